"""Where `migrate --diff` spends its time on a real tree: per phase and per rule, in one process.

    python bench/profile_migrate.py --tree PATH [--per-rule] [--cprofile 25]

Runs exactly what `migrate --diff` runs for each .py file (the kind's processing with fixes on,
then the unified diff of a changed file), with timers around each phase:
  * prefilter: coarse words, the catalog's trigger words, the code text (comments and docstrings
    blanked) and each rule's own wake test — everything before the parse;
  * parse: libcst's parse of the files that get past the prefilter;
  * walk: the rules' visitors (one walk per fix round, rules instantiated in it);
  * rebuild + imports: applying fixes;
  * codegen: code generation (spans of findings, the rewritten file);
  * check: the compile check of rewritten output;
  * diff: the unified diff of each changed file.
CPU seconds (process time) beside wall. --per-rule also times each rule's visitor methods (this
adds overhead of its own; the shares are what count). --cprofile N prints the N functions with
the largest own time over the whole run. --wakes counts the files each rule wakes on.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from cuda2neuron.core import Config, FileStatus, RunOptions

class Timers:
    def __init__(self) -> None:
        self.cpu: Counter[str] = Counter()
        self.wall: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self._stack: list[str] = []

    def wrap(self, phase: str, fn):
        """``fn`` timed under ``phase``; time spent in a nested timed phase counts only there."""

        def timed(*args, **kwargs):
            c0, w0 = time.process_time(), time.perf_counter()
            self._stack.append(phase)
            try:
                return fn(*args, **kwargs)
            finally:
                self._stack.pop()
                dc, dw = time.process_time() - c0, time.perf_counter() - w0
                self.cpu[phase] += dc
                self.wall[phase] += dw
                self.calls[phase] += 1
                if self._stack:  # not the parent's own time
                    self.cpu[self._stack[-1]] -= dc
                    self.wall[self._stack[-1]] -= dw

        return timed


def install(timers: Timers, per_rule: dict[str, float] | None):
    """Wrap the engine's phase functions where they are looked up."""
    import cuda2neuron.kinds._python as kpy
    import cuda2neuron.python as cpy
    import cuda2neuron.python._lint as lint
    import cuda2neuron.python._walk as walk

    cpy.parse_bytes  # noqa: B018 - loads the submodule so the attribute can be replaced
    cpy.parse_bytes = timers.wrap("parse", cpy.parse_bytes)  # type: ignore[attr-defined]
    lint.walk_rules = timers.wrap("walk", lint.walk_rules)
    lint._collect = timers.wrap("walk", lint._collect)  # rule instantiation counts as walk
    lint.rebuild = timers.wrap("rebuild + imports", lint.rebuild)
    lint._fix_imports = timers.wrap("rebuild + imports", lint._fix_imports)
    lint.spans_and_code = timers.wrap("codegen", lint.spans_and_code)

    kpy._compile_check = timers.wrap("check", kpy._compile_check)
    if per_rule is not None:
        original_init = walk._Walker.__init__

        def init(self, rules, context):
            original_init(self, rules, context)
            for table in (self.visit, self.leave):
                for key, methods in table.items():
                    table[key] = [_rule_timed(m, per_rule) for m in methods]

        walk._Walker.__init__ = init
    # The prefilter is everything in the kind's processing that is not a timed phase.
    return timers.wrap("prefilter", kpy.process_python_findings)


def _rule_timed(method, per_rule: dict[str, float]):
    code = method.__self__.code

    def timed(node):
        c0 = time.perf_counter()
        try:
            return method(node)
        finally:
            per_rule[code] += time.perf_counter() - c0

    return timed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--per-rule", action="store_true")
    ap.add_argument("--cprofile", type=int, default=0, metavar="N")
    ap.add_argument("--wakes", action="store_true", help="also count the files each rule wakes on")
    args = ap.parse_args()

    from cuda2neuron.cli._render import diff_text
    from cuda2neuron.kinds import catalog
    from cuda2neuron.kinds._guard import guarded

    files = sorted(p for p in args.tree.rglob("*.py") if ".git" not in p.parts)
    catalog()  # import cost is not a per-file phase
    timers = Timers()
    per_rule: dict[str, float] | None = defaultdict(float) if args.per_rule else None
    body = install(timers, per_rule)
    diff = timers.wrap("diff", diff_text)
    read = timers.wrap("read", Path.read_bytes)
    config = Config()
    options = RunOptions(fix=True)
    changed = findings = 0
    by_rule: Counter[str] = Counter()
    profiler = cProfile.Profile() if args.cprofile else None
    c0, w0 = time.process_time(), time.perf_counter()
    if profiler:
        profiler.enable()
    for path in files:
        result = guarded(str(path), read(path), config, options, body)
        findings += len(result.findings)
        by_rule.update(f.code for f in result.findings)
        if result.status is FileStatus.CHANGED:
            changed += 1
            diff(result)
    if profiler:
        profiler.disable()
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    print(f"{args.tree}: {len(files)} .py files, {timers.calls['parse']} parsed, {changed} changed, {findings} findings")
    print(f"{'phase':<20}{'CPU s':>9}{'wall s':>9}{'share':>8}")
    for phase in ("read", "prefilter", "parse", "walk", "rebuild + imports", "codegen", "check", "diff"):
        print(f"{phase:<20}{timers.cpu[phase]:>9.2f}{timers.wall[phase]:>9.2f}{timers.cpu[phase] / cpu:>8.1%}")
    print(f"{'total':<20}{cpu:>9.2f}{wall:>9.2f}")
    if per_rule:
        total = sum(per_rule.values())
        print("visitor time per rule (instrumented; share of all visitor time):")
        for code, t in sorted(per_rule.items(), key=lambda kv: -kv[1])[:15]:
            print(f"  {code} {t:7.2f} s {t / total:6.1%}  findings {by_rule[code]}")
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.cprofile)
    if args.wakes:
        print_wakes(files, config)
    return 0


def print_wakes(files: list[Path], config: Config) -> None:
    """Which rules wake on how many files, and how many files each alone makes parsed."""
    from cuda2neuron.core import has_trigger
    from cuda2neuron.kinds import may_trigger, rules_for
    from cuda2neuron.kinds._code_text import code_text
    from cuda2neuron.kinds._python import python_triggers

    rules = tuple(r for r in rules_for(config) if "python" in r.file_kinds)
    woken: Counter[str] = Counter()
    alone: Counter[str] = Counter()
    for path in files:
        data = path.read_bytes()
        if not may_trigger(data, "python"):
            continue
        code = code_text(data)
        awake = [r.code for r in rules if has_trigger(code, python_triggers((r,))) and r.wakes(code)]
        woken.update(awake)
        if len(awake) == 1:
            alone[awake[0]] += 1
    print("rules by files woken (alone: files no other rule wakes):")
    for code, n in woken.most_common(15):
        print(f"  {code} {n:5d} files, alone {alone[code]}")


if __name__ == "__main__":
    sys.exit(main())
