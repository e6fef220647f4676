"""The full OpInfo sweep: every op of PyTorch's OpInfo database, CPU against the emulated device.

    python bench/opinfo_sweep.py [--jobs 2] [--chunk 40] [--ops REGEX] [--out sweep.jsonl] [--timeout 600]

Each chunk of ops runs in its own subprocess (a worker). The worker writes a line naming a case
before it runs it and the case's result after, so a case that kills the process (a segfault, an
abort) is recorded as ``abort`` and the chunk resumes after it in a fresh worker. At the end the
pass table is printed (per mode and dtype: cases, identical, by design, both raise, differences,
aborts) and the differing cases are listed by op. The comparison itself is
tests/backend/opinfo_driver.py (see there for what "identical" means).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DRIVER_DIR = REPO / "tests" / "backend"
#: The outcomes that agree with CPU (opinfo_driver.AGREE; repeated so that the table needs no torch).
AGREE = ("identical", "both_raise", "by_design", "undefined_values", "on_cpu", "cpu_unstable")


def table(results: list[dict]) -> str:
    cols = ["cases", "identical", "both_raise", "by_design", "undefined_values", "on_cpu", "cpu_unstable", "mismatch",
            "meta",
            "neuron_raises", "cpu_raises", "no_samples", "abort", "timeout"]
    rows: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    ops_per: dict[str, set] = collections.defaultdict(set)
    for r in results:
        for k in (f"{r['mode']} {r['dtype']}", "all"):
            rows[k]["cases"] += r["outcome"] != "no_samples"
            rows[k][r["outcome"]] += 1
            ops_per[k].add(r["op"])
    lines = ["| mode dtype | ops | " + " | ".join(cols) + " | agree % |", "|" + "---|" * (len(cols) + 3)]
    for k in sorted(rows, key=lambda k: (k == "all", k)):
        c = rows[k]
        agree = sum(c[x] for x in AGREE)
        pct = 100.0 * agree / c["cases"] if c["cases"] else 100.0
        lines.append(f"| {k} | {len(ops_per[k])} | " + " | ".join(str(c[x]) for x in cols) + f" | {pct:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--chunk", type=int, default=40)
    p.add_argument("--ops", default="", help="only ops whose full name matches this regex")
    p.add_argument("--out", default="", help="write every result as JSON lines here")
    p.add_argument("--timeout", type=float, default=600, help="seconds one case may run before it is killed and counted as timeout")
    a = p.parse_args(argv)
    sys.path.insert(0, str(DRIVER_DIR))
    import opinfo_driver as drv

    names = [n for n in drv.all_ops() if not a.ops or re.search(a.ops, n)]
    chunks = [names[i : i + a.chunk] for i in range(0, len(names), a.chunk)]
    t0 = time.perf_counter()
    results: list[dict] = []
    with ThreadPoolExecutor(a.jobs) as ex:
        for part in ex.map(lambda c: drv.run_chunk(c, a.timeout), chunks):
            results.extend(part)
            print(f"... {len(results)} cases, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    if a.out:
        with open(a.out, "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    print(f"OpInfo sweep: {len(names)} ops, {time.perf_counter() - t0:.0f} s wall\n")
    print(table(results))
    bad = collections.defaultdict(list)
    for r in results:
        if r["outcome"] not in drv.AGREE and r["outcome"] not in ("no_samples", "cpu_raises"):
            bad[r["op"]].append(r)
    if bad:
        print("\nDiffering ops:")
        for op, rs in sorted(bad.items()):
            kinds = collections.Counter(f"{r['mode']} {r['dtype']} {r['outcome']}" for r in rs)
            print(f"  {op}: " + ", ".join(f"{k} x{n}" for k, n in kinds.items()) + f" — {rs[0]['detail']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
