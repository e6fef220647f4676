"""Dependency lists: ``requirements*.txt`` and the dependency tables of ``pyproject.toml``.

Both are reduced to the same document — requirement entries (normalised name, text span) and
package index URLs — so the CN71x rules do not care where a dependency was declared. Nothing is
rewritten: dropping a dependency is a decision that comes with code changes.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from cuda2neuron.core import SourceError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "Dependency",
    "DependencyDoc",
    "IndexUrl",
    "normalise",
    "parse_pyproject",
    "parse_requirements",
    "requirement_name",
]


def normalise(name: str) -> str:
    """PEP 503 name normalisation: ``Flash_Attn`` -> ``flash-attn``."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Dependency:
    name: str  # normalised
    spec: str  # the requirement as written
    start: int
    end: int


@dataclass(frozen=True)
class IndexUrl:
    url: str
    start: int
    end: int


@dataclass
class DependencyDoc:
    text: str
    dependencies: list[Dependency] = field(default_factory=list)
    indexes: list[IndexUrl] = field(default_factory=list)


_NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_COMMENT_RE = re.compile(r"(?:^|\s)#")
_INDEX_OPT_RE = re.compile(r"(?:--(?:extra-)?index-url|--find-links|-i|-f)(?:=|\s+)(\S+)")
_WHEEL_RE = re.compile(r"/([A-Za-z0-9_.]+?)-\d[^/]*\.(?:whl|tar\.gz|zip)$")
# Repositories whose name differs from their distribution name.
# Repositories whose name is not the distribution's (normalised): what `pip install git+URL` or a
# clone of the repository builds (DeepEP's and DeepGEMM's setup.py: deep_ep, deep_gemm).
_REPO_NAMES = {"flash-attention": "flash-attn", "deepep": "deep-ep", "deepgemm": "deep-gemm", "groupedgemm": "grouped-gemm"}


def _name_from_url(url: str) -> str | None:
    egg = re.search(r"[#&]egg=([A-Za-z0-9._-]+)", url)
    if egg:
        return egg.group(1)
    clean = url.split("#", 1)[0].split("?", 1)[0]
    wheel = _WHEEL_RE.search(clean)
    if wheel:
        return wheel.group(1)
    clean = clean.rstrip("/")
    clean = re.sub(r"@[^/]*$", "", clean)  # git+https://...@v1.2
    last = clean.rsplit("/", 1)[-1]
    last = last[:-4] if last.endswith(".git") else last
    return _REPO_NAMES.get(normalise(last), last) if last else None


def requirement_name(spec: str) -> str | None:
    """The distribution name a requirement line or pip argument names (URLs included)."""
    body = spec
    if body.startswith(("-e ", "--editable ", "--editable=")):
        body = re.sub(r"^(-e|--editable)[=\s]+", "", body)
    if "://" in body.split(" @ ", 1)[0] or body.startswith(("git+", "hg+", "svn+")):
        return _name_from_url(body)
    m = _NAME_RE.match(body)
    return m.group(0) if m else None


def _requirement(spec: str, start: int) -> Dependency | None:
    name = requirement_name(spec)
    if not name:
        return None
    return Dependency(normalise(name), spec, start, start + len(spec))


def parse_requirements(text: str) -> DependencyDoc:
    doc = DependencyDoc(text)
    offset = 0
    for raw in text.splitlines(keepends=True):
        line_start = offset
        offset += len(raw)
        line = raw.rstrip("\r\n")
        comment = _COMMENT_RE.search(line)
        code = line[: comment.start()] if comment else line
        if code.rstrip().endswith("\\"):
            code = code.rstrip()[:-1]  # continuation: hashes and options follow; name is here
        stripped = code.strip()
        if not stripped:
            continue
        lead = len(code) - len(code.lstrip())
        if stripped.startswith("-") and not stripped.startswith(("-e", "--editable")):
            for m in _INDEX_OPT_RE.finditer(code):
                doc.indexes.append(IndexUrl(m.group(1), line_start + m.start(1), line_start + m.end(1)))
            continue
        # Drop per-requirement options (`--hash=...`) and keep the requirement itself.
        spec = re.split(r"\s+--", stripped, maxsplit=1)[0].rstrip()
        dep = _requirement(spec, line_start + lead)
        if dep is not None:
            doc.dependencies.append(dep)
    return doc


