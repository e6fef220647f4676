"""Structured configs — YAML, JSON, TOML, INI — as the config rules read them.

Every scalar of the file becomes a ``Scalar``: its path of keys from the document root
(``("services", "train", "runtime")``; list items are numbered), its value, and where it is
written (offsets of the value as written, quotes included, and of its mapping key). The rules
match paths and values whatever the syntax — ``backend: nccl``, ``{"backend": "nccl"}`` in a YAML
flow mapping, ``"backend": "nccl"`` in JSON, ``backend = "nccl"`` in TOML — and a fix is a splice of
the value's characters, so every byte outside it (comments, layout, key order, quoting style)
stays as it was: nothing is ever re-serialised.

* YAML is read with ruamel.yaml's composer (block and flow style, several documents per file,
  anchors: an aliased node is read once, where its anchor is written).
* JSON with the standard library's string scanner inside a small walker that records offsets;
  ``//`` and ``/* */`` comments and trailing commas (JSONC: devcontainer.json, VS Code files) are
  accepted.
* TOML is validated with tomllib, then its ``key = value`` lines are read with their table.
* INI / cfg is validated with configparser, then read line by line (sections, ``key = value``
  and ``key: value``, continuation lines).

A file that does not parse (a Helm or Jinja template, a YAML file with tabs) is read as text:
YAML keeps the line reader's ``key: value`` entries (``plaintext``), the others no scalars; their
CUDA lines are then left to the residual pass. ``parsed`` and ``error`` say which happened.

YAML values that are shell commands — GitHub Actions ``run:``, GitLab ``script:``, compose and
Kubernetes ``command:`` / ``args:`` / ``entrypoint:``, and ``KEY=value`` items of an ``environment:``
list — are kept in a *shell view* of the file (``text``; everything else is blanked, offsets
kept), which the launch-script rules read as they read a Dockerfile's ``RUN`` lines.
"""

from __future__ import annotations

import configparser
import json
import re
import sys
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from json.decoder import scanstring

from .shell import ShellScript, scan_spans

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "ENV_KEYS",
    "SHELL_KEYS",
    "ConfigDocument",
    "is_env_key",
    "Scalar",
    "parse_ini",
    "parse_json",
    "parse_toml",
    "parse_yaml",
]

Key = str | int

# Keys whose values are shell commands (GitHub Actions, GitLab CI, compose, Kubernetes).
SHELL_KEYS = frozenset({"run", "script", "before_script", "after_script", "command", "entrypoint", "args"})
# Keys whose mapping (or list of KEY=value strings) holds environment variables; `is_env_key`
# also takes names ending like one (`launcher_env`, `containerEnv`, `remoteEnv`).
ENV_KEYS = frozenset({"env", "environment", "variables", "envs", "env_vars", "envVars", "environment_variables"})
_ENV_SUFFIX = re.compile(r"(?:[_-]env|Env|[_-]environment|Environment|_env_vars|EnvVars)$")


def is_env_key(key: object) -> bool:
    """Whether a mapping key holds environment variables (``env:``, ``environment:``,
    ``variables:``, ``launcher_env:``, ``containerEnv:``)."""
    return isinstance(key, str) and (key in ENV_KEYS or _ENV_SUFFIX.search(key) is not None)


@dataclass(frozen=True)
class Scalar:
    """One scalar value of a structured config."""

    path: tuple[Key, ...]
    value: str
    start: int  # the value as written, quotes included
    end: int
    quote: str  # '"', "'", "" (plain / bare), or "|" / ">" for YAML block scalars
    # Whether the characters between the quotes are exactly ``value`` (no escape, no folding,
    # no tag): only then can a fix splice ``quote + new + quote`` over the value.
    literal: bool = True
    key_start: int = -1  # the mapping key as written, when the scalar is a mapping value
    key_end: int = -1
    document: int = 0

    @property
    def key(self) -> str | None:
        """The mapping key right above the value (None for a list item or a root scalar)."""
        return self.path[-1] if self.path and isinstance(self.path[-1], str) else None

    @property
    def owner(self) -> str | None:
        """The nearest mapping key above the value: a list item's list key (``capabilities`` for
        the ``gpu`` of ``capabilities: [gpu]``), or the value's own key."""
        for part in reversed(self.path):
            if isinstance(part, str):
                return part
        return None


