"""Python sources (``*.py``, ``*.pyi``): the rule catalog's libcst visitors on one file."""

from __future__ import annotations

import collections
import dis
import gc
import re
import warnings
from functools import lru_cache
from pathlib import Path

from cuda2neuron.core import (
    Config,
    Finding,
    ProjectFacts,
    Rule,
    RunOptions,
    Safety,
    Settings,
    SourceError,
    has_trigger,
    key_folded,
    key_folded_text,
    trigger_words,
)

from ._catalog import rules_for
from ._code_text import code_text
from ._nesting import deep_stack, nesting_error
from ._prefilter import may_trigger
from ._span_path import as_linted, fixed_by_spans

__all__ = [
    "is_python_source",
    "process_python_findings",
    "python_key_triggers",
    "python_triggers",
    "rewrite_compiles",
    "span_path_files",
    "triggered",
]


def is_python_source(path: Path) -> bool:
    return path.suffix in (".py", ".pyi")


@lru_cache(maxsize=64)
def python_triggers(rule_types: tuple[type[Rule], ...]) -> tuple[bytes, ...]:
    """The trigger words of ``rule_types`` that are matched as written."""
    return trigger_words({t for r in _python_only(rule_types) if not r.triggers_as_keys for t in r.triggers})


@lru_cache(maxsize=64)
def python_key_triggers(rule_types: tuple[type[Rule], ...]) -> tuple[bytes, ...]:
    """The trigger words of the rules among ``rule_types`` that compare setting keys
    (``Rule.triggers_as_keys``), folded: they are matched in ``key_folded`` text."""
    rules = _python_only(rule_types)
    return trigger_words({key_folded_text(t) for r in rules if r.triggers_as_keys for t in r.triggers})


def _python_only(rule_types: tuple[type[Rule], ...]) -> tuple[type[Rule], ...]:
    return tuple(r for r in rule_types if "python" in r.file_kinds)


def triggered(rule_types: tuple[type[Rule], ...], data: bytes) -> bool:
    """Does ``data`` hold a trigger word of one of ``rule_types``, each matched as its rule
    compares (as written, or as keys compare)?"""
    if has_trigger(data, python_triggers(rule_types)):
        return True
    keys = python_key_triggers(rule_types)
    return bool(keys) and has_trigger(key_folded(data), keys)


def _awake(rule_types: tuple[type[Rule], ...], code: bytes, project: tuple[bytes, ...]) -> tuple[type[Rule], ...]:
    """The rules whose words occur in ``code`` and whose ``wakes`` test says they can fire.

    Many rules share words ("cuda") and a wake test (the compile family's), so each word is
    searched once per file and each test run once per file, not once per rule.
    """
    found: dict[tuple[bytes, int], bool] = {}
    woken: dict[object, bool] = {}
    in_project = None
    runs: bytes | None = None
    folded: bytes | None = None
    whole: dict[bytes, bool] = {}
    awake = []
    for rule, words, test, last_parts in _plan(rule_types):
        fires = False
        for word, how in words:
            hit = found.get((word, how))
            if hit is None:
                if how == _IN_RUNS:
                    # A word of letters, digits and _ lies inside one run of them: search the
                    # file's distinct runs (about an eighth of its bytes on a real tree) instead
                    # of the whole file, once per word of the catalog (diffusers: 4.1 -> 2.8 s).
                    if runs is None:
                        runs = word_runs(code)
                    hit = word in runs
                elif how == _AS_KEY:
                    if folded is None:
                        folded = key_folded(code)
                    hit = word in folded
                else:
                    # A word with punctuation (`torch.backends.cudnn`, `"cuda:`) is searched in
                    # the whole code, eight times the runs' bytes: its longest run of word bytes
                    # must be in the runs first (shared by many words: "cuda", "torch"), which
                    # rules most of them out at a fraction of the cost (diffusers: 1.9 -> 1.5 s).
                    part = _longest_part(word)
                    hit = found.get((part, _IN_RUNS)) if part else True
                    if hit is None:
                        if runs is None:
                            runs = word_runs(code)
                        hit = found[part, _IN_RUNS] = part in runs
                    hit = hit and word in code
                found[word, how] = hit
            if hit:
                fires = True
                break
        if not fires and project and rule.project_triggers:
            if in_project is None:
                in_project = has_trigger(code, project)
            fires = in_project
        if not fires:
            continue
        if last_parts:
            # A rule that reports only references to its qualified names: one of their last
            # parts must be a whole word of the code (``Rule.reports_names`` says why).
            if runs is None:
                runs = word_runs(code)
            spelled = False
            for part in last_parts:
                hit = whole.get(part)
                if hit is None:
                    hit = whole[part] = _is_run(part, runs)
                if hit:
                    spelled = True
                    break
            if not spelled:
                continue
        wakes = woken.get(test)
        if wakes is None:
            wakes = woken[test] = rule.wakes(code)
        if wakes:
            awake.append(rule)
    return tuple(awake)


