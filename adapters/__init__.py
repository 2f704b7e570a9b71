"""Platform edges: Slack, Discord and the console, each translating to and from the core."""

import warnings

import weaviate  # noqa: F401  (it calls simplefilter("default") on import; go first)

# discord.py imports the stdlib's deprecated audioop (voice support we never use); without
# this every `quorum` command would start with a DeprecationWarning.
warnings.filterwarnings("ignore", message="'audioop' is deprecated", category=DeprecationWarning)
