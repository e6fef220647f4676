"""A speed change must not change what the tool says: compare two versions' outputs on a tree.

    python bench/compare_outputs.py --tree PATH --save DIR       # on the old version
    python bench/compare_outputs.py --tree PATH --against DIR    # on the new one: exit 1 if any differ

Runs `cuda2neuron check --no-cache --output-format json` and `migrate --diff --no-cache` on PATH
(``--jobs 2``) in fresh processes, saves their stdout (and CPU seconds) under DIR, or compares
them byte for byte with what an earlier run saved there. Check out the old commit (or put an
export of it first on PYTHONPATH) for the --save run. bench/check_prefilter.py proves the
prefilter against no prefilter within one version; this proves one version against another.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
from pathlib import Path

RUNS = {
    "check.json": ["check", "--no-cache", "--jobs", "2", "--output-format", "json"],
    "migrate.diff": ["migrate", "--diff", "--no-cache", "--jobs", "2"],
}


def run(args: list[str]) -> tuple[bytes, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "cuda2neuron", *args], capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return proc.stdout, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, required=True)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--save", type=Path, help="write this version's outputs here")
    where.add_argument("--against", type=Path, help="compare with the outputs saved here")
    args = ap.parse_args()
    differ = 0
    for name, command in RUNS.items():
        out, cpu = run([*command, str(args.tree)])
        if args.save is not None:
            args.save.mkdir(parents=True, exist_ok=True)
            (args.save / name).write_bytes(out)
            print(f"{name}: {len(out)} bytes saved, {cpu:.1f} s CPU")
            continue
        saved = args.against / name
        if not saved.is_file():
            print(f"{name}: nothing saved in {args.against} (run with --save first)")
            return 2
        same = saved.read_bytes() == out
        differ += not same
        print(f"{name}: {'identical' if same else 'DIFFERS'} ({len(out)} bytes), {cpu:.1f} s CPU")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
