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

The folder is the user's alone (``_Folder``): created 0700, and a cache folder or fan-out folder
that is a symlink, belongs to another user or is group/world-writable is refused — the run goes
on without a cache and the command says so once, naming the folder — unless
``CUDA2NEURON_CACHE_SHARED=1`` says it is shared on purpose. Every file in it is opened relative
to the folder's descriptor with ``O_NOFOLLOW``, so no symlink planted inside is ever followed
(another user once made root's next ``check`` overwrite a root-only file through one). The
checksum is an HMAC under a per-user secret: ``$CUDA2NEURON_CACHE_KEY``, else the ``key`` file
(0600) the first run writes in the folder, so an entry forged by someone who cannot read the key
is a miss — for every kind, including the text kinds whose rewrites nothing else re-checks.

A few results read more than the file: the residual pass looks for the modules a file's imports
find beside it (``kinds/_local_imports.py``: ``from nvidia.modeling import ...`` with a folder
``nvidia/`` of the project's). Such a file's key holds only the names looked for (``{"r": [...]}``,
checksummed like any entry), and its result sits under a second key made of the first and what
those names resolve to now, so a folder added or removed is a miss; every other file costs a
warm run nothing more. The residual pass also asks the names the whole project defines
(``ProjectFacts.own_names`` / ``foreign_names``, pooled by the sweep): they are left out of the
run's key, and a file's key (a script's or a config's too: a shell function of the project's
is excused there) holds instead what they answer for the CUDA-worded names the file spells (``kinds.file_words``), so a module that defines such a name changes the keys of the
files that spell it, not every key.

Entries are written to a fresh temporary file (``O_CREAT|O_EXCL|O_NOFOLLOW``, a random name in
the entry's own folder) and renamed into place, so concurrent runs (pre-commit in two
terminals, parallel CI jobs sharing a cache) never read a torn entry. Failed files are not
cached: an I/O error or an internal error must be seen again. Entries are never evicted;
`rm -rf ~/.cache/cuda2neuron/results` is always safe.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import errno
import hashlib
import hmac
import json
import os
import secrets
import stat
from functools import lru_cache
from pathlib import Path
from typing import Any

from cuda2neuron.core import Config, Effort, FileResult, FileStatus, Finding, Fix, RunOptions, Safety, Span
from cuda2neuron.kinds import file_words, found_modules, worded_imports

__all__ = ["CacheRefused", "ResultCache", "default_cache_root"]

# Bumped when the stored shape changes in a way the engine hash cannot see (the JSON layout).
_FORMAT = 3
_MAGIC = b"c2n-result 3 "
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


class CacheRefused(Exception):
    """A cache folder another user could write to: the run goes on without the cache."""


# Set to 1 for a cache folder shared on purpose (a CI cache volume, a group's folder): the owner
# and write-permission checks are off; symlinks are still never followed. Pair it with
# CUDA2NEURON_CACHE_KEY, a secret only the trusted jobs hold.
SHARED_ENV = "CUDA2NEURON_CACHE_SHARED"
KEY_ENV = "CUDA2NEURON_CACHE_KEY"
_KEY_FILE = "key"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW
# O_NONBLOCK: a FIFO planted as an entry or as the key opens at once instead of waiting for a
# writer forever; fstat then says it is no regular file.
_READ_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0)
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW


def _shared() -> bool:
    return os.environ.get(SHARED_ENV, "") not in ("", "0")


def _foreign(st: os.stat_result, what: str, shared: bool) -> str | None:
    """Why a folder (or the key file) of the cache is not the user's own, or None."""
    if shared or not hasattr(os, "geteuid"):
        return None
    if st.st_uid != os.geteuid():
        return f"{what} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"{what} is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


class _Folder:
    """The cache folder, held open: every name in it is opened relative to its descriptor with
    ``O_NOFOLLOW``, so a symlink planted in it (a fan-out folder, an entry, a temporary name)
    is never followed, and renaming the folder away under a run cannot redirect its writes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.shared = _shared()
        if os.open not in os.supports_dir_fd or os.rename not in os.supports_dir_fd:
            # Without names relative to a folder's descriptor (Windows) no symlink check is
            # free of races: no cache there rather than an unsafe one.
            raise OSError(errno.ENOSYS, "no dir_fd support")
        try:
            os.makedirs(root, mode=0o700, exist_ok=True)
            fd = os.open(root, _DIR_FLAGS)
        except OSError as exc:
            if exc.errno == errno.ELOOP or root.is_symlink():
                raise CacheRefused(f"{root} is a symlink") from None
            raise
        self.fd = fd
        try:
            reason = _foreign(os.fstat(fd), str(root), self.shared)
            if reason:
                raise CacheRefused(reason)
            self.secret = self._secret()
        except BaseException:
            os.close(fd)
            raise
        self._fanout: dict[str, int] = {}

    def _secret(self) -> bytes:
        env = os.environ.get(KEY_ENV)
        if env:
            return env.encode("utf-8", "surrogateescape")
        shown = self.root / _KEY_FILE
        try:
            fd = os.open(_KEY_FILE, _NEW_FLAGS, 0o600, dir_fd=self.fd)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(32))
        try:
            fd = os.open(_KEY_FILE, _READ_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            raise CacheRefused(f"{shown} is a symlink" if exc.errno == errno.ELOOP else f"{shown}: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise CacheRefused(f"{shown} is not a regular file")
            reason = _foreign(st, str(shown), self.shared)
            if reason is None and not self.shared and st.st_mode & 0o044:
                reason = f"{shown} is readable by others (mode {stat.S_IMODE(st.st_mode):o})"
            if reason:
                raise CacheRefused(reason)
            secret = fh.read(4097)
        if not 16 <= len(secret) <= 4096:
            # A key another run is still writing reads short: no entry can be checked this run.
            raise OSError(errno.EAGAIN, "the cache key is being written")
        return secret

    def subfolder(self, name: str, create: bool) -> int | None:
        """The descriptor of fan-out folder ``name``; None if it does not exist (and not ``create``)."""
        fd = self._fanout.get(name)
        if fd is not None:
            return fd
        if create:
            try:
                os.mkdir(name, 0o700, dir_fd=self.fd)
            except FileExistsError:
                pass
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise CacheRefused(f"{self.root / name} is a symlink or not a folder") from None
            raise
        reason = _foreign(os.fstat(fd), str(self.root / name), self.shared)
        if reason:
            os.close(fd)
            raise CacheRefused(reason)
        self._fanout[name] = fd
        return fd

    def close(self) -> None:
        for fd in (self.fd, *self._fanout.values()):
            try:
                os.close(fd)
            except OSError:
                pass
        self._fanout = {}


class ResultCache:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root or default_cache_root()
        self._last: tuple[Config, RunOptions, bytes] | None = None
        # The folder, opened on first use; False once it proved unusable (this run goes on without).
        self._folder: _Folder | bool | None = None
        # Why the folder was refused, for the command to say once; None while it is fine.
        self.refused: str | None = None

    def __getstate__(self) -> dict:
        # Workers hash their own copies and open the folder themselves (descriptors do not
        # travel); a forked worker shares the parent's open folder instead, which stays valid.
        return {"root": self.root, "_last": None, "_folder": False if self._folder is False else None,
                "refused": self.refused}

    def __del__(self) -> None:
        folder = getattr(self, "_folder", None)
        if isinstance(folder, _Folder):
            folder.close()

    def folder(self) -> _Folder | None:
        """The open cache folder, or None when it cannot be used (``refused`` says why, when that
        is a safety matter rather than a missing or read-only disk)."""
        if self._folder is None:
            try:
                self._folder = _Folder(self.root)
            except CacheRefused as exc:
                self.refused = str(exc)
                self._folder = False
            except OSError:
                self._folder = False  # a read-only or full disk costs speed, never a result
        return self._folder or None

    def _refuse(self, exc: CacheRefused) -> None:
        self.refused = str(exc)
        folder = self._folder
        if isinstance(folder, _Folder):
            folder.close()
        self._folder = False

    def _run_key(self, config: Config, options: RunOptions) -> bytes:
        # One Config and RunOptions serve a whole run: hash them once. The objects are kept,
        # so an identity check cannot be fooled by a reused id.
        last = self._last
        if last is not None and last[0] is config and last[1] is options:
            return last[2]
        # The project's pooled names are keyed per file, by the names each file spells (``key``).
        project = dataclasses.replace(config.settings.project, own_names=frozenset(), foreign_names=frozenset())
        keyed = dataclasses.replace(config, settings=dataclasses.replace(config.settings, project=project))
        text = json.dumps([engine_fingerprint(), _canonical(keyed), _canonical(options)], sort_keys=True)
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
        self._last = (config, options, key)
        return key

    def key(self, shown: str, kind: str | None, data: bytes, config: Config, options: RunOptions) -> str:
        h = hashlib.sha256(self._run_key(config, options))
        h.update(b"\0" + str(kind).encode() + b"\0" + _path_bytes(shown) + b"\0")
        h.update(data)
        facts = config.settings.project
        if kind is not None and (facts.own_names or facts.foreign_names):
            # The residual pass asks the project's pooled names (``kinds/_project_names.py``) about
            # the names the file spells: the answers are part of the key, so a warm run sees a
            # name defined, removed or imported from outside in another module.
            spelled = file_words(data)
            own = sorted(spelled & facts.own_names) + sorted(
                m for m in facts.own_names if "." in m and m.split(".", 1)[1] in spelled
            )
            h.update(b"\0own\0" + "\0".join(own).encode() + b"\0foreign\0")
            h.update("\0".join(sorted(spelled & facts.foreign_names)).encode())
        return h.hexdigest()

    @staticmethod
    def _beside(key: str, found: frozenset[str]) -> str:
        """The key of a file's entry once its worded imports resolved to ``found``."""
        return hashlib.sha256(f"{key}\0local-modules\0{','.join(sorted(found))}".encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key[2:]}.json"

    def _checksum(self, key: str, payload: bytes) -> bytes:
        """An HMAC under the user's secret: only who can read the key can make an entry pass."""
        folder = self.folder()
        if folder is None:
            raise _Invalid
        h = hmac.new(folder.secret, b"c2n-result\0" + engine_fingerprint().encode() + b"\0" + key.encode() + b"\0",
                     hashlib.sha256)
        h.update(payload)
        return h.hexdigest().encode()

    def get(self, key: str, shown: str | None = None, data: bytes | None = None) -> FileResult | None:
        """The cached result for ``key``, or None — for a missing entry and for *any* entry that
        is not exactly what ``put`` wrote for this key and engine. ``shown`` and ``data`` (the
        path and bytes the key was made of) fill in what an entry does not store."""
        raw = self._read(key)
        if raw is None:
            return None
        try:
            payload = self._verified(key, raw)
            if payload.startswith(_BESIDE):
                # The result read the folders around the file (kinds/_local_imports.py): it is kept
                # under what the file's worded imports resolve to now, so a changed folder is a miss.
                if shown is None:
                    return None
                sub = self._beside(key, found_modules(shown, _decode_names(payload)))
                raw = self._read(sub)
                if raw is None:
                    return None
                payload = self._verified(sub, raw)
            return _decode(payload, shown, data)
        except (_Invalid, ValueError, TypeError, KeyError, IndexError, AttributeError, UnicodeError,
                binascii.Error, RecursionError, MemoryError, OverflowError):
            return None

    def _read(self, key: str) -> bytes | None:
        folder = self.folder()
        if folder is None:
            return None
        try:
            sub = folder.subfolder(key[:2], create=False)
            if sub is None:
                return None
            fd = os.open(f"{key[2:]}.json", _READ_FLAGS, dir_fd=sub)
        except CacheRefused as exc:
            self._refuse(exc)
            return None
        except OSError:
            return None
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None  # a FIFO, a device: never read
            return fh.read(_MAX_ENTRY + 1)

    def _verified(self, key: str, raw: bytes) -> bytes:
        if len(raw) > _MAX_ENTRY or not raw.startswith(_MAGIC):
            raise _Invalid
        header_end = raw.find(b"\n", len(_MAGIC))
        if header_end != len(_MAGIC) + 64:
            raise _Invalid
        payload = raw[header_end + 1 :]
        if not hmac.compare_digest(raw[len(_MAGIC) : header_end], self._checksum(key, payload)):
            raise _Invalid
        return payload

    def put(self, key: str, result: FileResult, kind: str | None = None, data: bytes | None = None) -> None:
        """Store ``result`` under ``key``; a file whose imports were looked for beside it (``kind``
        and ``data`` say: ``kinds.worded_imports``) is stored under what they resolve to, and
        ``key`` holds their names."""
        if result.status is FileStatus.FAILED:
            return
        if self.folder() is None:
            return
        payload = json.dumps(_encode(result), separators=(",", ":")).encode("utf-8", "surrogatepass")
        names = worded_imports(kind, data) if data is not None else ()
        if names:
            self._write(key, _BESIDE + json.dumps(list(names), separators=(",", ":")).encode() + b"}")
            key = self._beside(key, found_modules(result.path, names))
        self._write(key, payload)

    def _write(self, key: str, payload: bytes) -> None:
        folder = self.folder()
        if folder is None:
            return
        name = f"{key[2:]}.json"
        tmp = None
        sub = None
        try:
            sub = folder.subfolder(key[:2], create=True)
            if sub is None:
                return
            # A fresh random name, created exclusively and never through a link: a name planted
            # in advance (a symlink to a file of the user's) makes this attempt fail, not write there.
            tmp = f".{name}.{secrets.token_hex(8)}.tmp"
            fd = os.open(tmp, _NEW_FLAGS, 0o600, dir_fd=sub)
            with os.fdopen(fd, "wb") as fh:
                fh.write(_MAGIC + self._checksum(key, payload) + b"\n" + payload)
            os.rename(tmp, name, src_dir_fd=sub, dst_dir_fd=sub)  # POSIX: replaces atomically
        except CacheRefused as exc:
            self._refuse(exc)
        except (OSError, _Invalid):
            # A read-only or full cache costs speed, never a result.
            if tmp is not None and sub is not None:
                try:
                    os.unlink(tmp, dir_fd=sub)
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


# An entry that names a file's worded imports: {"r":["nvidia","turing"]}.
_BESIDE = b'{"r":'


def _decode_names(payload: bytes) -> tuple[str, ...]:
    obj = json.loads(payload)
    if type(obj) is not dict or set(obj) != {"r"} or type(obj["r"]) is not list or len(obj["r"]) > 1024:
        raise _Invalid
    names = tuple(_str(n) for n in obj["r"])
    if not all(n.isidentifier() for n in names):
        raise _Invalid
    return names


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
