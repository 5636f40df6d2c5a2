"""JavaScript and TypeScript tool modules: each in a Node.js child process speaking Luma's
JSON-lines protocol, with the original Luma's export order, ``(input, signal, needs)`` handlers,
an ``AbortSignal`` that fires on timeout and ``LumaToolError`` from ``"luma"``. Real ``node``;
TypeScript through the ``typescript`` package of tests/node."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from node_packages import node_modules

from sandbox.project import CPU_LIMIT_DETAIL, wait_gone, with_deadline
from sandbox.project import Project, isolated_imports, project  # noqa: F401 (fixtures)


CALC = """schema CalcResult {
  result: float
}
tool calculate(a: float, b: float, operation: enum["add", "multiply"]) -> CalcResult {
  description: "Add or multiply two numbers."
}
r = tool calculate({ a: 2, b: 3, operation: "multiply" })
r
"""


TYPED_ERROR_PROGRAM = """schema ToolError {
  code: string
  message: string
  retryable: bool
  details?: any
}
schema DbWriteResult { ok: bool }
tool db_write(table: string) -> DbWriteResult {
  description: "writes"
  error: ToolError
}
out = ""
try {
  r = tool db_write({ table: "users" })
} catch err {
  out = err
}
out
"""


@pytest.fixture()
def typescript(project: Project) -> Project:
    """The project with the pinned ``typescript`` package beside its modules."""
    os.symlink(node_modules("the TypeScript tool-module tests"),
               project.folder / "node_modules")
    return project


def test_the_seed_tools_ts_runs(typescript: Project) -> None:
    typescript.write("tools.ts", """
        // tools.ts
        export const calculate = async (input, signal, needs) => {
          if (input.operation === "add")      return { result: input.a + input.b };
          if (input.operation === "multiply") return { result: input.a * input.b };
          throw new Error("Unsupported operation");
        };
    """)
    typescript.config(modules=["./tools.ts"])
    outcome = typescript.run(program=CALC)
    assert (outcome.code, outcome.value) == (0, {"result": 6})


def test_a_generated_tool_module_typed_module_runs(typescript: Project) -> None:
    typescript.write("tools.generated.d.ts", """
        export type ToolHandler<I, O, N = Record<string, never>> =
          (input: I, signal?: AbortSignal, needs?: N) => O | Promise<O>;
        export interface CalcResult { result: number }
        export interface CalculateInput { a: number; b: number; operation: "add" | "multiply" }
        export interface CalculateNeeds {}
        export type CalculateHandler = ToolHandler<CalculateInput, CalcResult, CalculateNeeds>;
        export interface GeneratedToolModule { calculate: CalculateHandler; }
    """)
    typescript.write("tools.ts", """
        import type { GeneratedToolModule } from "./tools.generated";

        export const tools: GeneratedToolModule = {
          calculate: async (input, signal, needs) => ({
            result: input.operation === "add" ? input.a + input.b : input.a * input.b,
          }),
        };
    """)
    typescript.config(modules=["./tools.ts"])
    outcome = typescript.run(program=CALC)
    assert (outcome.code, outcome.value) == (0, {"result": 6})


def test_a_typed_error_from_luma(typescript: Project) -> None:
    typescript.write("tools.ts", """
        import { LumaToolError } from "luma";

        export const lumaTools = {
          db_write: (input: { table: string }) => {
            throw new LumaToolError({
              code: "DB_TIMEOUT",
              message: "The database timed out",
              retryable: false,
              details: { table: input.table },
            });
          },
        };
    """)
    typescript.config(modules=["./tools.ts"])
    program = TYPED_ERROR_PROGRAM
    outcome = typescript.run(program=program)
    assert (outcome.code, outcome.value) == (0, {
        "code": "DB_TIMEOUT", "message": "The database timed out", "retryable": False,
        "tool": "db_write", "details": {"table": "users"}})


@pytest.mark.parametrize("name, text", [
    ("tools.mjs", "export default { calculate: (input) => ({ result: input.a * input.b }) };"),
    ("tools.cjs", "module.exports = { calculate: (input) => ({ result: input.a * input.b }) };"),
    ("tools.js", "exports.tools = { calculate: (input) => ({ result: input.a * input.b }) };"),
])
def test_javascript_modules_and_the_export_order(project: Project, name: str, text: str) -> None:
    project.write(name, text)
    project.config(modules=[f"./{name}"])
    outcome = project.run(program=CALC)
    assert (outcome.code, outcome.value) == (0, {"result": 6})


def test_the_abort_signal_fires_on_timeout(project: Project) -> None:
    project.write("tools.mjs", """
        export const calculate = (input, signal) => new Promise((resolve, reject) => {
          signal.addEventListener("abort", () => reject(new Error("aborted: " + signal.reason)));
        });
    """)
    project.config(modules=["./tools.mjs"])
    program = CALC.replace('description: "Add or multiply two numbers."',
                           'description: "Add or multiply two numbers."\n  timeout: 200')
    outcome = project.run(program=program)
    assert outcome.code == 1
    assert outcome.stderr.splitlines()[0] == (
        "error[TOOL_TIMEOUT]: Tool 'calculate' timed out after 200 ms.")


def test_a_failure_and_output_that_is_not_json(project: Project) -> None:
    project.write("tools.mjs", """
        export const calculate = (input) => {
          if (input.a === 2) return { result: undefined, x: () => 1 };
          throw new Error("never");
        };
    """)
    project.config(modules=["./tools.mjs"])
    outcome = project.run(program=CALC)
    assert outcome.stderr.splitlines()[0] == (
        "error[TOOL_OUTPUT_INVALID]: calculate.output.result: undefined is not a JSON value")
    project.write("tools.mjs", "export const calculate = () => { throw new Error('boom'); };")
    outcome = project.run(program=CALC)
    assert outcome.stderr.splitlines()[0] == "error[TOOL_FAILED]: Tool 'calculate' failed: boom"


def test_typescript_without_the_typescript_package_is_a_start_error(project: Project) -> None:
    project.write("tools.ts", "export const calculate = (input: any) => ({ result: 1 });")
    project.config(modules=["./tools.ts"])
    outcome = project.run(program=CALC)
    assert (outcome.code, outcome.stdout) == (2, "")
    assert outcome.stderr == (
        "error: Tool module './tools.ts' is TypeScript, and the 'typescript' package was not "
        "found (looked beside the module, in dependency_root and in the program's folder); "
        "install it there (npm install typescript).\n")


def test_integrity_and_dependencies_apply(project: Project) -> None:
    project.write("tools.mjs", "import x from 'leftpad';\nexport const calculate = () => x;\n")
    project.config(modules=[{"path": "./tools.mjs", "dependencies": []}])
    outcome = project.run(program=CALC)
    assert outcome.code == 2
    assert outcome.stderr == (
        "error: Tool module './tools.mjs' could not be loaded: Error: may not import "
        "'leftpad': it is not in tool_modules[0].dependencies\n")
    project.config(modules=[{"path": "./tools.mjs", "integrity": "sha256-" + "A" * 43 + "="}])
    outcome = project.run(program=CALC)
    assert outcome.code == 2
    assert outcome.stderr.startswith("error: Tool module './tools.mjs' (tool_modules[0]) does "
                                      "not match its integrity")


def test_luma_check_finds_the_handlers_of_a_javascript_module(project: Project) -> None:
    import subprocess
    import sys

    project.write("prog.luma", CALC)
    project.write("tools.mjs", "export const calculate = (input) => ({ result: 1 });\n")
    project.write("other.mjs", "export const other = (input) => ({ result: 1 });\n")
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root}

    def check(module: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "luma", "check", "prog.luma",
                               "--tool-module", module], cwd=project.folder, env=env,
                              capture_output=True, text=True, timeout=60)

    done = check("tools.mjs")
    assert (done.returncode, done.stdout + done.stderr) == (0, "checked 1 file: no problems\n")
    done = check("other.mjs")
    assert done.returncode == 1
    assert "error[E040]: 'calculate' is not registered in the tool registry." in done.stderr


NETWORK = """
    import net from "node:net";

    export const calculate = (input) => new Promise((resolve) => {
      const socket = net.connect(Number(process.argv.at(-1) || 0) || PORT, "127.0.0.1");
      socket.on("connect", () => { socket.destroy(); resolve({ result: 1 }); });
      socket.on("error", () => resolve({ result: 0 }));
    });
