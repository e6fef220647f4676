"""Which rules keep a tree's Python files on libcst (issue 42's census).

    python bench/span_blockers.py --tree /work/trees/diffusers [--tree ...] [--files]

A file leaves libcst only where every rule the engine wakes on it has a detector on CPython's
``ast`` and each of them decides it (``kinds/_python._detections``). For each Python file that
wakes a rule, as the engine wakes them (trigger words in the code, the project sweep's words,
each rule's wake test), this counts the woken rules that block: no detector, or a detector
unsure on the file. It prints, per rule, the files it blocks, the files it blocks with no
detector, and the files where it is the only blocker (the ones a detector for it alone would
take); then how many files every woken rule decides. ``--files`` lists each blocked file with
its blockers. Nothing is compared here: bench/check_detectors.py holds the detectors to their
visitors.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from cuda2neuron.core import Config, RunOptions
from cuda2neuron.kinds import catalog
from cuda2neuron.kinds._code_text import code_text
from cuda2neuron.kinds._python import _awake, _detected, _python_rules
from cuda2neuron.workspace import discover
from cuda2neuron.workspace._project import with_project_facts


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, action="append", required=True)
    ap.add_argument("--files", action="store_true", help="list every blocked file with its blockers")
    args = ap.parse_args()
    for tree in args.tree:
        config = with_project_facts(Config(), discover([tree]).files)
        settings = config.settings
        rules = _python_rules(tuple(r for r in catalog().values() if r.applies(settings)), settings)
        project = settings.project.words()
        missing: Counter[str] = Counter()  # files a rule blocks for want of a detector
        unsure: Counter[str] = Counter()  # files a rule's detector cannot decide
        sole: Counter[str] = Counter()  # files where the rule is the only blocker
        woken_files = decided_files = 0
        for path in sorted(tree.rglob("*.py")):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            woken = [r for r in _awake(rules, code_text(data), project) if settings.target in r.targets]
            if not woken:
                continue
            woken_files += 1
            blockers = []
            for rule in woken:
                if not rule.has_detector():
                    missing[rule.code] += 1
                    blockers.append(rule.code)
                elif _detected(str(path), data, config, RunOptions(), (rule,)) is None:
                    unsure[rule.code] += 1
                    blockers.append(rule.code + "?")
            if not blockers:
                decided_files += 1
            elif len(blockers) == 1:
                sole[blockers[0].rstrip("?")] += 1
            if args.files and blockers:
                print(f"  {path.relative_to(tree)}: {' '.join(blockers)}")
        print(f"{tree}: {woken_files} files wake a rule, {decided_files} decided by every woken rule")
        print(f"  {'rule':<7} {'blocks':>6} {'no detector':>11} {'unsure':>6} {'sole':>5}")
        for code in sorted(set(missing) | set(unsure), key=lambda c: -(missing[c] + unsure[c])):
            print(f"  {code:<7} {missing[code] + unsure[code]:>6} {missing[code]:>11} {unsure[code]:>6} {sole[code]:>5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