# How ``_awake`` looks for a trigger word: in the code as written, among its runs of word bytes
# (a word of \\w bytes), or in the code folded as setting keys compare (``Rule.triggers_as_keys``).
_IN_CODE, _IN_RUNS, _AS_KEY = 0, 1, 2


@lru_cache(maxsize=64)
def _plan(
    rule_types: tuple[type[Rule], ...],
) -> tuple[tuple[type[Rule], tuple[tuple[bytes, int], ...], object, tuple[bytes, ...]], ...]:
    """Per rule of a run: its trigger words (each with how it is looked for), the key of its
    wake test and the last parts of the names it reports through, worked out once per catalog
    instead of once per rule and file."""
    return tuple(
        (
            rule,
            tuple((w, _IN_RUNS if _is_word(w) else _IN_CODE) for w in python_triggers((rule,)))
            + tuple((w, _AS_KEY) for w in python_key_triggers((rule,))),
            _wake_key(rule),
            tuple(sorted({n.rpartition(".")[2].encode() for n in rule.reports_names})),
        )
        for rule in rule_types
    )


def _is_run(word: bytes, runs: bytes) -> bool:
    """Is ``word`` one of ``runs`` (``word_runs``: distinct runs, one per line) whole?"""
    at = runs.find(word)
    while at != -1:
        end = at + len(word)
        if (at == 0 or runs[at - 1] == 0x0A) and (end == len(runs) or runs[end] == 0x0A):
            return True
        at = runs.find(word, at + 1)
    return False


_WORD_RUN = re.compile(rb"\w+")
# Every byte that is not a word byte (``\w`` of a bytes pattern: ASCII letters, digits, _) made a
# space: the runs of word bytes are then what ``split()`` returns.
_RUN_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_NON_WORD_TO_SPACE = bytes(b if b in _RUN_BYTES else 0x20 for b in range(256))


def word_runs(code: bytes) -> bytes:
    """The distinct runs of word bytes of ``code`` (what ``\\w+`` finds), one per line.

    A translation and a split in C: half the cost of ``findall`` (diffusers: 0.5 -> 0.2 s).
    """
    return b"\n".join(set(code.translate(_NON_WORD_TO_SPACE).split()))


@lru_cache(maxsize=None)
def _longest_part(word: bytes) -> bytes:
    """The longest run of word bytes in ``word`` (b"" if none): wherever ``word`` is in a file,
    that run lies inside one of the file's runs (``word_runs``)."""
    return max(_WORD_RUN.findall(word), key=len, default=b"")


@lru_cache(maxsize=None)
def _is_word(word: bytes) -> bool:
    return _WORD_RUN.fullmatch(word) is not None


