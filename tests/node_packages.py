"""The Node packages the tests use (tests/node/package.json and its lock file), installed with
``npm ci`` the first time a test needs them. Without npm and node those tests fail: they are part
of the suite, not an optional extra."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).resolve().parent / "node"
NODE_MODULES = NODE_DIR / "node_modules"


def node_modules(purpose: str, needed: str = "typescript/bin/tsc") -> Path:
    """tests/node/node_modules, installed first when ``needed`` (a file of a pinned package)
    is missing."""
    if not (NODE_MODULES / needed).exists():
        npm, node = shutil.which("npm"), shutil.which("node")
        if npm is None or node is None:
            pytest.fail(f"npm and node are needed to install the Node packages for {purpose} "
                        "(npm ci --prefix tests/node); install Node.js and npm.")
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--prefix", str(NODE_DIR)],
            capture_output=True, text=True, timeout=600,
        )
        if done.returncode != 0 or not (NODE_MODULES / needed).exists():
            pytest.fail(f"npm ci --prefix tests/node failed: {done.stderr.strip()[-2000:]}")
    return NODE_MODULES
