"""The platform-neutral conversation every chat platform shares."""