@lru_cache(maxsize=None)
def _wake_key(rule: type[Rule]) -> object:
    """One key for the rules whose ``wakes`` is the same test: a function shared by several rules
    (``wakes = classmethod(f)``, the default) that never reads its ``cls`` gives one answer for
    them all; any other test is the rule's own."""
    func = getattr(rule.wakes, "__func__", None)
    code = getattr(func, "__code__", None)
    if code is None or code.co_argcount < 1:
        return rule
    cls_name = code.co_varnames[0]
    if cls_name in code.co_cellvars:
        return rule
    if any(i.argval == cls_name for i in dis.get_instructions(code) if i.opname.startswith(("LOAD_FAST", "STORE_FAST", "DELETE_FAST"))):
        return rule
    return func


@lru_cache(maxsize=64)
def _python_rules(rule_types: tuple[type[Rule], ...], settings: Settings) -> tuple[type[Rule], ...]:
    """The rules of a run that read Python and can fire under its settings (``Rule.applies``)."""
    return tuple(r for r in rule_types if "python" in r.file_kinds and r.applies(settings))


@lru_cache(maxsize=8)
def _project_words(facts: ProjectFacts) -> tuple[bytes, ...]:
    return facts.words()


def process_python_findings(
    path: str, data: bytes, config: Config, options: RunOptions
) -> tuple[bytes | None, list[Finding]]:
    """Lint (and fix) Python source bytes; raises SourceError / ConvergenceError."""
    undecodable = _wide_encoding(data)
    if undecodable:
        # Before the prefilter: in UTF-16 "cuda" is c\0u\0d\0a\0, so such a file would pass
        # as clean without a word of it having been read.
        raise SourceError("decode", undecodable)
    # Names only the project sweep knows (``from .ops import layer_norm`` where that module
    # imports triton) wake the rules that use the sweep's facts.
    project = _project_words(config.settings.project)
    if not may_trigger(data, "python") and not (project and has_trigger(data, project)):
        return None, []  # no rule can fire: the catalog and the parser stay unloaded

    rule_types = _python_rules(rules_for(config, path), config.settings)
    if not rule_types or not (
        triggered(rule_types, data)
        or (project and any(r.project_triggers for r in rule_types) and has_trigger(data, project))
    ):
        return None, []
    # Words in comments and docstrings cannot make a rule fire: look again in the code alone,
    # and run only the rules whose words are there and that say they can fire on it (most
    # files wake one or two families; the others are never instantiated).
    code = code_text(data)
    candidates = rule_types
    rule_types = _awake(rule_types, code, project)
    if not rule_types:
        return None, []
    # The cyclic garbage collector is off while a file is parsed, walked and written: a libcst
    # tree holds no reference cycles (reference counting frees it), yet each collection that
    # its millions of allocations trigger re-scans the live nodes (~7% of a file's time). It
    # runs again once the file is done.
    nested = nesting_error(data, path)
    if nested is not None:
        raise SourceError("nesting", nested[0], nested[1])
    read = _detections(path, data, config, rule_types)
    if read is not None:
        file, found = read
        if not (options.fix and any(f.fix is not None and _applied(f.fix.safety, options.unsafe) for f in found)):
            return None, found
        # An edit lands: spliced into the text where the detectors decide every round.
        spanned = fixed_by_spans(
            data, file, found, options, config.settings,
            lambda text: _awake(candidates, code_text(text.encode("utf-8")), project),
            lambda new: rewrite_compiles(new, path),
        )
        if spanned is not None:
            _SPAN_PATH[0] += 1
            return _with_last_break(data, spanned.new), spanned.findings
    enabled = gc.isenabled()
    gc.disable()
    try:
        # On a thread with a deep stack: libcst's native parser has no depth limit of its own.
        new, findings = deep_stack(_parsed_file, path, data, config, options, rule_types, candidates, project)
    finally:
        if enabled:
            gc.enable()
    return _with_last_break(data, new), findings


