"""Platform edges: Slack, Discord and the console, each translating to and from the core."""

import warnings

# Weaviate's client calls simplefilter("default") on import: import it (through retrieval)
# before adding our own filters, or it would undo them.
import retrieval.store.weaviate.server  # noqa: F401

# discord.py imports the stdlib's deprecated audioop (voice support we never use); without
# this every `quorum` command would start with a DeprecationWarning.
warnings.filterwarnings("ignore", message="'audioop' is deprecated", category=DeprecationWarning)
