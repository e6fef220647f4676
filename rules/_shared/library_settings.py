"""Library settings that choose CUDA without naming it: the table ``library_settings.toml``.

One table serves three readers (CN627 for Python keywords, CN737 for config keys, CN709 for
launch-script flags), so ``attn_implementation="flash_attention_2"``, ``attn_implementation:
flash_attention_2`` and ``--attn_implementation flash_attention_2`` are one row. A value is
compared after ``normalize``: the readers hand it over as written in their language (``True``,
``true``, ``"True"``), and this module decides what it means.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cuda2neuron.core import Effort, Safety, TextReport, search_unjoined

from .kernels import trainer_optimizers
from .tables import read_table

__all__ = [
    "LibraryCall",
    "LibrarySetting",
    "ListItem",
    "Match",
    "RayResources",
    "gpu_constants",
    "library_calls",
    "library_settings",
    "list_settings",
    "match_setting",
    "member_keys",
    "may_set_in_python",
    "normalize_key",
    "normalize_value",
    "ray_resources",
    "setting_keys",
    "table_markdown",
    "with_table",
]

TABLE = "library_settings.toml"
_WHERE = frozenset({"python", "config", "cli", "notebook", "arglist"})
_TRUE = frozenset({"true", "yes", "on", "1"})
_OFF = frozenset({"", "false", "no", "off", "0", "none", "null", "~"})


@dataclass(frozen=True)
class LibrarySetting:
    """One row ``[setting.<id>]``."""

    id: str
    keys: frozenset[str]
    values: frozenset[str]
    pattern: re.Pattern[str] | None
    any: bool
    values_from: str
    where: frozenset[str]
    what: str
    port: str
    guidance: str
    source: str
    # The file names (globs) a config row is read in; empty: every config. A platform's own
    # file gives a common key its meaning there (cog.yaml's `gpu: true`).
    files: tuple[str, ...] = ()
    spelled: tuple[str, ...] = ()  # the keys as the table writes them (`runsOn`), for the docs
    # The key may hold a list of values or a mapping NAME: COUNT, each member matched on its own
    # (SkyPilot's `accelerators: [V100, A100]`, `{A100: 8}`).
    members: bool = False
    # Keys that, set beside it (the same call or dict, the same config document), mean the user
    # planned what the setting decides: `device_map="auto", max_memory={0: ...}` places the model
    # on neuron:0 (an integer is the current accelerator's index), so only the bare "auto" is reported.
    unless_beside: frozenset[str] = frozenset()

    def planned(self, beside: frozenset[str] | set[str]) -> bool:
        """Whether a key of ``unless_beside`` is among ``beside`` (normalized keys)."""
        return not self.unless_beside.isdisjoint(beside)

    def reads(self, path: str) -> bool:
        """Whether the row is read in the file at ``path``."""
        if not self.files:
            return True
        name = path.replace("\\", "/").rsplit("/", 1)[-1]
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.files)


@dataclass(frozen=True)
class Match:
    """A setting's value that chooses CUDA, and what the neuron target writes there ("" if nothing)."""

    setting: LibrarySetting
    port: str
    what: str
    same_update: bool = True  # False: the port changes the numerics (an unsafe fix)

    def port_report(self, start: int, end: int, message: str, replacement: str, description: str) -> TextReport:
        """The report that writes the port over ``[start, end)``: safe where the update is the
        same, unsafe where the port's optimizer keeps full-precision state (config keys, flags)."""
        return TextReport(
            start, end, message, replacement=replacement,
            safety=Safety.SAFE if self.same_update else Safety.UNSAFE,
            guidance="" if self.same_update else (
                f"`{self.port}` keeps full-precision optimizer state (about four times the memory)"
            ),
            effort=Effort.NONE if self.same_update else Effort.LOW,
            description=description,
        )


@dataclass(frozen=True)
class LibraryCall:
    """One row ``[call.<qualified name>]``: a call that sets up CUDA or NCCL inside the library."""

    name: str
    what: str
    guidance: str
    source: str
    backend: str = ""  # reported only when the call's backend is this one


@dataclass(frozen=True)
class RayResources:
    gpu: str
    neuron: str
    source: str


def _path() -> Path:
    return Path(__file__).with_name(TABLE)


@lru_cache(maxsize=1)
def _table() -> dict:
    return read_table(_path())


def normalize_key(key: str) -> str:
    """``--Flash-Attn`` and ``flash_attn`` are one key."""
    return key.lstrip("-").replace("-", "_").lower()


def normalize_value(value: str) -> str:
    """A value as the table writes it: lower case, unquoted, booleans as ``true``."""
    value = value.strip().strip("'\"").strip().lower()
    return "true" if value in _TRUE else value


