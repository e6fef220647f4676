"""A change to the project sweep must not change one of its answers: compare ProjectFacts.

    python bench/check_sweep.py --tree PATH [--tree PATH ...] --save DIR     # on the old version
    python bench/check_sweep.py --tree PATH [--tree PATH ...] --against DIR  # on the new one

Runs the sweep (``workspace.project_facts``) over the files ``discover`` finds under each tree,
as `migrate` and `check` do, and writes every field of the facts as sorted JSON (one file per
tree), or compares it field by field with what an earlier version saved: exit 1 if any differ,
naming the field and a few of the entries only one side has. It also prints the sweep's CPU
seconds (best of ``--rounds``), measured in this process after a first run has imported what
the sweep imports (the rules' tables: a `migrate` run imports them anyway). Run the --save side
with the old version's interpreter (cwd outside a worktree, so that its package is the one
imported). bench/compare_outputs.py compares whole outputs; this compares the sweep alone, also
on facts no output of a tree happens to show.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from cuda2neuron.workspace import discover, project_facts


def facts_of(tree: Path, rounds: int) -> tuple[dict[str, list], float]:
    files = list(discover([tree]).files)
    best = float("inf")
    facts = project_facts(files, extra_roots=[tree])  # imports what the sweep imports
    for _ in range(rounds):
        cpu = time.process_time()
        again = project_facts(files, extra_roots=[tree])
        best = min(best, time.process_time() - cpu)
        if again != facts:
            raise SystemExit(f"{tree}: two sweeps of the same files gave different facts")
    fields = {f.name: sorted(json.loads(json.dumps(sorted(getattr(facts, f.name), key=repr), default=list)), key=repr)
              for f in dataclasses.fields(facts)}
    return fields, best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, action="append", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--save", type=Path)
    where.add_argument("--against", type=Path)
    args = ap.parse_args()
    differ = 0
    for tree in args.tree:
        fields, cpu = facts_of(tree, args.rounds)
        size = sum(len(v) for v in fields.values())
        name = f"{tree.resolve().name}.facts.json"
        if args.save is not None:
            args.save.mkdir(parents=True, exist_ok=True)
            (args.save / name).write_text(json.dumps(fields, indent=1, sort_keys=True))
            print(f"{tree}: {size} facts saved; sweep {cpu:.2f} s CPU (best of {args.rounds})")
            continue
        saved = json.loads((args.against / name).read_text())
        wrong = [k for k in sorted(set(saved) | set(fields)) if saved.get(k) != fields.get(k)]
        differ += bool(wrong)
        for k in wrong:
            old = {repr(v) for v in saved.get(k, [])}
            new = {repr(v) for v in fields.get(k, [])}
            print(f"  {k}: only before {sorted(old - new)[:3]}, only now {sorted(new - old)[:3]}")
        print(f"{tree}: {size} facts, {'identical' if not wrong else 'DIFFER'}; sweep {cpu:.2f} s CPU (best of {args.rounds})")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
