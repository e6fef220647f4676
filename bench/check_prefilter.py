"""Prove on a real tree that the prefilter loses nothing: the catalog with and without it.

    python bench/check_prefilter.py --tree PATH [--check]

For every .py file under PATH, once as `migrate` runs it (coarse words, trigger words in the
code text, each rule's ``wakes`` test; rules that do not wake are never run) and once with no
prefilter at all (every file parsed, every selected rule run), fixes on. The findings (code,
span, message, fix) and the rewritten bytes must be identical. Prints how many files each way
parsed and every difference; exits 1 when there is one. ``--check`` (fixes off) compares what
`check` reports instead.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cuda2neuron.core import Config, RunOptions
from cuda2neuron.kinds import rules_for
from cuda2neuron.kinds._guard import guarded
from cuda2neuron.kinds._python import process_python_findings


def unfiltered(path: str, data: bytes, config: Config, options: RunOptions):
    """The Python kind's processing with no prefilter: parse, then every selected rule."""
    from cuda2neuron.python import fix_module, lint_module, parse_bytes

    rule_types = tuple(r for r in rules_for(config, path) if "python" in r.file_kinds)
    module = parse_bytes(data)
    if not options.fix:
        return None, lint_module(module, rule_types, path, config.settings)
    outcome = fix_module(module, rule_types, path, config.settings, unsafe=options.unsafe)
    new = outcome.bytes if outcome.applied else None
    return (None if new == data else new), outcome.applied + outcome.remaining


def key(result):
    return (
        result.status,
        result.new_bytes,
        tuple((f.code, f.span, f.message, f.fix, f.applied) for f in result.findings),
        result.error.kind if result.error else None,
    )


def compare(files: list[Path], options: RunOptions, config: Config | None = None) -> tuple[list[str], int, int]:
    """(differences, files the prefiltered run parsed, files parsed without the prefilter).

    A file libcst cannot read fails the same way both ways (the error kind is compared)."""
    config = config or Config()
    parsed = [0]

    def counting(path, data, config, options):
        import cuda2neuron.python as engine

        real = engine.parse_bytes

        def parse(data):
            parsed[0] += 1
            return real(data)

        engine.parse_bytes = parse
        try:
            return process_python_findings(path, data, config, options)
        finally:
            engine.parse_bytes = real

    differences = []
    everything = 0
    for path in files:
        data = path.read_bytes()
        everything += 1
        with_prefilter = guarded(str(path), data, config, options, counting)
        without = guarded(str(path), data, config, options, unfiltered)
        if key(with_prefilter) != key(without):
            lost = {(f.code, f.span) for f in without.findings} - {(f.code, f.span) for f in with_prefilter.findings}
            extra = {(f.code, f.span) for f in with_prefilter.findings} - {(f.code, f.span) for f in without.findings}
            differences.append(
                f"{path}: lost {sorted(lost)}, extra {sorted(extra)}, "
                f"status {with_prefilter.status.value} vs {without.status.value}"
            )
    return differences, parsed[0], everything


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--check", action="store_true", help="fixes off (what `check` reports)")
    args = ap.parse_args()
    files = sorted(p for p in args.tree.rglob("*.py") if ".git" not in p.parts)
    t = time.process_time()
    differences, parsed, everything = compare(files, RunOptions(fix=not args.check))
    print(
        f"{args.tree}: {len(files)} .py files; with the prefilter {parsed} parsed, without it "
        f"{everything}; {len(differences)} differ ({time.process_time() - t:.0f} s CPU)"
    )
    for line in differences:
        print("  " + line)
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
