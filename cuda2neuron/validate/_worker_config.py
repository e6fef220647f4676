"""What one validate worker (reference, golden or port run) is told: a frozen dataclass the parent
builds, sends as JSON in argv and the worker reads back typed.

Torch-free and small on purpose: the parent serialises it before any run starts. Reading is
strict — an unknown key, a missing key or a value of the wrong type is a `WorkerConfigError`
naming the key — so the two sides cannot drift apart the way an untyped dict with `.get(key,
default)` reads did (the worker read keys the parent never sent).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = ["SKIPPED_STEPS_CAP", "Mode", "PortDevice", "Role", "WorkerConfig", "WorkerConfigError"]

Role = Literal["reference", "golden", "port"]
Mode = Literal["entry", "script"]
PortDevice = Literal["neuron", "cpu"]

#: Optimizer steps the original's GradScaler may skip beyond the requested ``steps`` before a run
#: stops short of its taken steps: each skip halves the loss scale, so 16 bring 65536 (the default
#: scale) down to 1; a run still skipping then is overflowing for another reason.
SKIPPED_STEPS_CAP = 16


class WorkerConfigError(ValueError):
    """A worker configuration that does not match `WorkerConfig` (the message names the key)."""


@dataclass(frozen=True)
class WorkerConfig:
    role: Role
    tree: Path  # the tree the run imports from and runs in
    fd: int  # the write end of the record pipe, inherited from the parent
    mode: Mode
    entry: str | None  # module:callable (entry mode)
    script: str | None  # relative to the tree (script mode)
    args: tuple[str, ...]  # the script's own arguments
    steps: int
    seed: int
    port_device: PortDevice  # "cpu" only for tests that run without the emulator
    in_fd: int  # the read end of the pipe the reference's frames come in on (stdin is /dev/null)
    parent: int  # validate's pid: the worker dies with it
    # Port run after an in-place migrate: the migrated text of files the revision lacks, at
    # their paths relative to ``tree`` (imported from here instead of the work tree's copy).
    overlay: Path | None = None
    # False: the logic run — autocast forced off (the original's reduced-precision autocast and the
    # port's alike), compared in float32 with tight bounds.
    autocast: bool = True
    # The logic run: stop once this many steps were taken (the ones the original's GradScaler
    # skipped do not count, their gradients are not compared); None: run all ``steps``.
    taken_steps: int | None = None

    def to_json(self) -> str:
        return json.dumps({f.name: _encode(getattr(self, f.name)) for f in dataclasses.fields(self)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WorkerConfig:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise WorkerConfigError(f"worker config is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise WorkerConfigError(f"worker config must be a JSON object, got {type(data).__name__}")
        hints = typing.get_type_hints(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise WorkerConfigError(f"worker config: unknown key(s) {', '.join(unknown)}")
        missing = [n for n in names if n not in data]
        if missing:
            raise WorkerConfigError(f"worker config: missing key(s) {', '.join(missing)}")
        return cls(**{n: _decode(n, hints[n], data[n]) for n in names})


def _encode(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


def _decode(name: str, hint: Any, value: Any) -> Any:
    """``value`` read from JSON as ``hint``: the types WorkerConfig uses, nothing more."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _decode(name, inner, value)
    if origin is Literal:
        if value not in args:
            raise WorkerConfigError(f"worker config: {name} must be one of {', '.join(map(repr, args))}, got {value!r}")
        return value
    if origin is tuple:
        if not isinstance(value, list):
            raise _wrong(name, "a list", value)
        return tuple(_decode(name, args[0], v) for v in value)
    if hint is Path:
        if not isinstance(value, str):
            raise _wrong(name, "a path string", value)
        return Path(value)
    # An exact type, not isinstance: True is an int to isinstance, and neither it nor 3.0 is a
    # step count.
    if isinstance(hint, type) and type(value) is hint:
        return value
    raise _wrong(name, hint.__name__ if isinstance(hint, type) else str(hint), value)


def _wrong(name: str, expected: str, value: Any) -> WorkerConfigError:
    return WorkerConfigError(f"worker config: {name} must be {expected}, got {type(value).__name__} {value!r}")