"""


@pytest.mark.parametrize("policy, connected", [(None, 1), ({"sandbox": "process"}, 0)])
def test_a_policy_without_network_puts_the_node_child_in_an_empty_namespace(
        project: Project, policy: dict[str, str] | None, connected: int) -> None:
    import socket

    server = socket.create_server(("127.0.0.1", 0))
    try:
        port = server.getsockname()[1]
        project.write("tools.mjs", NETWORK.replace("PORT", str(port)))
        project.config(modules=["./tools.mjs"], policy=policy)
        outcome = project.run(program=CALC)
        assert (outcome.code, outcome.value) == (0, {"result": connected}), outcome.stderr
    finally:
        server.close()


def test_max_memory_mb_is_the_node_heap_limit(project: Project) -> None:
    project.write("tools.mjs", """
        export const calculate = (input) => {
          if (input.a === 2) {
            const kept = [];
            for (;;) kept.push(new Array(100000).fill({ x: kept.length }));
          }
          return { result: 7 };
        };
    """)
    project.config(modules=["./tools.mjs"], policy={"sandbox": "process", "max_memory_mb": 64})
    program = CALC.replace('r = tool calculate({ a: 2, b: 3, operation: "multiply" })\nr', """
first = ""
try {
  r = tool calculate({ a: 2, b: 3, operation: "multiply" })
} catch err {
  first = err.message
}
second = tool calculate({ a: 1, b: 3, operation: "multiply" })
{ first: first, second: second.result }""")
    outcome = project.run(program=program)
    assert outcome.code == 0, outcome.stderr
    assert outcome.value["second"] == 7
    assert outcome.value["first"] == (
        "Tool 'calculate' failed: the tool module's process ended (killed by SIGABRT); its "
        "memory is limited by tool_module_policy.max_memory_mb (64 MB)")


def test_the_deadline_reaches_the_runner_and_fires_the_abort_signal(project: Project) -> None:
    import asyncio

    from luma.runtime.handlers import HandlerTimeout

    project.write("tools.mjs", """
        import { writeFileSync } from "node:fs";

        export const calculate = (input, signal) => input.a === 0 ? { result: 0 } :
          new Promise((resolve) => {
            signal.addEventListener("abort", () => {
              writeFileSync("fired.txt", String(signal.reason));
              resolve({ result: 1 });
            });
          });
    """)
    project.config(modules=["./tools.mjs"])
    handler = project.load().registry.handlers["calculate"]
    with pytest.raises(HandlerTimeout) as caught:
        asyncio.run(with_deadline(handler, {"a": 1}, 200))
    assert caught.value.detail == ""
    assert (project.folder / "fired.txt").read_text() == "timeout"
    assert asyncio.run(with_deadline(handler, {"a": 0}, 5000)) == {"result": 0}


SPIN = """
    export const calculate = (input) => {
      if (input.a === 2) for (;;) {}
      return { result: process.pid };
    };
