"""``"sandbox": "process"`` (RUNTIME.md §6): each tool module in its own child process, with a
clean environment, its folder as working folder, ``max_memory_mb`` as ``RLIMIT_AS``, an empty
network namespace while ``allow_network`` is false, and a restart after the child ends. These
are real child processes; nothing of the protocol is patched."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.project import CPU_LIMIT_DETAIL, wait_gone, with_deadline
from sandbox.project import Project, isolated_imports, project  # noqa: F401 (fixtures)

PREFIX = "error[TOOL_FAILED]: Tool 'probe' failed: "

#: ``probe`` called twice: the second call shows whether the module's process came back.
TWICE = """schema Out {
  text: string
}
tool probe(name: string) -> Out {
  description: "probes"
}
first = ""
try {
  r = tool probe({ name: NAME })
  first = r.text
} catch err {
  first = err.message
}
second = tool probe({ name: "again" })
{ first: first, second: second.text }
"""


PROGRAM_ONCE = """schema Out {
  text: string
}
tool probe(name: string) -> Out {
  description: "probes"
}
r = tool probe({ name: "x" })
r
"""


def process(*allow: str, **settings: object) -> dict[str, object]:
    return {"sandbox": "process", "allow_builtins": list(allow), **settings}


def test_the_escape_that_reads_the_environment_under_strict_finds_nothing_in_a_process(
        project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """The module that reads the environment under ``strict`` (tests/sandbox/escape.py) finds
    an empty one in its process; the strict rules still refuse its process start there."""
    monkeypatch.setenv("LUMA_SANDBOX_PROBE", "leaked")
    project.fixture("escape.py")
    project.config(policy=process())
    outcome = project.run("LUMA_SANDBOX_PROBE")
    assert (outcome.code, outcome.value) == (0, {
        "text": " refused: Tool module './tools.py' may not start a process "
                "('subprocess.Popen'): sandbox 'strict' always forbids it."})


def test_the_child_environment_is_clean_and_its_folder_is_the_module_folder(
        project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    project.write("tools/tools.py", """
        REAL = getattr(print.__self__, '__imp' + 'ort__')

        def probe(input):
            os = REAL("os")
            return {"text": repr(sorted(getattr(os, "envi" + "ron"))) + " " + os.getcwd()}
    """)
    project.config(modules=["./tools/tools.py"], policy=process())
    outcome = project.run()
    assert outcome.code == 0, outcome.stderr
    text = outcome.value["text"]
    assert text == ("['LC_ALL', 'MALLOC_ARENA_MAX', 'PYTHONDONTWRITEBYTECODE', "
                    f"'PYTHONIOENCODING'] {(project.folder / 'tools').resolve()}")


def test_no_file_descriptor_is_inherited(project: Project, tmp_path: Path) -> None:
    kept = open(tmp_path / "parent-only.txt", "w")  # an open descriptor in Luma's process
    os.set_inheritable(kept.fileno(), True)
    project.write("tools.py", """
        REAL = getattr(print.__self__, '__imp' + 'ort__')

        def probe(input):
            os = REAL("os")
            targets = []
            for fd in os.listdir("/proc/self/fd"):
                if int(fd) <= 2:
                    continue
                try:
                    targets.append(os.readlink("/proc/self/fd/" + fd))
                except OSError:
                    pass  # the descriptor listdir read the folder with
            return {"text": repr(sorted(targets))}
    """)
    project.config(policy=process())
    try:
        targets = eval(project.run().value["text"])  # noqa: S307 - the list the child printed
    finally:
        kept.close()
    assert str(tmp_path / "parent-only.txt") not in targets
    # the protocol's pipe and the event loop's own: nothing that was open in Luma's process
    assert all(target.split(":")[0] in ("pipe", "socket", "anon_inode")
               for target in targets), targets


def test_memory_past_the_limit_fails_the_call_and_the_process_comes_back(
        project: Project) -> None:
    project.write("tools.py", """
        def probe(input):
            if input["name"] == "big":
                block = bytearray(1024 * 1024 * 1024)
                return {"text": str(len(block))}
            return {"text": "fine"}
    """)
    project.config(policy=process(max_memory_mb=256))
    outcome = project.run("big", program=TWICE)
    assert (outcome.code, outcome.value) == (0, {
        "first": "Tool 'probe' failed: MemoryError: the handler went past "
                 "tool_module_policy.max_memory_mb (256 MB)",
        "second": "fine"})


def test_a_child_that_exits_fails_the_call_and_is_started_again(project: Project) -> None:
    project.write("tools.py", """
        REAL = getattr(print.__self__, '__imp' + 'ort__')

        def probe(input):
            if input["name"] == "die":
                REAL("os")._exit(3)
            return {"text": "back"}
    """)
    project.config(policy=process())
    outcome = project.run("die", program=TWICE)
    assert (outcome.code, outcome.value) == (0, {
        "first": "Tool 'probe' failed: the tool module's process ended (exit status 3)",
        "second": "back"})


def test_a_child_that_is_killed_fails_the_call(project: Project) -> None:
    project.write("tools.py", """
        REAL = getattr(print.__self__, '__imp' + 'ort__')

        def probe(input):
            if input["name"] == "segfault":
                REAL("faulthandler")._sigsegv()
            return {"text": "back"}
    """)
    project.config(policy=process())
    outcome = project.run("segfault", program=TWICE)
    assert outcome.code == 0, outcome.stderr
    assert outcome.value == {
        "first": "Tool 'probe' failed: the tool module's process ended (killed by SIGSEGV)",
        "second": "back"}


def test_a_child_that_ignores_its_signal_past_the_deadline_is_killed(project: Project) -> None:
    project.write("tools.py", """
        REAL = getattr(print.__self__, '__imp' + 'ort__')

        def probe(input, signal):
            if input["name"] == "stuck":
                REAL("pathlib").Path("pid.txt").write_text(str(REAL("os").getpid()))
                while True:
                    pass
            return {"text": "back"}
    """)
    project.config(policy=process())
    program = TWICE.replace('description: "probes"', 'description: "probes"\n  timeout: 300')
    outcome = project.run("stuck", program=program)
    assert (outcome.code, outcome.value) == (0, {
        "first": "Tool 'probe' timed out after 300 ms.", "second": "back"})
    pid = int((project.folder / "pid.txt").read_text())
    wait_gone(pid)


@pytest.fixture()
def listener() -> Iterator[tuple[threading.Thread, int, list[bool]]]:
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[bool] = []

    def serve() -> None:
        try:
            connection, _ = server.accept()
            accepted.append(True)
            connection.close()
        except OSError:
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield thread, server.getsockname()[1], accepted
    server.close()


NETWORK_BY_A_THREAD = """
    REAL = getattr(print.__self__, '__imp' + 'ort__')

    def probe(input):
        address = ("127.0.0.1", int(input["name"]))
        thread = REAL("threading").Thread(target=REAL("sock" + "et").create_connection,
                                          args=(address, 2))
        thread.start()
        thread.join()
        return {"text": "tried"}
