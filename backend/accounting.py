"""Op accounting on the emulated neuron device.

Counts the aten ops a program runs on the device and those it leaves on the CPU, with the user's
source locations of the CPU ones and of the device ops on float64 / complex data — the
validation command uses it to flag ports that forgot to move work to the device. Off by
default; when on, counting happens in C++ (a global RecordFunction callback) and Python frames
are captured only for the first few occurrences of each CPU (or float64 / complex) op. Only outermost ops are counted (ops a kernel calls
internally are not).

    from cuda2neuron.backend.accounting import OpAccounting
    with OpAccounting() as acc:
        train_step()
    report = acc.report()

Work that is the caller's own, not the program's (copying a tensor to the host to record it,
drawing reference random numbers on the CPU), can be left out of the counts with
:func:`paused` (or ``acc.paused()``); ``OpAccounting(skip_paths=...)`` makes the caller's own
wrappers invisible in the CPU ops' source locations, as torch's frames are.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType

__all__ = ["AccountingReport", "CpuOp", "OpAccounting", "paused"]


@dataclass(frozen=True)
class CpuOp:
    """One aten op that ran on CPU tensors: how often, on how many elements, and from where."""

    op: str
    count: int
    elements: int
    locations: tuple[str, ...]


@dataclass(frozen=True)
class AccountingReport:
    device_ops: int
    device_elements: int
    cpu_ops: int
    cpu_elements: int
    float64_ops: int
    complex_ops: int
    cpu_op_details: tuple[CpuOp, ...]
    # The device ops that ran on float64 / complex data, per op with their first source lines
    # (elements: the largest input's): where a port keeps float64 arrays on the device.
    float64_op_details: tuple[CpuOp, ...] = ()
    complex_op_details: tuple[CpuOp, ...] = ()
    # Every device op by name (no lines: taking them per device op would slow the run down).
    device_op_details: tuple[CpuOp, ...] = ()


def _skip_prefixes() -> list[str]:
    import torch

    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.dirname(os.path.abspath(torch.__file__)) + os.sep, here + os.sep]


def _ops(rows: Iterable[tuple[str, int, int, list[str]]]) -> tuple[CpuOp, ...]:
    """The extension's (name, count, elements, locations) rows, most frequent first."""
    ops = (CpuOp(op=name, count=int(count), elements=int(elements), locations=tuple(locs))
           for name, count, elements, locs in rows)
    return tuple(sorted(ops, key=lambda o: (-o.count, o.op)))


class OpAccounting:
    """Context manager counting device and CPU ops while active (one at a time per process)."""

    _active: OpAccounting | None = None

    def __init__(self, *, skip_paths: Iterable[str] = ()) -> None:
        """``skip_paths``: folders (or files) whose frames, like torch's own, are skipped when a CPU
        op's source location is taken: the op is reported at the line that called into them."""
        self._report: AccountingReport | None = None
        self._skip_paths = tuple(os.path.abspath(p) + (os.sep if os.path.isdir(p) else "") for p in skip_paths)
        self._pause_depth = 0
        self._tracking_was = False

    def __enter__(self) -> OpAccounting:
        from ._registration import extension

        if OpAccounting._active is not None:
            raise RuntimeError("OpAccounting is already active in this process; nesting is not supported")
        ext = extension()
        ext.accounting_reset()
        ext.accounting_start([*_skip_prefixes(), *self._skip_paths])
        OpAccounting._active = self
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        from ._registration import extension

        ext = extension()
        ext.accounting_stop()
        if self._pause_depth:  # ending inside paused(): its end will not restore the tracking
            ext.op_tracking_set(self._tracking_was)
        self._pause_depth = 0
        self._report = self._snapshot()
        OpAccounting._active = None

    def _snapshot(self) -> AccountingReport:
        from ._registration import extension

        (dev_ops, dev_el, cpu_ops, cpu_el, f64, cplx, cpu, f64_detail, cplx_detail,
         dev_detail) = extension().accounting_snapshot()
        return AccountingReport(device_ops=int(dev_ops), device_elements=int(dev_el), cpu_ops=int(cpu_ops),
                                cpu_elements=int(cpu_el), float64_ops=int(f64), complex_ops=int(cplx),
                                cpu_op_details=_ops(cpu), float64_op_details=_ops(f64_detail),
                                complex_op_details=_ops(cplx_detail), device_op_details=_ops(dev_detail))

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Count nothing inside the block; counting resumes after it and the counts accumulate
        across the gap (no reset). Nests; a no-op when this accounting is not active."""
        from ._registration import extension

        if OpAccounting._active is not self:
            yield
            return
        if self._pause_depth == 0:
            extension().accounting_stop()
            # torch_neuronx's op tracking too: the caller's own copies are not the program's ops.
            self._tracking_was = extension().op_tracking_set(False)
        self._pause_depth += 1
        try:
            yield
        finally:
            self._pause_depth -= 1
            if self._pause_depth == 0:
                extension().op_tracking_set(self._tracking_was)
                if OpAccounting._active is self:
                    extension().accounting_start([*_skip_prefixes(), *self._skip_paths])

    def report(self) -> AccountingReport:
        """The counts so far (while active) or of the finished block."""
        if self._report is not None:
            return self._report
        if OpAccounting._active is self:
            return self._snapshot()
        raise RuntimeError("OpAccounting.report(): the accounting block has not run yet")


def paused() -> contextlib.AbstractContextManager[None]:
    """Pause the active :class:`OpAccounting` for the block (see ``OpAccounting.paused``); a no-op
    when none is active.

        with accounting.paused():
            host_copy = tensor.cpu()  # the caller's own work, not counted
    """
    active = OpAccounting._active
    return active.paused() if active is not None else contextlib.nullcontext()