def _with_last_break(data: bytes, new: bytes | None) -> bytes | None:
    if new is not None and data.endswith(b"\r") and not new.endswith((b"\r", b"\n")):
        # libcst drops the final line break of a file whose lines end in CR alone (old Mac
        # style): put it back, as the rest of the file keeps its bytes.
        new += b"\r"
    return new


# How many files of this process took the span path (kinds/_span_path.py): data for tests and
# bench scripts (``span_path_files``), never read by the engine.
_SPAN_PATH = [0]


def span_path_files() -> int:
    """How many files this process fixed by the span path, without libcst, so far."""
    return _SPAN_PATH[0]


def _detected(
    path: str, data: bytes, config: Config, options: RunOptions, rule_types: tuple[type[Rule], ...]
) -> list[Finding] | None:
    """The findings of a file no edit can touch, read from CPython's ``ast`` by the woken rules'
    detectors (``Rule.detect``) instead of their libcst visitors; None where that cannot be said
    (a woken rule without a detector, a detector that cannot tell, a fix the run would apply).

    The findings are those ``lint_module`` / ``fix_module`` return for such a file: suppression
    comments honoured, sorted by span and code. A fix among them that this run would apply
    (safe, or unsafe under ``--unsafe-fixes``) means an edit lands: ``process_python_findings``
    then tries the span path, and libcst writes it where that cannot decide.
    """
    read = _detections(path, data, config, rule_types)
    if read is None:
        return None
    found = read[1]
    if options.fix and any(f.fix is not None and _applied(f.fix.safety, options.unsafe) for f in found):
        return None
    return found


# Each detector walks the tree on its own, so a file that wakes many rules costs as many walks as
# rules, and past about ten that is more than libcst's one parse and one shared walk (and such a
# file is the likeliest to hold something a detector is unsure of). `migrate --diff --no-cache
# --jobs 2` on diffusers, CPU s, back to back: no limit 99.8, at most 16 rules 89.1, 10 rules
# 86.5, 6 rules 87.3 (490258f, before this round's detectors: 87.9), output identical each time.
_MOST_DETECTORS = 10

# How often each rule's detector was unsure in this process (``_detections`` asks those first).
_UNSURE: collections.Counter[str] = collections.Counter()


def _detections(path: str, data: bytes, config: Config, rule_types: tuple[type[Rule], ...]):  # noqa: ANN202 - (python.AstFile, findings)
    """The file as CPython reads it and its woken rules' detectors' findings, suppression comments
    honoured, sorted by span and code; None where a rule has no detector or one cannot tell.
    Most trigger files end with no edit (diffusers: 209 of the 461 parsed), and CPython's parse
    costs a fraction of libcst's."""
    rules = [r for r in rule_types if config.settings.target in r.targets]
    if not rules or not all(r.has_detector() for r in rules):
        return None
    if len(rules) > _MOST_DETECTORS:
        return None
    from cuda2neuron.python import AstFile

    # Kept for the residual pass, which reads the same text next where no edit lands.
    file = AstFile.read(path, data, keep=True)
    if file is None:
        return None
    # The detectors that were unsure most often in this process are asked first: one unsure
    # answer sends the file to libcst, and the walks before it are then lost (each detector
    # walks the tree on its own). The findings are put back in the rules' order, which the
    # nets' filter below reads, so the order asked changes nothing but the cost.
    by_rule: dict[type[Rule], list[Finding]] = {}
    for rule in sorted(rules, key=lambda r: -_UNSURE[r.code]):
        findings = rule.detect(file, config.settings)
        if findings is None:
            _UNSURE[rule.code] += 1
            return None
        by_rule[rule] = findings
    found = as_linted(file, [f for rule in rules for f in by_rule[rule]], rules)
    if found is None:
        return None
    if found:
        found.sort(key=lambda f: (f.span, f.code))
    return file, found


def _applied(safety: Safety, unsafe: bool) -> bool:
    """Would the fixed point apply a fix of this safety (``python/_lint.py``'s ``_allowed``)?"""
    return safety is Safety.SAFE or (unsafe and safety is Safety.UNSAFE)


