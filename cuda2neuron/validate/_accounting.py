"""Op accounting of the port run, with validate's own work kept out of the numbers.

Recording a tensor (copying it to the host, viewing its bytes) and drawing random numbers on
the CPU (`_rng.py`) are validate's work, not the port's: accounting is paused around them
(the backend's public ``accounting.paused()``) so the residency audit counts only the user's ops;
the counts accumulate across the gaps. validate's own frames are skipped like torch's: a CPU op
reached through one of validate's wrappers (`_host_api.py`) belongs to the user line that called
the wrapper, not to validate.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

__all__ = ["start", "paused", "finish"]

_STATE: dict[str, Any] = {"acc": None}


def start() -> bool:
    """Begin accounting if the emulator provides it; True when it is on."""
    try:
        from cuda2neuron.backend.accounting import OpAccounting
    except ImportError:
        return False
    acc = OpAccounting(skip_paths=[os.path.dirname(os.path.abspath(__file__))])
    acc.__enter__()
    _STATE["acc"] = acc
    return True


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
