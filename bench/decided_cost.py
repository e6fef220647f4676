"""What the detectors spare on the files some rules' detectors decide: CPU of each path, same files.

    python bench/decided_cost.py --tree /work/repos/diffusers --rule CN112 --rule CN611 [--rounds 2]

Runs the Python kind on every ``.py`` file of the tree as ``migrate`` does (safe fixes, the
sweep's facts) and keeps the files the detectors decide (``kinds/_python._detected`` answered)
where one of ``--rule`` woke: without those rules' detectors these files went to libcst. Then,
round by round, times on exactly those files the engine's two paths for the same woken rules:
``_detected`` (CPython's ``ast``, the detectors) and ``_parsed_file`` (libcst's parse, the rule
walk, spans), and checks their findings are equal. CPU seconds (``time.process_time``); print
``cat /proc/loadavg`` beside them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cuda2neuron.core import Config, RunOptions, SourceError
from cuda2neuron.kinds import _python as kind
from cuda2neuron.workspace import discover
from cuda2neuron.workspace._project import with_project_facts


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, action="append", required=True)
    ap.add_argument("--rule", action="append", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    real = kind._detected
    seen: list[tuple] = []

    def detected(path, data, config, options, rule_types):  # noqa: ANN001, ANN202 - a transparent wrapper
        found = real(path, data, config, options, rule_types)
        if found is not None and any(r.code in args.rule for r in rule_types):
            seen.append((path, data, rule_types))
        return found

    kind._detected = detected
    options = RunOptions(fix=True)
    differ = 0
    for tree in args.tree:
        config = with_project_facts(Config(), discover([tree]).files)
        seen.clear()
        for path in sorted(tree.rglob("*.py")):
            try:
                kind.process_python_findings(str(path), path.read_bytes(), config, options)
            except (OSError, SourceError, RuntimeError, RecursionError):
                continue
        files = list(seen)
        size = sum(len(d) for _, d, _ in files)
        for n in range(1, args.rounds + 1):
            t0 = time.process_time()
            fast = [real(p, d, config, options, r) for p, d, r in files]
            t1 = time.process_time()
            slow = [kind.deep_stack(kind._parsed_file, p, d, config, options, r)[1] for p, d, r in files]
            t2 = time.process_time()
            differ += sum(a != b for a, b in zip(fast, slow))
            print(f"{tree.name} round {n}: {len(files)} files ({size / 1e6:.1f} MB) decided with {'/'.join(args.rule)} woken: "
                  f"detectors {t1 - t0:.2f} CPU-s, libcst path {t2 - t1:.2f} CPU-s ({(t1 - t0) / max(t2 - t1, 1e-9):.2f}x)")
    print("findings equal" if not differ else f"{differ} files DIFFER")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
