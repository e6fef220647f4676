"""Cost of the emulated ``neuron`` process group against plain gloo on CPU, side by side.

    python bench/bench_ddp.py [--sizes 1024,1048576] [--iters 50] [--steps 20]

Starts 2 ranks on this machine. In the same processes, with the same thread setting, it times
(1) all_reduce of float32 tensors of each size on neuron tensors through
``init_process_group("neuron")`` and on CPU tensors through a gloo group, alternating rounds so
that machine noise hits both, and (2) a small DDP training step on each. Prints the median times
and the ratio neuron / CPU (the goal: close to 1.0, the aliases are zero copy).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

WORLD = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _median_time(fn: Callable[[], None], iters: int) -> float:
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def worker(sizes: list[int], iters: int, steps: int) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    import cuda2neuron.backend as backend
    from cuda2neuron.backend import distributed as neuron_dist

    backend.activate()
    neuron_dist.register()
    rank = int(os.environ["RANK"])
    dist.init_process_group("neuron", rank=rank, world_size=WORLD)
    torch.neuron.set_device(rank)
    gloo = dist.new_group(backend="gloo")
    groups = {"neuron": dist.group.WORLD, "cpu": gloo}

    rows = []
    for size in sizes:
        tensors = {dev: torch.ones(size, device=dev) for dev in groups}
        times: dict[str, list[float]] = {dev: [] for dev in groups}
        for _ in range(3):  # alternate rounds: noise on a shared machine hits both sides
            for dev, g in groups.items():
                dist.barrier(group=g)
                times[dev].append(_median_time(lambda d=dev, g=g: dist.all_reduce(tensors[d], group=g), iters))
        rows.append((f"all_reduce {size * 4 / 1024:.0f} KiB", min(times["neuron"]), min(times["cpu"])))

    def ddp_step_timer(dev: str) -> Callable[[], None]:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)).to(dev)
        ddp = DDP(model, process_group=groups[dev])
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        x, y = torch.randn(32, 256).to(dev), torch.randint(0, 10, (32,)).to(dev)

        def step() -> None:
            loss = nn.functional.cross_entropy(ddp(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss.item()

        return step

    steppers = {dev: ddp_step_timer(dev) for dev in groups}
    step_times: dict[str, list[float]] = {dev: [] for dev in groups}
    for _ in range(3):
        for dev in groups:
            step_times[dev].append(_median_time(steppers[dev], steps))
    rows.append(("DDP training step", min(step_times["neuron"]), min(step_times["cpu"])))

    if rank == 0:
        print(f"{'case':<24} {'neuron (ms)':>12} {'gloo CPU (ms)':>14} {'ratio':>7}")
        for name, n, c in rows:
            print(f"{name:<24} {n * 1e3:>12.3f} {c * 1e3:>14.3f} {n / c:>7.2f}")
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1024,262144,4194304", help="all_reduce sizes in float32 elements")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.worker:
        worker(sizes, args.iters, args.steps)
        return 0
    port = str(_free_port())
    procs = [
        subprocess.Popen([sys.executable, __file__, "--worker", "--sizes", args.sizes, "--iters", str(args.iters),
                          "--steps", str(args.steps)],
                         env={**os.environ, "RANK": str(r), "WORLD_SIZE": str(WORLD), "MASTER_ADDR": "127.0.0.1",
                              "MASTER_PORT": port, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
        for r in range(WORLD)
    ]
    codes = [p.wait(timeout=900) for p in procs]
    return max(codes)


if __name__ == "__main__":
    raise SystemExit(main())