@lru_cache(maxsize=1)
def library_settings() -> tuple[LibrarySetting, ...]:
    rows = []
    for ident, row in _table()["setting"].items():
        where = frozenset(row["where"])
        if not where or not where <= _WHERE:
            raise ValueError(f"{TABLE}: setting {ident}: where must be a subset of {sorted(_WHERE)}")
        choosers = [k for k in ("values", "pattern", "any", "values_from") if k in row]
        for option in ("files", "members"):
            if option in row and where != {"config"}:
                raise ValueError(f"{TABLE}: setting {ident}: {option} is only read where = [\"config\"]")
        if len(choosers) != 1:
            raise ValueError(f"{TABLE}: setting {ident}: exactly one of values / pattern / any / values_from")
        rows.append(LibrarySetting(
            id=ident,
            keys=frozenset(normalize_key(k) for k in row["keys"]),
            values=frozenset(row.get("values", ())),
            pattern=re.compile(row["pattern"], re.IGNORECASE) if "pattern" in row else None,
            any=bool(row.get("any", False)),
            values_from=row.get("values_from", ""),
            where=where,
            what=row["what"],
            port=row.get("port", ""),
            guidance=row.get("guidance", ""),
            source=row["source"],
            files=tuple(row.get("files", ())),
            spelled=tuple(row["keys"]),
            members=bool(row.get("members", False)),
            unless_beside=frozenset(normalize_key(k) for k in row.get("unless_beside", ())),
        ))
    return tuple(rows)


@lru_cache(maxsize=1)
def member_keys() -> frozenset[str]:
    """The config keys whose value may be a list or a mapping of members (``members = true``)."""
    return frozenset(k for s in library_settings() if s.members for k in s.keys)


@lru_cache(maxsize=4)
def setting_keys(where: str) -> frozenset[str]:
    """Every key a reader in ``where`` ("python", "config", "cli", "notebook") looks at."""
    return frozenset(k for s in library_settings() if where in s.where for k in s.keys)


def match_setting(key: str, value: str, where: str, path: str = "", member: bool = False) -> Match | None:
    """The row that ``key`` set to ``value`` (as written) matches in ``where``, if any; a row
    with ``files`` only in a file of that name (``path``); with ``member``, ``value`` is one
    member of a list or mapping the key holds, and only rows with ``members`` are read."""
    key = normalize_key(key)
    if key not in setting_keys(where):
        return None
    norm = normalize_value(value)
    for s in library_settings():
        if where not in s.where or key not in s.keys or not s.reads(path) or (member and not s.members):
            continue
        if s.values_from == "trainer_optim":
            row = trainer_optimizers().get(norm)
            if row is not None:
                return Match(s, row.instead, f"makes the Trainer build {row.what}", row.same_update)
        elif s.any:
            if norm not in _OFF:
                return Match(s, s.port, s.what)
        elif s.pattern is not None:
            if s.pattern.fullmatch(norm):
                return Match(s, s.port, s.what)
        elif norm in s.values:
            return Match(s, s.port, s.what)
    return None


# One item of a `key=value` list handed to a program as a single value (lm-evaluation-harness's
# `--model_args pretrained=gpt2,parallelize=True`): items split on commas, each `key=value`, or
# `key: value` beside a `key=value` item (afrobench's "pretrained=${model},parallelize: true").
_ITEM_RE = re.compile(r"(?:^|(?<=,))[ \t]*([A-Za-z_][\w.-]*)[ \t]*(=|:)[ \t]*([^,]*)")


@dataclass(frozen=True)
class ListItem:
    """An item of a ``key=value`` list whose key and value match a row read in such lists."""

    start: int  # the item's span in the list's text
    end: int
    value_start: int  # the value's span
    value_end: int
    key: str
    value: str
    match: Match


def list_settings(text: str, whole: bool = False) -> list[ListItem]:
    """The items of ``text``, a ``key=value,key=value`` list, that a row read in lists matches:
    a row whose ``where`` holds ``arglist`` (a library's own switch that only such lists carry,
    lm-evaluation-harness's ``parallelize``) or ``cli`` (what a command line passes is what its
    list passes: ``attn_implementation=flash_attention_2``, ``load_in_4bit=True``). A text with
    no ``key=value`` item is no list; a value computed at run time (``${MODEL}``) matches nothing.
    With ``whole``, every comma-separated piece must be an item (a Python string is read as a list
    only then: ``"use_accelerate=True,load_in_8bit=True"``, never a sentence that holds one)."""
    if "=" not in text:
        return []
    items = list(_ITEM_RE.finditer(text))
    if not any(m.group(2) == "=" for m in items):
        return []
    if whole and len(items) != text.count(",") + 1:
        return []
    keys = frozenset(normalize_key(m.group(1)) for m in items)
    found: list[ListItem] = []
    for m in items:
        raw = m.group(3).rstrip()
        value = raw.strip("'\"")
        if not value or "$" in value or "{" in value:
            continue
        match = match_setting(m.group(1), value, "arglist") or match_setting(m.group(1), value, "cli")
        if match is None or (match.setting.unless_beside and match.setting.planned(keys)):
            continue
        vs = m.start(3) + (len(raw) - len(raw.lstrip("'\"")))
        found.append(ListItem(m.start(1), m.start(3) + len(raw), vs, vs + len(value), m.group(1), value, match))
    return found


