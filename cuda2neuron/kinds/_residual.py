"""The residual pass (CN902): a line that still names CUDA and that no finding covers is reported.

After every rule of a file's kind has run (and its fixes were applied), each line of the final
text whose *code* — not a comment, a docstring or prose (a quoted message with spaces) — still
holds ``cuda``, ``nccl``, ``cudnn``, ``nvidia`` or ``nvcc`` is looked at. It is covered when a
finding points at it (a finding's span, widened in Python to the whole statement as a reviewer
reads it), when a fix rewrote it, or when each of its words is provably no CUDA construct (the
project's own names, labels, keys of its own data: ``_leftover_python``). Every other such line
gets one low-effort finding of its own: "CUDA reference left — review". So "nothing reported"
means "nothing CUDA-specific left" by construction, and the lines that no rule knows are counted
apart (``report.RunReport.residual``) to show which uses deserve a rule of their own.

"Covered" is judged against the whole catalog, whatever the run selects or a suppression comment
hides: a line a deselected rule (``--ignore CN711``), a rule of the other target, or a silenced
finding (``# cuda2neuron: ignore[CN101]``) would report is known, not left. Finding that out
costs a second, check-only run of the file — only when a candidate line is left and the run is
narrowed or the file holds a suppression comment. The pass's own findings honour select /
ignore / per-file-ignores (``CN902``) and ``# cuda2neuron: ignore[CN902]`` like any rule's; a
JSON file, which has no comments, is silenced with per-file-ignores.

It runs inside each kind's processing (``with_residual``), so its findings are cached with the
file's. A file without any of the words costs one case-insensitive search; the words are coarse
words of every kind the pass reads (kinds/_prefilter.py), and nothing here imports libcst or the
rule catalog: Python's excuses use the standard library's ``ast``.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path, PurePath

from cuda2neuron.core import (
    Config, Effort, Finding, RunOptions, Span, Suppressions, kept_tree, negated_cuda_word, suppressions_disabled,
)

from ._guard import Body

__all__ = ["RESIDUAL", "RESIDUAL_KINDS", "residual_findings", "with_residual"]

RESIDUAL = ("CN902", "cuda-reference-left")
# CUDA sources are reported as a whole (CN741).
RESIDUAL_KINDS = frozenset({
    "python", "shell", "requirements", "notebook", "config", "json", "toml", "ini", "build", "dockerfile",
})
_WORDS = re.compile(r"cuda(?!2neuron)|nccl|cudnn|nvidia|nvcc", re.IGNORECASE)
_WORDS_BYTES = re.compile(rb"cuda(?!2neuron)|nccl|cudnn|nvidia|nvcc", re.IGNORECASE)
# The same words in a lowered copy: a case-sensitive search is several times faster.
_LOWER_WORDS = re.compile(rb"cuda(?!2neuron)|nccl|cudnn|nvidia|nvcc")
# What a word is reported as: the run of name-like characters around it (`nvidia-smi`,
# `nvcr.io/nvidia/pytorch:24.02-py3`, `PYTORCH_CUDA_ALLOC_CONF`).
_TOKEN_CHARS = re.compile(r"[\w.\-/:+@]")
_DIRECTIVE = re.compile(r"[ \t]*#(?:SBATCH|PBS|BSUB)\b")
# A key spelled like an environment variable (`NCCL_IB_DISABLE`), wherever it is.
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*_[A-Z0-9_]+")
_STACKS = ("triton", "tilelang", "cutlass", "helion", "cupy")
_GUIDANCE = (
    "no rule knows this use of CUDA: check whether it still works on Trainium and port it by hand; "
    "once reviewed, silence the line with `# cuda2neuron: ignore[CN902]` (files without comments, "
    "such as JSON: per-file-ignores in the config)"
)


@dataclass(frozen=True)
class Hit:
    """A CUDA word left in code: 1-based line, 0-based character columns, the token as written;
    ``where`` names a notebook's cell and line (the columns are within the cell's line)."""

    line: int
    col: int
    end_col: int
    token: str
    where: str = ""
    # `${base_dir}/ds_config_nccl.json`: the token (`/ds_config_nccl.json`) starts right after a
    # `${name}` the shell expands to a folder, so it is a path relative to that folder.
    under_variable: bool = False


def with_residual(kind: str, body: Body) -> Body:
    """``body`` followed by the residual pass over its output (for the kinds the pass reads)."""
    if kind not in RESIDUAL_KINDS:
        return body

    def run(path: str, data: bytes, config: Config, options: RunOptions):  # noqa: ANN202
        new, findings = body(path, data, config, options)
        if not config.selects(RESIDUAL[0], path):
            return new, findings
        final = data if new is None else new
        extra = residual_findings(kind, path, data, final, list(findings), config, body)
        return new, [*findings, *extra] if extra else findings

    return run


def residual_findings(
    kind: str, path: str, data: bytes, final: bytes, findings: list[Finding], config: Config, body: Body
) -> list[Finding]:
    lowered = final.lower()
    if _LOWER_WORDS.search(lowered) is None:
        return []
    covered = _covered(data, final, findings)
    # Most words sit on lines a finding covers: only the other lines are worth reading closely.
    if _word_lines(lowered) <= covered:
        return []
    text = final.decode("utf-8", "surrogateescape")
    if kind == "python":
        hits, words = _python_hits(final, covered)
    elif kind == "notebook":
        hits, words = _notebook_hits(text, covered), None
    else:
        hits, words = _text_hits(kind, path, text), None
    if words is None:
        _drop_own_names(hits, config.settings.project)
    left = {line for line in hits if line not in covered}
    # Would a rule this run does not show report the line (deselected, of the neuron target,
    # silenced by a comment)? Then it is known, not left. Only those rules run again, check-only.
    for other in _unshown(config, path, b"cuda2neuron:" in final) if left else ():
        with suppressions_disabled():
            _, more = body(path, final, other, RunOptions())
        for f in more:
            covered.update(range(f.span.start_line, f.span.end_line + 1))
        findings = [*findings, *more]
        left = {line for line in left if line not in covered}
        if not left:
            break
    if left and words is not None:
        scripts = {line for line in left if line not in words}  # only shell hits of a script string
        left = _python_left(path, data, final, left - scripts, covered, words, findings, config) | scripts
    if not left:
        return []
    suppressions = Suppressions.from_text(text)
    out = []
    for line in sorted(left):
        line_hits = hits[line]
        span = Span(line, line_hits[0].col, line, line_hits[-1].end_col)
        if suppressions.suppressed(RESIDUAL[0], span):
            continue
        tokens = ", ".join(dict.fromkeys(f"`{h.token}`" for h in line_hits))
        out.append(Finding(
            code=RESIDUAL[0],
            name=RESIDUAL[1],
            message=f"{line_hits[0].where}CUDA reference left — review: {tokens} still names CUDA and no rule covers this line",
            path=path,
            span=span,
            guidance=_GUIDANCE,
            effort=Effort.LOW,
        ))
    return out


def _word_lines(lowered: bytes) -> set[int]:
    """The lines on which a word occurs anywhere (code, comment or text) of a lowered text."""
    starts = sorted(m.start() for m in _LOWER_WORDS.finditer(lowered))
    lines: set[int] = set()
    line, pos = 1, 0
    for start in starts:
        line += lowered.count(b"\n", pos, start)
        pos = start
        lines.add(line)
    return lines


def _unshown(config: Config, path: str, suppressed: bool) -> list[Config]:
    """The runs that show what this one does not: the rules its selection leaves out (all rules
    when the file holds a suppression comment, since a comment hides selected rules' findings),
    and, on the accelerator target, the rules that only the neuron target runs (``NCCL_*``
    variables kept for GPUs there). The neuron target is the reference: a rule that only the
    accelerator target runs (CN407, device arguments) is not asked on the neuron target."""
    from ._catalog import catalog

    runs: list[Config] = []
    everything = replace(config, select=("CN",), ignore=(), per_file_ignores=())
    if suppressed:
        runs.append(everything)
    elif config.select != ("CN",) or config.ignore or config.per_file_ignores:
        rules = catalog()
        left_out = tuple(sorted(code for code in rules if code != RESIDUAL[0] and not config.selects(code, path)))
        if left_out:
            runs.append(replace(everything, select=left_out))
    if config.settings.target != "neuron":
        neuron_only = tuple(sorted(code for code, rule in catalog().items() if "neuron" in rule.targets and config.settings.target not in rule.targets))
        if neuron_only:
            runs.append(replace(everything, select=neuron_only, settings=replace(config.settings, target="neuron")))
    return runs


def _covered(old: bytes, new: bytes, findings: list[Finding]) -> set[int]:
    """Lines of the final text that a finding points at or a fix rewrote.

    Findings are located in the file as read (the engines map every finding and edit back
    through the fix rounds). A line of the final text that is no line of the original was
    written by a fix; a line that equals one a finding pointed at is that line, kept or moved
    (an import added above shifts it). Line texts are compared by hash, not aligned with a diff:
    this runs for every changed file.
    """
    lines: set[int] = set()
    if new is old or new == old:
        for f in findings:
            lines.update(range(f.span.start_line, f.span.end_line + 1))
        return lines
    before = old.splitlines()
    original = set(before)
    pointed = {before[n - 1] for f in findings for n in range(f.span.start_line, f.span.end_line + 1) if 0 < n <= len(before)}
    for number, line in enumerate(new.splitlines(), start=1):
        if line not in original or line in pointed:
            lines.add(number)
    return lines


# -- Python ------------------------------------------------------------------------------------


def _python_hits(final: bytes, covered: set[int]):
    from ._code_text import code_text
    from ._leftover_python import RESIDUAL_WORDS, code_words

    words = code_words(code_text(final), RESIDUAL_WORDS, final, skip_lines=covered)
    hits: dict[int, list[Hit]] = {}
    for line, tokens in words.items():
        for tok in tokens:
            col = len(tok.before)
            first = tok.string.split("\n", 1)[0]
            hits.setdefault(line, []).append(Hit(line, col, col + len(first), first))
    for line, row in _script_string_hits(final).items():
        if line not in covered and line not in words:
            hits[line] = row
    return hits, words


# A line of shell in a string: a command a job script runs, or a scheduler's directive.
_SHELL_LINE = re.compile(
    r"^[ \t]*(?:\#!\S*(?:sh|bash|zsh)\b|\#(?:SBATCH|PBS|BSUB)\b|export[ \t]+\w+=|set[ \t]+-[a-z]|srun\b|module[ \t]+load\b"
    r"|(?:if|then|fi|done|esac)\b)",
    re.MULTILINE,
)


@lru_cache(maxsize=1)
def _token_re() -> re.Pattern[str]:
    """``_code_text``'s scan of comments and strings, on a decoded text (columns in characters)."""
    from ._code_text import _TOKEN_RE

    return re.compile(_TOKEN_RE.pattern.decode(), re.VERBOSE | re.DOTALL)


def _script_string_hits(final: bytes) -> dict[int, list[Hit]]:
    """Words in the shell scripts a Python file writes as multi-line strings (nanotron's sbatch
    launcher: ``script = f\"\"\"#!/bin/bash ...\"\"\"``), read as a script file is: commands and
    directives count, comments and quoted messages do not. The Python pass leaves such a string
    out as prose (it has spaces), so its `export CUDA_DEVICE_MAX_CONNECTIONS=1` or `nvidia-smi`
    would go unreported. A string is a script where two or more of its lines are shell."""
    if b'"""' not in final and b"'''" not in final:
        return {}
    text = final.decode("utf-8", "surrogateescape")
    strings = [
        m.span("string") for m in _token_re().finditer(text)
        if m.group("string") is not None and m.group("string")[:3] in ('"""', "'''") and "\n" in m.group("string")
        and _WORDS.search(m.group("string")) is not None
    ]
    if not strings:
        return {}
    view = [" " if c != "\n" else c for c in text]
    scripts = 0
    for a, b in strings:
        body = text[a + 3:b - 3]
        if len(_SHELL_LINE.findall(body)) >= 2:
            view[a + 3:b - 3] = body
            scripts += 1
    if not scripts:
        return {}
    lines = _Lines(text)
    hits = _Hits()
    view_text = "".join(view)
    _shell_hits(view_text, view_text, lines, hits, all_chars=True)
    for row in hits.values():
        row.sort(key=lambda h: h.col)
    return hits


def _python_left(
    path: str, data: bytes, final: bytes, left: set[int], covered: set[int], words, findings, config: Config
) -> set[int]:
    """The lines of ``left`` still left once coverage is widened to whole statements and each
    word's excuse is heard (the audit's judgement: ``_leftover_python``). The project's own
    modules are its top-level packages, the file's first folder, and what its imports find
    beside it (``from nvidia.modeling import ...`` with a folder ``nvidia/`` of the project's:
    ``_local_imports``, read from the file as read, as its cache key is); the names the
    project defines in its other modules come from the sweep (``ProjectFacts.own_names``)."""
    from ._leftover_python import FileExcuses, ProjectNames, excuse, parse_names, plainly_own, widen
    from ._local_imports import local_modules

    own = set(config.settings.project.own_packages)
    parts = PurePath(path).with_suffix("").parts
    own.update(p for p in parts[:1] if p.isidentifier())
    own.update(local_modules(path, data))
    source = final.decode("utf-8", "replace")
    if all(plainly_own(tok, source, frozenset(own)) for line in left for tok in words[line]):
        return set()  # every leftover word is a name the module defines: no parse needed
    names = parse_names(final, frozenset(own) | frozenset(parts), _tree_read(final, source))
    if names is None:
        return left
    kernel_lines: set[int] = set()
    stacks: set[str] = set()
    for f in findings:
        text = (f.message + " " + f.guidance).lower()
        named = {s for s in _STACKS if s in text}
        if named:
            stacks |= named
            kernel_lines.update(range(f.span.start_line, f.span.end_line + 1))
    lines = widen(names, covered, kernel_lines)
    rel = str(Path(*parts).with_suffix(".py")) if parts else "module.py"
    facts = config.settings.project
    project = ProjectNames.pool(
        {rel: names}, own_tops=frozenset(own), tree_own=facts.own_names, tree_foreign=facts.foreign_names
    )
    ctx = FileExcuses.of(rel, names, project, lines, stacks)
    return {line for line in left if line not in lines and not all(excuse(tok, ctx) for tok in words[line])}


def _tree_read(final: bytes, text: str):  # noqa: ANN202 (ast stays unimported here)
    """The tree the splicer made of ``final`` when it cut the same file into statements
    (``core.kept_tree``), where ``ast.parse(final)`` would read the very same text: ``text`` is
    ``final`` decoded with no byte replaced, and no byte-order mark or coding line other than
    UTF-8's (``# coding=utf-8``: 431 of diffusers' 2,089 files) could make CPython decode the
    bytes otherwise. None else: ``parse_names`` parses, as before."""
    if "\ufffd" in text or final.startswith(b"\xef\xbb\xbf"):
        return None
    head = final[: _second_line_end(final)]
    if b"coding" in head and any(m.group(1).lower() not in _UTF8 for m in _COOKIE.finditer(head)):
        return None
    return kept_tree(text)


# PEP 263's coding line, as CPython's tokenizer matches it on each of the first two lines; a name
# it normalises to UTF-8 only where spelled as one of these (anything else: parsed again).
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.MULTILINE)
_UTF8 = frozenset({b"utf-8", b"utf8", b"utf_8"})


