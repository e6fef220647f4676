"""Helpers shared by the neuron device tests (imported by name: tests/ is not a package)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_python(code: str, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (activation is per process) and capture its output."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=str(REPO))
