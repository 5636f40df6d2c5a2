"""How soon ``luma lsp`` publishes the diagnostics of a 2,000-line document after an edit.

The real server process is started and spoken to over stdio (``tests/lsp_client.py``); the
document is the generated contracts of ``bench/corpus.py`` concatenated. Each run sends one
``didChange`` that breaks a type (or mends it again) and waits for the diagnostics it causes;
the time covers the pause the server waits for more keystrokes (``DEBOUNCE_SECONDS``), the
parse, the check and the index. Reports the median and the worst run.

    .venv/bin/python bench/lsp_diagnostics.py [--lines 2000] [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
import corpus  # noqa: E402
from lsp_client import LspClient  # noqa: E402


def document(lines: int) -> str:
    parts: list[str] = []
    while sum(p.count("\n") for p in parts) < lines:
        parts.append(corpus.TEMPLATE.format(n=len(parts)))
    return "".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    text = document(args.lines)
    line = next(i for i, t in enumerate(text.split("\n")) if t.strip().startswith("id: string"))
    col = text.split("\n")[line].index("string")
    client = LspClient()
    try:
        client.initialize()
        uri = "file:///bench/big.luma"
        client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "luma", "version": 1, "text": text}})
        client.diagnostics(uri)
        times = []
        for run in range(args.runs):
            new, old = ("strng", "string") if run % 2 == 0 else ("string", "strng")
            start = time.perf_counter()
            client.notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": run + 2},
                "contentChanges": [{"range": {
                    "start": {"line": line, "character": col},
                    "end": {"line": line, "character": col + len(old)}}, "text": new}]})
            published = client.diagnostics(uri)
            times.append(time.perf_counter() - start)
            assert bool(published) == (run % 2 == 0), published
        client.shutdown()
    finally:
        client.close()
    print(f"{text.count(chr(10))} lines, {args.runs} edits: median "
          f"{statistics.median(times) * 1000:.0f} ms, worst {max(times) * 1000:.0f} ms "
          "from the edit to its diagnostics")


if __name__ == "__main__":
    main()