def _second_line_end(data: bytes) -> int:
    first = data.find(b"\n")
    second = data.find(b"\n", first + 1) if first != -1 else -1
    return len(data) if second == -1 else second


# -- notebooks ---------------------------------------------------------------------------------


def _notebook_hits(text: str, covered: set[int]) -> dict[int, list[Hit]]:
    """Words left in a notebook's code cells, at the line of the ``.ipynb`` file that holds their
    source line (where the notebook's findings point); shell lines (``!cmd``, ``%%bash`` cells)
    are read as shell, other magics are not code."""
    from cuda2neuron.core import LineIndex
    from cuda2neuron.documents.nbjson import NotebookShapeError, locate_cells

    from ._code_text import code_text
    from ._leftover_python import RESIDUAL_WORDS, code_words

    try:
        notebook = locate_cells(text.lstrip("\ufeff"))
    except (NotebookShapeError, ValueError, IndexError):
        return {}
    offset = len(text) - len(text.lstrip("\ufeff"))
    index = LineIndex(text)
    hits = _Hits()
    for loc in notebook.cells:
        if loc.cell_type != "code" or not _WORDS.search(loc.text):
            continue
        lines = loc.text.splitlines(keepends=True)

        def file_line(k: int) -> int:  # k: the cell's 1-based line
            if loc.elements:
                return index.position(offset + loc.elements[min(k, len(loc.elements)) - 1][0])[0]
            return index.position(offset + loc.start)[0]

        shell_cell = bool(lines) and lines[0].lstrip().startswith(("%%bash", "%%sh", "%%script bash", "%%script sh"))
        python: list[str] = []
        for k, line in enumerate(lines, start=1):
            stripped = line.lstrip()
            shell = shell_cell and k > 1 or stripped.startswith("!")
            if shell or stripped.startswith("%"):
                python.append("\n" if line.endswith("\n") else "")
                if shell and _WORDS.search(line):
                    body = line[len(line) - len(stripped) + (1 if stripped.startswith("!") else 0):]
                    row = _Hits()
                    _shell_hits(body, body, _Lines(body), row, all_chars=True)
                    for h in row.get(1, ()):
                        col = h.col + len(line) - len(body)
                        _add(hits, Hit(file_line(k), col, col + len(h.token), h.token, f"cell {loc.number}, line {k}: "))
                continue
            python.append(line)
        source = "".join(python).encode("utf-8", "surrogateescape")
        cell_covered = {k for k in range(1, len(lines) + 1) if file_line(k) in covered}
        for k, tokens in code_words(code_text(source), RESIDUAL_WORDS, source, skip_lines=cell_covered).items():
            for tok in tokens:
                col = len(tok.before)
                first = tok.string.split("\n", 1)[0]
                _add(hits, Hit(file_line(k), col, col + len(first), first, f"cell {loc.number}, line {k}: "))
    for row in hits.values():
        row.sort(key=lambda h: h.col)
    return hits


