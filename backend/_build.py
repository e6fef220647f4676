"""Build and load the C++ part of the emulated neuron device.

The extension is compiled against the installed torch (its binary works only with the exact torch
it was built for), so the cache key is (torch version, Python ABI, source hash). Two processes may
build at once (pytest-xdist, torchrun workers): a file lock serialises them and the second one
finds the finished library.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import sys
import sysconfig
import time
from pathlib import Path
from types import ModuleType

__all__ = ["BackendBuildError", "build", "cache_dir", "cached_library", "can_build"]

_CSRC = Path(__file__).with_name("csrc")
# Several translation units so ninja can use every core (each needs ~2 GB of compiler memory).
_SOURCES = ("allocator.cpp", "device.cpp", "fallback.cpp", "kernels.cpp", "rnn.cpp", "autocast.cpp",
            "accounting.cpp", "module.cpp")
_HEADERS = ("neuron.h", "accounting.h")


class BackendBuildError(RuntimeError):
    """The neuron emulator's C++ extension could not be built or loaded."""


def _torch_version() -> str:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError as exc:
        raise BackendBuildError("the neuron emulator needs torch installed (pip install 'cuda2neuron[validate]')") from exc


def _source_hash() -> str:
    h = hashlib.sha256()
    for name in _SOURCES + _HEADERS:
        h.update(name.encode())
        h.update((_CSRC / name).read_bytes())
    return h.hexdigest()[:16]


def _key() -> str:
    abi = sysconfig.get_config_var("SOABI") or f"py{sys.version_info.major}{sys.version_info.minor}"
    return f"torch-{_torch_version()}-{abi}-{_source_hash()}"


def _module_name() -> str:
    # Fixed, so ninja's incremental build (shared build folder) recompiles only changed files;
    # the cache folder, not the name, tells versions apart (one process loads only one).
    return "cuda2neuron_neuron"


def cache_dir() -> Path:
    """Folder of the compiled extension for this torch, Python and source."""
    root = os.environ.get("CUDA2NEURON_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "cuda2neuron"
    return base / "backend" / _key()


def cached_library() -> Path | None:
    """The compiled library if it is already in the cache, else None."""
    d = cache_dir()
    lib = d / (_module_name() + ".so")
    return lib if lib.is_file() else None


def _compiler() -> str | None:
    cxx = os.environ.get("CXX", "c++")
    return shutil.which(cxx) or shutil.which("g++") or shutil.which("clang++")


def can_build() -> bool:
    """True when a C++ compiler and ninja are on this machine (no side effects)."""
    try:
        import ninja  # noqa: F401  (the pip package ships the binary)
        has_ninja = True
    except ImportError:
        has_ninja = shutil.which("ninja") is not None
    return _compiler() is not None and has_ninja


def _import_library(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(_module_name(), path)
    if spec is None or spec.loader is None:
        raise BackendBuildError(f"{path}: not a loadable extension")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _FileLock:
    """An exclusive lock on a file (fcntl) held while building; released even on error."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None

    def __enter__(self) -> _FileLock:
        import fcntl

        self._fd = os.open(self._path, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        import fcntl

        assert self._fd is not None
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)


_loaded: ModuleType | None = None


def build(*, verbose: bool = False) -> ModuleType:
    """Compile (if not cached) and load the extension; returns the loaded module.

    Loading it registers the C++ parts of the device (allocator, guard, kernels, fallback) with
    torch: callers that only want the library built should run this in a subprocess
    (``python -m cuda2neuron.backend build``).
    """
    global _loaded
    if _loaded is not None:
        return _loaded
    import torch  # noqa: F401  (the extension links against the loaded libtorch)

    lib = cached_library()
    if lib is None:
        d = cache_dir()
        d.mkdir(parents=True, exist_ok=True)
        with _FileLock(d.parent / ".lock"):
            lib = cached_library()
            if lib is None:
                # cpp_extension.load already imported the fresh build: loading the cached copy as
                # well would register every kernel twice (a hard error in the dispatcher).
                _loaded = _compile(d, verbose=verbose)
                return _loaded
    try:
        _loaded = _import_library(lib)
    except ImportError as exc:
        raise BackendBuildError(f"{lib}: could not load the neuron emulator library ({exc}); "
                                f"delete {lib.parent} and rebuild") from exc
    return _loaded


def _compile(d: Path, *, verbose: bool) -> ModuleType:
    if not can_build():
        raise BackendBuildError(
            "building the neuron emulator needs a C++ compiler (g++ or clang++, or set CXX) and ninja "
            "(pip install ninja); none was found on PATH")
    from torch.utils import cpp_extension

    print(f"cuda2neuron: building the neuron emulator for torch {_torch_version()} into {d} "
          f"(once per torch version, about a minute)...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    build_dir = d.parent / f"build-{d.name.rsplit('-', 1)[0]}"
    build_dir.mkdir(exist_ok=True)
    try:
        module = cpp_extension.load(
            name=_module_name(),
            sources=[str(_CSRC / s) for s in _SOURCES],
            # NDEBUG as in libtorch itself: inline debug-only asserts in torch headers (e.g.
            # RecordFunction::inputs) would otherwise fire in the extension.
            extra_cflags=["-O2", "-g0", "-DNDEBUG"],
            build_directory=str(build_dir),
            verbose=verbose,
        )
    except Exception as exc:  # compiler errors arrive as RuntimeError/CalledProcessError
        errors = [ln for ln in str(exc).splitlines() if "error" in ln.lower()][:10]
        detail = "\n".join(errors) or str(exc)[-2000:]
        raise BackendBuildError(f"building the neuron emulator in {build_dir} failed:\n{detail}") from exc
    built = build_dir / (_module_name() + ".so")
    if not built.is_file():
        raise BackendBuildError(f"{built}: the build finished but produced no library")
    target = d / built.name
    tmp = d / (built.name + f".tmp{os.getpid()}")
    shutil.copy2(built, tmp)
    os.replace(tmp, target)  # atomic: a concurrent reader never sees half a library
    print(f"cuda2neuron: neuron emulator built in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return module