@dataclass
class ConfigDocument(ShellScript):
    """A structured config: ``scalars``, and (``text``) its shell view for the shell rules."""

    raw: str = ""
    path: str = ""
    format: str = "yaml"  # "yaml", "json", "toml", "ini"
    scalars: tuple[Scalar, ...] = ()
    # (document, path) -> (start, end) of every mapping key, containers' keys included.
    keys: dict[tuple[int, tuple[Key, ...]], tuple[int, int]] = field(default_factory=dict)
    documents: int = 1
    parsed: bool = True
    error: str = ""
    # Where each shell value of ``text`` is written: each is lexed on its own (``scan_spans``).
    shell_spans: tuple[tuple[int, int], ...] = ()

    @cached_property
    def _scanned(self) -> tuple[str, list[bool]]:
        return scan_spans(self.text, self.shell_spans)

    @cached_property
    def by_path(self) -> dict[tuple[int, tuple[Key, ...]], Scalar]:
        return {(s.document, s.path): s for s in self.scalars}

    def at(self, document: int, path: tuple[Key, ...]) -> Scalar | None:
        return self.by_path.get((document, path))

    def top_keys(self, document: int = 0) -> frozenset[str]:
        """The keys of a document's root mapping."""
        return frozenset(p[0] for (d, p) in self.keys if d == document and len(p) == 1 and isinstance(p[0], str))

    @property
    def entries(self) -> tuple[Scalar, ...]:
        """Scalars that are mapping values (what the YAML line reader used to call entries)."""
        return tuple(s for s in self.scalars if s.key is not None)

    def line_of(self, offset: int) -> int:
        return self.raw.count("\n", 0, offset) + 1

    @cached_property
    def dependencies(self) -> list:
        """A ``setup.cfg``'s requirements (``[options] install_requires`` / ``setup_requires`` /
        ``tests_require``, ``[options.extras_require]``), as the dependency rules read them."""
        from .requirements import Dependency, normalise, requirement_name

        if self.format != "ini":
            return []
        out = []
        for s in self.scalars:
            if len(s.path) < 2:
                continue
            section, key = s.path[0], s.path[1]
            if not ((section == "options" and key in _SETUP_REQUIRES) or section == "options.extras_require"):
                continue
            spec = s.value.split("#", 1)[0].strip()
            name = requirement_name(spec) if spec else None
            if name:
                out.append(Dependency(normalise(name), spec, s.start, s.start + len(spec)))
        return out


_SETUP_REQUIRES = frozenset({"install_requires", "setup_requires", "tests_require"})


def _blank(text: str, keep: list[tuple[int, int]]) -> str:
    """``text`` with everything outside ``keep`` made spaces (newlines kept: offsets and lines
    stay)."""
    if not keep:
        return re.sub(r"[^\n]", " ", text)
    out = []
    pos = 0
    for start, end in sorted(keep):
        if start < pos:
            start = pos
        out.append(re.sub(r"[^\n]", " ", text[pos:start]))
        out.append(text[start:end])
        pos = max(pos, end)
    out.append(re.sub(r"[^\n]", " ", text[pos:]))
    return "".join(out)


def _under_shell_key(path: tuple[Key, ...]) -> bool:
    owner = next((p for p in reversed(path) if isinstance(p, str)), None)
    return owner in SHELL_KEYS


def _javascript_input(s: Scalar, uses: dict) -> bool:
    """``with: script:`` of a step that ``uses: actions/github-script``: JavaScript, not shell.
    Read as shell, an apostrophe in its comments (``// don't``) opened a quote that ran on into
    every later step of the workflow (axolotl's docker-e2e.yml: its `run:` steps went unread)."""
    if len(s.path) < 2 or s.path[-2:] != ("with", "script"):
        return False
    return uses.get((s.document, (*s.path[:-2], "uses")), "").startswith("actions/github-script")


def _env_list_item(s: Scalar) -> bool:
    """``environment: ["CUDA_VISIBLE_DEVICES=0,1"]`` (compose): a list item that is an assignment."""
    return (
        len(s.path) >= 2 and isinstance(s.path[-1], int) and is_env_key(s.path[-2])
        and re.match(r"[A-Za-z_]\w*=", s.value) is not None
    )


