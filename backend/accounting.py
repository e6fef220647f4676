"""Op accounting on the emulated neuron device.

Counts the aten ops a program runs on the device and those it leaves on the CPU, with the user's
source locations of the CPU ones — the validation command uses it to flag ports that forgot to
move work to the device. Off by default; when on, counting happens in C++ (a global
RecordFunction callback) and Python frames are captured only for the first few occurrences of
each CPU op. Only outermost ops are counted (ops a kernel calls internally are not).

    from cuda2neuron.backend.accounting import OpAccounting
    with OpAccounting() as acc:
        train_step()
    report = acc.report()
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import TracebackType

__all__ = ["AccountingReport", "CpuOp", "OpAccounting"]


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


def _skip_prefixes() -> list[str]:
    import torch

    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.dirname(os.path.abspath(torch.__file__)) + os.sep, here + os.sep]


class OpAccounting:
    """Context manager counting device and CPU ops while active (one at a time per process)."""

    _active: OpAccounting | None = None

    def __init__(self) -> None:
        self._report: AccountingReport | None = None

    def __enter__(self) -> OpAccounting:
        from ._registration import extension

        if OpAccounting._active is not None:
            raise RuntimeError("OpAccounting is already active in this process; nesting is not supported")
        ext = extension()
        ext.accounting_reset()
        ext.accounting_start(_skip_prefixes())
        OpAccounting._active = self
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        from ._registration import extension

        ext = extension()
        ext.accounting_stop()
        self._report = self._snapshot()
        OpAccounting._active = None

    def _snapshot(self) -> AccountingReport:
        from ._registration import extension

        dev_ops, dev_el, cpu_ops, cpu_el, f64, cplx, details = extension().accounting_snapshot()
        ops = tuple(sorted((CpuOp(op=name, count=int(count), elements=int(elements), locations=tuple(locs))
                            for name, count, elements, locs in details), key=lambda o: (-o.count, o.op)))
        return AccountingReport(device_ops=int(dev_ops), device_elements=int(dev_el), cpu_ops=int(cpu_ops),
                                cpu_elements=int(cpu_el), float64_ops=int(f64), complex_ops=int(cplx),
                                cpu_op_details=ops)

    def report(self) -> AccountingReport:
        """The counts so far (while active) or of the finished block."""
        if self._report is not None:
            return self._report
        if OpAccounting._active is self:
            return self._snapshot()
        raise RuntimeError("OpAccounting.report(): the accounting block has not run yet")