_INDEX_IN_TEXT_RE = re.compile(r"https?://[^\s\"']*/whl/(?:nightly/)?cu\d+[^\s\"']*")


def _code_positions(text: str) -> list[tuple[int, int]]:
    """Line ranges without their TOML comments (a ``#`` outside strings)."""
    out = []
    offset = 0
    for raw in text.splitlines(keepends=True):
        in_str: str | None = None
        end = len(raw)
        for i, ch in enumerate(raw):
            if in_str:
                if ch == in_str:
                    in_str = None
            elif ch in "'\"":
                in_str = ch
            elif ch == "#":
                end = i
                break
        out.append((offset, offset + end))
        offset += len(raw)
    return out


def parse_pyproject(text: str, path: str) -> DependencyDoc:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SourceError("parse", f"invalid TOML: {exc}") from None
    doc = DependencyDoc(text)
    code_ranges = _code_positions(text)

    def in_code(i: int) -> bool:
        return any(a <= i < b for a, b in code_ranges)

    used: set[int] = set()

    def locate_string(value: str, header: str) -> None:
        # tomllib keeps no positions: find the string literal after its table header.
        head = re.search(rf"(?m)^\s*\[{re.escape(header)}\]", text)
        begin = head.end() if head else 0
        for quote in ('"', "'"):
            literal = f"{quote}{value}{quote}"
            i = text.find(literal, begin)
            while i != -1 and (i in used or not in_code(i)):
                i = text.find(literal, i + 1)
            if i != -1:
                used.add(i)
                dep = _requirement(value, i + 1)
                if dep is not None:
                    doc.dependencies.append(dep)
                return

    def locate_key(key: str, header: str) -> None:
        head = re.search(rf"(?m)^\s*\[{re.escape(header)}\]", text)
        if head is None:
            return
        m = re.compile(rf"(?m)^[ \t]*([\"']?){re.escape(key)}\1[ \t]*=").search(text, head.end())
        if m is not None and in_code(m.start()):
            start = m.start() + m.group(0).index(key)
            doc.dependencies.append(Dependency(normalise(key), key, start, start + len(key)))

    project = data.get("project", {})
    if isinstance(project, dict):
        for spec in project.get("dependencies", []) or []:
            if isinstance(spec, str):
                locate_string(spec, "project")
        optional = project.get("optional-dependencies", {}) or {}
        if isinstance(optional, dict):
            for specs in optional.values():
                for spec in specs if isinstance(specs, list) else []:
                    if isinstance(spec, str):
                        locate_string(spec, "project.optional-dependencies")
    groups = data.get("dependency-groups", {})
    if isinstance(groups, dict):
        for specs in groups.values():
            for spec in specs if isinstance(specs, list) else []:
                if isinstance(spec, str):
                    locate_string(spec, "dependency-groups")
    # Poetry declares dependencies as keys: `flash-attn = "^2.5"` under its tables.
    tool = data.get("tool", {})
    poetry = tool.get("poetry", {}) if isinstance(tool, dict) else {}
    if isinstance(poetry, dict):
        tables = [("tool.poetry.dependencies", poetry.get("dependencies"))]
        groups = poetry.get("group", {})
        if isinstance(groups, dict):
            tables += [
                (f"tool.poetry.group.{name}.dependencies", group.get("dependencies"))
                for name, group in groups.items()
                if isinstance(group, dict)
            ]
        for header, deps in tables:
            if isinstance(deps, dict):
                for key in deps:
                    locate_key(key, header)
    for m in _INDEX_IN_TEXT_RE.finditer(text):
        if in_code(m.start()):
            doc.indexes.append(IndexUrl(m.group(0), m.start(), m.end()))
    doc.dependencies.sort(key=lambda d: d.start)
    return doc
