"""Benchmark of the emulated neuron device against plain CPU, same thread count, side by side.

    python bench/bench_backend.py [--threads N] [--repeat R]

Measures (emulator time / CPU time): a small-GPT training step (goal <= 1.2x), a loop of 10,000
tiny adds (goal <= 2.5x), a 256x256 matmul loop (~1.0x), peak memory of a training step
(goal <= 1.1x, zero copy), plus the cold build time (fresh cache, in a subprocess) and the
import / activate time. Peak memory is measured in fresh subprocesses (VmHWM after a reset).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

CHILD = r"""
import json, sys
import torch
threads, device = int(sys.argv[1]), sys.argv[2]
torch.set_num_threads(threads)
if device == "neuron":
    import cuda2neuron.backend as b
    b.activate()
sys.path.insert(0, sys.argv[3])
from bench_backend import make_gpt, gpt_step
def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key))
model, opt, batch = make_gpt(device)
gpt_step(model, opt, batch)  # warm-up: optimizer state exists from here on
base = status("VmRSS:")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak (VmHWM) to the current RSS
for _ in range(3):
    gpt_step(model, opt, batch)
print(json.dumps({"peak_kb": status("VmHWM:"), "base_kb": base}))
"""

def make_gpt(device: str):
    import torch
    from torch import nn

    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, dim: int, heads: int) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x):
            t = x.shape[1]
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), diagonal=1)
            h = self.ln1(x)
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self, vocab=256, dim=128, heads=4, layers=4, ctx=64) -> None:
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(ctx, dim)
            self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(layers)])
            self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

        def forward(self, idx):
            pos = torch.arange(idx.shape[1], device=idx.device)
            return self.head(self.ln(self.blocks(self.tok(idx) + self.pos(pos))))

    model = GPT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, 256, (8, 64)).to(device)
    y = torch.randint(0, 256, (8, 64)).to(device)
    return model, opt, (x, y)


def gpt_step(model, opt, batch) -> None:
    import torch

    x, y = batch
    loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def _time(fn: Callable[[], None], repeat: int) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _workloads(device: str):
    import torch

    model, opt, batch = make_gpt(device)
    a = torch.ones(8, device=device)
    m = torch.randn(256, 256, device=device)

    def adds() -> None:
        x = a
        for _ in range(10_000):
            x = x + 1

    def matmuls() -> None:
        x = m
        for _ in range(50):
            x = torch.mm(x, m).mul_(0.01)

    return {"small-GPT train step": lambda: gpt_step(model, opt, batch), "10,000 tiny adds": adds,
            "256x256 matmul x50": matmuls}


def _peak_rss(device: str, threads: int) -> tuple[int, int]:
    """(peak RSS during three training steps, RSS before them) in KiB, measured in a fresh process."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, "-c", CHILD, str(threads), device, here], capture_output=True,
                         text=True, check=True)
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return int(data["peak_kb"]), int(data["base_kb"])


def _cold_build() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, CUDA2NEURON_CACHE=tmp)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cuda2neuron", "build-backend"], env=env, check=True,
                       capture_output=True)
        return time.perf_counter() - t0


def _activate_time() -> tuple[float, float]:
    code = ("import time; t0=time.perf_counter(); import torch; t1=time.perf_counter(); "
            "import cuda2neuron.backend as b; t2=time.perf_counter(); b.activate(); t3=time.perf_counter(); "
            "print(t2-t1, t3-t2)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    imp, act = out.stdout.split()
    return float(imp), float(act)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads on both sides (default 1)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cold-build", action="store_true", help="also time a cold build (about a minute+)")
    args = parser.parse_args(argv)

    import torch

    import cuda2neuron.backend as backend

    torch.set_num_threads(args.threads)
    backend.activate()
    rows = []
    cpu_w, dev_w = _workloads("cpu"), _workloads("neuron")
    goals = {"small-GPT train step": 1.2, "10,000 tiny adds": 2.5, "256x256 matmul x50": 1.0}
    for name in cpu_w:
        # interleave so that machine noise hits both sides alike
        t_cpu = _time(cpu_w[name], args.repeat)
        t_dev = _time(dev_w[name], args.repeat)
        rows.append((name, t_cpu * 1e3, t_dev * 1e3, t_dev / t_cpu, goals[name]))
    rss_cpu, rss_dev = _peak_rss("cpu", args.threads), _peak_rss("neuron", args.threads)
    print(f"threads={args.threads} torch={torch.__version__}")
    print(f"{'workload':<24}{'cpu ms':>10}{'neuron ms':>11}{'ratio':>8}{'goal':>7}")
    for name, c, d, r, g in rows:
        print(f"{name:<24}{c:>10.2f}{d:>11.2f}{r:>8.2f}{'<=' + str(g):>7}")
    (peak_cpu, base_cpu), (peak_dev, base_dev) = rss_cpu, rss_dev
    print(f"{'peak RSS, GPT steps (MB)':<24}{peak_cpu / 1024:>10.1f}{peak_dev / 1024:>11.1f}"
          f"{peak_dev / peak_cpu:>8.2f}{'<=1.1':>7}")
    print(f"{'  of which the steps (MB)':<24}{(peak_cpu - base_cpu) / 1024:>10.1f}"
          f"{(peak_dev - base_dev) / 1024:>11.1f}{(peak_dev - base_dev) / max(peak_cpu - base_cpu, 1):>8.2f}")
    imp, act = _activate_time()
    print(f"import cuda2neuron.backend: {imp * 1e3:.0f} ms; activate() with a warm cache: {act * 1e3:.0f} ms")
    if args.cold_build:
        print(f"cold build: {_cold_build():.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
