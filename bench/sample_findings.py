"""Draw a seeded sample of a tree's findings, stratified by rule code and top folder, to read by hand.

    python bench/sample_findings.py --tree REPO [--n 300] [--seed 3904] [--findings FILE.jsonl] [--jobs 2]

Runs `cuda2neuron check --output-format json-lines` over REPO (or reads FILE.jsonl, the output of
such a run) and draws N findings. The strata are (rule code, top folder of the path; a file at the
top is its own folder's "."): each stratum gets its share of N by the largest remainder of
N * size / total, so every finding has the same chance (about N / total) and the false share read
off the sample is the tree's, with no reweighting. A stratum too small for one draw is still
drawn from in turn by its remainder, which keeps rare rules in some samples and not in others.

Each finding is printed with its index, code, place, message and the source line, as

    #12 CN902 studio/setup.sh:2929:29 | <message>
         > <the line>

for the reader to append a verdict to (false / wrongly described / true). `--summary` prints the
strata's sizes and draws instead. Read the sample, count the false ones, and give the count with a
95% interval: `--false K` prints the share and its Wilson interval for K false of the N drawn.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
from collections import defaultdict
from pathlib import Path


def _findings(tree: Path, findings: Path | None, jobs: int) -> list[dict]:
    if findings is not None:
        lines = findings.read_text(encoding="utf-8").splitlines()
    else:
        out = subprocess.run(
            [sys.executable, "-m", "cuda2neuron", "check", "--no-cache", f"-j{jobs}", "--exit-zero",
             "--output-format", "json-lines", "."],
            cwd=tree, capture_output=True, text=True, check=True,
        )
        lines = out.stdout.splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return [r for r in rows if r.get("type", "finding") == "finding" and "code" in r]


def _stratum(finding: dict) -> tuple[str, str]:
    parts = Path(finding["path"]).parts
    return finding["code"], parts[0] if len(parts) > 1 else "."


def allocate(sizes: dict[tuple[str, str], int], n: int, rng: random.Random) -> dict[tuple[str, str], int]:
    """Draws per stratum: the floor of each share of ``n``, then one more to the largest
    remainders (ties broken by ``rng``) until ``n`` are drawn."""
    total = sum(sizes.values())
    n = min(n, total)
    shares = {s: n * size / total for s, size in sizes.items()}
    draws = {s: int(share) for s, share in shares.items()}
    order = sorted(sizes, key=lambda s: (-(shares[s] - draws[s]), rng.random()))
    for s in order[: n - sum(draws.values())]:
        draws[s] += 1
    return draws


def sample(findings: list[dict], n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    strata: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for f in sorted(findings, key=lambda f: (f["path"], f["line"], f["col"], f["code"])):
        strata[_stratum(f)].append(f)
    draws = allocate({s: len(fs) for s, fs in strata.items()}, n, rng)
    picked = [f for s in sorted(strata) for f in rng.sample(strata[s], draws[s])]
    return sorted(picked, key=lambda f: (f["path"], f["line"], f["col"], f["code"]))


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval for ``k`` of ``n`` (a share near 0 keeps a lower bound >= 0)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _source_line(tree: Path, finding: dict) -> str:
    try:
        text = (tree / finding["path"]).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"<unreadable: {exc.strerror}>"
    lines = text.splitlines()
    line = finding["line"]
    return lines[line - 1].strip()[:240] if 0 < line <= len(lines) else "<no such line>"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tree", type=Path, required=True)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--seed", type=int, default=3904)
    parser.add_argument("--findings", type=Path, help="json-lines output of a check run over --tree")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--summary", action="store_true", help="print the strata and their draws")
    parser.add_argument("--false", type=int, dest="false_count", help="print K false of the N drawn with a 95%% interval")
    args = parser.parse_args(argv)
    if args.false_count is not None:
        low, high = wilson(args.false_count, args.n)
        print(f"{args.false_count} of {args.n} false: {100 * args.false_count / args.n:.1f}% "
              f"(95% Wilson interval {100 * low:.1f}%-{100 * high:.1f}%)")
        return 0
    findings = _findings(args.tree, args.findings, args.jobs)
    picked = sample(findings, args.n, args.seed)
    print(f"# {len(findings)} findings in {args.tree}, {len(picked)} drawn (seed {args.seed}), "
          f"stratified by rule code and top folder")
    if args.summary:
        strata: dict[tuple[str, str], int] = defaultdict(int)
        for f in findings:
            strata[_stratum(f)] += 1
        drawn: dict[tuple[str, str], int] = defaultdict(int)
        for f in picked:
            drawn[_stratum(f)] += 1
        for s in sorted(strata, key=lambda s: -strata[s]):
            print(f"{s[0]:6} {s[1]:30} {strata[s]:6} {drawn[s]:4}")
        return 0
    for i, f in enumerate(picked):
        print(f"#{i} {f['code']} {f['path']}:{f['line']}:{f['col']} | {f['message'][:200]}")
        print(f"     > {_source_line(args.tree, f)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