"""


def test_a_handler_that_spins_past_its_cpu_time_limit_is_stopped(project: Project) -> None:
    """A busy loop holds the JavaScript thread, so its deadline cannot even fire there: the
    runner's CPU watch (a thread of its own) stops the process, which comes back."""
    import asyncio

    from luma.runtime.handlers import HandlerTimeout

    project.write("tools.mjs", SPIN)
    project.config(modules=["./tools.mjs"])
    handler = project.load().registry.handlers["calculate"]
    first = asyncio.run(with_deadline(handler, {"a": 1}, 5000))
    with pytest.raises(HandlerTimeout) as caught:
        asyncio.run(with_deadline(handler, {"a": 2}, 300))
    assert caught.value.detail == CPU_LIMIT_DETAIL
    wait_gone(first["result"])  # type: ignore[index]
    assert asyncio.run(with_deadline(handler, {"a": 1}, 5000)) != first


SPIN_AND_CALC = """schema CalcResult {
  result: float
}
tool spin(a: float) -> CalcResult {
  description: "Spins."
  timeout: 300
}
tool calculate(a: float) -> CalcResult {
  description: "The process id."
}
first = ""
try {
  s = tool spin({ a: 2 })
} catch err {
  first = err.message
}
r = tool calculate({ a: 1 })
{ first: first, second: r.result }
"""


def test_a_spinning_handler_under_a_timeout_is_a_tool_timeout(project: Project) -> None:
    """Through the pipeline: Luma's clock ends the call (``TOOL_TIMEOUT``); the next call finds
    the process still spinning, retires it and starts a new one (a tool without a timeout
    here: the start of a process counts in the timeout of the call that starts it)."""
    project.write("tools.mjs", SPIN + "export const spin = calculate;\n")
    project.config(modules=["./tools.mjs"])
    outcome = project.run(program=SPIN_AND_CALC)
    assert outcome.code == 0, outcome.stderr
    assert outcome.value["first"] == "Tool 'spin' timed out after 300 ms."
    assert outcome.value["second"] > 0


