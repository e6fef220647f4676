"""Cold start of `cuda2neuron check FILE`: one fresh process per run, as pre-commit and editors call it.

    python bench/bench_check.py [--runs 7]

Times, in a fresh process each run (median and best of --runs):
  (a) a file with no CUDA words (`import os` / `print(1)`): nothing to parse, no rule to load;
  (b) a small CUDA file (a dozen lines);
  (c) a large CUDA file (about 3,000 lines, generated like bench_migrate.py's tail files).
The files sit in a small project with a pyproject.toml declaring torch, so the config and the
project's torch bound are read as in real use. For scale it also reports the interpreter's bare
start-up and the cost of `import libcst` alone (which (b) and (c) cannot avoid: they parse).
Goal (issue 2): check on one file <= 0.3 s cold.

Byte-code caches are written (PYTHONDONTWRITEBYTECODE is cleared for the children): users have
them, and without them every run would compile the package.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_migrate import make_file  # a sibling script, not a package

SMALL = """\
import torch
import torch.nn as nn


def train(model: nn.Module, loader, epochs: int = 1):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = model.to(device)
    for _ in range(epochs):
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
    torch.cuda.synchronize()
"""

PYPROJECT = """\
[project]
name = "demo"
version = "0.1"
dependencies = ["torch>=2.6", "numpy"]
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _command() -> list[str]:
    # The console script is what users run; fall back to -m when it is not installed next to us.
    script = Path(sys.executable).with_name("cuda2neuron")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "cuda2neuron"]


def _time(argv: list[str], runs: int, cwd: Path) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU (user + system) seconds of each run.

    CPU time is reported too because on a shared machine the wall clock also measures the
    neighbours; CPU time moves much less with load.
    """
    env = _env()
    subprocess.run(argv, capture_output=True, env=env, cwd=cwd, check=False)  # writes the .pyc files
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(argv, capture_output=True, env=env, cwd=cwd, check=False)
        wall.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall, cpu


def _libcst_import_ms() -> float:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import libcst"],
        capture_output=True, text=True, env=_env(), check=False,
    ).stderr
    cumulative = [int(m.group(1)) for m in re.finditer(r"\|\s*(\d+)\s*\|\s*libcst\s*$", out, re.MULTILINE)]
    return cumulative[-1] / 1000 if cumulative else float("nan")


def _line(label: str, times: tuple[list[float], list[float]]) -> str:
    wall, cpu = times
    return (
        f"{label:<44} median {statistics.median(wall):.3f} s   best {min(wall):.3f} s   "
        f"cpu median {statistics.median(cpu):.3f} s   (n={len(wall)})"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pyproject.toml").write_text(PYPROJECT)
        files = {
            "(a) no CUDA words": ("plain.py", "import os\nprint(1)\n"),
            "(b) small CUDA file": ("small.py", SMALL),
            "(c) large CUDA file": ("large.py", make_file(random.Random(7), cuda=True, lines_target=3000)),
        }
        for name, text in files.values():
            (root / name).write_text(text)
        print(_line("python -c pass (interpreter start-up)", _time([sys.executable, "-c", "pass"], args.runs, root)))
        print(f"{'import libcst alone (-X importtime)':<44} {_libcst_import_ms():.0f} ms")
        for label, (name, text) in files.items():
            size = f"{label}, {text.count(chr(10))} lines"
            print(_line(f"check {size}", _time([*_command(), "check", name], args.runs, root)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
