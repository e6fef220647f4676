"""Benchmark: `validate --nproc N` vs. the bare distributed runs it replaces, CPU time beside wall.

    .venv/bin/python bench/bench_validate_nproc.py [--original DIR --port DIR] [--script train.py]
                                                   [--nproc 2] [-- SCRIPT ARGS]

Defaults to the `ddp_trainer` fixture pair (`train.py --steps 3`). Bare runs = N ranks of the
original under the CUDA-on-CPU shim (gloo), then N ranks of the port on the emulated neuron
device, each group launched the way torchrun launches it, one torch thread per rank as in
validate. Then validate itself (reference + float64 golden + port, N ranks each, recording and
comparing). Wall time on a shared machine says little; the CPU seconds of all child processes
are printed beside it. Goal: validate <= 2x the two bare runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from cuda2neuron.validate import ValidateRequest, run_validation
from cuda2neuron.validate._runner import _free_ports, _launch_env

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import bench_validate as _single  # noqa: E402
PAIR = REPO / "tests" / "fixtures" / "projects" / "ddp_trainer"

# The bare-run script and its setups are bench_validate's; a rank runs the port on the emulator.
SETUP = {"reference": _single.SETUP["reference"], "port": _single.SETUP["neuron"]}


def bare(tree: Path, role: str, script: str, args: list[str], nproc: int) -> tuple[float, float]:
    (port,) = _free_ports(1)
    code = _single.BARE_RUN.format(setup=SETUP[role], script=script, args=args)
    cpu0, t0 = _single.children_cpu(), time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=tree, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True,
                              env={**os.environ, **_launch_env(rank, nproc, port), "OMP_NUM_THREADS": "1"})
             for rank in range(nproc)]
    for p in procs:
        _, err = p.communicate(timeout=1800)
        if p.returncode != 0:
            raise SystemExit(f"bare {role} run failed ({p.returncode}):\n{err[-3000:]}")
    return time.perf_counter() - t0, _single.children_cpu() - cpu0


def main() -> int:
    argv = sys.argv[1:]
    script_args = argv[argv.index("--") + 1:] if "--" in argv else ["--steps", "3"]
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--original", type=Path, default=PAIR / "original")
    parser.add_argument("--port", type=Path, default=PAIR / "port")
    parser.add_argument("--script", default="train.py")
    parser.add_argument("--nproc", type=int, default=2)
    args = parser.parse_args(argv)
    rows = []
    for role, tree in (("reference", args.original), ("port", args.port)):
        wall, cpu = bare(tree.resolve(), role, args.script, script_args, args.nproc)
        rows.append((f"bare {role} x{args.nproc}", wall, cpu))
        print(f"{rows[-1][0]:<22} {wall:7.1f} s wall {cpu:7.1f} s CPU", flush=True)
    cpu0, t0 = _single.children_cpu(), time.perf_counter()
    result = run_validation(ValidateRequest(original=args.original.resolve(), port=args.port.resolve(), mode="script",
                                            script=args.script, args=tuple(script_args), nproc=args.nproc))
    wall, cpu = time.perf_counter() - t0, _single.children_cpu() - cpu0
    print(f"{'validate --nproc ' + str(args.nproc):<22} {wall:7.1f} s wall {cpu:7.1f} s CPU  ({result.verdict.value})")
    bare_wall, bare_cpu = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"ratio validate / bare: {wall / bare_wall:.2f} wall, {cpu / bare_cpu:.2f} CPU (goal <= 2)")
    return 0 if result.exit_code == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