# -- other kinds -------------------------------------------------------------------------------


def _token_at(text: str, i: int, j: int) -> tuple[int, int]:
    while i > 0 and _TOKEN_CHARS.match(text, i - 1):
        i -= 1
    while j < len(text) and _TOKEN_CHARS.match(text, j):
        j += 1
    # `image:` or a trailing `.`/`:` is punctuation of the line, not part of the name.
    while j > i and text[j - 1] in ".:-/":
        j -= 1
    return i, j


class _Lines:
    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0]
        for m in re.finditer("\n", text):
            self.starts.append(m.end())

    def hit(self, i: int, j: int) -> Hit:
        a, b = _token_at(self.text, i, j)
        line = bisect.bisect_right(self.starts, a) - 1
        start = self.starts[line]
        # `}` is not a token character, so `${base_dir}/x.json` gives the token `/x.json`: not an
        # absolute path (which is_file_name refuses: `/usr/local/cuda/...`), a file under the folder.
        under_variable = a > 0 and self.text[a - 1] == "}" and self.text.startswith("/", a)
        return Hit(line + 1, a - start, b - start, self.text[a:b], under_variable=under_variable)

    def line_text(self, i: int) -> tuple[int, str]:
        start = self.text.rfind("\n", 0, i) + 1
        end = self.text.find("\n", i)
        return start, self.text[start: len(self.text) if end == -1 else end]


