"""Benchmark `migrate --diff` on a generated tree of realistic files.

    python bench/bench_migrate.py [--files 2000] [--jobs 1 2]

Generates a deterministic tree (about a third of the files CUDA-bearing, a tail of files a few
thousand lines long), then measures:
  * libcst parse time of the CUDA-bearing files alone (single process) — the yardstick;
  * `cuda2neuron migrate --diff` wall time for the whole tree, per --jobs value;
  * `cuda2neuron check FILE` cold, in a fresh process, on the largest file.
Goal (issue 2): migrate within 1.5x the parse time; check on one file <= 0.3 s cold.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import libcst as cst

CUDA_SNIPPETS = [
    "model = model.cuda()\n",
    "x = x.cuda(non_blocking=True)\n",
    "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n",
    "torch.cuda.synchronize()\n",
    "scaler = torch.cuda.amp.GradScaler()\n",
    "with torch.cuda.amp.autocast():\n    loss = model(x).sum()\n",
    "dist.init_process_group(backend='nccl')\n",
    "torch.backends.cudnn.benchmark = True\n",
    "print(torch.cuda.max_memory_allocated() / 2**20)\n",
    "y = torch.zeros(3, device='cuda:0')\n",
    "state = torch.load(path, map_location=f'cuda:{rank}')\n",
]

PLAIN_FUNC = '''
def {name}(values, scale={scale}, *, clip=None):
    """Compute a running statistic over values (generated benchmark code)."""
    total = 0.0
    out = []
    for i, v in enumerate(values):
        if clip is not None and abs(v) > clip:
            v = clip if v > 0 else -clip
        total += v * scale
        out.append((i, total / (i + 1)))
    return {{"mean": total / max(len(values), 1), "trace": out}}

'''

CLASS = '''
class Block{n}(nn.Module):
    def __init__(self, dim={dim}):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, dim * 4)
        self.out = nn.Linear(dim * 4, dim)

    def forward(self, x):
        h = self.proj(self.norm(x))
        return x + self.out(torch.nn.functional.gelu(h))

'''


def make_file(rng: random.Random, cuda: bool, lines_target: int) -> str:
    parts = ["import os\nimport math\nimport torch\nimport torch.nn as nn\nimport torch.distributed as dist\n\n"]
    n = 0
    while sum(p.count("\n") for p in parts) < lines_target:
        kind = rng.random()
        if kind < 0.5:
            parts.append(PLAIN_FUNC.format(name=f"stat_{n}", scale=rng.randint(1, 9)))
        else:
            parts.append(CLASS.format(n=n, dim=rng.choice([64, 128, 256])))
        if cuda and rng.random() < 0.35:
            body = rng.choice(CUDA_SNIPPETS)
            parts.append(f"def step_{n}(model, x, path='ckpt.pt', rank=0):\n" + "".join("    " + l + "\n" for l in body.splitlines()) + "    return model\n\n")
        n += 1
    return "".join(parts)


def generate(root: Path, files: int, seed: int = 0) -> tuple[list[Path], list[Path]]:
    rng = random.Random(seed)
    all_files, cuda_files = [], []
    for i in range(files):
        cuda = i % 3 == 0
        lines = rng.choice([2000, 3000, 4000]) if i % 50 == 7 else rng.randint(80, 400)
        path = root / f"pkg{i % 20}" / f"mod_{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(make_file(rng, cuda, lines))
        all_files.append(path)
        if cuda:
            cuda_files.append(path)
    return all_files, cuda_files


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    from cuda2neuron.cli import main as cli_main

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        all_files, cuda_files = generate(root, args.files)
        total_mb = sum(p.stat().st_size for p in all_files) / 2**20
        cuda_lines = sum(p.read_text().count("\n") for p in cuda_files)
        t = time.perf_counter()
        for p in cuda_files:
            cst.parse_module(p.read_bytes())
        parse_s = time.perf_counter() - t
        print(f"tree: {len(all_files)} files, {total_mb:.1f} MB; {len(cuda_files)} CUDA-bearing files, {cuda_lines} lines")
        print(f"libcst parse of the CUDA-bearing files: {parse_s:.2f} s")
        for jobs in args.jobs:
            sink = io.StringIO()
            t = time.perf_counter()
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(io.StringIO()):
                code = cli_main(["migrate", "--diff", "--jobs", str(jobs), str(root)])
            dt = time.perf_counter() - t
            print(
                f"migrate --diff --jobs {jobs}: {dt:.2f} s (exit {code}), {len(all_files) / dt:.0f} files/s, "
                f"{total_mb / dt:.2f} MB/s, {dt / parse_s:.2f}x parse time"
            )
        biggest = max(cuda_files, key=lambda p: p.stat().st_size)
        cold = []
        for _ in range(3):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "cuda2neuron", "check", str(biggest)], capture_output=True, check=False)
            cold.append(time.perf_counter() - t)
        print(f"check one file cold ({biggest.stat().st_size / 1024:.0f} KB): best {min(cold):.2f} s of 3")
    return 0


if __name__ == "__main__":
    sys.exit(main())
