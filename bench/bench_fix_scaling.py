"""Fix application must grow linearly with the number of fixes in one file.

    python bench/bench_fix_scaling.py [--counts 1000 10000 50000] [--check-only]

Generates one Python file per count with that many fixable findings of a few kinds (``.cuda()``
calls, ``torch.cuda`` API moves, ``"cuda"`` device strings, ``"nccl"`` backends, a device test
in front of its branch: a linked group), some of them nested in functions and branches, and runs
the engine on it as ``migrate`` does (``process_bytes`` with fixes on, in this process). Prints
CPU seconds (user + system of this process) and wall seconds per count, the CPU seconds per
1,000 fixes, and the ratio of the largest count's per-fix cost to the smallest's: linear
application keeps it near 1 (issue 33: 50,000 fixes in one file took more than 300 s).
``--check-only`` times the findings without fixes, for comparison.
"""

from __future__ import annotations

import argparse
import resource
import time

from cuda2neuron.core import Config, FileStatus, RunOptions
from cuda2neuron.kinds import process_bytes

# Each block holds FIXES_PER_BLOCK fixable findings.
BLOCK = '''
def step_{i}(model, batch, rank):
    model_{i} = model.cuda()
    x_{i} = batch.to("cuda")
    torch.cuda.synchronize()
    if x_{i}.device.type == "cuda":
        y_{i} = x_{i}.cuda(non_blocking=True)
    dist.init_process_group("nccl")
    return model_{i}(y_{i})
'''
FIXES_PER_BLOCK = 6
HEADER = "import torch\nimport torch.distributed as dist\n"


def generate(fixes: int) -> bytes:
    blocks = max(1, fixes // FIXES_PER_BLOCK)
    return (HEADER + "".join(BLOCK.format(i=i) for i in range(blocks))).encode()


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(data: bytes, fix: bool) -> tuple[float, float, int]:
    config = Config()
    c0, w0 = cpu(), time.perf_counter()
    result = process_bytes("generated.py", data, config, RunOptions(fix=fix, unsafe=True))
    c1, w1 = cpu(), time.perf_counter()
    assert result.status in (FileStatus.CHANGED, FileStatus.UNCHANGED), result.error
    applied = len(result.applied) if fix else len(result.findings)
    return c1 - c0, w1 - w0, applied


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", type=int, nargs="+", default=[1000, 10000, 50000])
    ap.add_argument("--check-only", action="store_true")
    args = ap.parse_args()
    measure(generate(70), fix=not args.check_only)  # warm up: catalog and libcst imports
    per_k: list[float] = []
    print(f"{'fixes':>8} {'applied':>8} {'cpu s':>8} {'wall s':>8} {'cpu s / 1k':>11}")
    for count in args.counts:
        data = generate(count)
        cpu_s, wall_s, applied = measure(data, fix=not args.check_only)
        per_k.append(cpu_s / max(applied, 1) * 1000)
        print(f"{count:>8} {applied:>8} {cpu_s:>8.2f} {wall_s:>8.2f} {per_k[-1]:>11.3f}")
    if len(per_k) > 1:
        print(f"per-fix cost, largest vs smallest count: {per_k[-1] / per_k[0]:.2f}x (linear: ~1)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