def _quoted_prose(line: str, col: int) -> bool:
    """Whether ``col`` of ``line`` sits inside a quoted string that has a space (a message)."""
    quote = None
    start = 0
    for k, ch in enumerate(line):
        if quote is None:
            if ch in "\"'":
                quote, start = ch, k
        elif ch == quote and line[k - 1] != "\\":
            if start < col < k:
                return any(c in " \t" for c in line[start + 1:k])
            quote = None
    return False


class _Hits(dict):
    """line -> its hits, remembering which (line, column) pairs it holds: a 269 KB YAML flow
    line holds thousands of hits, and looking each new one up in its row took minutes (issue 44)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[int, int]] = set()


def _add(hits: _Hits, hit: Hit) -> None:
    from ._leftover_python import is_file_name, is_hub_id, is_web_address

    token = hit.token.lstrip("rbuRBUfF").strip("'\"")  # a notebook's Python token keeps its quotes
    if (
        is_file_name(token) or is_hub_id(token) or is_web_address(token)
        or (hit.under_variable and is_file_name(token[1:]))
    ):
        return  # a file's or a Hub repository's name (`nvidia/GR1-100`), a page's address: a label
    words = list(_WORDS.finditer(token))
    if words and all(negated_cuda_word(token, m.start(), m.end()) for m in words):
        return  # `trainer-without-cuda-extras`, `cuda-off`: names the variant without CUDA
    if (hit.line, hit.col) not in hits.seen:
        hits.seen.add((hit.line, hit.col))
        hits.setdefault(hit.line, []).append(hit)


def _drop_own_names(hits: dict[int, list[Hit]], facts) -> None:  # noqa: ANN001 - ProjectFacts
    """Leave out of a script's, a config's or a notebook's hits the names the project defines
    (``ProjectFacts.own_names``, pooled by the sweep): a shell function of its own
    (``make_mock_nvcc``, ``_has_usable_nvidia_gpu``) or one of its Python names run from a
    script. A name spelled as an environment variable (``CUDA_HOME``) stays a setting even where
    a Python module assigns one so: in a script it is the variable."""
    from ._leftover_python import _ENV_VAR_NAME

    own = facts.own_names - facts.foreign_names
    if not own:
        return
    for line in list(hits):
        row = [h for h in hits[line] if h.token not in own or _ENV_VAR_NAME.fullmatch(h.token)]
        if row:
            hits[line] = row
        else:
            del hits[line]


def _text_hits(kind: str, path: str, text: str) -> dict[int, list[Hit]]:
    lines = _Lines(text)
    hits = _Hits()
    if kind == "shell":
        _shell_hits(text, text, lines, hits, all_chars=True)
    elif kind == "dockerfile":
        _dockerfile_hits(path, text, lines, hits)
    elif kind == "requirements":
        _commented_hits(text, lines, hits, toml=path.endswith(".toml"))
    elif kind == "build":
        _build_hits(path, text, lines, hits)
    else:
        _config_hits(kind, path, text, lines, hits)
    for row in hits.values():
        row.sort(key=lambda h: h.col)
    return hits


def _shell_hits(view: str, raw: str, lines: _Lines, hits: _Hits, all_chars: bool, states: str | None = None) -> None:
    """Words in a shell text's code: commands, single-word quoted values, scheduler directives.
    ``states``: the view's lexed states where it is not one script (a YAML file's shell values,
    each lexed on its own)."""
    from cuda2neuron.documents.shell import CODE, COMMENT, DQUOTE, SQUOTE, scan

    if states is None:
        states = scan(view)
    names: list[tuple[int, int]] | None = None
    for m in _WORDS.finditer(view):
        i = m.start()
        if not all_chars and view[i] != raw[i]:
            continue
        state = states[i]
        if state == CODE:
            if names is None:
                names = _path_values(view, states)
            if _word_of_a_name(view, i, m.end()) and any(a <= i < b for a, b in names):
                continue  # `JOB_NAME=bsz4k_seq128_nccl` read as `${JOB_NAME}.log`: a name
            hit = lines.hit(i, m.end())
            if hit.under_variable and _JOINED_BEFORE.search(view, max(0, i - 64), i):
                continue  # `${base_dir}/saved_models/bsz4k_seq128_nccl/`: a folder under the script's
            _add(hits, hit)
        elif state == COMMENT:
            _, line = lines.line_text(i)
            if _DIRECTIVE.match(line):
                _add(hits, lines.hit(i, m.end()))
        elif state in (DQUOTE, SQUOTE):
            # The whole quoted string (a `"` inside single quotes is text of it): a message when
            # it has a space, a value (`--device 'cuda'`) when it has none.
            quote = "'" if state == SQUOTE else '"'
            a, b = i, m.end()
            while a > 0 and states[a - 1] == state and view[a - 1] != quote:
                a -= 1
            while b < len(view) and states[b] == state and view[b] != quote:
                b += 1
            # A CI expression's spaces (`"CUDA=${{ matrix.cuda }}" >> $GITHUB_ENV`) make no message.
            if not any(c.isspace() for c in _CI_EXPRESSION.sub("", view[a:b])):
                _add(hits, lines.hit(i, m.end()))


# A GitHub Actions expression inside a `run:` script, replaced before the step runs.
_CI_EXPRESSION = re.compile(r"\$\{\{.*?\}\}")
# A read of a shell variable, `$NAME` or `${NAME}`.
_VAR_READ = re.compile(r"\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))")
_VAR_ASSIGN = re.compile(r"(?<![\w$])([A-Za-z_]\w*)=")
# What follows a read that builds a folder's or a file's name from it: `${OUT}/ckpt`, `${JOB}.log`.
_PATH_AFTER = re.compile(r"[/.][\w-]")
_MKDIR_BEFORE = re.compile(r"\bmkdir(?:[ \t]+-\w+)*[ \t]+[\"']?$")


def _path_values(text: str, states: str) -> list[tuple[int, int]]:
    """Where the values assigned to the script's path variables are written: a variable it reads
    as a folder or a file name (`${OUTPUT_DIR}/saved_models`, `${JOB_NAME}.log`, `mkdir -p
    $OUTPUT_DIR`) holds a name, whatever its words; one whose own name holds a CUDA word
    (`CUDA_HOME`) names CUDA's folder and never counts."""
    from cuda2neuron.documents.shell import CODE, COMMENT, HEREDOC, word_end

    paths: set[str] = set()
    for m in _VAR_READ.finditer(text):
        if states[m.start()] in (COMMENT, HEREDOC):
            continue
        name = m.group(1) or m.group(2)
        if _WORDS.search(name):
            continue
        line_start = text.rfind("\n", 0, m.start()) + 1
        if _PATH_AFTER.match(text, m.end()) or _MKDIR_BEFORE.search(text, line_start, m.start()):
            paths.add(name)
    if not paths:
        return []
    out = []
    for m in _VAR_ASSIGN.finditer(text):
        if m.group(1) in paths and states[m.start()] == CODE and (m.start() == 0 or text[m.start() - 1] in " \t\n;&|("):
            out.append((m.end(), word_end(text, m.end())))
    return out