@lru_cache(maxsize=1)
def library_calls() -> dict[str, LibraryCall]:
    return {
        name: LibraryCall(name, row["what"], row["guidance"], row["source"], row.get("backend", ""))
        for name, row in _table()["call"].items()
    }


@lru_cache(maxsize=1)
def ray_resources() -> RayResources:
    row = _table()["ray"]
    return RayResources(row["gpu"], row["neuron"], row["source"])


@lru_cache(maxsize=1)
def gpu_constants() -> tuple[frozenset[str], str, str, str]:
    """(names, what, guidance, source) of ``[constant]``."""
    row = _table()["constant"]
    return frozenset(row["names"]), row["what"], row["guidance"], row["source"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table_markdown(where: str) -> str:
    """The rows read in ``where`` as a Markdown table with their sources (docs/rules.md)."""
    return "\n".join(line[4:] for line in _table_lines(where)).strip() + "\n"


def with_table(doc: str, where: str) -> str:
    """``doc`` (a rule's docstring) with the rows read in ``where`` as a table, and their sources,
    at the end of its *What it does* section (``cuda2neuron rules CODE``)."""
    marker = "\n    ## Why is this bad?"
    head, sep, tail = doc.partition(marker)
    return head.rstrip("\n") + "\n" + "\n".join(_table_lines(where)) + "\n" + sep + tail


def _table_lines(where: str) -> list[str]:
    lines = [
        "",
        f"    The rows (``{TABLE}``, where ``{where}``):",
        "",
        "    | keys | values that choose CUDA | port | source |",
        "    |---|---|---|---|",
    ]
    for s in library_settings():
        if where not in s.where:
            continue
        if s.values_from:
            values = f"the names of ``[{s.values_from}.*]``"
            port = "the row's ``instead``"
        else:
            values = ("any but off" if s.any else f"``{s.pattern.pattern}``" if s.pattern is not None
                      else ", ".join(f"``{v}``" for v in sorted(s.values)))
            port = f"``{s.port}``" if s.port else "reported"
        keys = ", ".join(f"``{k}``" for k in sorted(s.spelled, key=normalize_key))
        if s.files:
            keys += " in " + ", ".join(f"``{f}``" for f in s.files)
        if s.members:
            values += " (or a list / mapping of them)"
        lines.append(f"    | {keys} | {_cell(values)} | {port} | {_cell(s.source)} |")
    if where == "python":
        lines += ["", "    Calls that set up CUDA or NCCL inside the library:", ""]
        lines += [f"    * ``{c.name}``: {c.what} (source: {c.source})" for c in library_calls().values()]
        ray = ray_resources()
        lines += ["", f"    Ray's resource for AWS Neuron cores: ``{ray.neuron}`` (source: {ray.source})."]
    return lines


# Letters (lower-cased), digits and ``_`` kept, ``-`` read as ``_`` (``normalize_key``), every
# other byte a space: the words of the code are then what ``split()`` returns.
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_")
_TO_WORDS = bytes(
    (b if b in _WORD_BYTES else 0x5F if b == 0x2D else 0x20) for b in bytes(range(256)).lower()
)
# Adjacent string literals (``"flash_" "attn"``, across a backslash-continued line too) are one
# value: joined, their pieces form the words a key can be spelled in.
_STRING_JOIN = re.compile(rb"[\"']+\s*(?:\\\r?\n\s*)*[rRuU]?[\"']+")
# An escape can spell any letter of a key ("\x66lash_attn"): such a file is never ruled out.
_LETTER_ESCAPE = re.compile(rb"\\(?:[xuUN0-7])")


@lru_cache(maxsize=1)
def _python_words() -> tuple[dict[bytes, int], tuple[tuple[dict[bytes, int], re.Pattern[bytes] | None], ...]]:
    """(the words that always wake: the roots of the library calls, Ray, the GPU constants;
    per python setting, its keys and its values, None where any value can match).
    Each set of words is lower-cased and kept as ``_spelled`` reads it: without its leading
    ``_``, with how many it had (more are allowed: ``--flash-attn`` is the word ``__flash_attn``)."""

    def whole(words) -> dict[bytes, int]:
        found: dict[bytes, int] = {}
        for word in words:
            key = word.lower().encode()
            core = key.lstrip(b"_")
            found[core] = min(found.get(core, len(key)), len(key) - len(core))
        return found

    always = whole({"ray", *(name.split(".")[0] for name in library_calls()), *gpu_constants()[0]})
    settings = []
    for s in library_settings():
        if "python" not in s.where:
            continue
        values: re.Pattern[bytes] | None = None
        if s.values and not (s.any or s.pattern is not None or s.values_from):
            texts = set()
            for v in s.values:
                texts.update(_TRUE if v == "true" else (v,))
            # Whole, as a literal writes it: `"xformers"`, `True`, `1`; not `use_xformers` (the
            # byte before is read by ``_whole_value``: a look-behind first made the engine try
            # every byte of the file, three times the time).
            alternatives = b"|".join(re.escape(t.encode()) for t in sorted(texts))
            values = re.compile(rb"(?:" + alternatives + rb")(?![a-z0-9_])")
        settings.append((whole(s.keys), values))
    return always, tuple(settings)


@lru_cache(maxsize=1)
def _list_item_keys() -> frozenset[bytes]:
    """The keys of the rows read in ``key=value`` lists (``cli``, ``arglist``), lower case."""
    return frozenset(k.encode() for s in library_settings() if not s.where.isdisjoint(("cli", "arglist")) for k in s.keys)


def _list_item_at(code: bytes, key: bytes) -> bool:
    """Does ``key`` start an item of a ``key=value`` list somewhere in ``code``: after a quote or a
    comma (blanks between), ``=`` or ``:`` after? ``find`` per key the file's words hold: a
    regular expression over all the keys tried every comma of diffusers (0.25 CPU-s)."""
    i = code.find(key)
    while i >= 0:
        before = code[max(0, i - 8):i].rstrip(b" \t")[-1:]
        after = code[i + len(key):i + len(key) + 8].lstrip(b" \t")[:1]
        if before in (b'"', b"'", b",") and after in (b"=", b":"):
            return True
        i = code.find(key, i + 1)
    return False


def may_set_in_python(code: bytes) -> bool:
    """False only where CN627 cannot report on Python ``code`` (comments and docstrings blanked).

    What it reports always spells, in the code, a setting key (a keyword, a dict key, an
    assigned name or an ``add_argument`` flag, compared by ``normalize_key``) beside a value of
    that setting written as a literal, a GPU constant's name, or an import of Ray or of a
    library call's package: this looks for those words among the file's words (runs of
    letters, digits, ``_`` and ``-``, case ignored), and for a value's text in the code.
    """
    if _LETTER_ESCAPE.search(code):
        return True
    lower = code.lower()
    texts = (lower, _STRING_JOIN.sub(b"", lower))
    words = {w for text in texts for w in text.translate(_TO_WORDS).split()}
    # A `key=value,...` string (`model_args="pretrained=gpt2,parallelize=True"`): an item of the
    # rows read in lists starts the string or follows a comma. Not the keys alone as words:
    # diffusers spells `xformers` and `True` in hundreds of files that hold no such list.
    for key in _list_item_keys() & words:
        if _list_item_at(lower, key):
            return True
    # The words that start with ``_``, by what follows their ``_`` (the most ``_`` seen): a key
    # matches them after any number of ``_`` of its own (``--flash-attn`` is ``__flash_attn``).
    underscored: dict[bytes, int] = {}
    for w in words:
        if w[:1] == b"_":
            core = w.lstrip(b"_")
            lead = len(w) - len(core)
            if underscored.get(core, 0) < lead:
                underscored[core] = lead
    always, settings = _python_words()
    if _spelled(always, words, underscored):
        return True
    for keys, values in settings:
        if not _spelled(keys, words, underscored):
            continue
        # A value is compared whole, case ignored: a literal holding it holds it as written.
        if values is None or any(_whole_value(values, text) for text in texts):
            return True
    return False


def _whole_value(values: re.Pattern[bytes], text: bytes) -> bool:
    """Does ``values`` match in ``text`` (lower-cased) where no letter, digit or ``_`` comes before?"""
    return search_unjoined(values, text, _WORD_BYTES)


def _spelled(keys: dict[bytes, int], words: set[bytes], underscored: dict[bytes, int]) -> bool:
    """Is one of ``keys`` a word of the code, with any number of ``_`` before it? ``keys``: each
    key without its leading ``_``, with how many it has (``_attn_implementation`` needs one).

    Set look-ups where a pattern ``^_*(?:key|...)$`` over the words, one per line, was run per
    setting: it tried every byte of them (a third of this test's time on diffusers).
    """
    for core, lead in keys.items():
        if (lead == 0 and core in words) or underscored.get(core, -1) >= lead:
            return True
    return False