def _shell_spans(raw: str, scalars: tuple[Scalar, ...]) -> list[tuple[int, int]]:
    """Where the shell commands of a YAML file are written: the characters of each command value
    (inside its quotes; a block scalar's lines after its header)."""
    spans = []
    uses = {(s.document, s.path): s.value for s in scalars if s.key == "uses"}
    for s in scalars:
        if not (_under_shell_key(s.path) or _env_list_item(s)):
            continue
        if _javascript_input(s, uses):
            continue
        if s.quote in ("|", ">"):
            if s.quote == ">":
                continue  # folded lines are joined into one command: no character is one of it
            header_end = raw.find("\n", s.start, s.end)
            if header_end != -1:
                spans.append((header_end + 1, s.end))
        elif s.literal:
            q = len(s.quote)
            spans.append((s.start + q, s.end - q))
    return spans


# -- YAML --------------------------------------------------------------------------------------


def _yaml(pure: bool):
    # Imported on first use: most runs never read a YAML file with a CUDA word in it. The
    # composer of ruamel.yaml's C extension (ruamel.yaml.clib, libyaml) gives the same nodes and
    # marks as the pure one, four times faster; the pure one reads what it does not (a text with
    # a byte-order mark or bytes that are not UTF-8, whose marks libyaml counts differently).
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=pure)


@lru_cache(maxsize=8)
def parse_yaml(text: str, path: str = "") -> ConfigDocument:
    """The YAML document of ``text`` (cached: the rules and the residual pass read the same
    text; a document is only read, never changed)."""
    pure = text.startswith("\ufeff") or not text.isascii() and _has_surrogates(text)
    try:
        try:
            scalars, keys, documents = _yaml_scalars(text, pure)
        except Exception:  # noqa: BLE001
            if pure:
                raise
            scalars, keys, documents = _yaml_scalars(text, True)  # the pure reader decides
    except Exception as exc:  # noqa: BLE001 - ruamel raises many types; any of them means "not YAML we can read"
        from .plaintext import PlainText

        # A template (Helm, Jinja) or broken YAML: its `key: value` lines, read one by one.
        entries = PlainText(text).entries
        fallback = tuple(
            Scalar((e.key,), e.value, e.start, e.end, e.quote, True, e.key_start, e.key_end) for e in entries
        )
        # (Nesting is unknown: each key is its own path, named by where it is written.)
        keys = {(0, (f"<at {m.start(1)}>", m.group(1))): (m.start(1), m.end(1)) for m in _LINE_KEY.finditer(text)}
        return ConfigDocument(
            _blank(text, []), raw=text, path=path, format="yaml", scalars=fallback, keys=keys,
            parsed=False, error=_first_line(exc),
        )
    spans = tuple(sorted(_shell_spans(text, scalars)))
    return ConfigDocument(
        _blank(text, list(spans)), raw=text, path=path, format="yaml",
        scalars=scalars, keys=keys, documents=documents, shell_spans=spans,
    )


# Every `key:` that starts a line of a YAML file read as text (its value may be a template).
_LINE_KEY = re.compile(r"^[ \t]*(?:-[ \t]+)?([A-Za-z_][\w./-]*)[ \t]*:(?=[ \t]|$)", re.MULTILINE)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _yaml_scalars(text: str, pure: bool):
    from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

    scalars: list[Scalar] = []
    keys: dict[tuple[int, tuple[Key, ...]], tuple[int, int]] = {}

    def literal(node, start: int, end: int) -> bool:
        style = node.style
        if style in ("|", ">"):
            return False
        written = text[start + 1:end - 1] if style in ('"', "'") else text[start:end]
        return written == node.value

    def walk(node, path: tuple[Key, ...], document: int, key_span: tuple[int, int], seen: set[int]) -> None:
        # An alias is the node of its anchor: read once, where the anchor writes it (a merge
        # key `<<: *defaults` would otherwise report the defaults at every use).
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, ScalarNode):
            start, end = node.start_mark.index, node.end_mark.index
            style = node.style or ""
            scalars.append(Scalar(
                path, str(node.value), start, end, style, literal(node, start, end), *key_span, document,
            ))
        elif isinstance(node, SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, (*path, i), document, (-1, -1), seen)
        elif isinstance(node, MappingNode):
            for k, v in node.value:
                name = str(k.value) if isinstance(k, ScalarNode) else f"<{type(k).__name__}>"
                span = (k.start_mark.index, k.end_mark.index)
                keys[document, (*path, name)] = span
                walk(v, (*path, name), document, span, seen)

    documents = 0
    for document, root in enumerate(_yaml(pure).compose_all(text)):
        documents = document + 1
        if root is not None:
            walk(root, (), document, (-1, -1), set())
    return tuple(scalars), keys, max(documents, 1)