# A CUDA word joined by `_` to a word of letters (`seq128_nccl`, `lamb_nvidia_data`): one word of a
# longer name. Not a version (`nccl_2.18`, an install folder) nor the word alone (`/usr/local/cuda`).
_JOINED_BEFORE = re.compile(r"[A-Za-z][A-Za-z0-9]*_$")
_JOINED_AFTER = re.compile(r"_[A-Za-z]")


def _word_of_a_name(text: str, start: int, end: int) -> bool:
    return _JOINED_BEFORE.search(text, max(0, start - 64), start) is not None or _JOINED_AFTER.match(text, end) is not None


def _dockerfile_hits(path: str, text: str, lines: _Lines, hits: _Hits) -> None:
    from cuda2neuron.documents.dockerfile import parse_apptainer, parse_dockerfile, raw_instruction_spans

    from ._text_files import is_apptainer_name

    apptainer = is_apptainer_name(path)
    doc = parse_apptainer(text) if apptainer else parse_dockerfile(text)
    _shell_hits(doc.text, text, lines, hits, all_chars=False)
    # The instructions that are no shell (FROM, LABEL, COPY, an Apptainer header or %labels);
    # a heredoc's body belongs to no instruction: data, like a script's heredoc.
    for start, end in raw_instruction_spans(doc):
        for m in _WORDS.finditer(text, start, end):
            i = m.start()
            if doc.text[i] == text[i]:
                continue  # shell: judged above
            line_start, line = lines.line_text(i)
            if line.lstrip().startswith("#") or _quoted_prose(line, i - line_start):
                continue
            _add(hits, lines.hit(i, m.end()))


