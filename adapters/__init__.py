"""Platform edges: Slack, Discord and the console, each translating to and from the core."""

import warnings

# The store's client (Weaviate's) calls simplefilter("default") on import: import the
# retrieval layer before adding our own filters, or it would undo them.
import retrieval.service  # noqa: F401

# discord.py imports the stdlib's deprecated audioop (voice support we never use); without
# this every `quorum` command would start with a DeprecationWarning.
warnings.filterwarnings("ignore", message="'audioop' is deprecated", category=DeprecationWarning)
