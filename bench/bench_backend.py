"""Benchmark of the emulated neuron device against plain CPU, same thread count, side by side.

    python bench/bench_backend.py [--threads N] [--repeat R] [--per-op [--calls N] [--accounting]]

Measures (emulator time / CPU time): a small-GPT training step (goal <= 1.2x), a loop of 10,000
tiny adds (goal <= 2.5x), a 256x256 matmul loop (~1.0x), peak memory of a training step
(goal <= 1.1x, zero copy), plus the cold build time (fresh cache, in a subprocess) and the
import / activate time. Peak memory is measured in fresh subprocesses (VmHWM after a reset).
``--per-op`` instead prints the per-call time of 20 common ops on small tensors, neuron beside
CPU, wall and CPU (process) seconds, with OMP_NUM_THREADS=1 and torch.set_num_threads(1) on both;
``--accounting`` times them inside an ``OpAccounting`` block with ``torch_neuronx``'s op tracking on
(validate's port run): the accounting's per-op cost, CPU ops included (its callback sees every op).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
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


def _per_op_cases(device: str) -> dict[str, Callable[[], object]]:
    """20 common ops on small tensors (what an optimizer step or a small layer issues)."""
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 64, generator=g).to(device)
    b = torch.randn(64, 64, generator=g).to(device)
    v = torch.randn(1024, generator=g).to(device)
    x4 = torch.randn(2, 4, 16, 16, generator=g).to(device)
    w4 = torch.randn(8, 4, 3, 3, generator=g).to(device)
    idx = torch.randint(0, 64, (32,), generator=g).to(device)
    tgt = torch.randint(0, 64, (64,), generator=g).to(device)
    q = torch.randn(2, 4, 16, 32, generator=g).to(device)
    ln_w = torch.ones(64, device=device)
    ps = [torch.randn(64, 64, generator=g).to(device) for _ in range(4)]
    return {
        "add": lambda: a + b, "mul (scalar)": lambda: a * 0.5, "add_ (in place)": lambda: a.add_(b, alpha=0.0),
        "exp": lambda: torch.exp(v), "relu": lambda: F.relu(a), "gelu": lambda: F.gelu(a),
        "sum": lambda: a.sum(), "mean(dim)": lambda: a.mean(1), "softmax": lambda: a.softmax(-1),
        "mm 64x64": lambda: a @ b, "linear": lambda: F.linear(a, b), "layer_norm": lambda: F.layer_norm(a, (64,), ln_w),
        "conv2d": lambda: F.conv2d(x4, w4, padding=1), "cross_entropy": lambda: F.cross_entropy(a, tgt),
        "index_select": lambda: a.index_select(0, idx), "cat": lambda: torch.cat([a, b]),
        "view+transpose": lambda: a.view(32, 128).t(), "clone": lambda: a.clone(),
        "sdpa": lambda: F.scaled_dot_product_attention(q, q, q),
        "_foreach_add_ (4)": lambda: torch._foreach_add_(ps, ps, alpha=0.0),
    }


def per_op(calls: int, repeat: int) -> list[tuple[str, float, float, float, float]]:
    """(op, cpu wall us, neuron wall us, cpu cpu-us, neuron cpu-us) per call, best of `repeat`."""
    cases = {d: _per_op_cases(d) for d in ("cpu", "neuron")}

    def clock(fn: Callable[[], object]) -> tuple[float, float]:
        best_w = best_c = float("inf")
        fn()
        for _ in range(repeat):
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(calls):
                fn()
            best_w = min(best_w, time.perf_counter() - w0)
            best_c = min(best_c, time.process_time() - c0)
        return best_w / calls * 1e6, best_c / calls * 1e6

    rows = []
    for name in cases["cpu"]:
        cw, cc = clock(cases["cpu"][name])  # interleaved: machine noise hits both alike
        dw, dc = clock(cases["neuron"][name])
        rows.append((name, cw, dw, cc, dc))
    return rows


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
    parser.add_argument("--per-op", action="store_true", help="per-call overhead of 20 common ops instead")
    parser.add_argument("--calls", type=int, default=200, help="calls per timing with --per-op")
    parser.add_argument("--accounting", action="store_true",
                        help="with --per-op: inside an OpAccounting block, torch_neuronx op tracking on")
    args = parser.parse_args(argv)
    if args.per_op:
        os.environ["OMP_NUM_THREADS"] = "1"  # before torch is imported: its thread pool reads it

    import torch

    import cuda2neuron.backend as backend

    torch.set_num_threads(args.threads)
    backend.activate()
    if args.per_op:
        with contextlib.ExitStack() as stack:
            if args.accounting:
                from cuda2neuron.backend.accounting import OpAccounting

                backend.install_torch_neuronx()
                stack.enter_context(OpAccounting())
            rows = per_op(args.calls, args.repeat)
        on = ", accounting and op tracking on" if args.accounting else ""
        print(f"threads={args.threads} torch={torch.__version__}{on}; microseconds per call, best of {args.repeat}")
        print("| op | CPU wall | neuron wall | ratio | CPU cpu-time | neuron cpu-time | ratio |")
        print("|---|---|---|---|---|---|---|")
        for name, cw, dw, cc, dc in rows:
            print(f"| {name} | {cw:.1f} | {dw:.1f} | {dw / cw:.2f} | {cc:.1f} | {dc:.1f} | {dc / max(cc, 1e-9):.2f} |")
        tw = statistics.geometric_mean(r[2] / r[1] for r in rows)
        tc = statistics.geometric_mean(r[4] / max(r[3], 1e-9) for r in rows)
        print(f"| geometric mean | | | {tw:.2f} | | | {tc:.2f} |")
        return 0
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