def _commented_hits(text: str, lines: _Lines, hits: _Hits, toml: bool) -> None:
    """Words outside ``#`` comments (requirements files, dependency TOML)."""
    for m in _WORDS.finditer(text):
        line_start, line = lines.line_text(m.start())
        col = m.start() - line_start
        if _comment_start(line, toml) <= col:
            continue
        if toml and _quoted_prose(line, col):
            continue
        _add(hits, lines.hit(m.start(), m.end()))


def _comment_start(line: str, quoted: bool) -> int:
    """Where a ``#`` comment starts on ``line`` (its length when there is none); with ``quoted``
    a ``#`` inside quotes is text (TOML, YAML)."""
    quote = None
    for k, ch in enumerate(line):
        if quote is not None:
            if ch == quote and line[k - 1] != "\\":
                quote = None
            continue
        if quoted and ch in "\"'":
            quote = ch
        elif ch == "#" and (k == 0 or line[k - 1] in " \t"):
            return k
    return len(line)


def _build_hits(path: str, text: str, lines: _Lines, hits: _Hits) -> None:
    from cuda2neuron.documents.buildfile import parse_build

    doc = parse_build(text, path)
    # A Makefile's own target names (`check-cuda-install:`) are labels, wherever they are named
    # (`make check-cuda-install` in a recipe too).
    targets = set(_MAKE_TARGET.findall(doc.code)) if doc.flavour == "make" else set()
    recipe = _Hits()
    _shell_hits(doc.text, text, lines, recipe, all_chars=False)
    for row in recipe.values():
        for hit in row:
            if hit.token not in targets:
                _add(hits, hit)
    for m in _WORDS.finditer(doc.code):
        i = m.start()
        if doc.text[i] == text[i] and doc.text[i] != " ":
            continue  # a recipe: judged as shell above
        line_start, line = lines.line_text(i)
        if _quoted_prose(line, i - line_start):
            continue
        hit = lines.hit(i, m.end())
        if hit.token in targets:
            continue
        _add(hits, hit)


