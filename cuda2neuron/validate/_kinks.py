"""Kinks taken the other way: a ReLU whose input the port rounds across zero.

A ReLU's output is continuous in its input, its derivative is not: an input the golden has at
+0.004 and the port, rounding through bfloat16, at -0.002 is nearly the same forward value, but
that sample's whole contribution to every weight gradient upstream of the ReLU is there in one run
and missing in the other. The precision band scales the original's error by the ratio of unit
roundoffs (fp16 -> bf16: 8x), which holds for errors that grow with the rounding; a kink flip does
not grow with it, it happens or not, and its size is a sample's share of the gradient, not a
rounding error. With a batch of 4, one flipped input moved a first-layer weight gradient by 48% of
its largest value at the third step of a correct bf16 port of an fp16 MLP with BatchNorm1d heads,
where the fp16 original, 8x closer to the golden, took every kink the golden's way (79x its error:
a WARN; CPU's own bf16 autocast gives the same 48%, so the emulator computes what CPU does). The
smaller the batch, the larger a sample's share: small-batch heads are where this shows.

So a forward record of a kink activation (`KINKED`) whose port output is zero where the golden's
is not, or the reverse, by no more than the port may be off there, marks its step: a gradient of
that step or a later one (the flipped update moved the weights the next steps start from) that is
only in the WARN band is not judged, with the reason naming the kink. A gradient beyond the band
still FAILs, and the logic check (autocast off, float32) still judges the same code tightly.
"""

from __future__ import annotations

from typing import Any

import torch

from cuda2neuron.validate._compare import to_tensor

__all__ = ["KINKED", "flipped_kinks"]

#: Module classes whose output is zero on one side of a threshold and the input's own value (or a
#: fixed slope) on the other: piecewise-linear activations with a kink at zero.
KINKED = frozenset({"ReLU", "ReLU6", "Hardtanh", "Threshold"})


def flipped_kinks(ref: dict[str, Any], port: dict[str, Any], golden: dict[str, Any], allowed: float) -> int:
    """Outputs of a kink activation the port took the other way than the golden (zero on one side,
    non-zero on the other) within ``allowed`` (absolute), and the reference did not; 0 when the
    shapes differ (the comparison says so itself)."""
    shape = tuple(golden["shape"])
    if tuple(port["shape"]) != shape or tuple(ref["shape"]) != shape:
        return 0
    g, p, r = (to_tensor(rec).reshape(-1) for rec in (golden, port, ref))
    if not g.is_floating_point():
        return 0
    g, p, r = g.double(), p.double(), r.double()
    # A flip is a zero on exactly one side; its size is the other side's value, which a correct
    # port only reaches by rounding (an input near zero).
    port_flip = ((g == 0) != (p == 0)) & ((g - p).abs() <= allowed)
    ref_flip = (g == 0) != (r == 0)
    return int((port_flip & ~ref_flip).sum())
