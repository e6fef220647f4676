"""Every rule's detector against its libcst visitor on a real tree (issue 42's contract).

    python bench/check_detectors.py --tree /work/repos/diffusers [--tree ...] [--rule CN112 ...]

For each Python file a detecting rule wakes on (its trigger words, the project's words and its
wake test, as the engine asks, with the facts the project sweep finds in the tree), runs the
rule's detector on CPython's ``ast`` and its visitor on libcst, and compares the findings field
for field; a detector that is unsure is counted, not compared. Exit 1 on any difference. tests/rules/test_detectors.py does the same on the examples and a table of traps;
bench/compare_outputs.py compares the tool's whole output between two versions.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cuda2neuron.core import Config, RunOptions, SourceError
from cuda2neuron.kinds import catalog
from cuda2neuron.kinds._code_text import code_text
from cuda2neuron.kinds._python import _awake, _detected
from cuda2neuron.python import lint_module, parse_bytes
from cuda2neuron.workspace import discover
from cuda2neuron.workspace._project import with_project_facts


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, action="append", required=True)
    ap.add_argument("--rule", action="append", default=[], help="only these rules' detectors (default: all)")
    args = ap.parse_args()
    detecting = tuple(r for r in catalog().values() if r.has_detector() and (not args.rule or r.code in args.rule))
    differ = 0
    for tree in args.tree:
        # The sweep's facts: CN602's loaders and CN617's modules, and the words that wake them.
        config = with_project_facts(Config(), discover([tree]).files)
        settings = config.settings
        rules = tuple(r for r in detecting if r.applies(settings))
        project = settings.project.words()
        woken = decided = unsure = findings = 0
        # Per rule: (file, rule) pairs woken, decided, decided with a fix among the findings.
        per_rule: dict[str, list[int]] = {}
        for path in sorted(tree.rglob("*.py")):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            module = None  # libcst's tree of the file, parsed once for every rule decided in it
            for rule in _awake(rules, code_text(data), project):
                woken += 1
                counts = per_rule.setdefault(rule.code, [0, 0, 0])
                counts[0] += 1
                detected = _detected(str(path), data, config, RunOptions(), (rule,))
                if detected is None:
                    unsure += 1
                    continue
                try:
                    module = parse_bytes(data) if module is None else module
                except SourceError:
                    print(f"{path}: {rule.code}: decided, yet libcst cannot parse it")
                    differ += 1
                    continue
                linted = lint_module(module, [rule], str(path), settings, data.decode(module.encoding))
                decided += 1
                counts[1] += 1
                counts[2] += any(f.fix is not None for f in detected)
                findings += len(linted)
                if detected != linted:
                    differ += 1
                    print(f"{path}: {rule.code} differs:\n  detector {detected}\n  visitor  {linted}")
        print(f"{tree}: {woken} (file, rule) pairs woken, {decided} decided ({findings} findings), {unsure} unsure")
        for code, (w, d, f) in sorted(per_rule.items()):
            print(f"  {code}: {w} woken, {d} decided, {f} decided with fixes")
    print("identical" if not differ else f"{differ} DIFFER")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
