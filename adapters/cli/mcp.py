"""``quorum mcp``: the archive as an MCP server over stdio, for a desktop assistant to
start (``adapters.mcp.stdio``). Its stdout is the protocol's: everything else goes to
stderr, which the client keeps as the server's log."""

from __future__ import annotations

from adapters.cli.app import KbOpt, app, kb_name, run
from bot.config import Settings


@app.command("mcp")
def mcp_cmd(kb: KbOpt = None) -> None:
    """Serve a knowledge base to an AI assistant (Claude Desktop, Cursor) over MCP's stdio."""

    async def go(settings: Settings) -> None:
        from adapters.mcp.stdio import serve_stdio  # the MCP SDK only for this command

        await serve_stdio(settings, kb_name(settings, kb))

    run(go)
