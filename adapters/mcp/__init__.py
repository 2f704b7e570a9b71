"""Quorum as an MCP server: the archive's tools and transcripts for AI assistants (Claude
Desktop, Cursor, VS Code, a chat app's own assistant). ``server`` defines it on the SDK,
``tools`` is what each tool does in Quorum's terms, ``stdio`` is ``quorum mcp``, and
``http`` mounts it at ``/mcp`` on ``quorum serve``'s port. The SDK is imported here only."""
