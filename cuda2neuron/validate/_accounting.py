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
    _restart()
    return True


def _restart() -> None:
    """(Re)start the backend's counter, treating validate's own frames like torch's: a CPU op
    reached through one of validate's wrappers (`_host_api.py`) belongs to the user line that
    called the wrapper, not to validate."""
    import os

    from cuda2neuron.backend._registration import extension
    from cuda2neuron.backend.accounting import _skip_prefixes

    ext = extension()
    ext.accounting_stop()
    ext.accounting_start([*_skip_prefixes(), os.path.dirname(os.path.abspath(__file__)) + os.sep])


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

    extension().accounting_stop()
    _STATE["depth"] += 1
    try:
        yield
    finally:
        _STATE["depth"] -= 1
        _restart()


def finish() -> Any | None:
    """Stop accounting; the backend's AccountingReport, or None when it was not on."""
    acc = _STATE["acc"]
    if acc is None:
        return None
    _STATE["acc"] = None
    acc.__exit__(None, None, None)
    return acc.report()
