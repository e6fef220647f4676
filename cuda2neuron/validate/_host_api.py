"""Source lines where the port calls a PyTorch API that does host work by contract.

`pack_padded_sequence` requires its lengths as a CPU int64 tensor, and an RNN fed a
`PackedSequence` reads `batch_sizes` on the host; `pad_packed_sequence` indexes with host
lengths. That host work happens on real CUDA and on Trainium alike — it is not model compute left
behind by a port. The port run notes the user lines that call these APIs; the residency audit
(`_audit.py`) then lists the small host bookkeeping ops on those lines as API-mandated instead of
warning about them. Ops that are real compute (an `aten::lstm` on CPU because the input stayed
there) are still judged: only the bookkeeping ops in `_audit.API_HOST_OPS` are excused.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

__all__ = ["SiteCollector"]

# Functions of torch.nn.utils.rnn whose contract puts lengths / batch sizes on the host.
_RNN_UTILS = ("pack_padded_sequence", "pad_packed_sequence", "pack_sequence", "unpack_sequence")


class SiteCollector:
    """Collects `file:line` of user calls into the packed-sequence API while installed."""

    def __init__(self) -> None:
        import torch

        self.sites: set[str] = set()
        self._skip = (
            os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
        )
        self._saved: list[tuple[Any, str, Any]] = []
        self._handle: Any = None

    def _note_caller(self) -> None:
        # The innermost frame outside torch and cuda2neuron: the same rule the emulator's op
        # accounting uses for its locations, so the two can be matched line for line.
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if not name.startswith("<") and not name.startswith(self._skip):
                self.sites.add(f"{name}:{frame.f_lineno}")
                return
            frame = frame.f_back

    def install(self) -> None:
        import torch.nn.utils.rnn as rnn_utils
        from torch import nn

        for name in _RNN_UTILS:
            orig = getattr(rnn_utils, name, None)
            if orig is None:
                continue
            self._saved.append((rnn_utils, name, orig))
            setattr(rnn_utils, name, self._wrap(orig))

        packed = rnn_utils.PackedSequence

        def pre_hook(module: nn.Module, args: Any) -> None:
            if args and isinstance(args[0], packed):
                self._note_caller()

        self._handle = nn.modules.module.register_module_forward_pre_hook(pre_hook)

    def _wrap(self, fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self._note_caller()
            return fn(*args, **kwargs)

        return wrapper

    def uninstall(self) -> None:
        for owner, name, orig in self._saved:
            setattr(owner, name, orig)
        self._saved.clear()
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