"""


def test_a_connection_by_another_thread_gets_through_strict(
        project: Project, listener: tuple[threading.Thread, int, list[bool]]) -> None:
    """*Remains* under strict: work handed to another thread is not held by the effect rules."""
    thread, port, accepted = listener
    project.write("tools.py", NETWORK_BY_A_THREAD)
    project.config(policy={"sandbox": "strict"})
    assert project.run(str(port)).value == {"text": "tried"}
    thread.join(5)
    assert accepted == [True]


def test_a_connection_by_another_thread_fails_in_a_process_without_network(
        project: Project, listener: tuple[threading.Thread, int, list[bool]]) -> None:
    thread, port, accepted = listener
    project.write("tools.py", NETWORK_BY_A_THREAD)
    project.config(policy=process())
    outcome = project.run(str(port))
    assert (outcome.code, outcome.stderr, outcome.value) == (0, "", {"text": "tried"})
    thread.join(1)
    assert accepted == []


def test_a_module_that_fails_to_load_in_its_process_is_a_start_error(project: Project) -> None:
    project.write("tools.py", """
        import json

        def probe(input):
            return {"text": "never"}
    """)
    project.config(policy=process())
    outcome = project.run()
    assert (outcome.code, outcome.stdout) == (2, "")
    assert outcome.stderr == ("error: ./tools.py:2: Tool module './tools.py' may not import "
                              "'json': it is not in tool_module_policy.allow_builtins.\n")


def test_a_module_nobody_holds_any_more_ends_its_process(project: Project) -> None:
    """From Python, a program that is dropped does not leave its modules' processes behind."""
    import gc

    project.write("tools.py", """
        REAL = getattr(print.__self__, '__imp' + 'ort__')
        REAL("pathlib").Path("pid.txt").write_text(str(REAL("os").getpid()))

        def probe(input):
            return {"text": "x"}
    """)
    project.config(policy=process())
    loaded = project.load()
    assert loaded.errors == []
    pid = int((project.folder / "pid.txt").read_text())
    os.kill(pid, 0)  # running
    del loaded
    gc.collect()
    wait_gone(pid)


