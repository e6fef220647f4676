"""Benchmark: whole `validate` vs. the two bare runs it replaces.

    .venv/bin/python bench/bench_validate.py [--project gpt_trainer|cnn_cuda|mlp|amp_vit] [--repeat 2]
                                             [--port-device neuron|cpu]
    .venv/bin/python bench/bench_validate.py --original DIR --port DIR --script train.py [-- ARGS]

The second form times any pair (a public codebase and its port, kept outside this repository).

Bare runs = the original script under the CUDA-on-CPU shim, then the port on the emulated neuron
device, one after the other, same thread setting (1 thread) as validate's runs. Goal: validate
(reference + float64 golden + port, recording and comparing every module output, loss and
gradient) takes <= 2x the sum of the bare runs. Prints one line per measurement and the ratio,
wall time and CPU time (user + system of the child processes, and for validate also of this
process, which compares the records) side by side: on a loaded machine the wall ratio moves with
the load, the CPU ratio much less.

An original under reduced-precision autocast gets the logic pair too (original and port with
autocast off, issue 32): five runs instead of three. `--no-logic` measures without it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "validate"))

from fixture_ports import migrate_fixture  # noqa: E402

from cuda2neuron.validate import ValidateRequest, run_validation  # noqa: E402
from cuda2neuron.validate._zygote import close_shared  # noqa: E402

SOURCES = {
    "cnn_cuda": REPO / "examples" / "cnn_cuda",
    "gpt_trainer": REPO / "tests" / "fixtures" / "projects" / "gpt_trainer",
    "lstm_tagger": REPO / "tests" / "fixtures" / "projects" / "lstm_tagger",
}

BARE_RUN = """
import runpy, sys
{setup}
sys.argv = [{script!r}, *{args!r}]
sys.path.insert(0, '.')
runpy.run_path({script!r}, run_name='__main__')
"""
SETUP = {
    "reference": "from cuda2neuron.validate import _cuda_shim; _cuda_shim.install()",
    "neuron": "import cuda2neuron.backend as b; b.activate()",
    "cpu": "import torch; torch.utils.rename_privateuse1_backend('neuron');"
           "from cuda2neuron.validate import _cuda_shim; _cuda_shim.install(source='neuron')",
}


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def bare_run(tree: Path, setup: str, script: str, args: tuple[str, ...], tmp: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one bare run."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TMPDIR=str(tmp), PYTHONDONTWRITEBYTECODE="1")
    code = "import torch; torch.set_num_threads(1)\n" + BARE_RUN.format(setup=SETUP[setup], script=script, args=list(args))
    t0, c0 = time.perf_counter(), children_cpu()
    proc = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - t0, children_cpu() - c0
    if proc.returncode != 0:
        raise SystemExit(f"bare {setup} run failed in {tree}:\n{proc.stderr[-3000:]}")
    return elapsed, cpu


def main() -> int:
    argv = sys.argv[1:]
    script_args: tuple[str, ...] = ()
    if "--" in argv:
        script_args = tuple(argv[argv.index("--") + 1:])
        argv = argv[:argv.index("--")]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--project", default="gpt_trainer", choices=[*SOURCES, "mlp", "amp_vit"])
    p.add_argument("--original", type=Path, help="any original tree (with --port and --script)")
    p.add_argument("--port", type=Path)
    p.add_argument("--script", default="train.py")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--port-device", default=None, choices=["neuron", "cpu"])
    p.add_argument("--no-logic", action="store_true", help="leave out the autocast-off logic pair")
    args = p.parse_args(argv)
    port_device = args.port_device
    if port_device is None:
        try:
            import cuda2neuron.backend as backend

            port_device = "neuron" if backend.is_available() else "cpu"
        except Exception:  # noqa: BLE001
            port_device = "cpu"
    work = Path(tempfile.mkdtemp(prefix="bench-validate-"))
    try:
        script = args.script
        if args.original is not None:
            if args.port is None:
                raise SystemExit("--original needs --port")
            original, port, label = args.original.resolve(), args.port.resolve(), str(args.original)
        elif args.project in ("mlp", "amp_vit"):
            original = REPO / "tests" / "fixtures" / "projects" / args.project / "original"
            port = REPO / "tests" / "fixtures" / "projects" / args.project / "port"
            script, label = "train.py", args.project
        else:
            original, port, label = SOURCES[args.project], work / "port", args.project
            migrate_fixture(original, port, args.project)
            script = "train.py"
        if not script_args:
            script_args = ("--steps", str(args.steps))
        bare_ref, bare_port, whole = [], [], []
        for i in range(args.repeat):
            tmp = work / f"tmp{i}"
            tmp.mkdir()
            bare_ref.append(bare_run(original, "reference", script, script_args, tmp))
            bare_port.append(bare_run(port, port_device, script, script_args, tmp))
            t0, c0 = time.perf_counter(), children_cpu() + own_cpu()
            result = run_validation(ValidateRequest(original=original, port=port, mode="script", script=script,
                                                    args=script_args, steps=args.steps, port_device=port_device,
                                                    logic=not args.no_logic))
            # The process-wide zygote outlives the call; ended here, so that its CPU and its runs'
            # (reaped by it) are counted, and each call pays a cold start as `cuda2neuron validate` does.
            close_shared()
            whole.append((time.perf_counter() - t0, children_cpu() + own_cpu() - c0))
            print(f"run {i}: bare original {bare_ref[-1][0]:.2f} s ({bare_ref[-1][1]:.2f} s CPU), bare port "
                  f"{bare_port[-1][0]:.2f} s ({bare_port[-1][1]:.2f} s CPU), validate {whole[-1][0]:.2f} s "
                  f"({whole[-1][1]:.2f} s CPU) ({result.verdict.value}, {len(result.comparisons)} tensors, "
                  f"{len(result.runs)} runs)")
        med = lambda xs, k: statistics.median(x[k] for x in xs)  # noqa: E731
        for k, what in ((0, "wall"), (1, "CPU")):
            bare = med(bare_ref, k) + med(bare_port, k)
            print(f"{what}: bare original {med(bare_ref, k):.2f} s + bare port {med(bare_port, k):.2f} s = {bare:.2f} s; "
                  f"validate {med(whole, k):.2f} s; ratio {med(whole, k) / bare:.2f}x (goal <= 2.0x)")
        print(f"project {label}, port device {port_device}, cores {os.cpu_count()}, load {os.getloadavg()[0]:.1f}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
