"""Bad input and misbehaving handlers at run time: a located Luma error, never a traceback, and
a run that ends. Every test runs the real ``luma`` command in a child process."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from cli_runner import luma


def _write(tmp_path: Path, program: str, tools: str = "") -> tuple[str, str]:
    (tmp_path / "prog.luma").write_text(textwrap.dedent(program), encoding="utf-8")
    (tmp_path / "tools.py").write_text(textwrap.dedent(tools), encoding="utf-8")
    return str(tmp_path / "prog.luma"), str(tmp_path / "tools.py")


def _clean(stderr: str) -> None:
    assert "Traceback" not in stderr
    assert "internal error" not in stderr


# ------------------------------------------------------------------------------ fn parameters

def test_a_fn_parameter_of_a_schema_type_is_validated_against_that_schema(tmp_path: Path) -> None:
    prog, _ = _write(tmp_path, """\
        schema Item { sku: string }
        schema Order { id: string, qty: int, items?: Item[] }
        agent Shop {
          fn run(order: Order) -> int {
            order.qty
          }
        }
        """)
    r = luma(prog, "--input", '{"order": {"id": "o-1", "qty": 3, "items": [{"sku": "a"}]}}')
    assert (r.code, r.stdout, r.stderr) == (0, "3\n", "")
    r = luma(prog, "--input", '{"order": {"id": "o-1", "qty": 3, "items": [{"sku": 1}]}}')
    assert r.code == 1
    assert r.stderr.splitlines()[0] == \
        "error[ARGUMENT_INVALID]: Shop.run.input.order.items[0].sku: expected string, got int"
    _clean(r.stderr)
