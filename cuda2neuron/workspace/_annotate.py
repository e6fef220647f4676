"""Suppression comments added for the current findings (`cuda2neuron suppress`, ruff's add-noqa).

A team adopting the pre-commit hook on a large repository accepts today's findings in one
commit: each finding's line gets ``# cuda2neuron: ignore[CODE]`` (merged into a suppression
comment already there). Only the ends of lines change; line endings and everything else are
kept byte for byte. Running it again adds nothing: the comments hide what they were added for.

A comment goes on the line where the finding starts, unless that line continues (a trailing
backslash, or a string that runs on): then on the line where it ends. A backslash-continued
command of a shell script, a Makefile or a requirements file takes its comment on its last
line — after the ``\\`` the comment swallowed the continuation: the command lost its arguments
and the next line ran on its own — and a comment there covers the whole command. Python output is parsed
again, and a file whose result would not parse is refused, never written. Notebooks (comments
live in cells), CUDA sources (``//`` comments), Dockerfiles (a ``#`` after an instruction is
not a comment), JSON (no comments) and INI files (a value runs to the end of its line) are
refused with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from cuda2neuron.core import Finding

__all__ = ["ANNOTATED_KINDS", "Annotated", "add_suppressions"]

# Kinds whose lines can end with a `#` comment.
ANNOTATED_KINDS = frozenset({"python", "shell", "requirements", "config", "toml", "build"})
_REFUSED = {
    "notebook": "notebooks keep their code in cells: add `# cuda2neuron: ignore[CODE]` in the cell",
    "cuda-source": "CUDA sources have no `#` comments: select or per-file-ignore the rule in the config",
    "dockerfile": "a `#` after a Dockerfile instruction is not a comment: use per-file-ignores in the config",
    "json": "JSON has no comments: use per-file-ignores in the config",
    "ini": "an INI value runs to the end of its line (`#` included): use per-file-ignores in the config",
}
# Kinds where a trailing backslash continues a command (YAML and TOML have no such lines).
_CONTINUED_KINDS = frozenset({"python", "shell", "requirements", "build"})
_DIRECTIVE_RE = re.compile(rb"#[ \t]*cuda2neuron:[ \t]*ignore(\[([A-Za-z0-9_,\s]*)\])?")
_UNUSED = "CN901"


@dataclass(frozen=True)
class Annotated:
    """What adding suppressions to one file gave: the new bytes (None: unchanged), how many
    comment lines were written, or why the file was refused."""

    new_bytes: bytes | None
    lines: int = 0
    refused: str = ""


def _ending(line: bytes) -> tuple[bytes, bytes]:
    body = line.rstrip(b"\r\n")
    return body, line[len(body):]


def _with_codes(body: bytes, codes: set[str]) -> bytes:
    m = _DIRECTIVE_RE.search(body)
    if m is not None:
        if m.group(1) is None:
            return body  # a bare ignore already hides every rule
        have = [c.strip().decode() for c in m.group(2).split(b",") if c.strip()]
        merged = have + sorted(codes - set(have))
        return body[: m.start()] + f"# cuda2neuron: ignore[{', '.join(merged)}]".encode() + body[m.end():]
    sep = b"" if not body.strip() else b"  "
    return body.rstrip() + sep + f"# cuda2neuron: ignore[{', '.join(sorted(codes))}]".encode()


def _python_line_for(lines: list[bytes], finding: Finding) -> int:
    """The 1-based line a comment for ``finding`` can end: its start line unless that one
    continues with a backslash (then the first line that does not)."""
    n = finding.span.start_line
    while n < len(lines) and _continues(lines[n - 1]):
        n += 1
    return n


def _continues(line: bytes) -> bool:
    body = _ending(line)[0]
    return (len(body) - len(body.rstrip(b"\\"))) % 2 == 1


def add_suppressions(data: bytes, kind: str | None, findings: Sequence[Finding]) -> Annotated:
    """``data`` with a suppression comment for every finding not applied (CN901 excepted:
    an unused suppression is removed with --fix, not suppressed)."""
    wanted = [f for f in findings if not f.applied and f.code != _UNUSED]
    if not wanted:
        return Annotated(None)
    if kind not in ANNOTATED_KINDS:
        return Annotated(None, refused=_REFUSED.get(kind or "", "this file kind takes no suppression comments"))
    lines = data.splitlines(keepends=True)
    by_line: dict[int, set[str]] = {}
    for f in wanted:
        line = _python_line_for(lines, f) if kind in _CONTINUED_KINDS else f.span.start_line
        by_line.setdefault(line, set()).add(f.code)
    new = _rewrite(lines, by_line)
    if kind == "python":
        new, by_line = _fit_python(data, lines, by_line, wanted, new)
        if new is None:
            return Annotated(None, refused="a comment cannot be placed without breaking the code (a string runs over the line?)")
    return Annotated(None if new == data else new, lines=len(by_line))


def _rewrite(lines: list[bytes], by_line: dict[int, set[str]]) -> bytes:
    out = []
    for number, line in enumerate(lines, start=1):
        codes = by_line.get(number)
        if codes:
            body, ending = _ending(line)
            line = _with_codes(body, codes) + ending
        out.append(line)
    return b"".join(out)


def _parses(source: bytes) -> bool:
    import ast

    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


def _fit_python(data: bytes, lines: list[bytes], by_line, wanted, new: bytes):  # noqa: ANN001
    """Python: every comment must be a comment (not text inside a string that runs on), and
    the file must still parse. A line that fails moves to the finding's end line."""
    from cuda2neuron.kinds import directives

    def placed(text: bytes) -> set[int]:
        return {d.line for d in directives(text, "python")}

    if not _parses(data):
        return new, by_line  # libcst read what CPython cannot (newer syntax): trust the line scan
    good = placed(new)
    if all(n in good for n in by_line) and _parses(new):
        return new, by_line
    moved: dict[int, set[str]] = {}
    for f in wanted:
        start = _python_line_for(lines, f)
        line = start if start in good else f.span.end_line
        moved.setdefault(line, set()).add(f.code)
    again = _rewrite(lines, moved)
    if all(n in placed(again) for n in moved) and _parses(again):
        return again, moved
    return None, by_line
