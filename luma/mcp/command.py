"""``luma mcp serve PROGRAM.luma``: parse the arguments, load the program, serve it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from luma.cli_common import EXIT_FAILED, EXIT_OK
from luma.cli_parser import _Parser


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
    serve.add_argument("--http", metavar="HOST:PORT", type=_address, help="serve Streamable HTTP at "
                       "http://HOST:PORT/mcp instead of stdio")
    return parser


def _address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT (like 127.0.0.1:8765), got "
                                         f"'{value}'")
    return host.strip("[]"), int(port)


def mcp_command(argv: Sequence[str]) -> int:
    """``luma mcp serve``: 1 when the program does not load or the extra is missing."""
    args = mcp_parser().parse_args(list(argv))
    address: tuple[str, int] | None = args.http
    if address is not None:
        args.http_text = f"[{address[0]}]:{address[1]}" if ":" in address[0] else \
            f"{address[0]}:{address[1]}"
    from luma.mcp import MissingExtra, require_sdk

    try:
        require_sdk()
    except MissingExtra as exc:
        print(f"luma mcp: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    import asyncio

    import luma
    from luma.mcp.server import listen, serve_http, serve_stdio

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

    sock = None
    if address is not None:
        host, port = address
        try:
            sock = listen(host, port)
        except OSError as exc:
            print(f"luma mcp: error: cannot listen on {args.http_text}: "
                  f"{exc.strerror or exc}", file=sys.stderr)
            program.close()
            return EXIT_FAILED

    async def serve() -> None:
        try:
            if sock is None:
                await serve_stdio(program, args.agent)
            else:
                await serve_http(program, args.agent, sock, ready=lambda: print(
                    f"luma mcp: serving http://{args.http_text}/mcp", file=sys.stderr,
                    flush=True))
        finally:
            await program.aclose()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    return EXIT_OK
