"""Running the ``luma`` command as a user does: a child process, its stdout, stderr and exit code."""

from __future__ import annotations

import os
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
