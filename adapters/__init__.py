"""Platform edges: Slack, Discord and the console, each translating to and from the core."""
