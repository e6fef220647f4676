"""A content-addressed cache of per-file results, for `check` and `migrate` run again and again.

A file's result is a pure function of its bytes, its shown path (per-file-ignores, messages),
its kind, the run's configuration and options, and the engine itself. The key hashes all of
them; the engine part is a hash of every source file of the packages that decide a result
(core, python, documents, rules, kinds), so an upgrade or a local edit of a rule invalidates
everything without a version number to remember. Looking a file up costs reading it and one
small read from the cache: neither the rule catalog nor libcst is imported on a warm run.

Where: ``$CUDA2NEURON_RESULTS_CACHE``, else ``results/`` inside the first of
``$CUDA2NEURON_CACHE``, ``$XDG_CACHE_HOME/cuda2neuron`` and ``~/.cache/cuda2neuron``.

The cache folder is input, not code. A shared or restored CI cache can be written by others, so
an entry is **plain data**: a header with a checksum, then JSON (``_encode``/``_decode``), read
back through a strict schema into the frozen result types — nothing in it is ever executed
(the first version stored pickles: a crafted entry ran code in every later run). The checksum
covers the engine's fingerprint, the entry's key and its payload, so a torn, truncated, bit-
flipped or misplaced entry (copied under another key) is a miss, as is any entry that fails
to decode for any reason (wrong types, absurd sizes, deep nesting): a miss costs one file's
processing, never the run. The checksum is not a secret, so it cannot stop someone who may
write the cache from writing a well-formed entry; what such an entry could still change is
bounded by the callers: a cached rewrite is compiled like a fresh one before it is written
(``workspace._runner``), so no entry can make migrate write a file that does not compile.

Entries are written to a temporary file and renamed into place, so concurrent runs (pre-commit
in two terminals, parallel CI jobs sharing a cache) never read a torn entry. Failed files are
not cached: an I/O error or an internal error must be seen again. Entries are never evicted;
`rm -rf ~/.cache/cuda2neuron/results` is always safe.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from cuda2neuron.core import Config, Effort, FileResult, FileStatus, Finding, Fix, RunOptions, Safety, Span

__all__ = ["ResultCache", "default_cache_root"]

# Bumped when the stored shape changes in a way the engine hash cannot see (the JSON layout).
_FORMAT = 2
_MAGIC = b"c2n-result 2 "
# No entry of a real file comes near this; a bigger one is not read at all.
_MAX_ENTRY = 64 << 20
# The packages whose code decides a file's result.
_ENGINE_PACKAGES = ("cuda2neuron.core", "cuda2neuron.python", "cuda2neuron.documents", "cuda2neuron.rules", "cuda2neuron.kinds")


def default_cache_root() -> Path:
    """``$CUDA2NEURON_RESULTS_CACHE``; else ``results/`` in ``$CUDA2NEURON_CACHE``, in
    ``$XDG_CACHE_HOME/cuda2neuron``, or in ``~/.cache/cuda2neuron`` (the first one set).

    The emulator's build cache uses the same root (``backend/_build.py``).
    """
    results = os.environ.get("CUDA2NEURON_RESULTS_CACHE")
    if results:
        return Path(results)
    root = os.environ.get("CUDA2NEURON_CACHE")
    if root:
        return Path(root) / "results"
    xdg = os.environ.get("XDG_CACHE_HOME")
    # The XDG spec: a relative path in XDG_CACHE_HOME is invalid and must be ignored.
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "cuda2neuron" / "results"
    return Path.home() / ".cache" / "cuda2neuron" / "results"


@lru_cache(maxsize=1)
def engine_fingerprint() -> str:
    """A hash of the engine's own sources (and data files such as the catalog's TOML tables)."""
    from importlib.util import find_spec

    h = hashlib.sha256(f"format {_FORMAT}".encode())
    for package in _ENGINE_PACKAGES:
        spec = find_spec(package)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            for path in sorted(Path(folder).rglob("*")):
                if path.suffix in (".py", ".toml") and "__pycache__" not in path.parts:
                    h.update(path.relative_to(folder).as_posix().encode())
                    h.update(path.read_bytes())
    return h.hexdigest()


def _canonical(value: object) -> object:
    """A JSON-able form of configuration data whose text does not depend on set order."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (set, frozenset)):
        return sorted((_canonical(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    return value


def _path_bytes(shown: str) -> bytes:
    # A file name that is not UTF-8 (``caf\xe9.py``) reaches us as surrogate escapes: its bytes
    # are the name, and encoding it strictly raised UnicodeEncodeError on every cached run.
    return os.fsencode(shown) if os.name != "nt" else shown.encode("utf-8", "surrogatepass")


class _Invalid(Exception):
    """An entry that does not have the shape of a result: a miss."""


class ResultCache:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root or default_cache_root()
        self._last: tuple[Config, RunOptions, bytes] | None = None

    def __getstate__(self) -> dict:
        return {"root": self.root, "_last": None}  # workers hash their own copies

    def _run_key(self, config: Config, options: RunOptions) -> bytes:
        # One Config and RunOptions serve a whole run: hash them once. The objects are kept,
        # so an identity check cannot be fooled by a reused id.
        last = self._last
        if last is not None and last[0] is config and last[1] is options:
            return last[2]
        text = json.dumps([engine_fingerprint(), _canonical(config), _canonical(options)], sort_keys=True)
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
        self._last = (config, options, key)
        return key

    def key(self, shown: str, kind: str | None, data: bytes, config: Config, options: RunOptions) -> str:
        h = hashlib.sha256(self._run_key(config, options))
        h.update(b"\0" + str(kind).encode() + b"\0" + _path_bytes(shown) + b"\0")
        h.update(data)
        return h.hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key[2:]}.json"

    @staticmethod
    def _checksum(key: str, payload: bytes) -> bytes:
        h = hashlib.sha256(b"c2n-result\0" + engine_fingerprint().encode() + b"\0" + key.encode() + b"\0")
        h.update(payload)
        return h.hexdigest().encode()

    def get(self, key: str, shown: str | None = None, data: bytes | None = None) -> FileResult | None:
        """The cached result for ``key``, or None — for a missing entry and for *any* entry that
        is not exactly what ``put`` wrote for this key and engine. ``shown`` and ``data`` (the
        path and bytes the key was made of) fill in what an entry does not store."""
        try:
            with open(self._path(key), "rb") as fh:
                raw = fh.read(_MAX_ENTRY + 1)
        except OSError:
            return None
        try:
            return _decode(self._verified(key, raw), shown, data)
        except (_Invalid, ValueError, TypeError, KeyError, IndexError, AttributeError, UnicodeError,
                binascii.Error, RecursionError, MemoryError, OverflowError):
            return None

    def _verified(self, key: str, raw: bytes) -> bytes:
        if len(raw) > _MAX_ENTRY or not raw.startswith(_MAGIC):
            raise _Invalid
        header_end = raw.find(b"\n", len(_MAGIC))
        if header_end != len(_MAGIC) + 64:
            raise _Invalid
        payload = raw[header_end + 1 :]
        if raw[len(_MAGIC) : header_end] != self._checksum(key, payload):
            raise _Invalid
        return payload

    def put(self, key: str, result: FileResult) -> None:
        if result.status is FileStatus.FAILED:
            return
        path = self._path(key)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        payload = json.dumps(_encode(result), separators=(",", ":")).encode("utf-8", "surrogatepass")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as fh:
                fh.write(_MAGIC + self._checksum(key, payload) + b"\n" + payload)
            os.replace(tmp, path)
        except OSError:
            # A read-only or full cache costs speed, never a result.
            try:
                tmp.unlink()
            except OSError:
                pass


# -- the entry's JSON -------------------------------------------------------------------------
# {"p": path, "s": status, "f": [finding, ...], "n": new bytes (base64) or null, "k": skip reason}
# finding: [code, name, message, path or null (the file's own), [l, c, l, c], fix or null,
#           applied, guidance, effort]; fix: [safety, replacement, description]
# The file's old bytes are not stored: they are the bytes the key was made of.


def _encode(result: FileResult) -> dict[str, Any]:
    return {
        "p": result.path,
        "s": result.status.value,
        "f": [_encode_finding(f, result.path) for f in result.findings],
        "n": None if result.new_bytes is None else base64.b64encode(result.new_bytes).decode("ascii"),
        "k": result.skip_reason,
    }


def _encode_finding(f: Finding, path: str) -> list[Any]:
    s = f.span
    fix = None if f.fix is None else [f.fix.safety.value, f.fix.replacement, f.fix.description]
    return [f.code, f.name, f.message, None if f.path == path else f.path,
            [s.start_line, s.start_col, s.end_line, s.end_col], fix, f.applied, f.guidance, f.effort.value]


def _str(value: object) -> str:
    if type(value) is not str:
        raise _Invalid
    return value


def _int(value: object) -> int:
    # Exact type: True is an int to isinstance; a line is never negative nor astronomically big.
    if type(value) is not int or not 0 <= value < 1 << 31:
        raise _Invalid
    return value


def _bool(value: object) -> bool:
    if type(value) is not bool:
        raise _Invalid
    return value


def _decode(payload: bytes, shown: str | None, data: bytes | None) -> FileResult:
    obj = json.loads(payload)
    if type(obj) is not dict or set(obj) != {"p", "s", "f", "n", "k"}:
        raise _Invalid
    status = FileStatus(_str(obj["s"]))
    if status is FileStatus.FAILED:
        raise _Invalid  # never written: a failure must be seen again
    path = _str(obj["p"])
    if shown is not None and path != shown:
        raise _Invalid
    findings = obj["f"]
    if type(findings) is not list:
        raise _Invalid
    new = obj["n"]
    new_bytes = None if new is None else base64.b64decode(_str(new), validate=True)
    if (new_bytes is not None) != (status is FileStatus.CHANGED):
        raise _Invalid
    return FileResult(
        path,
        status,
        findings=tuple(_decode_finding(f, path) for f in findings),
        new_bytes=new_bytes,
        old_bytes=data if status is FileStatus.CHANGED else None,
        skip_reason=_str(obj["k"]),
    )


def _decode_finding(item: object, path: str) -> Finding:
    if type(item) is not list or len(item) != 9:
        raise _Invalid
    code, name, message, own_path, span, fix, applied, guidance, effort = item
    if type(span) is not list or len(span) != 4:
        raise _Invalid
    fix_value = None
    if fix is not None:
        if type(fix) is not list or len(fix) != 3:
            raise _Invalid
        fix_value = Fix(Safety(_str(fix[0])), _str(fix[1]), _str(fix[2]))
    return Finding(
        code=_str(code),
        name=_str(name),
        message=_str(message),
        path=path if own_path is None else _str(own_path),
        span=Span(*(_int(v) for v in span)),
        fix=fix_value,
        applied=_bool(applied),
        guidance=_str(guidance),
        effort=Effort(_str(effort)),
    )