# -- JSON --------------------------------------------------------------------------------------

_JSON_WS = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.DOTALL)
_JSON_BARE = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")


class _JsonError(ValueError):
    pass


@lru_cache(maxsize=8)
def parse_json(text: str, path: str = "") -> ConfigDocument:
    try:
        scalars, keys = _json_scalars(text)
    except (_JsonError, ValueError) as exc:
        return ConfigDocument(
            _blank(text, []), raw=text, path=path, format="json", parsed=False, error=_first_line(exc),
        )
    return ConfigDocument(_blank(text, []), raw=text, path=path, format="json", scalars=scalars, keys=keys)


def _json_scalars(text: str):
    """Every scalar of a JSON (or JSONC) text with its offsets; raises ``_JsonError``."""
    scalars: list[Scalar] = []
    keys: dict[tuple[int, tuple[Key, ...]], tuple[int, int]] = {}
    n = len(text)

    def ws(i: int) -> int:
        return _JSON_WS.match(text, i).end()

    def fail(i: int, what: str):
        line = text.count("\n", 0, i) + 1
        col = i - (text.rfind("\n", 0, i) + 1) + 1
        raise _JsonError(f"{what} at line {line}, column {col}")

    def string(i: int) -> tuple[str, int]:
        try:
            return scanstring(text, i + 1, True)
        except ValueError as exc:
            raise _JsonError(str(exc)) from None

    def value(i: int, path: tuple[Key, ...], key_span: tuple[int, int]) -> int:
        i = ws(i)
        if i >= n:
            fail(i, "value expected")
        ch = text[i]
        if ch == "{":
            i = ws(i + 1)
            while i < n and text[i] != "}":
                if text[i] != '"':
                    fail(i, "string key expected")
                key, key_end = string(i)
                keys[0, (*path, key)] = (i, key_end)
                i = ws(key_end)
                if i >= n or text[i] != ":":
                    fail(i, "':' expected")
                i = ws(value(i + 1, (*path, key), (keys[0, (*path, key)])))
                if i < n and text[i] == ",":
                    i = ws(i + 1)
                elif i < n and text[i] != "}":
                    fail(i, "',' or '}' expected")
            if i >= n:
                fail(i, "'}' expected")
            return i + 1
        if ch == "[":
            i = ws(i + 1)
            index = 0
            while i < n and text[i] != "]":
                i = ws(value(i, (*path, index), (-1, -1)))
                index += 1
                if i < n and text[i] == ",":
                    i = ws(i + 1)
                elif i < n and text[i] != "]":
                    fail(i, "',' or ']' expected")
            if i >= n:
                fail(i, "']' expected")
            return i + 1
        if ch == '"':
            decoded, end = string(i)
            scalars.append(Scalar(path, decoded, i, end, '"', text[i + 1:end - 1] == decoded, *key_span))
            return end
        m = _JSON_BARE.match(text, i)
        if m is None:
            fail(i, "value expected")
        scalars.append(Scalar(path, m.group(0), i, m.end(), "", True, *key_span))
        return m.end()

    start = 1 if text.startswith("\ufeff") else 0
    end = ws(value(start, (), (-1, -1)))
    if end != n:
        fail(end, "extra data")
    return tuple(scalars), keys


# -- TOML --------------------------------------------------------------------------------------

