"""Running the ``luma`` command as a user does: a child process, its stdout, stderr and exit code."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONSOLE_SCRIPT = Path(sys.executable).parent / "luma"


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str
    stdout_bytes: bytes


def luma(*args: str, cwd: str | Path | None = None, env: dict[str, str] | None = None,
         script: bool = False, timeout: float = 60) -> Result:
    """Run ``python -m luma ARGS`` (or the installed ``luma`` console script with
    ``script=True``) with colour and debugging variables cleared unless ``env`` sets them."""
    command = [str(CONSOLE_SCRIPT)] if script else [sys.executable, "-m", "luma"]
    environ = {k: v for k, v in os.environ.items()
               if k not in ("NO_COLOR", "FORCE_COLOR", "LUMA_DEBUG", "TERM")}
    environ.update(env or {})
    done = subprocess.run([*command, *args], cwd=cwd or ROOT, env=environ, capture_output=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    return Result(done.returncode, done.stdout.decode("utf-8", errors="replace"),
                  done.stderr.decode("utf-8", errors="replace"), done.stdout)


def on_a_terminal(args: list[str], env: dict[str, str], stdout: int = subprocess.DEVNULL
                  ) -> tuple[bytes, subprocess.Popen[bytes]]:
    """Start ``python -m luma ARGS`` with the environment ``env`` and stderr on a
    pseudo-terminal: what the terminal received until the child closed it (or 30 s passed
    without a byte), and the child, to wait for."""
    master, slave = pty.openpty()
    child = subprocess.Popen([sys.executable, "-m", "luma", *args], cwd=ROOT, env=env,
                             stdin=subprocess.DEVNULL, stdout=stdout, stderr=slave)
    os.close(slave)
    received = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 30)
            if not ready:
                break
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            received += chunk
    finally:
        os.close(master)
    return received, child