_MAKE_TARGET = re.compile(r"^([\w.-]+)[ \t]*:(?!=)", re.MULTILINE)


def _config_hits(kind: str, path: str, text: str, lines: _Lines, hits: _Hits) -> None:
    from cuda2neuron.documents import structured

    from ._text_files import is_json_data

    if kind == "json" and is_json_data(text.encode("utf-8", "surrogateescape")):
        return  # data, not a config: not read

    parse = {"config": structured.parse_yaml, "json": structured.parse_json, "toml": structured.parse_toml}.get(
        kind, structured.parse_ini
    )
    doc = parse(text, path)
    if not doc.parsed:
        # Not readable as its format (a template): every word outside a comment counts.
        comment_chars = "" if kind == "json" else "#;" if kind == "ini" else "#"
        for m in _WORDS.finditer(text):
            line_start, line = lines.line_text(m.start())
            col = m.start() - line_start
            if comment_chars and (line.lstrip()[:1] in comment_chars or _comment_start(line, True) <= col):
                continue
            _add(hits, lines.hit(m.start(), m.end()))
        return
    if kind == "config":
        _shell_hits(doc.text, text, lines, hits, all_chars=False, states=doc.states)
    shell_owned = [(s.start, s.end) for s in doc.scalars if structured_shell(s)]
    for s in doc.scalars:
        written = text[s.start:s.end]
        if not _WORDS.search(written) or (kind == "config" and (s.start, s.end) in shell_owned):
            continue
        if any(c.isspace() for c in s.value.strip()):
            continue  # prose: a description, a message
        if _own_config_value(s) or _left_out(s):
            continue
        for m in _WORDS.finditer(written):
            _add(hits, lines.hit(s.start + m.start(), s.start + m.end()))
    for (_document, key_path), (start, end) in doc.keys.items():
        written = text[start:end]
        if not _WORDS.search(written):
            continue
        parent = key_path[-2] if len(key_path) >= 2 else None
        # Keys are the program's own names, except environment variables and resource names
        # (`CUDA_VISIBLE_DEVICES:` under `env:`, `nvidia.com/gpu:` under `limits:`).
        if structured.is_env_key(parent) or "/" in written or _ENV_NAME.fullmatch(written.strip("'\"")):
            for m in _WORDS.finditer(written):
                _add(hits, lines.hit(start + m.start(), start + m.end()))