_TOML_TABLE = re.compile(r"[ \t]*(\[\[?)[ \t]*([^\]\n]+?)[ \t]*\]\]?[ \t]*(?:#.*)?$")
_TOML_KEY = re.compile(r"[ \t]*((?:[A-Za-z0-9_-]+|\"[^\"\n]*\"|'[^'\n]*')(?:[ \t]*\.[ \t]*(?:[A-Za-z0-9_-]+|\"[^\"\n]*\"|'[^'\n]*'))*)[ \t]*=[ \t]*")
_TOML_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r\n]+|\#[^\n]*)
      | (?P<mstr>\"\"\"(?:.|\n)*?\"\"\"\"{0,2}|'''(?:.|\n)*?'''\'{0,2})
      | (?P<str>"(?:[^"\\\n]|\\.)*"|'[^'\n]*')
      | (?P<punct>[\[\]{},=])
      | (?P<key>[A-Za-z0-9_.+:-]+)
    """,
    re.VERBOSE,
)


def _toml_key_parts(key: str) -> tuple[str, ...]:
    parts = re.findall(r"\"([^\"]*)\"|'([^']*)'|([A-Za-z0-9_-]+)", key)
    return tuple(a or b or c for a, b, c in parts)


@lru_cache(maxsize=8)
def parse_toml(text: str, path: str = "") -> ConfigDocument:
    try:
        tomllib.loads(text)
        scalars, keys = _toml_scalars(text)
    except (tomllib.TOMLDecodeError, _JsonError, ValueError) as exc:
        return ConfigDocument(
            _blank(text, []), raw=text, path=path, format="toml", parsed=False, error=_first_line(exc),
        )
    return ConfigDocument(_blank(text, []), raw=text, path=path, format="toml", scalars=scalars, keys=keys)


def _toml_string(token: str) -> tuple[str, str, bool]:
    """(value, quote, literal) of a one-line TOML string token."""
    if token[0] == "'":
        return token[1:-1], "'", True
    body = token[1:-1]
    if "\\" not in body:
        return body, '"', True
    try:
        return json.loads(token), '"', False
    except ValueError:  # \U and \e are TOML escapes JSON lacks: the value is not needed exactly
        return body, '"', False


def _toml_scalars(text: str):
    scalars: list[Scalar] = []
    keys: dict[tuple[int, tuple[Key, ...]], tuple[int, int]] = {}
    table: tuple[Key, ...] = ()
    arrays: dict[tuple[Key, ...], int] = {}
    pos = 0
    n = len(text)
    while pos < n:
        line_end = text.find("\n", pos)
        line_end = n if line_end == -1 else line_end
        line = text[pos:line_end]
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            pos = line_end + 1
            continue
        header = _TOML_TABLE.match(line)
        if header is not None and not _TOML_KEY.match(line):
            parts = _toml_key_parts(header.group(2))
            if header.group(1) == "[[":
                arrays[parts] = arrays.get(parts, -1) + 1
                table = (*parts, arrays[parts])
            else:
                table = parts
            keys[0, table] = (pos + header.start(2), pos + header.end(2))
            pos = line_end + 1
            continue
        m = _TOML_KEY.match(line)
        if m is None:
            pos = line_end + 1
            continue
        key_path = (*table, *_toml_key_parts(m.group(1)))
        keys[0, key_path] = (pos + m.start(1), pos + m.end(1))
        pos = _toml_value(text, pos + m.end(), key_path, (pos + m.start(1), pos + m.end(1)), scalars, keys)
        # The rest of the value's last line (a comment) belongs to it.
        nl = text.find("\n", pos)
        pos = n if nl == -1 else nl + 1
    return tuple(scalars), keys


def _toml_value(text: str, i: int, path: tuple[Key, ...], key_span: tuple[int, int], scalars: list[Scalar], keys) -> int:
    """Read one TOML value at ``i`` (a scalar, an array or an inline table); its end offset."""
    m = _TOML_TOKEN.match(text, i)
    while m is not None and m.lastgroup == "ws" and "\n" not in m.group(0):
        i = m.end()
        m = _TOML_TOKEN.match(text, i)
    if m is None:
        raise _JsonError("TOML value expected")
    kind, token = m.lastgroup, m.group(0)
    if kind == "str":
        value, quote, literal = _toml_string(token)
        scalars.append(Scalar(path, value, m.start(), m.end(), quote, literal, *key_span))
        return m.end()
    if kind == "mstr":
        scalars.append(Scalar(path, token.strip("\"'"), m.start(), m.end(), '"""', False, *key_span))
        return m.end()
    if kind == "key":
        scalars.append(Scalar(path, token, m.start(), m.end(), "", True, *key_span))
        return m.end()
    if token == "[":
        i, index = m.end(), 0
        while True:
            i = _skip_toml_ws(text, i)
            if text.startswith("]", i):
                return i + 1
            i = _toml_value(text, i, (*path, index), (-1, -1), scalars, keys)
            index += 1
            i = _skip_toml_ws(text, i)
            if text.startswith(",", i):
                i += 1
    if token == "{":
        i = m.end()
        while True:
            i = _skip_toml_ws(text, i)
            if text.startswith("}", i):
                return i + 1
            k = _TOML_KEY.match(text, i)
            if k is None:
                raise _JsonError("inline table key expected")
            sub = (*path, *_toml_key_parts(k.group(1)))
            keys[0, sub] = (k.start(1), k.end(1))
            i = _toml_value(text, k.end(), sub, (k.start(1), k.end(1)), scalars, keys)
            i = _skip_toml_ws(text, i)
            if text.startswith(",", i):
                i += 1
    raise _JsonError(f"unexpected {token!r} in a TOML value")