def test_require_luma_in_a_commonjs_module(project: Project) -> None:
    project.write("tools.cjs", """
        const { LumaToolError } = require("luma");

        module.exports = {
          db_write: (input) => {
            throw new LumaToolError({ code: "DB_TIMEOUT", message: "The database timed out",
                                      retryable: false, details: { table: input.table } });
          },
        };
    """)
    project.config(modules=["./tools.cjs"])
    outcome = project.run(program=TYPED_ERROR_PROGRAM)
    assert (outcome.code, outcome.value) == (0, {
        "code": "DB_TIMEOUT", "message": "The database timed out", "retryable": False,
        "tool": "db_write", "details": {"table": "users"}})


def test_require_and_import_of_luma_give_the_same_class(project: Project) -> None:
    project.write("helper.cjs", "module.exports = require('luma').LumaToolError;\n")
    project.write("tools.mjs", """
        import { LumaToolError } from "luma";
        import Required from "./helper.cjs";

        export const calculate = () => ({ result: LumaToolError === Required ? 1 : 0 });
    """)
    project.config(modules=["./tools.mjs"])
    outcome = project.run(program=CALC)
    assert (outcome.code, outcome.value) == (0, {"result": 1})


def test_dependencies_apply_to_require(project: Project) -> None:
    project.write("tools.cjs", "const x = require('leftpad');\nexports.calculate = () => x;\n")
    project.config(modules=[{"path": "./tools.cjs", "dependencies": []}])
    outcome = project.run(program=CALC)
    assert (outcome.code, outcome.stdout) == (2, "")
    assert outcome.stderr == (
        "error: Tool module './tools.cjs' could not be loaded: Error: may not import "
        "'leftpad': it is not in tool_modules[0].dependencies\n")


def test_datasource_bridges_in_a_javascript_module_are_a_start_error(project: Project) -> None:
    """The seed's bridge (``export const datasources``): a bridge is called by Luma's data
    layer, not through the tool protocol, so a JavaScript module's bridges are refused."""
    project.write("tools.mjs", """
        export const datasources = {
          Warehouse: async (sql, params, signal) => [],
        };
        export const calculate = (input) => ({ result: 1 });
    """)
    project.config(modules=["./tools.mjs"])
    outcome = project.run(program=CALC)
    assert (outcome.code, outcome.stdout) == (2, "")
    assert outcome.stderr == (
        "error: Tool module './tools.mjs' exports datasource bridges (Warehouse), which a "
        "JavaScript or TypeScript module does not provide: use a built-in bridge (datasources "
        "in luma.config.json), or a bridge in a Python tool module without sandbox "
        "'process'.\n")


@pytest.mark.parametrize("name, text", [
    ("tools.mjs", "import pad from 'leftpad';\nexport const calculate = () => ({ result: pad });\n"),
    ("tools.cjs", "const pad = require('leftpad');\nexports.calculate = () => ({ result: pad });\n"),
])
def test_packages_come_from_dependency_root(project: Project, name: str, text: str) -> None:
    """With ``dependency_root``, a package is loaded from its ``node_modules``, and not from the
    ``node_modules`` beside the module."""
    project.write(name, text)
    project.write("vendor/node_modules/leftpad/package.json",
                  '{"name": "leftpad", "main": "index.js"}')
    project.write("vendor/node_modules/leftpad/index.js", "module.exports = 6;\n")
    project.write("node_modules/leftpad/package.json", '{"name": "leftpad", "main": "index.js"}')
    project.write("node_modules/leftpad/index.js", "module.exports = 1;\n")
    project.config(modules=[{"path": f"./{name}", "dependencies": ["leftpad"],
                             "dependency_root": "./vendor"}])
    outcome = project.run(program=CALC)
    assert (outcome.code, outcome.value) == (0, {"result": 6}), outcome.stderr
    project.config(modules=[{"path": f"./{name}", "dependencies": ["leftpad"]}])
    outcome = project.run(program=CALC)
    assert (outcome.code, outcome.value) == (0, {"result": 1}), outcome.stderr