# Keys whose values are the project's own files and folders (a workflow's `paths:`, compose's
# `dockerfile:` / `context:`, an action's `file:`), and labels (`name:`).
_PATH_KEYS = frozenset({
    "file", "files", "dockerfile", "path", "paths", "paths-ignore", "context", "working-directory",
    "working_dir", "workdir", "cache-dependency-path",
    # and the names of a workflow's own jobs (`needs: setup_torch_cuda_pipeline_matrix`)
    "needs",
})


def _own_config_value(s) -> bool:  # noqa: ANN001 - a documents.structured.Scalar
    """A value that names the project's own file or is a label, not a CUDA construct: under a
    path key, a relative path (``./docker/docker-cuda/Dockerfile``), or a ``name:`` that is not
    an environment variable's (``name: tests_cuda``)."""
    from cuda2neuron.documents.structured import is_env_key

    owner = s.owner
    if owner in _PATH_KEYS or s.value.startswith(("./", "../")):
        return True
    return s.key == "name" and not (len(s.path) >= 3 and is_env_key(s.path[-3]))


# Keys whose list names what a program leaves out (unsloth's Colab-to-CPU pin map: `"skip":
# ["nvidia-nccl-cu12", ...]`, the CUDA wheels a CPU runner must not install): nothing named there
# is installed or run, so nothing there is for a Trainium user to change.
_LEFT_OUT_KEYS = frozenset({"skip", "skipped", "exclude", "excludes", "excluded", "ignore", "ignored", "omit", "blocklist", "denylist"})


def _left_out(s) -> bool:  # noqa: ANN001 - a documents.structured.Scalar
    """An item of a list under a key that leaves things out (``"skip": ["nvidia-nccl-cu12"]``)."""
    return len(s.path) >= 2 and isinstance(s.path[-1], int) and isinstance(s.path[-2], str) and s.path[-2].lower() in _LEFT_OUT_KEYS


def structured_shell(s) -> bool:  # noqa: ANN001 - a documents.structured.Scalar
    from cuda2neuron.documents.structured import SHELL_KEYS, is_env_key

    owner = s.owner
    return owner in SHELL_KEYS or (
        len(s.path) >= 2 and isinstance(s.path[-1], int) and is_env_key(s.path[-2]) and "=" in s.value
    )
