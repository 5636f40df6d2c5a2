"""The runtime accepts the generated names: a tool module typed with the generated file, declared
as ``luma_tools: GeneratedToolModule = {...}``, loads and runs; ``luma export`` prints what a
provider would receive."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from cli_runner import luma

CODEGEN = Path(__file__).parent / "codegen"


def test_a_module_typed_with_generated_types_loads_and_runs(tmp_path: Path) -> None:
    program = tmp_path / "prog.luma"
    program.write_text((CODEGEN / "tools.luma").read_text() + '''
sum = tool calculate({ a: 2, b: 3, operation: "multiply" })
doc = tool classify({ text: "a receipt for tea" })
[sum, doc]
''')
    shutil.copy(CODEGEN / "tools_ok.py", tmp_path / "tools.py")
    r = luma("prog.luma", "--generate-tool-types", "tools_types.py", cwd=tmp_path)
    assert r.code == 0 and r.stderr.endswith("wrote tools_types.py\n")
    r = luma("prog.luma", "--tool-module", "tools.py", cwd=tmp_path)
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout) == [
        {"result": 6},
        {"kind": "Receipt", "reference": "R-1", "items": [{"name": "tea", "price": 2}]},
    ]


def test_export_prints_the_declarations_for_a_provider() -> None:
    r = luma("export", str(CODEGEN / "tools.luma"), "--provider", "anthropic")
    assert r.code == 0, r.stderr
    declarations = json.loads(r.stdout)
    assert [d["name"] for d in declarations] == ["calculate", "classify", "db_write", "text_stats"]
    calculate = declarations[0]
    assert calculate["description"] == "Add or multiply two numbers."
    assert calculate["input_schema"]["properties"]["operation"] == {
        "type": "string", "enum": ["add", "multiply"], "description": "The operation to perform"}
    assert "needs" not in r.stdout and "Database" not in r.stdout


def test_export_rejects_an_unknown_agent() -> None:
    r = luma("export", str(CODEGEN / "tools.luma"), "--provider", "openai", "--agent", "Nope")
    assert r.code == 2 and r.stdout == ""
    assert r.stderr.startswith("error[EXPORT_INVALID]: There is no agent named 'Nope'.")
