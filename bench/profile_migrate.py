"""Where `migrate --diff --no-cache` spends its CPU on a real tree: the whole command, phase by phase.

    python bench/profile_migrate.py --tree PATH [--per-rule] [--jobs2] [--cprofile 25] [--wakes]

Runs the real command in this process (``cuda2neuron.cli.main``, ``--jobs 1``: every phase is in
one process and can be timed) with timers around the engine's functions where they are looked up:
  * discovery: walking the tree (``discover``);       * sweep: the project sweep (CPython ``ast``);
  * prefilter: the Python kind's own work before and around the parse (coarse words, trigger
    words) — what is left of it after the phases below;
  * wake: the code text (comments and docstrings blanked) and the rules' words and wake tests
    in it (``_awake``), on the file as read;
  * wake (output): the same on a rewritten module's code, which decides the rules of the fix
    rounds after the first (a rerun's rules: ``fix_module``'s ``woken_by``);
  * guard: the nesting check and the thread with a deep stack that the parse runs on;
  * detect: the rules' detectors on CPython's ``ast`` (``Rule.detect``), tried where every
    woken rule has one; a file they decide is never parsed by libcst (outcome "detected");
  * span path: where an edit lands in such a file, its fixes spliced into the text round by
    round (``kinds/_span_path.py``), re-detection included (outcome "spanned");
  * parse: libcst's parse;                            * metadata: libcst's import helpers
    (``MetadataWrapper``: scopes and qualified names, only where an import changes);
  * rules: the rule walk of a file's first round (visitor calls, rules instantiated);
    ``--per-rule`` splits it by family (the rule's folder under rules/) — instrumented, so the
    shares are what count;
  * rules (later rounds): the walks of a rewritten module, one per fix round after the first;
  * groups: linked fixes (``link_groups``: the program pass and the groups' safeties), each round;
  * fix rounds: rebuilding the paths to replaced nodes;
  * codegen: code generation (finding spans, the rewritten module, spliced where it can be);
  * statement lines: the splicer's cut of the file as read into its statements' texts (a
    CPython ``ast.parse`` of it, for the lines they start on), which codegen and spans use;
  * compile check: the rewritten output through ``compile()``;
  * residual: the residual pass (CN902) over each kind's output;
  * text kinds: every non-Python kind (shell, requirements, notebooks, configs ...);
  * cache: result cache look-ups and writes (0 with --no-cache, as here);
  * report: the report model, the text report and the unified diffs printed (to /dev/null);
  * other: start-up of the command and what no timer covers.
Python files are also split by outcome (never parsed, parsed with no finding, report-only, edited),
each with the CPU of every phase spent on them.
``--jobs2`` also runs ``migrate --diff --no-cache --jobs 2`` in a fresh process: its CPU beyond this
process's total is the pool (workers' start-up and catalog import, IPC of the results). The floor
is libcst's parse of the tree's files that mention CUDA, in this process. CPU seconds beside
wall; ``cat /proc/loadavg`` is printed, as other work on the machine moves wall time, not CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import resource
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from cuda2neuron.core import Config

PHASES = ("discovery", "sweep", "prefilter", "wake", "guard", "detect", "span path", "parse", "metadata", "rules",
          "rules (later rounds)", "groups", "wake (output)", "fix rounds", "codegen", "statement lines", "compile check", "residual",
          "text kinds", "cache", "report")


class Timers:
    def __init__(self) -> None:
        self.cpu: Counter[str] = Counter()
        self.wall: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self._stack: list[str] = []
        # Python files by outcome (see _outcome): how many, and each phase's CPU spent on them.
        self.files: Counter[str] = Counter()
        self.by_outcome: defaultdict[str, Counter[str]] = defaultdict(Counter)

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


def install(timers: Timers, per_family: dict[str, float] | None) -> None:
    """Wrap the engine's phase functions where they are looked up."""
    import cuda2neuron.cli._migrate as mig
    import cuda2neuron.kinds as kinds
    import cuda2neuron.kinds._nesting as nesting
    import cuda2neuron.kinds._python as kpy
    import cuda2neuron.kinds._residual as residual
    import cuda2neuron.python as cpy
    import cuda2neuron.python._lint as lint
    import cuda2neuron.python._walk as walk
    import cuda2neuron.workspace._runner as runner
    from cuda2neuron.workspace import ResultCache

    mig.discover = timers.wrap("discovery", mig.discover)
    mig.with_project_facts = timers.wrap("sweep", mig.with_project_facts)
    mig.build_report = timers.wrap("report", mig.build_report)
    mig.print_summary = timers.wrap("report", mig.print_summary)
    mig.print_diff = timers.wrap("report", mig.print_diff)
    for name in ("key", "get", "put"):
        setattr(ResultCache, name, timers.wrap("cache", getattr(ResultCache, name)))

    # Per file: a Python file's time is "prefilter" unless a nested phase claims it; any other
    # kind's is "text kinds".
    real_process_kind = runner.process_kind
    python_file = timers.wrap("prefilter", real_process_kind)
    text_file = timers.wrap("text kinds", real_process_kind)

    def process_kind(kind, *args):
        if kind != "python":
            return text_file(kind, *args)
        before, parsed, detected = timers.cpu.copy(), timers.calls["parse"], timers.calls["detected"]
        result = python_file(kind, *args)
        outcome = _outcome(result, timers.calls["parse"] > parsed, timers.calls["detected"] > detected)
        timers.files[outcome] += 1
        for phase, t in timers.cpu.items():
            timers.by_outcome[outcome][phase] += t - before[phase]
        return result

    runner.process_kind = process_kind
    residual.residual_findings = timers.wrap("residual", residual.residual_findings)
    kinds.check_suppressions = timers.wrap("residual", kinds.check_suppressions)
    kpy.nesting_error = timers.wrap("guard", kpy.nesting_error)
    # The detectors: ``_detections`` since the span path (the engine asks it directly),
    # ``_detected`` before it; the script profiles both.
    name = "_detections" if hasattr(kpy, "_detections") else "_detected" if hasattr(kpy, "_detected") else None
    if name is not None:
        real_detected = timers.wrap("detect", getattr(kpy, name))

        def detected(*args):
            found = real_detected(*args)
            timers.calls["detected"] += found is not None
            return found

        setattr(kpy, name, detected)
    if hasattr(kpy, "fixed_by_spans"):  # the span path: fixes spliced into the text, no libcst
        kpy.fixed_by_spans = timers.wrap("span path", kpy.fixed_by_spans)
    real_deep = nesting.deep_stack

    def deep_stack(fn, *args):  # the thread's start and join are the guard's; fn's time is its own
        return timers.wrap("guard", real_deep)(timers.wrap("prefilter", _in_thread_profiler(fn)), *args)

    kpy.deep_stack = deep_stack
    cpy.parse_bytes  # noqa: B018 - loads the submodule so the attribute can be replaced
    cpy.parse_bytes = timers.wrap("parse", cpy.parse_bytes)  # type: ignore[attr-defined]
    # The code text and the wake tests: on the file as read (the main thread), or on a rewritten
    # module's code inside the file's thread (the rules of the rounds after the first).
    for name in ("code_text", "_awake"):
        if hasattr(kpy, name):
            _by_thread(kpy, name, timers.wrap("wake", getattr(kpy, name)), timers.wrap("wake (output)", getattr(kpy, name)))
    # The first round's walk is "rules", every later round's "rules (later rounds)" (a file's
    # rounds count from its libcst parse).
    real_parsed_file, real_collect = kpy._parsed_file, lint._collect
    rounds = [0]

    def parsed_file(*args):
        rounds[0] = 0
        return real_parsed_file(*args)

    first_walk, later_walk = timers.wrap("rules", real_collect), timers.wrap("rules (later rounds)", real_collect)

    def collect(*args):
        rounds[0] += 1
        return (first_walk if rounds[0] == 1 else later_walk)(*args)

    kpy._parsed_file = parsed_file
    lint._collect = collect  # rule instantiation counts as the walk (walk_rules runs inside it)
    lint.link_groups = timers.wrap("groups", lint.link_groups)
    lint.rebuild = timers.wrap("fix rounds", lint.rebuild)
    lint._fix_imports = timers.wrap("fix rounds", lint._fix_imports)
    lint._transform = timers.wrap("metadata", lint._transform)
    lint.spans_and_code = timers.wrap("codegen", lint.spans_and_code)
    lint.spans_of = timers.wrap("codegen", lint.spans_of)
    try:  # absent from the code before the splice (0.3.0): the script profiles both
        import cuda2neuron.python._splice as splice

        splice.Splicer.code = timers.wrap("codegen", splice.Splicer.code)
        splice.Splicer.statement_lines = timers.wrap("codegen", splice.Splicer.statement_lines)
        if hasattr(splice.Splicer, "block_statements"):  # the statements inside blocks (this round)
            splice.Splicer.block_statements = timers.wrap("codegen", splice.Splicer.block_statements)
        lint.spans_in_statements = timers.wrap("codegen", lint.spans_in_statements)
        if hasattr(splice.Splicer, "_cut"):
            splice.Splicer._cut = timers.wrap("statement lines", splice.Splicer._cut)
    except (ImportError, AttributeError):
        pass
    kpy._compile_check = timers.wrap("compile check", kpy._compile_check)
    if per_family is not None:
        original_init = walk._Walker.__init__

        def init(self, rules, context):
            original_init(self, rules, context)
            for table in (self.visit, self.leave):
                for key, methods in table.items():
                    table[key] = [_rule_timed(m, per_family) for m in methods]

        walk._Walker.__init__ = init


