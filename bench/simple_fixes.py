"""Which fixes land in a tree's edited files, and how many files only get simple ones (issue 42).

    python bench/simple_fixes.py --tree /work/repos/diffusers [--tree ...] [--files]

Runs the Python kind on every ``.py`` file as ``migrate`` does (safe fixes applied to a fixed
point, the sweep's project facts), with ``fix_module`` wrapped to record, per edited file: the
rules woken, the rules whose fixes land, the fix rounds, the libcst parse's CPU seconds (a second
parse, timed alone), and what each applied fix is:

  * ``string``: a string literal whose text changes only where it names the device
    (``"cuda"`` -> ``"neuron"``, ``"cuda:0"`` -> ``"neuron:0"``, an f-string's part);
  * ``dotted``: a dotted name replaced by another (``torch.cuda.X`` -> ``torch.neuron.X``);
  * ``to-call``: ``.cuda(...)`` -> ``.to("neuron"...)`` on the same receiver text;
  * ``other``: anything else (an argument added or removed, a statement rewritten ...).

A file is "simple" when every applied fix is of the first three kinds AND the output equals the
file as read with each applied fix's span replaced by its text (no import added, no fix of a later
round reaching outside the first round's spans). That is the upper bound of what an edit path
without libcst (byte-span replacements from CPython's ``ast``) could take over; the libcst parse
of those files is what it could save. "detectors" says how many of them have every woken rule
with a detector today (the rest need one first).

It also counts the files libcst parses that end with NO edit, by the woken rules that keep them
from the detectors (no detector, or one that is unsure on the file): a rule that blocks a file
alone is the next detector to write (the libcst parse it would spare beside it).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path

import cuda2neuron.python as cpy
from cuda2neuron.core import Config, Finding, RunOptions, SourceError
from cuda2neuron.kinds import _python as kind
from cuda2neuron.workspace import discover
from cuda2neuron.workspace._project import with_project_facts

_LINE = re.compile(r"\r\n|\r|\n")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z_0-9]*(?:\s*\.\s*[A-Za-z_][A-Za-z_0-9]*)*")
_STRING = re.compile(r"(?s)[rRbBuUfF]{0,2}('''|\"\"\"|'|\").*\1")


def _offsets(text: str) -> list[int]:
    """Code point offset of each 1-based line's start (libcst's line breaks: \\r\\n, \\r, \\n)."""
    starts = [0, 0]
    starts += [m.end() for m in _LINE.finditer(text)]
    return starts


def _cut(text: str, starts: list[int], f: Finding) -> tuple[int, int]:
    s = f.span
    return starts[s.start_line] + s.start_col, starts[s.end_line] + s.end_col


def kind_of(old: str, new: str) -> str:
    if _STRING.fullmatch(old) and _STRING.fullmatch(new):
        if old.replace("cuda", "neuron").replace("CUDA", "neuron") == new or old.replace("cuda", "neuron") == new:
            return "string"
        return "other"
    if _DOTTED.fullmatch(old) and _DOTTED.fullmatch(new):
        return "dotted"
    m = re.fullmatch(r"(?s)(.*)\.cuda\((.*)\)", old)
    if m and new.startswith(m.group(1) + ".to(") and "neuron" in new:
        return "to-call"
    return "other"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, action="append", required=True)
    ap.add_argument("--files", action="store_true", help="print each edited file's row")
    args = ap.parse_args()
    real_fix = cpy.fix_module
    record: dict = {}

    def fix_module(module, rule_types, *a, **kw):  # noqa: ANN001, ANN202 - a transparent wrapper
        outcome = real_fix(module, rule_types, *a, **kw)
        record["woken"] = tuple(r.code for r in rule_types)
        record["detectable"] = all(r.has_detector() for r in rule_types)
        record["rounds"] = max((e[0] for e in outcome.edited), default=0)
        return outcome

    cpy.fix_module = fix_module
    real_parsed = kind._parsed_file

    def parsed_file(path, data, config, options, rule_types, *a, **kw):  # noqa: ANN001, ANN202
        record["parsed"] = rule_types
        return real_parsed(path, data, config, options, rule_types, *a, **kw)

    kind._parsed_file = parsed_file
    options = RunOptions(fix=True)
    for tree in args.tree:
        config = with_project_facts(Config(), discover([tree]).files)
        edited = simple = simple_detectable = 0
        parse_all = parse_simple = 0.0
        landed: Counter[str] = Counter()
        only: Counter[str] = Counter()
        kinds: Counter[str] = Counter()
        blockers: Counter[str] = Counter()
        no_edit = 0
        alone: Counter[str] = Counter()
        alone_cost: Counter[str] = Counter()
        combos: Counter[str] = Counter()
        for path in sorted(tree.rglob("*.py")):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            record.clear()
            try:
                new, findings = kind.process_python_findings(str(path), data, config, options)
            except (SourceError, RuntimeError, RecursionError):
                continue
            if new is None:
                if "parsed" in record:
                    no_edit += 1
                    rules = [r for r in record["parsed"] if config.settings.target in r.targets]
                    stuck = tuple(r.code for r in rules if kind._detected(str(path), data, config, options, (r,)) is None)
                    combos[" ".join(stuck)] += 1
                    if len(stuck) == 1:
                        t0 = time.process_time()
                        cpy.parse_bytes(data)
                        alone[stuck[0]] += 1
                        alone_cost[stuck[0]] += time.process_time() - t0
                continue
            edited += 1
            text = data.decode("utf-8", "surrogateescape")
            starts = _offsets(text)
            applied = sorted((f for f in findings if f.applied), key=lambda f: (f.span, f.code))
            fix_kinds = []
            spliced, last = [], 0
            for f in applied:
                a, b = _cut(text, starts, f)
                fix_kinds.append(kind_of(text[a:b], f.fix.replacement))
                if a < last:
                    fix_kinds.append("overlap")
                spliced += [text[last:a], f.fix.replacement]
                last = max(last, b)
            spliced.append(text[last:])
            same = "".join(spliced).encode("utf-8", "surrogateescape") == new
            for code in sorted({f.code for f in applied}):
                landed[code] += 1
            kinds.update(fix_kinds)
            t0 = time.process_time()
            cpy.parse_bytes(data)
            cost = time.process_time() - t0
            parse_all += cost
            is_simple = same and all(k in ("string", "dotted", "to-call") for k in fix_kinds)
            if is_simple:
                simple += 1
                parse_simple += cost
                simple_detectable += record.get("detectable", False)
                only[" ".join(sorted({f.code for f in applied}))] += 1
                for code in record.get("woken", ()):
                    blockers[code] += 1
            if args.files:
                print(f"  {path.relative_to(tree)}: woken {' '.join(record.get('woken', ()))}; "
                      f"landed {' '.join(sorted({f.code for f in applied}))}; kinds {' '.join(sorted(set(fix_kinds)))}; "
                      f"rounds {record.get('rounds')}; splice {'=' if same else '!='}; parse {cost:.3f}")
        print(f"{tree}: {edited} edited files (libcst parse {parse_all:.2f} CPU-s); "
              f"{simple} with only simple fixes and a spliced output (parse {parse_simple:.2f} CPU-s), "
              f"{simple_detectable} of them with a detector for every woken rule")
        print("  files where each rule's fix lands:", ", ".join(f"{c} {n}" for c, n in landed.most_common()))
        print("  applied fixes by kind:", ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
        print("  simple files by the rules that edit them:", ", ".join(f"{c} {n}" for c, n in only.most_common(12)))
        print("  rules woken in the simple files (each needs a detector with fixes):",
              ", ".join(f"{c} {n}" for c, n in blockers.most_common(25)))
        print(f"  {no_edit} parsed files end with no edit; the rules that keep each from the detectors, alone:",
              ", ".join(f"{c} {n} ({alone_cost[c]:.2f} s)" for c, n in alone.most_common(15)))
        print("  by combination:", "; ".join(f"{c or '(none)'}: {n}" for c, n in combos.most_common(15)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
