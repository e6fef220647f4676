"""A content-addressed cache of per-file results, for `check` and `migrate` run again and again.

A file's result is a pure function of its bytes, its shown path (per-file-ignores, messages),
its kind, the run's configuration and options, and the engine itself. The key hashes all of
them; the engine part is a hash of every source file of the packages that decide a result
(core, python, documents, rules, kinds), so an upgrade or a local edit of a rule invalidates
everything without a version number to remember. Looking a file up costs reading it and one
small read from the cache: neither the rule catalog nor libcst is imported on a warm run.

Entries are written to a temporary file and renamed into place, so concurrent runs (pre-commit
in two terminals, parallel CI jobs sharing a cache) never read a torn entry; an unreadable
entry is a miss. Failed files are not cached: an I/O error or an internal error must be seen
again. Entries are never evicted; `rm -rf ~/.cache/cuda2neuron/results` is always safe.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
from functools import lru_cache
from pathlib import Path

from cuda2neuron.core import Config, FileResult, FileStatus, RunOptions

__all__ = ["ResultCache", "default_cache_root"]

# Bumped when the stored shape changes in a way the engine hash cannot see (pickle layout).
_FORMAT = 1
# The packages whose code decides a file's result.
_ENGINE_PACKAGES = ("cuda2neuron.core", "cuda2neuron.python", "cuda2neuron.documents", "cuda2neuron.rules", "cuda2neuron.kinds")


def default_cache_root() -> Path:
    """``$CUDA2NEURON_RESULTS_CACHE``, else ``results/`` in ``$CUDA2NEURON_CACHE`` or
    ``~/.cache/cuda2neuron`` (where the emulator's build cache lives too)."""
    results = os.environ.get("CUDA2NEURON_RESULTS_CACHE")
    if results:
        return Path(results)
    root = os.environ.get("CUDA2NEURON_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "cuda2neuron") / "results"


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
        key = hashlib.sha256(text.encode()).digest()
        self._last = (config, options, key)
        return key

    def key(self, shown: str, kind: str | None, data: bytes, config: Config, options: RunOptions) -> str:
        h = hashlib.sha256(self._run_key(config, options))
        h.update(f"\0{kind}\0{shown}\0".encode())
        h.update(data)
        return h.hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key[2:]}.pickle"

    def get(self, key: str) -> FileResult | None:
        try:
            with open(self._path(key), "rb") as fh:
                result = pickle.load(fh)
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError, ValueError):
            return None  # missing, torn by a crash before rename (cannot happen), or from another layout
        return result if isinstance(result, FileResult) else None

    def put(self, key: str, result: FileResult) -> None:
        if result.status is FileStatus.FAILED:
            return
        path = self._path(key)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as fh:
                pickle.dump(result, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except OSError:
            # A read-only or full cache costs speed, never a result.
            try:
                tmp.unlink()
            except OSError:
                pass