def _by_thread(module, name: str, main, inside) -> None:
    """``module.name`` timed as ``main`` on the main thread, as ``inside`` on any other (the
    thread with a deep stack that parses, walks and fixes a file)."""
    import threading

    def timed(*args):
        return (main if threading.current_thread() is threading.main_thread() else inside)(*args)

    setattr(module, name, timed)


OUTCOMES = ("not parsed", "detected", "spanned", "no finding", "report-only", "edited")


def _outcome(result, parsed: bool, detected: bool = False) -> str:
    """A Python file's outcome: never parsed by libcst (the prefilter or the wake tests ended it),
    decided by the detectors on CPython's ast (never parsed by libcst either), parsed and ending
    with no finding, with findings but no edit, or rewritten."""
    if detected and not parsed:
        return "spanned" if result.new_bytes is not None else "detected"
    if not parsed:
        return "not parsed"
    if result.new_bytes is not None:
        return "edited"
    return "report-only" if result.findings else "no finding"


# --cprofile: cProfile follows one thread, and a file's parse, rule walk and fixes run on the
# thread with a deep stack; this second profiler is enabled there, around each file's work.
THREAD_PROFILER: cProfile.Profile | None = None


def _in_thread_profiler(fn):
    def profiled(*args):
        if THREAD_PROFILER is None:
            return fn(*args)
        THREAD_PROFILER.enable()
        try:
            return fn(*args)
        finally:
            THREAD_PROFILER.disable()

    return profiled


