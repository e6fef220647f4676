"""Op accounting of the port run, with validate's own work kept out of the numbers.

Recording a tensor (copying it to the host, viewing its bytes) and drawing random numbers on
the CPU (`_rng.py`) are validate's work, not the port's: accounting is paused around them so
the residency audit counts only the user's ops. The backend has no public pause; this stops and
restarts its global counter without a reset (the counts accumulate across the gaps).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["start", "paused", "finish"]

_STATE: dict[str, Any] = {"acc": None, "depth": 0}


def start() -> bool:
    """Begin accounting if the emulator provides it; True when it is on."""
    try:
        from cuda2neuron.backend.accounting import OpAccounting
    except ImportError:
        return False
    acc = OpAccounting()
    acc.__enter__()
    _STATE["acc"] = acc
    return True


@contextlib.contextmanager
def paused() -> Iterator[None]:
    acc = _STATE["acc"]
    if acc is None or _STATE["depth"]:
        _STATE["depth"] += 1
        try:
            yield
        finally:
            _STATE["depth"] -= 1
        return
    from cuda2neuron.backend._registration import extension
    from cuda2neuron.backend.accounting import _skip_prefixes

    ext = extension()
    ext.accounting_stop()
    _STATE["depth"] += 1
    try:
        yield
    finally:
        _STATE["depth"] -= 1
        ext.accounting_start(_skip_prefixes())


def finish() -> Any | None:
    """Stop accounting; the backend's AccountingReport, or None when it was not on."""
    acc = _STATE["acc"]
    if acc is None:
        return None
    _STATE["acc"] = None
    acc.__exit__(None, None, None)
    return acc.report()