def test_where_the_kernel_refuses_a_network_namespace_the_start_says_so(
        project: Project) -> None:
    """Inside a user namespace whose limit of nested namespaces is 0, the kernel refuses the
    child's network namespace: the program runs, and says so on stderr at start-up."""
    import shutil
    import subprocess
    import sys

    project.write("tools.py", """
        def probe(input):
            return {"text": "ran"}
    """)
    project.config(policy=process())
    project.write("prog.luma", PROGRAM_ONCE)
    root = str(Path(__file__).resolve().parents[1])
    unshare = shutil.which("unshare")
    assert unshare is not None, "util-linux's unshare is needed for this test"
    script = ("echo 0 > /proc/sys/user/max_user_namespaces && "
              f"exec {sys.executable} -m luma prog.luma")
    done = subprocess.run([unshare, "-Ur", "sh", "-c", script], cwd=project.folder,
                          env={**os.environ, "PYTHONPATH": root}, capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, '{\n  "text": "ran"\n}\n')
    assert done.stderr == (
        "warning: Tool module './tools.py' (tool_modules[0]) runs in its own process, but the "
        "network cannot be closed to it: the kernel refused a network namespace (No space "
        "left on device); tool_module_policy.allow_network false is held by the strict rules "
        "only.\n")


def test_calls_up_to_max_concurrency_are_in_the_child_at_once(project: Project) -> None:
    """Two calls meet at a barrier in the child: they can only both finish if they run at once
    over the one pair of pipes."""
    import asyncio

    from runtime.harness import context, program, runtime

    project.write("tools.py", """
        REAL = getattr(print.__self__, '__imp' + 'ort__')
        BARRIER = REAL("threading").Barrier(2, timeout=5)

        def probe(input):
            BARRIER.wait()
            return {"text": input["name"]}
    """)
    project.config(policy=process(max_concurrency=2))
    loaded = project.load()
    assert loaded.errors == []
    rt = runtime(program(PROGRAM_ONCE.split("r = ")[0]), dict(loaded.registry.handlers))

    async def both() -> list[object]:
        return list(await asyncio.gather(
            rt.pipeline.call("probe", {"name": "a"}, context(rt)),
            rt.pipeline.call("probe", {"name": "b"}, context(rt))))

    assert asyncio.run(both()) == [{"text": "a"}, {"text": "b"}]