# Byte-order marks of the encodings CPython cannot read source in (PEP 263 allows only
# ASCII-compatible ones), longest first: UTF-32's little-endian mark starts with UTF-16's.
_WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"),
)


def _wide_encoding(data: bytes) -> str | None:
    """Why ``data`` cannot be Python source text, when it holds NUL bytes (UTF-16 or UTF-32
    text, or a binary file named .py); None otherwise. CPython refuses such files too."""
    if b"\0" not in data:
        return None
    for bom, name in _WIDE_BOMS:
        if data.startswith(bom):
            return f"cannot decode source: {name} text (byte-order mark {bom.hex(' ')}); Python source must be UTF-8"
    if len(data) >= 2 and (data[0] == 0) != (data[1] == 0):
        return "cannot decode source: NUL bytes every other byte (UTF-16 or UTF-32 text without a byte-order mark?); Python source must be UTF-8"
    return "cannot decode source: the file contains NUL bytes (a binary file?)"


def _parsed_file(
    path: str,
    data: bytes,
    config: Config,
    options: RunOptions,
    rule_types: tuple[type[Rule], ...],
    candidates: tuple[type[Rule], ...] = (),
    project: tuple[bytes, ...] = (),
) -> tuple[bytes | None, list[Finding]]:
    # The libcst engine, imported only for files that need it.
    from cuda2neuron.python import fix_module, lint_module, parse_bytes

    module = parse_bytes(data)
    # libcst round-trips the bytes exactly, so this is the module's code without a generation.
    source = data.decode(module.encoding)
    if not options.fix:
        return None, lint_module(module, rule_types, path, config.settings, source)
    def woken_by(code: str) -> tuple[type[Rule], ...]:
        # What a run on the output would run: the rules its own words wake. The last round
        # lints with these, so what is left is what a rerun reports ("fixed 6, 8 remaining" and
        # then 5, when a rule woken by the input's words reported on the output).
        return _awake(candidates, code_text(code.encode(module.encoding)), project)

    outcome = fix_module(
        module,
        rule_types,
        path,
        config.settings,
        unsafe=options.unsafe,
        may_suppress=b"cuda2neuron:" in data,
        source=source,
        woken_by=woken_by if candidates else None,
    )
    findings = outcome.applied + outcome.remaining
    if not outcome.applied:
        return None, findings
    new = outcome.bytes
    if new == data:
        return None, findings
    # Never hand back output that does not compile: that would be a rule bug written to disk.
    try:
        _compile_check(new, path)
    except SyntaxError as exc:
        # Newer syntax than this interpreter knows is still fine if libcst reads it back.
        try:
            parse_bytes(new)
        except SourceError:
            raise RuntimeError(
                f"internal error: the rewrite does not parse ({exc.msg}, line {exc.lineno})"
            ) from None
    return new, findings


def rewrite_compiles(new: bytes, path: str) -> bool:
    """Whether ``new`` passes the check a fresh rewrite passes before it is returned (a cached
    rewrite gets the same check before it is written)."""
    try:
        _compile_check(new, path)
    except SyntaxError:
        from cuda2neuron.python import parse_bytes

        try:
            parse_bytes(new)
        except SourceError:
            return False
    except (ValueError, RecursionError, MemoryError):
        return False
    return True


def _compile_check(source: bytes, path: str) -> None:
    """Raise SyntaxError where ``source`` does not compile.

    CPython's compiler checks this in a fraction of libcst's parse time, and in a quarter of
    ast.parse's (which builds a Python object per node; diffusers' 261 rewritten files: 1.7 ->
    0.4 s CPU). It also checks what only the compiler sees ('return' outside a function): the
    caller sends such a file on to libcst, as it does newer syntax. Its warnings ('"is" with a
    literal') are about the user's code, not ours to show.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(source, path, "exec", dont_inherit=True)
