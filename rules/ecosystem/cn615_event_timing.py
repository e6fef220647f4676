"""CN615: timing with device events (``Event(enable_timing=True)`` + ``elapsed_time``)."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule

from .._shared.args import arg_by_name
from .._shared.names import call_qualname

__all__ = ["EventTiming"]

_EVENTS = frozenset({"torch.cuda.Event", "torch.neuron.Event"})
_GUIDANCE = (
    "torch.neuron.Event keeps the API, but the interval only covers work that ran on the device: "
    "ops the device lacks fall back to the CPU in eager mode and compiled graphs run when the "
    "runtime schedules them. For step times, measure wall clock: call torch.neuron.synchronize(), "
    "take time.perf_counter(), run the region, synchronize again and subtract."
)


class EventTiming(Rule):
    """
    ## What it does
    Reports ``a.elapsed_time(b)`` in a file that creates timing events
    (``torch.cuda.Event(enable_timing=True)`` or its ported ``torch.neuron.Event`` form).

    ## Why is this bad?
    The event itself is moved by the torch.cuda API rules (same name on Neuron), but CUDA event
    timing habits do not carry over blindly: on Trainium, eager ops the device does not implement
    run on the CPU, outside the device timeline, and compiled graphs execute when the runtime
    schedules them. A synchronize + ``time.perf_counter()`` measurement is the robust check.

    ## Example
    ```python
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(); step(); end.record(); end.synchronize()
    ms = start.elapsed_time(end)
    ```

    ## Fix safety
    No fix: both measurements are legitimate; which one the user wants is their call. The
    finding stays after the port as a reminder; silence it with
    ``# cuda2neuron: ignore[CN615]`` once checked.
    """

    code = "CN615"
    name = "event-timing"
    advisory = True  # a timing hint: never holds back a group of linked fixes
    triggers = ("elapsed_time",)
    targets = frozenset({"neuron"})
    VALID = (
        "import torch\ne = torch.cuda.Event()\ne.record()\n",
        "import time\nt0 = time.perf_counter()\n",
        "d = stats.elapsed_time(x)\n",  # no timing events in this file
    )
    INVALID = (
        Invalid(
            "import torch\ns = torch.cuda.Event(enable_timing=True)\ne = torch.cuda.Event(enable_timing=True)\n"
            "ms = s.elapsed_time(e)\n"
        ),
        Invalid("import torch\ns = torch.neuron.Event(enable_timing=True)\nms = s.elapsed_time(e)\n"),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._timing_events = False
        self._elapsed: list[tuple[cst.Call, tuple[cst.CSTNode, ...]]] = []

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "elapsed_time":
            self._elapsed.append((node, tuple(self.context.ancestors)))
            return
        if not self._timing_events and call_qualname(self, node) in _EVENTS:
            timing = arg_by_name(node, "enable_timing")
            if timing is not None and not (isinstance(timing.value, cst.Name) and timing.value.value == "False"):
                self._timing_events = True

    def leave_Module(self, original_node: cst.Module) -> None:
        if not self._timing_events:
            return
        for node, ancestors in self._elapsed:
            self.report(
                node,
                "`elapsed_time` of device events: check what it covers on Neuron",
                guidance=_GUIDANCE,
                effort=Effort.LOW,
                ancestors=ancestors,
            )