def test_calls_from_two_threads_after_a_crash_start_one_child(project: Project) -> None:
    """The Python API may call from several threads: the calls that find the child gone start
    one new child between them (they meet at a barrier in it)."""
    import asyncio

    project.write("tools.py", """
        REAL = getattr(print.__self__, '__imp' + 'ort__')
        BARRIER = REAL("threading").Barrier(2, timeout=5)

        def probe(input):
            if input["name"] == "die":
                REAL("os")._exit(3)
            BARRIER.wait()
            return {"text": input["name"]}
    """)
    project.config(policy=process(max_concurrency=2))
    loaded = project.load()
    handler = loaded.registry.handlers["probe"]
    with pytest.raises(Exception, match="exit status 3"):
        asyncio.run(handler({"name": "die"}, None, None))
    answers: list[object] = []

    def call(name: str) -> None:
        try:
            answers.append(asyncio.run(handler({"name": name}, None, None)))
        except Exception as exc:  # noqa: BLE001 - what the test reports
            answers.append(str(exc))

    threads = [threading.Thread(target=call, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(map(str, answers)) == ["{'text': 'a'}", "{'text': 'b'}"]


def test_answers_are_read_on_the_calling_loop_without_a_thread_hop(project: Project) -> None:
    """The child's answers are read by the event loop that waits for them: twenty calls hand
    nothing from another thread to that loop (``call_soon_threadsafe``)."""
    import asyncio

    project.write("tools.py", """
        def probe(input):
            return {"text": input["name"]}
    """)
    project.config(policy=process())
    handler = project.load().registry.handlers["probe"]
    hops: list[object] = []

    async def calls() -> list[object]:
        loop = asyncio.get_running_loop()
        real = loop.call_soon_threadsafe

        def counted(callback: Any, *args: Any, **kwargs: Any) -> Any:
            hops.append(callback)
            return real(callback, *args, **kwargs)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        return [await handler({"name": str(i)}, None, None) for i in range(20)]

    assert asyncio.run(calls()) == [{"text": str(i)} for i in range(20)]
    assert hops == []


def test_an_answer_that_comes_after_its_run_has_ended_spares_the_process(
        project: Project) -> None:
    """A call given up on (here by its run's own timeout) whose run ends before the child
    answers: no loop waits for that answer any more, yet it is read before the grace time is
    up, so the child, which did answer, is not killed."""
    import asyncio

    from luma.runtime.process_modules import KILL_GRACE_S

    project.write("tools.py", """
        REAL = getattr(print.__self__, '__imp' + 'ort__')

        def probe(input):
            if input["name"] == "nap":
                REAL("time").sleep(0.2)
            return {"text": str(REAL("os").getpid())}
    """)
    project.config(policy=process())
    handler = project.load().registry.handlers["probe"]
    first = asyncio.run(handler({"name": "pid"}, None, None))
    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(asyncio.wait_for(handler({"name": "nap"}, None, None), 0.05))
    time.sleep(KILL_GRACE_S + 0.3)  # past the moment a child that still owes it is killed
    assert asyncio.run(handler({"name": "pid"}, None, None)) == first


def test_datasource_bridges_in_a_process_module_are_a_start_error(project: Project) -> None:
    project.write("tools.py", """
        def warehouse(sql, params, signal):
            return []

        datasources = {"Warehouse": warehouse}

        def probe(input):
            return {"text": "x"}
    """)
    project.config(policy=process())
    outcome = project.run()
    assert (outcome.code, outcome.stdout) == (2, "")
    assert outcome.stderr == (
        "error: Tool module './tools.py' exports datasource bridges (Warehouse), which sandbox "
        "'process' does not run: use a built-in bridge (datasources in luma.config.json), or a "
        "tool_module_policy without 'process'.\n")


def test_the_deadline_reaches_the_child_and_fires_the_signal_there(project: Project) -> None:
    """The call message carries its deadline: the child fires the handler's Signal then and
    answers ``timeout``, although Luma's side never cancels the call."""
    import asyncio

    from luma.runtime.handlers import HandlerTimeout

    project.write("tools.py", """
        REAL = getattr(print.__self__, '__imp' + 'ort__')

        def probe(input, signal):
            if input["name"] == "wait":
                fired = signal.wait(10)
                REAL("pathlib").Path("fired.txt").write_text(f"{fired} {signal.reason}")
                return {"text": "finished after the signal"}
            return {"text": "quick"}
    """)
    project.config(policy=process())
    handler = project.load().registry.handlers["probe"]
    started = time.monotonic()
    with pytest.raises(HandlerTimeout) as caught:
        asyncio.run(with_deadline(handler, {"name": "wait"}, 200))
    assert caught.value.detail == ""
    assert time.monotonic() - started < 5  # the signal fired long before its 10 s wait
    assert (project.folder / "fired.txt").read_text() == "True timeout"
    # an answer before the deadline is the answer
    assert asyncio.run(with_deadline(handler, {"name": "x"}, 5000)) == {"text": "quick"}


CPU_PROBE = """
    REAL = getattr(print.__self__, '__imp' + 'ort__')

    def probe(input):
        if input["name"] == "spin":
            while True:
                pass
        if input["name"] == "sleep":
            REAL("time").sleep(0.6)
            return {"text": "slept"}
        return {"text": str(REAL("os").getpid())}
"""


def _cpu_probe(project: Project, text: str = CPU_PROBE, **policy: object) -> object:
    """The ``probe`` handler of ``text`` (:data:`CPU_PROBE`) in a process module."""
    project.write("tools.py", text)
    project.config(policy=process(**policy))
    return project.load().registry.handlers["probe"]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_call_past_its_cpu_time_limit_is_stopped_and_the_process_comes_back(
        project: Project, kind: str) -> None:
    """A handler that spins and never looks at its Signal: the child's CPU watch stops it when
    it has used its timeout's worth of CPU time (Luma's side never cancels it here)."""
    import asyncio

    from luma.runtime.handlers import HandlerTimeout

    text = CPU_PROBE if kind == "sync" else CPU_PROBE.replace("def probe", "async def probe")
    handler = _cpu_probe(project, text)
    first = asyncio.run(with_deadline(handler, {"name": "pid"}, 5000))
    with pytest.raises(HandlerTimeout) as caught:
        asyncio.run(with_deadline(handler, {"name": "spin"}, 300))
    assert caught.value.detail == CPU_LIMIT_DETAIL
    wait_gone(int(first["text"]))  # type: ignore[index]  # once Luma's side has seen it end
    second = asyncio.run(with_deadline(handler, {"name": "pid"}, 5000))
    assert second != first  # started again


def test_calls_sent_while_a_process_ends_at_a_cpu_limit_go_to_the_next_process(
        project: Project) -> None:
    """Calls keep arriving while a spinning call reaches its CPU limit: a call that reaches the
    ending process is handed back (it has not begun) and one still on its way when it ends goes
    to the next process, so every one of them is answered, none fails."""
    import asyncio

    from luma.runtime.handlers import HandlerTimeout

    handler = _cpu_probe(project)

    async def scenario() -> tuple[list[object], int]:
        spin = asyncio.create_task(with_deadline(handler, {"name": "spin"}, 200))
        answers: list[object] = []
        while not spin.done():
            answers.append(await handler({"name": "pid"}, None, None))  # type: ignore[operator]
        with pytest.raises(HandlerTimeout):
            await spin
        for _ in range(20):  # and past the end of the process
            answers.append(await handler({"name": "pid"}, None, None))  # type: ignore[operator]
        return answers, len({a["text"] for a in answers})  # type: ignore[index]

    answers, processes = asyncio.run(scenario())
    assert len(answers) > 20
    assert processes == 2  # the one stopped at its CPU limit, and the next


def test_a_call_that_sleeps_past_its_deadline_is_not_stopped_by_the_cpu_limit(
        project: Project) -> None:
    """The limit counts CPU time, not the clock: a handler that sleeps past its deadline (and
    ignores its Signal) is answered ``timeout`` when it returns, and its process lives on."""
    import asyncio

    from luma.runtime.handlers import HandlerTimeout

    handler = _cpu_probe(project)
    first = asyncio.run(with_deadline(handler, {"name": "pid"}, 5000))
    with pytest.raises(HandlerTimeout) as caught:
        asyncio.run(with_deadline(handler, {"name": "sleep"}, 100))
    assert caught.value.detail == ""
    assert asyncio.run(with_deadline(handler, {"name": "pid"}, 5000)) == first


def test_a_spinning_handler_under_a_timeout_is_a_tool_timeout_and_its_process_comes_back(
        project: Project) -> None:
    """Through the pipeline: Luma's clock ends the call first (``TOOL_TIMEOUT``); the child's
    CPU watch ends the spinning process (``EXIT_IDLE``, once every call it took is answered),
    and a call that reaches it as it ends is sent again, to a new process (a tool without a
    timeout here: the start of a process counts in the timeout of the call that starts it)."""
    project.write("tools.py", CPU_PROBE + "\n    spin = probe\n")
    project.config(policy=process())
    program = """schema Out {
  text: string
}
tool spin(name: string) -> Out {
  description: "spins"
  timeout: 300
}
tool probe(name: string) -> Out {
  description: "probes"
}
first = ""
try {
  s = tool spin({ name: "spin" })
} catch err {
  first = err.message
}
r = tool probe({ name: "pid" })
{ first: first, second: r.text }
"""
    outcome = project.run(program=program)
    assert outcome.code == 0, outcome.stderr
    assert outcome.value["first"] == "Tool 'spin' timed out after 300 ms."
    assert outcome.value["second"].isdigit()


def test_a_process_stopped_at_a_cpu_limit_lets_its_other_calls_finish(project: Project) -> None:
    """The spinning call is answered ``cpu_limit``; a call beside it (still sleeping when the
    limit is reached) gets its own answer before the process ends."""
    import asyncio

    from luma.runtime.handlers import HandlerTimeout

    handler = _cpu_probe(project, CPU_PROBE.replace("sleep(0.6)", "sleep(3)"),  # past the limit
                         max_concurrency=2)

    async def both() -> list[object]:
        async def sleeper() -> object:
            await asyncio.sleep(0.05)  # the spinner first
            return await handler({"name": "sleep"}, None, None)

        return list(await asyncio.gather(with_deadline(handler, {"name": "spin"}, 300),
                                         sleeper(), return_exceptions=True))

    spun, slept = asyncio.run(both())
    assert isinstance(spun, HandlerTimeout) and spun.detail.startswith(": the handler used")
    assert slept == {"text": "slept"}
