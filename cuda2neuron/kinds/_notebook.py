"""Jupyter notebooks: code cells go through the Python engine, the JSON stays as it was.

How a notebook is migrated:

1. The JSON is validated (``json.loads``) and the byte range of every cell's ``source`` is
   located (``cuda2neuron.documents.nbjson``); nothing is ever re-serialised.
2. IPython syntax is masked so libcst can parse the cells: line magics (``%matplotlib
   inline``), shell lines (``!nvidia-smi``, ``files = !ls``), help lines (``x?``) become a
   placeholder statement ``__c2n_magic_N__`` with the same indentation; a Python-bodied cell
   magic (``%%time``) has its first line masked the same way. Other cell magics (``%%html``,
   ``%%writefile``) are not Python and are skipped, except ``%%bash`` / ``%%sh`` bodies, which the
   shell rules read, as they read ``!`` lines and ``%env``.
3. All Python cells are joined into ONE module, separated by ``__c2n_cell_N__`` statements, so
   that names imported in an early cell resolve in later ones (``import torch`` in cell 1,
   ``torch.cuda.synchronize()`` in cell 5) and an import a fix needs is added once, at the top
   of the first code cell. Markers are statements, not comments: a fix that removes a statement
   takes its leading comments with it, but never another statement.
4. The result is split at the markers, placeholders are restored, and each changed cell's
   ``source`` array is spliced back with only the changed lines re-encoded. A missing marker or
   placeholder fails the notebook (typed error) instead of writing a damaged file.

A cell that does not parse even after masking is left as it is and reported (by the notebook rules, CN721); the other
cells are still migrated.

Finding locations: the line and the column are those of the notebook *file*: where the code
sits inside the cell's JSON string (past its opening quote and any escapes before it), so an
editor, a SARIF viewer or the report's own snippet lands on the text itself; every message
starts with ``cell N, line M:`` (N counts all cells, markdown included, from 1; M counts the
cell's source lines from 1). Findings are made in the joined cells as read (the engine locates
even the ones of later fix rounds there), so the layout of the cells as read places them all.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from cuda2neuron.core import (
    CellProblem,
    CellReport,
    Config,
    Finding,
    LineIndex,
    NotebookProblems,
    Rule,
    RunOptions,
    SourceError,
    Span,
    TextItem,
    TextReport,
    to_finding,
)
from cuda2neuron.documents.nbjson import CellLoc, NotebookJson, NotebookShapeError, locate_cells, render_source
from cuda2neuron.documents.structured import parse_json

from ._catalog import rules_for
from ._prefilter import may_trigger
from ._python import process_python_findings, triggered
from ._text_files import shell_items

__all__ = ["process_notebook_findings"]

_BOM = b"\xef\xbb\xbf"
# Cell magics whose body is Python (the magic line itself is masked).
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "autoreload"})
_SHELL_CELL_MAGICS = frozenset({"bash", "sh"})
# Line magics whose argument is a shell command line.
_SHELL_LINE_MAGICS = frozenset({"env", "sx", "system"})
_LINE_MAGIC_RE = re.compile(r"%[A-Za-z]")
# `files = !ls`, `out = %sx cmd`: assignment from IPython syntax.
_ASSIGN_MAGIC_RE = re.compile(r"[A-Za-z_][\w.,\s]*=\s*(?=[!%][^=])")
_HELP_RE = re.compile(r"[A-Za-z_][\w.]*\?{1,2}")
_MARKER_RE = re.compile(r"^__c2n_cell_(\d+)__[ \t]*\r?\n", re.M)
_PLACEHOLDER_RE = re.compile(r"^([ \t]*)(?:# )?__c2n_magic_(\d+)__[ \t]*$", re.M)
# Magic lines that open the first code cell (`%matplotlib inline`) become comments in the
# module header: an import a fix needs is then added after the cell's imports, not above the
# magic. Only there: elsewhere a comment belongs to the next statement and would vanish with it.
_LEADING_PLACEHOLDERS_RE = re.compile(r"\A(?:__c2n_magic_\d+__[ \t]*\r?\n)+")


@dataclass
class _ShellPart:
    """A shell command inside a cell: its text, and where it sits (cell line, column)."""

    cell: int  # cell number
    line: int  # 1-based line within the cell
    col: int
    text: str
    # The masked lines it spans (a `\` continuation masks the next line too); empty for a
    # %%bash cell body, which is not masked but replaced as a whole.
    mask_keys: list[int] = field(default_factory=list)
    # `%env NAME=value` sets one variable: a fix that adds one (`NEURON_RT_VISIBLE_CORES=0` beside
    # `CUDA_VISIBLE_DEVICES=0`, as a shell assignment list would) needs a `%env` line of its own.
    env_magic: bool = False


@dataclass
class _Cell:
    loc: CellLoc
    kind: str  # "python", "shell", "other"
    masked: str = ""
    shell: list[_ShellPart] = field(default_factory=list)
    # CUDA code the engine cannot migrate here, (cell line, message): reported as CN722.
    unmigrated: list[tuple[int, str]] = field(default_factory=list)


_ENV_ASSIGNMENT_RE = re.compile(r"[A-Za-z_]\w*=\S*")


def _one_env_per_line(command: str, magic: str) -> str:
    """`` A=0 B=0`` after ``%env`` -> `` A=0`` and a second line ``%env B=0`` (IPython's
    ``%env`` splits its argument once at ``=``: ``A`` would be set to ``"0 B=0"``)."""
    words = command.split()
    if len(words) < 2 or not all(_ENV_ASSIGNMENT_RE.fullmatch(w) for w in words):
        return command
    lead = command[: len(command) - len(command.lstrip())]
    return "\n".join([lead + words[0], *(f"{magic}{lead}{w}" for w in words[1:])])


def _sets_already(cell: _Cell, command: str) -> bool:
    """Whether every variable ``command`` adds after its first is set by a ``%env`` line of ``cell``."""
    added = command.split()[1:]
    if not added or not all(_ENV_ASSIGNMENT_RE.fullmatch(w) for w in added):
        return False
    names = {w.split("=", 1)[0] for w in added}
    set_here = {m.group(1) for m in re.finditer(r"^[ \t]*%env[ \t]+([A-Za-z_]\w*)[ =]", cell.loc.text, re.M)}
    return names <= set_here


def _newline(line: str) -> str:
    return line[len(line.rstrip("\r\n")) :]


def _classify(loc: CellLoc, masks: dict[int, str]) -> _Cell:
    lines = loc.text.splitlines(keepends=True)
    cell = _Cell(loc, "python")
    if not lines:
        cell.kind = "other"
        return cell
    first = lines[0].strip()
    start = 0
    if first.startswith("%%"):
        magic = first[2:].split(maxsplit=1)[0] if len(first) > 2 else ""
        args = first[2 + len(magic) :].split()
        if magic in _SHELL_CELL_MAGICS or (magic == "script" and args[:1] in (["bash"], ["sh"])):
            cell.kind = "shell"
            cell.shell.append(_ShellPart(loc.number, 2, 0, "".join(lines[1:])))
            return cell
        if magic not in _PYTHON_CELL_MAGICS:
            cell.kind = "other"
            if "cuda" in loc.text.lower():
                cell.unmigrated.append((1, f"`%%{magic}` cell is not Python and is not migrated"))
            return cell
        start = 1
    out: list[str] = []
    # IPython joins `!cmd \` / `%magic \` with the next line: those lines are masked too.
    continued: _ShellPart | None = None
    continued_indent = ""
    in_continuation = False
    for k, line in enumerate(lines):
        body = line.rstrip("\r\n")
        stripped = body.lstrip()
        indent = body[: len(body) - len(stripped)]
        if in_continuation:
            key = len(masks)
            masks[key] = body
            # The placeholder takes the command's indentation, not the continuation's own.
            out.append(f"{continued_indent}__c2n_magic_{key}__{_newline(line)}")
            if continued is not None:
                continued.text += "\n" + body
                continued.mask_keys.append(key)
            in_continuation = body.endswith("\\")
            continued = continued if in_continuation else None
            continue
        shell_at: int | None = None
        mask = k < start
        if k < start:
            if "cuda" in stripped.lower():
                cell.unmigrated.append((k + 1, f"`{stripped}`: code in a magic line is not migrated"))
        elif stripped.startswith("!") and not stripped.startswith("!="):
            mask = True
            shell_at = len(indent) + (2 if stripped.startswith("!!") else 1)
        elif _LINE_MAGIC_RE.match(stripped):
            mask = True
            name = re.match(r"%(\w+)", stripped).group(1)  # type: ignore[union-attr]
            if name in _SHELL_LINE_MAGICS:
                shell_at = len(indent) + 1 + len(name)
            elif name == "pip":
                shell_at = len(indent) + 1  # `%pip install x` reads as the command `pip install x`
            elif "cuda" in stripped.lower():
                cell.unmigrated.append((k + 1, f"`{stripped}`: code in a magic line is not migrated"))
        elif _ASSIGN_MAGIC_RE.match(stripped):
            mask = True
            m = _ASSIGN_MAGIC_RE.match(stripped)
            rest = stripped[m.end() :]  # type: ignore[union-attr]
            if rest.startswith("!"):
                shell_at = len(indent) + m.end() + 1  # type: ignore[union-attr]
            elif "cuda" in rest.lower():
                cell.unmigrated.append((k + 1, f"`{stripped}`: code in a magic line is not migrated"))
        elif _HELP_RE.fullmatch(stripped):
            mask = True
        if not mask:
            out.append(line)
            continue
        key = len(masks)
        masks[key] = body
        out.append(f"{indent}__c2n_magic_{key}__{_newline(line)}")
        part = None
        if shell_at is not None:
            part = _ShellPart(loc.number, k + 1, shell_at, body[shell_at:], [key], env_magic=stripped.startswith("%env"))
            cell.shell.append(part)
        if body.endswith("\\"):
            in_continuation, continued, continued_indent = True, part, indent
    cell.masked = "".join(out)
    return cell


@dataclass
class _Layout:
    """Which module line starts which cell."""

    starts: list[tuple[int, int]]  # (module line, cell number), ascending

    def locate(self, line: int) -> tuple[int, int]:
        number, first = self.starts[0][1], self.starts[0][0]
        for start, n in self.starts:
            if start > line:
                break
            number, first = n, start
        return number, max(1, line - first + 1)


def _join(cells: list[_Cell]) -> tuple[str, _Layout]:
    parts: list[str] = []
    starts: list[tuple[int, int]] = []
    line = 1
    for i, cell in enumerate(cells):
        if i:
            parts.append(f"__c2n_cell_{cell.loc.number}__\n")
            line += 1
        text = cell.masked if cell.masked.endswith("\n") else cell.masked + "\n"
        if not i:
            text = _LEADING_PLACEHOLDERS_RE.sub(lambda m: re.sub(r"(?m)^__c2n", "# __c2n", m.group(0)), text)
        starts.append((line, cell.loc.number))
        parts.append(text)
        line += text.count("\n")
    return "".join(parts), _Layout(starts)


def _split(module: str, cells: list[_Cell]) -> dict[int, str]:
    pieces = _MARKER_RE.split(module)
    numbers = [int(n) for n in pieces[1::2]]
    if numbers != [c.loc.number for c in cells[1:]]:
        raise SourceError("internal", "a rewrite moved a notebook cell boundary; notebook left untouched")
    texts = [pieces[0], *pieces[2::2]]
    return {c.loc.number: t for c, t in zip(cells, texts)}


def _restore(text: str, masks: dict[int, str], seen: set[int]) -> str:
    def put_back(m: re.Match[str]) -> str:
        key = int(m.group(2))
        seen.add(key)
        return masks[key]

    return _PLACEHOLDER_RE.sub(put_back, text)


class _Mapper:
    """Cell line and column -> notebook file line and column."""

    def __init__(self, text: str, cells: dict[int, CellLoc]) -> None:
        self.text = text
        self.index = LineIndex(text)
        self.cells = cells

    def file_line(self, number: int, line: int) -> int:
        return self.position(number, line, 0)[0]

    def position(self, number: int, line: int, col: int) -> tuple[int, int]:
        """Where column ``col`` of source line ``line`` of cell ``number`` sits in the file."""
        loc = self.cells[number]
        if loc.elements:
            k = min(max(line, 1), len(loc.elements)) - 1
            start, end = loc.elements[k]
            offset = _raw_offset(self.text, start, end, col)
        elif loc.elements is None and loc.lines:
            # One string holds the whole source: the line's first character is past the ones
            # of the lines before it.
            lines = loc.lines[0].splitlines(keepends=True) or [""]
            k = min(max(line, 1), len(lines)) - 1
            offset = _raw_offset(self.text, loc.start, loc.end, sum(len(x) for x in lines[:k]) + col)
        else:
            offset = loc.start
        return self.index.position(offset)

    def span(self, number: int, line: int, col: int, end_line: int, end_col: int) -> Span:
        start = self.position(number, line, col)
        end = self.position(number, end_line, end_col)
        return Span(*start, *end)

    def finding(self, f: Finding, layout: _Layout) -> Finding:
        number, line = layout.locate(f.span.start_line)
        end_number, end_line = layout.locate(f.span.end_line)
        if end_number != number:  # a span reaching into the next cell's marker: end with the cell
            end_line, end_col = line, f.span.start_col
        else:
            end_col = f.span.end_col
        span = self.span(number, line, f.span.start_col, end_line, end_col)
        return replace(f, span=span, message=f"cell {number}, line {line}: {f.message}")


def _raw_offset(text: str, start: int, end: int, index: int) -> int:
    """The offset in ``text`` of character ``index`` of the JSON string ``text[start:end]``
    (quotes included): escapes (``\\n``, ``\\u00e9``, a surrogate pair) take more than one
    character of the file for one of the string. An index past the string's end gives its
    closing quote."""
    i = start + 1  # past the opening quote
    last = end - 1  # the closing quote
    n = 0
    while n < index and i < last:
        if text[i] == "\\":
            if text[i + 1] == "u":
                code = int(text[i + 2 : i + 6], 16)
                i += 6
                if 0xD800 <= code < 0xDC00 and text[i : i + 2] == "\\u":
                    i += 6  # the low half of a surrogate pair: one character of the string
            else:
                i += 2
        else:
            i += 1
        n += 1
    return i


def _notebook_rules(config: Config, path: str) -> tuple[type[Rule], ...]:
    return tuple(r for r in rules_for(config, path) if "notebook" in r.file_kinds)


def _decode(data: bytes) -> tuple[bytes, str]:
    bom = _BOM if data.startswith(_BOM) else b""
    try:
        return bom, data[len(bom) :].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError("decode", f"notebook is not UTF-8: {exc}") from None


def _load(text: str):
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError("parse", f"not valid notebook JSON: {exc.msg}", exc.lineno, exc.colno) from None
    if not isinstance(nb, dict):
        raise SourceError("parse", "not a Jupyter notebook: the top level is not a JSON object")
    if "worksheets" in nb or (isinstance(nb.get("nbformat"), int) and nb["nbformat"] < 4):
        raise SourceError(
            "parse",
            "nbformat 3 notebooks are not supported: upgrade with "
            "`jupyter nbconvert --to notebook --nbformat 4`",
        )
    if not isinstance(nb.get("cells"), list):
        raise SourceError("parse", 'not a Jupyter notebook: no top-level "cells" list')
    try:
        return locate_cells(text)
    except (NotebookShapeError, ValueError, IndexError) as exc:
        raise SourceError("parse", f"not a Jupyter notebook: {exc}") from None


def _language(top: dict) -> str:
    meta = top.get("metadata")
    if not isinstance(meta, dict):
        return "python"
    for key, sub in (("kernelspec", "language"), ("language_info", "name")):
        value = meta.get(key)
        if isinstance(value, dict) and isinstance(value.get(sub), str):
            return value[sub].lower()
    return "python"


def process_notebook_findings(
    path: str, data: bytes, config: Config, options: RunOptions
) -> tuple[bytes | None, list[Finding]]:
    bom, text = _decode(data)
    nb = _load(text)
    if _language(nb.top) != "python":
        return None, []  # an R or Julia notebook has no PyTorch to port
    if not may_trigger(data, "notebook"):
        return None, []  # no rule can fire on any cell: the catalog and the parser stay unloaded
    notebook_rules = _notebook_rules(config, path)
    masks: dict[int, str] = {}
    cells = [_classify(loc, masks) for loc in nb.cells if loc.cell_type == "code"]
    mapper = _Mapper(text, {loc.number: loc for loc in nb.cells})
    findings: list[Finding] = []
    new_texts: dict[int, str] = {}  # cell number -> new source text

    # -- shell lines and %%bash bodies ---------------------------------------------------------
    new_mask_lines: dict[int, str] = {}
    for cell in cells:
        for part in cell.shell:
            new_cmd, items = shell_items(part.text, config, path, options)
            if part.env_magic and new_cmd is not None and _sets_already(cell, new_cmd):
                # `%env NEURON_RT_VISIBLE_CORES=0` is already a line of the cell (the last run
                # wrote it): nothing to add, and no edit to report.
                new_cmd, items = None, [it for it in items if not it.applied]
            for it in items:
                (line, col), (end_line, end_col) = it.start, it.end
                cell_line = part.line + line - 1
                col = col + (part.col if line == 1 else 0)
                end_col = end_col + (part.col if end_line == 1 else 0)
                span = mapper.span(part.cell, cell_line, col, part.line + end_line - 1, end_col)
                findings.append(to_finding(it, path, span, f"cell {part.cell}, line {cell_line}: "))
            if new_cmd is None:
                continue
            if not part.mask_keys:
                first = cell.loc.text.splitlines(keepends=True)[0]
                new_texts[cell.loc.number] = first + new_cmd
                continue
            new_lines = new_cmd.split("\n")
            if len(new_lines) != len(part.mask_keys):
                raise SourceError("internal", "a shell fix changed the number of lines of a `!` command")
            first_key = part.mask_keys[0]
            if part.env_magic:
                new_lines[0] = _one_env_per_line(new_lines[0], masks[first_key][: part.col])
            new_mask_lines[first_key] = masks[first_key][: part.col] + new_lines[0]
            new_mask_lines.update(zip(part.mask_keys[1:], new_lines[1:]))
    masks.update(new_mask_lines)

    # -- what the notebook rules report ---------------------------------------------------------
    in_magics = tuple(CellProblem(c.loc.number, line, message) for c in cells for line, message in c.unmigrated)
    unparsed: list[CellProblem] = []
    check_syntax = any(getattr(r, "reads_unparsed_cells", False) for r in notebook_rules)

    # -- Python cells, as one module -----------------------------------------------------------
    python = [c for c in cells if c.kind == "python" and c.masked.strip()]
    new_module: str | None = None
    if python:
        module, layout = _join(python)
        try:
            new_bytes, py_findings = _run_python(path, module, config, options, check_syntax=check_syntax)
        except SourceError as exc:
            if exc.kind != "parse":
                raise
            broken = _broken_cells(python)
            if not broken:
                raise
            unparsed += [CellProblem(cell.loc.number, error.line or 1, error.message) for cell, error in broken]
            broken_ids = {id(b) for b, _ in broken}
            python = [c for c in python if id(c) not in broken_ids]
            if python:
                module, layout = _join(python)
                new_bytes, py_findings = process_python_findings(path, module.encode("utf-8"), config, options)
            else:
                new_bytes, py_findings = None, []
        new_module = None if new_bytes is None else new_bytes.decode("utf-8")
        # Every finding, applied or left, is located in the joined cells as read.
        for f in py_findings:
            findings.append(mapper.finding(f, layout))
        if new_module is not None or new_mask_lines:
            pieces = _split(new_module, python) if new_module is not None else {
                c.loc.number: c.masked if c.masked.endswith("\n") else c.masked + "\n" for c in python
            }
            seen: set[int] = set()
            for cell in python:
                piece = _restore(pieces[cell.loc.number], masks, seen)
                if not cell.loc.text.endswith("\n"):
                    # Jupyter stores a cell without its final newline; we added one to join
                    # the cells (and an import added at the end may bring a blank line).
                    piece = piece.rstrip("\r\n")
                if piece != cell.loc.text:
                    new_texts[cell.loc.number] = piece
            expected = {int(k) for c in python for k in re.findall(r"__c2n_magic_(\d+)__", c.masked)}
            if seen != expected:
                raise SourceError("internal", "a rewrite removed an IPython magic line; notebook left untouched")

    problems = NotebookProblems(tuple(unparsed), in_magics)
    for rule in notebook_rules:
        if hasattr(rule, "check_metadata"):
            findings += _metadata_findings(rule, nb, mapper, path)
            continue
        for report in rule.check_cells(problems):  # type: ignore[attr-defined]
            findings.append(_own(rule, mapper, path, report))

    if not options.fix or not new_texts:
        return None, findings
    ascii_only = text.isascii()
    out = text
    for loc in sorted((loc for loc in nb.cells if loc.number in new_texts), key=lambda c: c.start, reverse=True):
        lines = new_texts[loc.number].splitlines(keepends=True)
        out = out[: loc.start] + render_source(text, loc, lines, ascii_only) + out[loc.end :]
    json.loads(out)  # never write a notebook Jupyter cannot open
    return bom + out.encode("utf-8"), findings


def _run_python(path: str, module: str, config: Config, options: RunOptions, check_syntax: bool):
    data = module.encode("utf-8")
    rules = tuple(r for r in rules_for(config, path) if "python" in r.file_kinds)
    if check_syntax and "cuda" in module.lower() and not (rules and triggered(rules, data)):
        # The engine will not parse this text (no rule can fire), but a notebook rule promises
        # to say which cells hide CUDA code from us: parse once here so a broken cell is reported.
        from ._nesting import parse_guarded

        parse_guarded(data, path)
    return process_python_findings(path, data, config, options)


def _broken_cells(cells: list[_Cell]) -> list[tuple[_Cell, SourceError]]:
    # Only on the error path: find the cells that fail on their own (a cell's error can surface
    # in the next one once they are joined, so the joined error line is not trusted).
    from ._nesting import parse_guarded

    broken = []
    for cell in cells:
        try:
            parse_guarded(cell.masked.encode("utf-8"), "<cell>")
        except SourceError as exc:
            broken.append((cell, exc))
    return broken


def _metadata_findings(rule: type[Rule], nb: NotebookJson, mapper: _Mapper, path: str) -> list[Finding]:
    """What ``rule`` reports on the notebook's top-level metadata, placed on the file's own lines
    (the metadata is read as a JSON config of its own: offsets are shifted by where it starts)."""
    if nb.metadata_span is None:
        return []
    start, end = nb.metadata_span
    doc = parse_json(mapper.text[start:end], path)
    out = []
    for report in rule.check_metadata(doc):  # type: ignore[attr-defined]
        span = Span(*mapper.index.position(start + report.start), *mapper.index.position(start + report.end))
        out.append(to_finding(TextItem(rule, report), path, span))
    return out


def _own(rule: type[Rule], mapper: _Mapper, path: str, report: CellReport) -> Finding:
    span = mapper.span(report.cell, report.line, 0, report.line, 0)
    item = TextItem(rule, TextReport(0, 0, report.message, guidance=report.guidance))
    return to_finding(item, path, span, f"cell {report.cell}, line {report.line}: ")
