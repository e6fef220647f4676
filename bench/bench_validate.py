"""Benchmark: whole `validate` vs. the two bare runs it replaces.

    .venv/bin/python bench/bench_validate.py [--project gpt_trainer|cnn_cuda|mlp] [--mode script|entry]
                                             [--repeat 2] [--port-device neuron|cpu]

Bare runs = the original script under the CUDA-on-CPU shim, then the port on the emulated neuron
device, one after the other, same thread setting (1 thread) as validate's runs. Goal: validate
(reference + float64 golden + port, recording and comparing every module output, loss and
gradient) takes <= 2x the sum of the bare runs. Prints one line per measurement and the ratio.
"""

from __future__ import annotations

import argparse
import os
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

SOURCES = {
    "cnn_cuda": REPO / "examples" / "cnn_cuda",
    "gpt_trainer": REPO / "tests" / "fixtures" / "projects" / "gpt_trainer",
    "lstm_tagger": REPO / "tests" / "fixtures" / "projects" / "lstm_tagger",
}

_BARE = """
import runpy, sys
{setup}
sys.argv = [{script!r}, *{args!r}]
sys.path.insert(0, '.')
runpy.run_path({script!r}, run_name='__main__')
"""
_SETUP = {
    "reference": "from cuda2neuron.validate import _cuda_shim; _cuda_shim.install()",
    "neuron": "import cuda2neuron.backend as b; b.activate()",
    "cpu": "import torch; torch.utils.rename_privateuse1_backend('neuron');"
           "from cuda2neuron.validate import _cuda_shim; _cuda_shim.install(source='neuron')",
}


def bare_run(tree: Path, setup: str, script: str, args: tuple[str, ...], tmp: Path) -> float:
    env = dict(os.environ, OMP_NUM_THREADS="1", TMPDIR=str(tmp), PYTHONDONTWRITEBYTECODE="1")
    code = "import torch; torch.set_num_threads(1)\n" + _BARE.format(setup=_SETUP[setup], script=script, args=list(args))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bare {setup} run failed in {tree}:\n{proc.stderr[-3000:]}")
    return elapsed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--project", default="gpt_trainer", choices=[*SOURCES, "mlp"])
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--port-device", default=None, choices=["neuron", "cpu"])
    args = p.parse_args()
    port_device = args.port_device
    if port_device is None:
        try:
            import cuda2neuron.backend as backend

            port_device = "neuron" if backend.is_available() else "cpu"
        except Exception:  # noqa: BLE001
            port_device = "cpu"
    work = Path(tempfile.mkdtemp(prefix="bench-validate-"))
    try:
        if args.project == "mlp":
            original = REPO / "tests" / "fixtures" / "projects" / "mlp" / "original"
            port = REPO / "tests" / "fixtures" / "projects" / "mlp" / "port"
            script, script_args = "train.py", ("--steps", "3")
        else:
            original, port = SOURCES[args.project], work / "port"
            migrate_fixture(original, port, args.project)
            script, script_args = "train.py", ("--steps", "3")
        bare_ref, bare_port, whole = [], [], []
        for i in range(args.repeat):
            tmp = work / f"tmp{i}"
            tmp.mkdir()
            bare_ref.append(bare_run(original, "reference", script, script_args, tmp))
            bare_port.append(bare_run(port, port_device, script, script_args, tmp))
            t0 = time.perf_counter()
            result = run_validation(ValidateRequest(original=original, port=port, mode="script", script=script,
                                                    args=script_args, port_device=port_device))
            whole.append(time.perf_counter() - t0)
            print(f"run {i}: bare original {bare_ref[-1]:.2f} s, bare port {bare_port[-1]:.2f} s, "
                  f"validate {whole[-1]:.2f} s ({result.verdict.value}, {len(result.comparisons)} tensors)")
        bare = statistics.median(bare_ref) + statistics.median(bare_port)
        ratio = statistics.median(whole) / bare
        print(f"project {args.project}, port device {port_device}, cores {os.cpu_count()}")
        print(f"median bare original {statistics.median(bare_ref):.2f} s + bare port {statistics.median(bare_port):.2f} s"
              f" = {bare:.2f} s; median validate {statistics.median(whole):.2f} s; ratio {ratio:.2f}x (goal <= 2.0x)")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