def _skip_toml_ws(text: str, i: int) -> int:
    while True:
        m = _TOML_TOKEN.match(text, i)
        if m is None or m.lastgroup != "ws":
            return i
        i = m.end()


# -- INI / cfg ---------------------------------------------------------------------------------

_INI_SECTION = re.compile(r"\[([^\]\n]+)\][ \t]*(?:[#;].*)?$")
_INI_OPTION = re.compile(r"([^=:\s#;\[][^=:\n]*?)[ \t]*[=:][ \t]*")
# An inline comment: `#` or `;` after whitespace (pytest, flake8, tox and most INI readers end
# a value there). Read as part of the value, `backend = nccl  ; multi-node` was never `nccl`.
_INI_INLINE_COMMENT = re.compile(r"[ \t]+[#;]")


def _ini_value(value: str) -> str:
    m = _INI_INLINE_COMMENT.search(value)
    return (value[: m.start()] if m else value).rstrip()


@lru_cache(maxsize=8)
def parse_ini(text: str, path: str = "") -> ConfigDocument:
    try:
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        parser.read_string(text)
    except configparser.Error as exc:
        return ConfigDocument(
            _blank(text, []), raw=text, path=path, format="ini", parsed=False, error=_first_line(exc),
        )
    scalars: list[Scalar] = []
    keys: dict[tuple[int, tuple[Key, ...]], tuple[int, int]] = {}
    section: tuple[Key, ...] = ()
    current: tuple[Key, ...] | None = None
    continuation = 0
    pos = 0
    for line in text.splitlines(keepends=True):
        start = pos
        pos += len(line)
        body = line.rstrip("\r\n")
        stripped = body.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if body[:1] in " \t" and current is not None:
            # A continuation line: one more value of the option above (install_requires = ...).
            first = start + len(body) - len(body.lstrip())
            stripped = _ini_value(stripped)
            scalars.append(Scalar((*current, continuation), stripped, first, first + len(stripped), ""))
            continuation += 1
            continue
        sec = _INI_SECTION.match(body)
        if sec is not None:
            section = (sec.group(1).strip(),)
            keys[0, section] = (start + sec.start(1), start + sec.end(1))
            current = None
            continue
        opt = _INI_OPTION.match(body)
        if opt is None:
            current = None
            continue
        current = (*section, opt.group(1).strip())
        keys[0, current] = (start + opt.start(1), start + opt.end(1))
        value = _ini_value(body[opt.end():])
        if value:
            scalars.append(Scalar(current, value, start + opt.end(), start + opt.end() + len(value), "", True,
                                  start + opt.start(1), start + opt.end(1)))
        continuation = 1 if value else 0
    return ConfigDocument(_blank(text, []), raw=text, path=path, format="ini", scalars=tuple(scalars), keys=keys)
