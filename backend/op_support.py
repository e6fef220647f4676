"""TorchNeuron's op-support classes on the emulated device: N ops fail, CPU_FALLBACK ops run on the host.

The emulator runs every op the CPU can run. TorchNeuron does not: its compatibility table marks an
op N (not supported: it fails on the device) or CPU_FALLBACK (eager mode runs it on the host and
copies the result back). ``op_support.toml`` beside this file holds those rows with their sources;
``CUDA2NEURON_OP_SUPPORT`` names another table in the same format (the real one, once it can be
read: a data change). On activation every row's op gets a PrivateUse1 kernel of its own:

* N: raises ``NotImplementedError`` naming the op, its source and the user's line.
* CPU_FALLBACK: copies the arguments to the host, runs the op there and copies the result back,
  as TorchNeuron does, and records the op and the user's line: ``fallback_ops()`` (what
  ``torch_neuronx.get_fallback_ops()`` returns under the emulator) and validate's residency audit
  ("would run on the host on Trainium") read them.

Trap: a row's kernel replaces the device's boxed fallback for that op only; in-place and ``out=``
overloads write the host result back into the device tensors they were given.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["OpSupport", "OpSupportError", "TABLE_ENV", "clear", "fallback_ops", "install", "load_table", "table_ops"]

TABLE_ENV = "CUDA2NEURON_OP_SUPPORT"
STATUSES = ("N", "CPU_FALLBACK")
_MAX_LOCATIONS = 4


class OpSupportError(ValueError):
    """The op-support table is malformed (names the file and the row)."""


@dataclass(frozen=True)
class OpSupport:
    op: str  # "aten::name"
    status: str  # "N" or "CPU_FALLBACK"
    source: str
    note: str = ""


def load_table(path: Path | None = None) -> tuple[OpSupport, ...]:
    """The rows of ``path`` (default: ``$CUDA2NEURON_OP_SUPPORT`` or the shipped table)."""
    if path is None:
        path = Path(os.environ.get(TABLE_ENV) or Path(__file__).with_name("op_support.toml"))
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise OpSupportError(f"{path}: cannot read the op-support table: {exc}") from exc
    rows = []
    for op, row in raw.get("op", {}).items():
        where = f'{path}: [op."{op}"]'
        if not op.startswith("aten::") or not isinstance(row, dict):
            raise OpSupportError(f"{where}: expected an aten op name (aten::NAME) with a table of keys")
        unknown = set(row) - {"status", "source", "note"}
        if unknown:
            raise OpSupportError(f"{where}: unknown key(s) {sorted(unknown)}")
        if row.get("status") not in STATUSES:
            raise OpSupportError(f"{where}: status must be one of {', '.join(STATUSES)}, got {row.get('status')!r}")
        if not isinstance(row.get("source"), str) or not row["source"].strip():
            raise OpSupportError(f"{where}: every row needs its source")
        rows.append(OpSupport(op, row["status"], row["source"], str(row.get("note", ""))))
    return tuple(rows)


_lock = threading.Lock()
_fallbacks: dict[str, list[Any]] = {}  # op -> [count, [locations]], since the last clear()
# The same since the process started: validate's audit reads these, whatever the port clears
# with torch_neuronx.clear_op_tracking().
_all_fallbacks: dict[str, list[Any]] = {}
_libraries: list[Any] = []  # kept alive: a torch.library.Library unregisters when collected
_table_ops: frozenset[str] = frozenset()  # the ops install() gave a kernel of the table's


def fallback_ops(*, since_clear: bool = True) -> dict[str, tuple[int, tuple[str, ...]]]:
    """CPU_FALLBACK ops run since the last ``clear()`` (or, ``since_clear=False``, since the
    process started): op -> (count, user lines)."""
    with _lock:
        table = _fallbacks if since_clear else _all_fallbacks
        return {op: (int(c), tuple(locs)) for op, (c, locs) in sorted(table.items())}


def table_ops() -> frozenset[str]:
    """The ops (``aten::name``) the installed table marks N or CPU_FALLBACK: they do not execute on
    the device (``torch_neuronx.get_executed_ops()`` leaves them out)."""
    return _table_ops


def clear() -> None:
    with _lock:
        _fallbacks.clear()


def _user_line() -> str:
    """``file.py:LINE`` of the innermost frame outside torch and cuda2neuron."""
    import torch

    import cuda2neuron

    # torch's frames, the emulator's and validate's (the package folders, not the checkout: the
    # backend folder sits at the top of the repository, beside a user's test projects).
    skip = (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
            os.path.dirname(os.path.abspath(__file__)) + os.sep,
            os.path.dirname(os.path.abspath(cuda2neuron.__file__)) + os.sep)
    frame = sys._getframe(2)
    while frame is not None:
        name = os.path.abspath(frame.f_code.co_filename)
        if not name.startswith(skip) and not frame.f_code.co_filename.startswith("<"):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


def _record(op: str) -> None:
    where = _user_line()
    with _lock:
        for table in (_fallbacks, _all_fallbacks):
            entry = table.setdefault(op, [0, []])
            entry[0] += 1
            if where and where not in entry[1] and len(entry[1]) < _MAX_LOCATIONS:
                entry[1].append(where)


def _unsupported(row: OpSupport):
    def kernel(*args: Any, **kwargs: Any) -> Any:
        where = _user_line()
        raise NotImplementedError(
            f"neuron: {row.op} is not supported on Trainium (N in the op-support table: {row.source})"
            + (f"; called at {where}" if where else "")
            + ". Keep this op on the CPU or replace it; the emulator refuses it as the device does."
        )

    return kernel


def _host_fallback(row: OpSupport, overload: Any):
    # Arguments the op writes (in-place self, out=): their host copies are copied back.
    written = {a.name for a in overload._schema.arguments if a.alias_info is not None and a.alias_info.is_write}

    def kernel(*args: Any, **kwargs: Any) -> Any:
        import torch
        from torch.utils._pytree import tree_map

        _record(row.op)
        copies: dict[int, Any] = {}  # id(host copy) -> the device tensor it stands for

        def to_host(a: Any) -> Any:
            if isinstance(a, torch.Tensor) and a.device.type == "neuron":
                host = a.cpu()
                copies[id(host)] = a
                return host
            return a

        host_args, host_kwargs = tree_map(to_host, args), tree_map(to_host, kwargs)
        out = overload(*host_args, **host_kwargs)
        names = [a.name for a in overload._schema.arguments]
        given = {**dict(zip(names, host_args)), **host_kwargs}
        for name in written:
            host = given.get(name)
            if isinstance(host, torch.Tensor) and id(host) in copies:
                copies[id(host)].copy_(host)
        device = next(iter(copies.values())).device if copies else torch.device("neuron")

        def back(r: Any) -> Any:
            if isinstance(r, torch.Tensor) and r.device.type == "cpu":
                return copies[id(r)] if id(r) in copies else r.to(device)
            return r

        return tree_map(back, out)

    return kernel


def install() -> None:
    """Register the table's kernels on the device (once per process; activate() calls it)."""
    if _libraries:
        return
    import torch

    rows = load_table()
    if not rows:
        return
    global _table_ops
    lib = torch.library.Library("aten", "IMPL")
    _table_ops = frozenset(row.op for row in rows)
    for row in rows:
        name = row.op.removeprefix("aten::")
        packet = getattr(torch.ops.aten, name, None)
        if packet is None:
            continue  # an op this torch does not have
        for overload_name in packet.overloads():
            overload = getattr(packet, overload_name)
            qualified = name if overload_name == "default" else f"{name}.{overload_name}"
            kernel = _unsupported(row) if row.status == "N" else _host_fallback(row, overload)
            lib.impl(qualified, kernel, "PrivateUse1")
    _libraries.append(lib)
