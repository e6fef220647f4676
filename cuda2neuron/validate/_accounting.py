"""Op accounting of the port run, with validate's own work kept out of the numbers.

Recording a tensor (copying it to the host, viewing its bytes) and drawing random numbers on
the CPU (`_rng.py`) are validate's work, not the port's: accounting is paused around them
(the backend's public ``accounting.paused()``) so the residency audit counts only the user's ops;
the counts accumulate across the gaps. validate's own frames are skipped like torch's: a CPU op
reached through one of validate's wrappers (`_host_api.py`) belongs to the user line that called
the wrapper, not to validate.

Initialising parameters is building the model, wherever it happens: a module created lazily in
its owner's forward (BYOL's projector, made at the first forward from the hidden size it sees,
then moved with `.to(hidden)`) filled its new host weights inside model code, and the audit
read those one-time fills as model compute left on the CPU (a WARN on a correct port). The
`torch.nn.init` functions and BatchNorm's running-statistics reset are left out of the counts
like validate's own work.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from typing import Any

__all__ = ["start", "paused", "finish", "optimizer_step", "optimizer_host_ops"]

_STATE: dict[str, Any] = {"acc": None, "step_mark": None, "optimizer_host": 0}


def start() -> bool:
    """Begin accounting if the emulator provides it; True when it is on."""
    try:
        from cuda2neuron.backend.accounting import OpAccounting
    except ImportError:
        return False
    acc = OpAccounting(skip_paths=[os.path.dirname(os.path.abspath(__file__))])
    acc.__enter__()
    _STATE["acc"] = acc
    _pause_parameter_init()
    return True


def _paused_call(fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with paused():
            return fn(*args, **kwargs)

    return wrapper


def _pause_parameter_init() -> None:
    """Parameter and buffer initialisation (see the module's docstring) is not counted. The
    functions are replaced in `torch.nn.init` itself: torch's modules call them through it
    (`init.kaiming_uniform_`) at call time."""
    import torch.nn.init as init
    from torch.nn.modules.batchnorm import _NormBase

    for name in ("uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_", "dirac_",
                 "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "sparse_"):
        fn = getattr(init, name, None)
        if fn is not None and not getattr(fn, "_cuda2neuron_paused", False):
            wrapped = _paused_call(fn)
            wrapped._cuda2neuron_paused = True  # type: ignore[attr-defined]
            setattr(init, name, wrapped)
    if not getattr(_NormBase.reset_running_stats, "_cuda2neuron_paused", False):
        wrapped = _paused_call(_NormBase.reset_running_stats)
        wrapped._cuda2neuron_paused = True  # type: ignore[attr-defined]
        _NormBase.reset_running_stats = wrapped  # type: ignore[method-assign]


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Leave the block's ops out of the counts (nests; a no-op when accounting is off)."""
    acc = _STATE["acc"]
    if acc is None:
        yield
        return
    with acc.paused():
        yield


def finish() -> Any | None:
    """Stop accounting; the backend's AccountingReport, or None when it was not on."""
    acc = _STATE["acc"]
    if acc is None:
        return None
    _STATE["acc"] = None
    acc.__exit__(None, None, None)
    return acc.report()


def _cpu_ops() -> dict[str, tuple[int, int]] | None:
    acc = _STATE["acc"]
    if acc is None:
        return None
    return {op.op: (op.count, op.elements) for op in acc.report().cpu_op_details}


def optimizer_step(starting: bool) -> None:
    """Mark the start (``starting``) or the end of an ``optimizer.step()``: the one-element CPU ops
    in between are torch's own bookkeeping — the step counters and bias corrections torch.optim
    keeps on the host for parameters on every device (`step_t += 1`, `.item()`). Counted apart,
    they made a correct port's residency line read "49.4% of ops on device"."""
    if _STATE["acc"] is None:
        return
    if starting:
        _STATE["step_mark"] = _cpu_ops()
        return
    before, _STATE["step_mark"] = _STATE["step_mark"], None
    after = _cpu_ops()
    if before is None or after is None:
        return
    for op, (count, elements) in after.items():
        c0, e0 = before.get(op, (0, 0))
        if count > c0 and elements - e0 <= count - c0:
            _STATE["optimizer_host"] += count - c0


def optimizer_host_ops() -> int:
    """CPU scalar ops inside optimizer steps so far (see `optimizer_step`)."""
    return int(_STATE["optimizer_host"])
