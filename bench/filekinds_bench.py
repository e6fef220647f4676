"""Throughput of the non-Python handlers (notebooks, launch scripts, requirements).

    .venv/bin/python bench/filekinds_bench.py [--notebooks 200] [--cells 30]

Generates realistic notebooks (markdown, magics, shell lines, outputs with base64 images, CUDA
code in about a third of the cells), launch scripts and requirements files in a temporary folder,
then times ``check`` (lint) and ``migrate --diff`` (fix, nothing written) through the engine's
``process_file``. For notebooks it also times the same code cells processed as one ``.py`` file
(the Python engine's share): the handler's own overhead (JSON location, masking, joining,
splicing) is the difference.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import tempfile
import time
from pathlib import Path

import libcst as cst

from cuda2neuron.core import Config, RunOptions
from cuda2neuron.kinds import process_bytes
from cuda2neuron.workspace import SourceFile, process_file

CUDA_CELL = """\
x = torch.randn(64, 128).cuda()
model = Net().cuda()
with torch.autocast("cuda", dtype=torch.bfloat16):
    y = model(x)
torch.cuda.synchronize()
print(torch.cuda.max_memory_allocated() / 2**20)
"""
PLAIN_CELL = """\
import numpy as np
values = [i * i for i in range(100)]
def summarise(xs):
    total = sum(xs)
    return total / len(xs)
print(summarise(values))
"""


def notebook(rng: random.Random, cells: int) -> str:
    out = []
    png = base64.b64encode(rng.randbytes(3000)).decode()
    for i in range(cells):
        if i % 5 == 0:
            out.append({"cell_type": "markdown", "id": f"m{i}", "metadata": {}, "source": ["## Step\n", "Text about CUDA kernels."]})
            continue
        src = CUDA_CELL if rng.random() < 0.33 else PLAIN_CELL
        if i == 1:
            src = "%matplotlib inline\nimport torch\n" + src
        if i % 7 == 0:
            src = "!nvidia-smi -L\n" + src
        out.append({
            "cell_type": "code", "execution_count": i, "id": f"c{i}", "metadata": {},
            "outputs": [{"data": {"image/png": png, "text/plain": ["<Figure>"]}, "metadata": {}, "output_type": "display_data"}],
            "source": src.splitlines(keepends=True),
        })
    doc = {"cells": out, "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


SCRIPT = """\
#!/usr/bin/env bash
set -euo pipefail
export CUDA_VISIBLE_DEVICES=0,1,2,3
export NCCL_DEBUG=INFO
NGPUS=$(nvidia-smi -L | wc -l)
echo "training on ${NGPUS} GPUs"  # log
torchrun --nproc_per_node=$NGPUS train.py "$@"
"""
REQUIREMENTS = "torch>=2.6\nnumpy\nflash-attn>=2.5\nxformers\ntriton\neinops\n"


def timed(files, config, fix):
    start = time.perf_counter()
    for path in files:
        result = process_file(SourceFile.at(path), config, RunOptions(fix=fix))
        assert result.error is None, (path, result.error)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--notebooks", type=int, default=200)
    parser.add_argument("--cells", type=int, default=30)
    parser.add_argument("--scripts", type=int, default=500)
    args = parser.parse_args()
    rng = random.Random(0)
    config = Config()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        notebooks = []
        code_sources = []
        for i in range(args.notebooks):
            p = root / f"nb{i}.ipynb"
            text = notebook(rng, args.cells)
            p.write_text(text, encoding="utf-8")
            notebooks.append(p)
            cells = json.loads(text)["cells"]
            code_sources.append("\n".join(
                "".join(line for line in c["source"] if not line.startswith(("%", "!"))).rstrip("\n") + "\n"
                for c in cells if c["cell_type"] == "code"
            ))
        scripts = []
        for i in range(args.scripts):
            p = root / f"run{i}.sh"
            p.write_text(SCRIPT, encoding="utf-8")
            scripts.append(p)
            q = root / f"requirements-{i}.txt"
            q.write_text(REQUIREMENTS, encoding="utf-8")
            scripts.append(q)
        timed(notebooks[:2], config, True)  # warm-up: catalog import
        nb_mb = sum(p.stat().st_size for p in notebooks) / 2**20
        start = time.perf_counter()
        for src in code_sources:
            cst.parse_module(src)
        parse = time.perf_counter() - start
        py = {}
        for fix_mode in (False, True):
            start = time.perf_counter()
            for src in code_sources:
                process_bytes("cells.py", src.encode(), config, RunOptions(fix=fix_mode))
            py[fix_mode] = time.perf_counter() - start
        lint = timed(notebooks, config, False)
        fix = timed(notebooks, config, True)
        small = timed(scripts, config, True)
    n = len(notebooks)
    print(f"notebooks: {n} files, {nb_mb:.1f} MB, {args.cells} cells each (cpu count {os.cpu_count()})")
    print(f"  libcst parse of code cells only: {parse:.2f} s")
    print(f"  same code as .py: check {py[False]:.2f} s, migrate {py[True]:.2f} s")
    print(f"  check   (lint): {lint:.2f} s  {n / lint:.1f} files/s  {nb_mb / lint:.2f} MB/s  "
          f"{lint / py[False]:.2f}x the .py run, {lint / parse:.1f}x parse")
    print(f"  migrate (fix):  {fix:.2f} s  {n / fix:.1f} files/s  {nb_mb / fix:.2f} MB/s  "
          f"{fix / py[True]:.2f}x the .py run, {fix / parse:.1f}x parse")
    print(f"scripts + requirements: {len(scripts)} files, migrate {small:.2f} s, {len(scripts) / small:.0f} files/s")


if __name__ == "__main__":
    main()