def _rule_timed(method, per_family: dict[str, float]):
    rule = type(method.__self__)
    family = f"{rule.__module__.split('.')[-2]} ({rule.code[:3]}x)"

    def timed(node):
        c0 = time.process_time()
        try:
            return method(node)
        finally:
            per_family[family] += time.process_time() - c0

    return timed


def _floor(tree: Path) -> tuple[int, float]:
    import libcst as cst

    files = [p for p in sorted(tree.rglob("*.py")) if ".git" not in p.parts and b"cuda" in p.read_bytes().lower()]
    c0 = time.process_time()
    for p in files:
        cst.parse_module(p.read_bytes())
    return len(files), time.process_time() - c0


def _jobs2(tree: Path) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "cuda2neuron", "migrate", "--diff", "--no-cache", "--jobs", "2", "-q", str(tree)],
                   capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--per-rule", action="store_true", help="split the rule walk by rule family (instrumented)")
    ap.add_argument("--jobs2", action="store_true", help="also time --jobs 2 in a fresh process (the pool's cost)")
    ap.add_argument("--no-floor", action="store_true", help="skip the libcst parse floor")
    ap.add_argument("--cprofile", type=int, default=0, metavar="N")
    ap.add_argument("--wakes", action="store_true", help="also count the files each rule wakes on")
    args = ap.parse_args()

    from cuda2neuron.cli import main as cli_main

    print(f"load {Path('/proc/loadavg').read_text().split()[:3] if Path('/proc/loadavg').exists() else '?'}")
    timers = Timers()
    per_family: dict[str, float] | None = defaultdict(float) if args.per_rule else None
    install(timers, per_family)
    global THREAD_PROFILER
    profiler = cProfile.Profile(time.process_time) if args.cprofile else None
    THREAD_PROFILER = cProfile.Profile(time.process_time) if args.cprofile else None
    c0, w0 = time.process_time(), time.perf_counter()
    if profiler:
        profiler.enable()
    sink = io.StringIO()
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull), contextlib.redirect_stderr(sink):
        code = cli_main(["migrate", "--diff", "--no-cache", "--jobs", "1", str(args.tree)])
    if profiler:
        profiler.disable()
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    summary = next((line for line in sink.getvalue().splitlines() if "files scanned" in line), "")
    print(f"{args.tree}: migrate --diff exit {code}; {summary}")
    print(f"{timers.calls['parse']} files parsed by libcst")
    print(f"{'phase':<22}{'CPU s':>9}{'wall s':>9}{'share':>8}")
    covered = 0.0
    for phase in PHASES:
        covered += timers.cpu[phase]
        print(f"{phase:<22}{timers.cpu[phase]:>9.2f}{timers.wall[phase]:>9.2f}{timers.cpu[phase] / cpu:>8.1%}")
    print(f"{'other':<22}{cpu - covered:>9.2f}{'':>9}{(cpu - covered) / cpu:>8.1%}")
    print(f"{'total':<22}{cpu:>9.2f}{wall:>9.2f}")
    print("Python files by outcome (CPU s of each phase spent on them):")
    shown = [p for p in PHASES if any(timers.by_outcome[o][p] > 0.005 for o in OUTCOMES)]
    print(f"  {'outcome':<13}{'files':>6}{'total':>8}" + "".join(f"{p[:10]:>11}" for p in shown))
    for outcome in OUTCOMES:
        row = timers.by_outcome[outcome]
        cells = "".join(f"{row[p]:>11.2f}" for p in shown)
        print(f"  {outcome:<13}{timers.files[outcome]:>6}{sum(row.values()):>8.2f}{cells}")
    if per_family:
        total = sum(per_family.values())
        print("rule visitors by family (instrumented; share of all visitor time):")
        for family, t in sorted(per_family.items(), key=lambda kv: -kv[1]):
            print(f"  {family:<22}{t:7.2f} s {t / total:6.1%}")
    if args.jobs2:
        two = _jobs2(args.tree)
        print(f"--jobs 2 (fresh process and its workers): {two:.2f} s CPU; pool/IPC beyond one process: {two - cpu:+.2f} s")
    if not args.no_floor:
        n, floor = _floor(args.tree)
        print(f"floor: libcst parse of the {n} files that mention CUDA: {floor:.2f} s CPU; this run {cpu / floor:.2f}x")
    if profiler:
        print("cProfile, the main thread:")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.cprofile)
        print("cProfile, the parse thread (each file's parse, rule walk, fixes and code generation):")
        pstats.Stats(THREAD_PROFILER).sort_stats("tottime").print_stats(args.cprofile)
    if args.wakes:
        print_wakes(sorted(p for p in args.tree.rglob("*.py") if ".git" not in p.parts), Config())
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
