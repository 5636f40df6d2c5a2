"""``luma mcp serve PROGRAM.luma``: parse the arguments, load the program, serve it."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from luma.cli_common import EXIT_FAILED, EXIT_OK, _Parser


def mcp_parser() -> _Parser:
    parser = _Parser(prog="luma mcp", allow_abbrev=False,
                     description="Offer a program's tools and agent methods to MCP clients.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    serve = commands.add_parser("serve", allow_abbrev=False,
                                help="serve the program over stdio (until the client closes it)",
                                description="Serve the program's tools over MCP on stdio.")
    serve.add_argument("program", metavar="PROGRAM.luma")
    serve.add_argument("--tool-module", action="append", default=[], metavar="PATH",
                       help="a Python tool module (repeatable)")
    serve.add_argument("--config", metavar="PATH", help="the config file (default: "
                       "luma.config.json beside the program)")
    serve.add_argument("--agent", metavar="NAME", help="offer only this agent's tools, under "
                       "its policies, and its methods")
    return parser


def mcp_command(argv: Sequence[str]) -> int:
    """``luma mcp serve``: 1 when the program does not load or the extra is missing."""
    args = mcp_parser().parse_args(list(argv))
    from luma.mcp import MissingExtra, require_sdk

    try:
        require_sdk()
    except MissingExtra as exc:
        print(f"luma mcp: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    import asyncio

    import luma
    from luma.mcp.server import serve_stdio

    try:
        program = luma.load(args.program, tool_modules=args.tool_module, config=args.config)
    except luma.CompileError as exc:
        sys.stderr.write(exc.rendered if exc.rendered.endswith("\n") else exc.rendered + "\n")
        return EXIT_FAILED
    except luma.LoadError as exc:
        prefix = f"error[{exc.code}]" if exc.code else "error"
        for line in exc.problems:
            print(f"{prefix}: {line}", file=sys.stderr)
        return EXIT_FAILED
    try:
        program.contracts(args.agent)
    except luma.RunError as exc:
        print(f"luma mcp: error: {exc.message}", file=sys.stderr)
        program.close()
        return EXIT_FAILED

    async def serve() -> None:
        try:
            await serve_stdio(program, args.agent)
        finally:
            await program.aclose()

    asyncio.run(serve())
    return EXIT_OK
