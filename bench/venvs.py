"""Venvs the benchmarks build for themselves, as a user has them.

- ``bench/.venv-wheel``: a fresh venv with Luma installed from a wheel of this checkout
  (``pip install .``), not in editable mode: what ``pip install luma`` gives a user. It is built
  again when the package's sources changed since (a digest of ``luma/``, ``grammar/`` and
  ``pyproject.toml`` is kept beside it). pip compiles the bytecode, as it does for any wheel.
- ``bench/.venv-baml``: ``baml-py`` from ``bench/requirements-baml.txt`` (its ``baml-cli``, a
  Rust binary in the wheel), for the side-by-side in ``check_scaling.py``.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WHEEL_VENV = HERE / ".venv-wheel"
BAML_VENV = HERE / ".venv-baml"
BAML_REQUIREMENTS = HERE / "requirements-baml.txt"


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _sources_digest() -> str:
    digest = hashlib.sha256()
    files = [ROOT / "pyproject.toml", *sorted((ROOT / "luma").rglob("*.py")),
             *sorted((ROOT / "grammar").rglob("*"))]
    for path in files:
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _fresh_venv(venv: Path, log: IO[str], what: str) -> None:
    log.write(f"creating {venv.relative_to(ROOT)} ({what}) ...\n")
    log.flush()
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--clear", str(venv)], check=True)


def wheel_python(log: IO[str] = sys.stderr) -> Path:
    """The interpreter of ``bench/.venv-wheel``, with the current sources installed."""
    wanted = _sources_digest()
    stamp = WHEEL_VENV / ".sources-sha256"
    if _python(WHEEL_VENV).exists() and stamp.exists() and stamp.read_text().strip() == wanted:
        return _python(WHEEL_VENV)
    _fresh_venv(WHEEL_VENV, log, "luma from a wheel of this checkout")
    subprocess.run([str(_python(WHEEL_VENV)), "-m", "pip", "install", "--quiet", str(ROOT)],
                   check=True, cwd=ROOT)
    stamp.write_text(wanted + "\n")
    return _python(WHEEL_VENV)


def baml_cli(log: IO[str] = sys.stderr) -> Path | None:
    """``baml-cli`` of ``bench/.venv-baml`` (installed from the pinned requirements when
    missing or made from other pins), or None when baml-py does not install here."""
    wanted = hashlib.sha256(BAML_REQUIREMENTS.read_bytes()).hexdigest()
    stamp = BAML_VENV / ".requirements-sha256"
    cli = BAML_VENV / "bin" / "baml-cli"
    if cli.exists() and stamp.exists() and stamp.read_text().strip() == wanted:
        return cli
    _fresh_venv(BAML_VENV, log, f"baml-py from {BAML_REQUIREMENTS.name}")
    done = subprocess.run([str(_python(BAML_VENV)), "-m", "pip", "install", "--quiet", "-r",
                           str(BAML_REQUIREMENTS)])
    if done.returncode != 0 or not cli.exists():
        log.write("baml-py did not install: no side-by-side\n")
        return None
    stamp.write_text(wanted + "\n")
    return cli
