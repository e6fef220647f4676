"""Prove that a prefilter change wakes the same rules: per file, the rules the Python kind would run.

    python bench/check_wakes.py --tree PATH --save FILE      # on the old version
    python bench/check_wakes.py --tree PATH --against FILE   # on the new one: exit 1 if any differ

For every .py file under PATH, the steps ``process_python_findings`` takes before the parse
(coarse words, trigger words, the code text, each rule's words in it and its ``wakes`` test),
without the project sweep's words: the codes of the rules woken, or none when the file is never
parsed. Saves them as JSON, or compares them file by file with a saved run and prints every
difference. Also prints the CPU seconds of each step (best of ``--rounds``), so a change to one
step is timed beside its proof. bench/check_prefilter.py proves the prefilter against no
prefilter within one version; this proves one version's prefilter against another's, cheaply
(nothing is parsed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from cuda2neuron.core import Config
from cuda2neuron.kinds import _python as kind
from cuda2neuron.kinds import rules_for
from cuda2neuron.kinds._code_text import code_text
from cuda2neuron.kinds._prefilter import may_trigger


def woken(files: list[tuple[str, bytes]], config: Config, cpu: Counter[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    clock = time.process_time
    for path, data in files:
        t = clock()
        passes = may_trigger(data, "python")
        cpu["coarse words"] += clock() - t
        if not passes:
            out[path] = []
            continue
        t = clock()
        rule_types = kind._python_rules(rules_for(config, path), config.settings)
        passes = bool(rule_types) and kind.triggered(rule_types, data)
        cpu["trigger words"] += clock() - t
        if not passes:
            out[path] = []
            continue
        t = clock()
        code = code_text.__wrapped__(data)  # uncached: each round pays it, as a run does once
        cpu["code text"] += clock() - t
        t = clock()
        awake = kind._awake(rule_types, code, ())
        cpu["words in code, wake tests"] += clock() - t
        out[path] = sorted(r.code for r in awake)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--save", type=Path, help="write this version's woken rules here (JSON)")
    where.add_argument("--against", type=Path, help="compare with the woken rules saved here")
    args = ap.parse_args()
    files = [
        (str(p.relative_to(args.tree)), p.read_bytes()) for p in sorted(args.tree.rglob("*.py")) if p.is_file()
    ]
    config = Config()
    best: Counter[str] = Counter()
    result: dict[str, list[str]] = {}
    for _ in range(max(1, args.rounds)):
        cpu: Counter[str] = Counter()
        result = woken(files, config, cpu)
        for step, seconds in cpu.items():
            best[step] = min(best.get(step, seconds), seconds)
    parsed = sum(1 for codes in result.values() if codes)
    print(f"{args.tree}: {len(files)} .py files, {parsed} would be parsed")
    for step, seconds in best.items():
        print(f"  {step:<28} {seconds:6.2f} CPU s (best of {args.rounds})")
    if args.save:
        args.save.write_text(json.dumps(result, indent=0, sort_keys=True))
        return 0
    saved = json.loads(args.against.read_text())
    differ = sorted(p for p in set(saved) | set(result) if saved.get(p) != result.get(p))
    for path in differ:
        print(f"  {path}: was {saved.get(path)}, now {result.get(path)}")
    print(f"{len(differ)} files differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
