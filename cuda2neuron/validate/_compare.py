"""Per-tensor comparison and dtype-aware verdicts.

Each recorded tensor of the port is measured against the float64 golden (the original computed
in float64, autocast off) and so is the reference's: the port passes when its error stays within
a small factor of the reference's own error — so a bf16 autocast port is judged against what
mixed precision costs, not by fp32 tolerances. The reference's error is rescaled by the ratio of
machine epsilons when the port legitimately runs a different 16-bit type (fp16 -> bf16 autocast).
Without a golden (it failed to run) the port is compared to the reference with per-dtype floors.

Precision lost in the port: where the port runs the very kernels of the reference (the emulated
device executes the CPU kernels the CUDA-on-CPU shim reference runs) with no autocast and the same
dtype on both sides, nothing legitimate makes the port's error much larger than the reference's
own. An error in the WARN band AND >= PRECISION_FACTOR times the reference's is FAIL — a
tensor rounded through a lower precision on the way (`x.half().float()`), not rounding noise;
beyond the WARN band it FAILs by the plain error rule, with the plain reason. On real hardware
(other kernels, other summation orders) the usual WARN band stays. Its reason says "precision
lost" only where every element of the port is the reference's value rounded to 16 bits; anything
else on the same kernels is a changed computation (a causal mask switched off), not rounding.

Direction (gradients, losses, outputs): the angle between the port and the golden must stay
within pass_factor x the reference's own angle (rescaled by the epsilon ratio, at least the
dtype's floor). A tensor within the magnitude bound can still point elsewhere: an axis swapped in
a permute, a distillation loss over the wrong axis (gradient cosine 0.03 under a bf16 bound of
51%). Beyond its band, with a cosine under WRONG_DIRECTION, it FAILs whatever the magnitude.

Power: where the reference itself is so far from the golden that neither bound can tell a
correct port from a broken one (the magnitude bound allows half the tensor's largest value, and
the direction band allows 60 degrees), the tensor is not judged (`judged=False`, PASS unless the
magnitude rule FAILs it): fp16 BatchNorm over a handful of values per channel is 50% off in its
gradients. The run counts them and is never a bare PASS when too few tensors were judged.
"""

from __future__ import annotations

from typing import Any

import math

import torch

from cuda2neuron.validate._model import TensorComparison, Tolerances, Verdict

__all__ = ["compare_records", "to_tensor"]

#: How many times the reference's own error the port's may reach, on the same kernels, before it is
#: precision lost rather than rounding (an fp16 round trip of fp32 data is ~1000x).
PRECISION_FACTOR = 100.0

#: A cosine to the golden under this, outside the calibrated band, is a wrong direction: FAIL.
WRONG_DIRECTION = 0.9
#: A magnitude bound at or above this share of the tensor's largest golden value has no power (a
#: port off by half of it would pass); a direction band at or above NO_POWER_ANGLE neither.
NO_POWER_ERROR = 0.5
NO_POWER_ANGLE = math.pi / 3
#: Kinds whose direction is judged (a final parameter is mostly its initial value: no direction).
_DIRECTED = {"forward", "output", "loss", "grad"}
#: Unit roundoff of the 16-bit types: a value rounded through one differs by at most this, relatively.
_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8}

_EPS = {"float64": 2.2e-16, "float32": 1.2e-7, "float16": 9.8e-4, "bfloat16": 7.8e-3}
_HALF = {"float16", "bfloat16"}


def to_tensor(rec: dict[str, Any]) -> torch.Tensor:
    """The record's tensor, on the host. Over its bytes where they arrived as a bytearray (the
    wire's out-of-band buffers, `_wire.py`): callers only read it, never write in place."""
    raw = rec["data"]
    if not raw:
        host = torch.empty(0, dtype=torch.uint8)
    else:
        host = torch.frombuffer(raw if isinstance(raw, bytearray) else bytearray(raw), dtype=torch.uint8)
    t = host.view(getattr(torch, rec["host_dtype"])).reshape(rec["host_shape"])
    return t


def _effective(rec: dict[str, Any]) -> str:
    """The precision a tensor was really computed in: its dtype, or the autocast dtype in force
    (a float32 residual stream fed by bf16 matmuls carries bf16 error)."""
    dtype, amp = rec["dtype"], rec.get("amp")
    if amp in _EPS and dtype in _EPS and _EPS[amp] > _EPS[dtype]:
        return amp
    return dtype


_AUTOCAST_FLOATS = {"float16", "bfloat16", "float32"}


def _dtype_verdict(ref: dict[str, Any], port: dict[str, Any]) -> str | None:
    """None when the dtypes may differ legitimately, else the reason they may not."""
    ref_amp, port_amp = ref.get("amp"), port.get("amp")
    if ref_amp and not port_amp:
        return f"autocast ({ref_amp}) in the original, none in the port"
    if port_amp and not ref_amp:
        return f"autocast ({port_amp}) in the port, none in the original"
    r, p = ref["dtype"], port["dtype"]
    if r == p:
        return None
    if r in _HALF and p in _HALF:
        return None  # fp16 autocast ported to bf16 autocast: judged by the error rule instead
    if ref_amp and port_amp and r in _AUTOCAST_FLOATS and p in _AUTOCAST_FLOATS:
        # Autocast on both sides, but CPU autocast (the shim's reference) and CUDA/neuron
        # autocast cast different op lists (layer_norm runs in fp32 on CUDA): judged by the
        # error rule with the less precise of the two.
        return None
    return f"dtype {r} -> {p}"


def _same_precision(ref: dict[str, Any], port: dict[str, Any]) -> bool:
    """Neither side under autocast and the same dtype: nothing explains a precision difference."""
    return not ref.get("amp") and not port.get("amp") and ref["dtype"] == port["dtype"]


# A gradient element is rounding noise where it is tiny next to the tensor's largest and a second
# computation of it (the float64 golden's, else the port's) does not even agree to 0.1%.
_NOISE_SCALE = 1e-3
_NOISE_DISAGREEMENT = 1e-3


def noise_elements(ref: dict[str, Any], other: dict[str, Any] | None) -> torch.Tensor | None:
    """Elements of a gradient that are rounding noise, or None when there are none.

    Their exact value is an accident of summation order, so any optimizer that normalises the
    update (Adam: lr * g / (|g| + eps)) turns them into weight changes of up to lr in a random
    direction. Attention's key bias is the classic case: softmax ignores it, its true gradient is
    zero, and the computed one is noise. The parameters' final values are compared without them.
    """
    if other is None or tuple(other["shape"]) != tuple(ref["shape"]):
        return None
    r, o = to_tensor(ref), to_tensor(other)
    if not r.is_floating_point() or r.numel() == 0:
        return None
    # No float64 copies of whole tensors (the parent compares every gradient of every step; the
    # copies were half its time on RetinaNet). A 16-bit gradient is widened: 1e-3 of a tiny value
    # underflows there.
    if r.dtype not in (torch.float32, torch.float64):
        r = r.float()
    r, o = r.reshape(-1), o.reshape(-1)
    size = r.abs()
    # The disagreement test on the tiny elements only, not the tensor.
    at = (size <= _NOISE_SCALE * float(size.max())).nonzero().squeeze(1)
    if at.numel() == 0:
        return None
    rs, os_ = r[at], o[at]
    noise = (os_.double() - rs).abs_() > _NOISE_DISAGREEMENT * size[at]
    if not bool(noise.any()):
        return None
    out = torch.zeros(r.numel(), dtype=torch.bool)
    out[at[noise]] = True
    return out.view(tuple(ref["shape"]))


def below_port_error(golden: dict[str, Any] | None, port: dict[str, Any] | None) -> torch.Tensor | None:
    """Elements of a gradient smaller than the port's own largest error on that gradient (vs the
    golden), or None: their sign, which a normalising optimizer follows, is noise at the port's
    precision, so the final parameters are compared without them."""
    if golden is None or port is None or tuple(golden["shape"]) != tuple(port["shape"]):
        return None
    g, p = to_tensor(golden), to_tensor(port)
    if not g.is_floating_point() or g.numel() == 0:
        return None
    g = (g if g.dtype == torch.float64 else g.double()).reshape(-1)
    p = p.reshape(-1)
    diff = (p - g).abs_()
    # A NaN or an infinity on either side makes the difference one, and the largest difference
    # too (max propagates NaN): the mask of finite elements only where there are others.
    err = float(diff.max())
    finite: torch.Tensor | None = None
    if not math.isfinite(err):
        finite = torch.isfinite(diff)
        if not bool(finite.any()):
            return None
        err = float(diff[finite].max())
    below = g.abs() <= err
    if finite is not None:
        below &= finite
    # The sign and ratio tests on the few elements under the port's error only, not the tensor.
    at = below.nonzero().squeeze(1)
    if at.numel() == 0:
        return None
    # Under the port's own error, an element's sign or its size relative to the steps before
    # (what Adam's m / sqrt(v) follows from step 2 on) is noise: a zero-initialised bias after
    # two AdamW steps at lr 3.9e-6 is only such ratios times lr, and WARNed at 0.159 > 0.077.
    gs = g[at]
    noise = (torch.sign(gs) != torch.sign(p[at])) | (diff[at] >= _RATIO_NOISE * gs.abs())
    if not bool(noise.any()):
        return None
    out = torch.zeros(g.numel(), dtype=torch.bool)
    out[at[noise]] = True
    return out.view(tuple(golden["shape"]))


#: An element of a gradient the port computed to worse than 1/8 of its size.
_RATIO_NOISE = 0.125


def side_angle(na: float, nb: float, c: float) -> float | None:
    """The angle (radians) between two vectors of norms ``na`` and ``nb`` whose difference has norm
    ``c``, or None when either is zero: Kahan's formula for a needle-like triangle, exact to a few
    ulps where arccos of a cosine near 1 loses half the digits — and the norms of the differences
    are computed anyway, so no extra pass over the tensors."""
    if not (na > 0 and nb > 0 and math.isfinite(na) and math.isfinite(nb) and math.isfinite(c)):
        return None
    a, b = max(na, nb), min(na, nb)
    mu = c - (a - b) if b >= c else b - (a - c)
    num = ((a - b) + c) * mu
    den = (a + (b + c)) * ((a - c) + b)
    if num <= 0:
        return 0.0
    if den <= 0:
        return math.pi
    return 2.0 * math.atan(math.sqrt(num / den))


def _norm(t: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(t, dtype=torch.float64)) if t.numel() else 0.0


def _max_abs(t: torch.Tensor) -> float:
    if not t.numel():
        return 0.0
    lo, hi = torch.aminmax(t)
    return max(-float(lo), float(hi))


# Fewer non-zero values than this cannot tell rounding from a changed computation: a scalar
# loss whose relative error happens to be under float16's unit roundoff (a dropout left on) read
# as "rounded through float16".
_ROUNDING_EVIDENCE = 16


def _rounded_copy(r: torch.Tensor, p: torch.Tensor) -> str | None:
    """The 16-bit type the port's values could be the reference's rounded through, None when
    they are not, "" when there are too few values to tell: every element within that type's
    unit roundoff (plus the float32 noise of the operations after)."""
    if int(torch.count_nonzero(r)) < _ROUNDING_EVIDENCE:
        return ""
    diff = (p - r).abs()
    for dtype in ("float16", "bfloat16"):
        if bool((diff <= 1.5 * _ROUNDOFF[dtype] * r.abs() + 1e-30).all()):
            return dtype
    return None


def compare_records(
    key: str,
    ref: dict[str, Any],
    port: dict[str, Any] | None,
    golden: dict[str, Any] | None,
    tol: Tolerances,
    ref_on_cuda: bool,
    ignore: torch.Tensor | None = None,
    same_kernels: bool = False,
    ref_tf32: bool = False,
    check: str = "",
) -> TensorComparison:
    """Compare one recorded tensor; ``ignore`` marks elements left out (noise-level gradients);
    ``same_kernels``: the port ran the reference's kernels (the emulator against the CPU shim);
    ``ref_tf32``: the reference ran on a GPU that computes float32 in TF32 (cuDNN's default);
    ``check``: which comparison this is ("logic": autocast off in both, "precision": the AMP runs,
    "": the only one)."""
    base = dict(
        key=key, kind=ref["kind"], step=ref["step"], module_path=ref.get("module_path"),
        module_class=ref.get("module_class"), shape_ref=tuple(ref["shape"]), dtype_ref=ref["dtype"],
        device_ref=ref["device"],
    )
    extra: dict[str, Any] = {"check": check}
    if port is None:
        return TensorComparison(**base, shape_port=None, dtype_port=None, device_port=None, max_abs=float("nan"),
                                max_rel=float("nan"), cosine=float("nan"), ref_error=None, port_error=None, allowed=None,
                                nonfinite_mismatch=0, verdict=Verdict.FAIL, reason="not produced by the port", **extra)
    base.update(shape_port=tuple(port["shape"]), dtype_port=port["dtype"], device_port=port["device"])

    def done(verdict: Verdict, reason: str, **metrics: Any) -> TensorComparison:
        full = dict(max_abs=float("nan"), max_rel=float("nan"), cosine=float("nan"), ref_error=None, port_error=None,
                    allowed=None, nonfinite_mismatch=0)
        full.update(metrics)
        return TensorComparison(**base, **full, **extra, verdict=verdict, reason=reason)

    if tuple(ref["shape"]) != tuple(port["shape"]):
        return done(Verdict.FAIL, f"shape {tuple(ref['shape'])} -> {tuple(port['shape'])}")
    dtype_problem = _dtype_verdict(ref, port)
    if dtype_problem:
        return done(Verdict.FAIL, dtype_problem)
    if ref_on_cuda and ref["device"] == "cuda" and port["device"] == "cpu":
        return done(Verdict.FAIL, "left on the CPU (the original had it on the GPU)")
    r, p = to_tensor(ref), to_tensor(port)
    if not (r.is_floating_point() or r.is_complex()):
        mismatches = int((r != p).sum()) if r.numel() else 0
        return done(Verdict.PASS if mismatches == 0 else Verdict.FAIL,
                    "exact" if mismatches == 0 else f"{mismatches} of {r.numel()} values differ",
                    max_abs=float((r.double() - p.double()).abs().max()) if r.numel() else 0.0, max_rel=0.0, cosine=1.0)
    # Flat views, 16-bit types widened to float32 (exact), float64 only where the golden takes part
    # (binary ops promote): masked copies only where something must be left out. A compare of
    # large activations was ~80 ms, most of it in copies and float64 conversions.
    r32 = (r.float() if r.dtype in (torch.float16, torch.bfloat16) else r).reshape(-1)
    p32 = (p.float() if p.dtype in (torch.float16, torch.bfloat16) else p).reshape(-1)
    g64 = (to_tensor(golden).double().reshape(-1)
           if golden is not None and tuple(golden["shape"]) == tuple(ref["shape"]) else None)
    nonfinite_mismatch = 0
    finite: torch.Tensor | None = None  # None: every element counts
    if not (bool(torch.isfinite(r32.sum())) and bool(torch.isfinite(p32.sum()))):
        bad_r, bad_p = ~torch.isfinite(r32), ~torch.isfinite(p32)
        nonfinite_mismatch = int((bad_r != bad_p).sum())
        in_port = int((bad_p & ~bad_r).sum())
        finite = ~(bad_r | bad_p)
    left_out = ""
    if ignore is not None and ignore.numel() == r32.numel():
        keep = ~ignore.reshape(-1)
        finite = keep if finite is None else finite & keep
        left_out = f"; {int(ignore.sum())} element(s) left out: their gradients were rounding noise"
    rf, pf = (r32, p32) if finite is None else (r32[finite], p32[finite])
    gf = g64 if g64 is None or finite is None else g64[finite]
    diff = rf.double() - pf if rf.dtype == torch.float64 or pf.dtype == torch.float64 else rf - pf
    max_abs = _max_abs(diff)
    c_rp = _norm(diff)
    max_rel = float(diff.abs_().div_(rf.abs().clamp_min_(1e-12)).max()) if diff.numel() else 0.0
    del diff
    nr, np_ = _norm(rf), _norm(pf)
    between = side_angle(nr, np_, c_rp)
    cosine = math.cos(between) if between is not None else (1.0 if nr == np_ else 0.0)
    metrics = dict(max_abs=max_abs, max_rel=max_rel, cosine=cosine, nonfinite_mismatch=nonfinite_mismatch)
    if nonfinite_mismatch:
        whose = ("the port's" if in_port == nonfinite_mismatch else "the original's" if not in_port
                 else f"{in_port} the port's")
        return done(Verdict.FAIL, f"{nonfinite_mismatch} NaN/Inf values appear in only one run ({whose})", **metrics)
    port_dtype, ref_dtype = _effective(port), _effective(ref)
    floor = tol.floor(port_dtype)
    ratio = 1.0
    if gf is not None:
        scale = max(_max_abs(gf), 1e-30)
        e = rf - gf
        ref_err, c_ref = _max_abs(e) / scale, _norm(e)
        e = pf - gf
        port_err, c_port = _max_abs(e) / scale, _norm(e)
        del e
        ratio = max(_EPS.get(port_dtype, 1.0) / _EPS.get(ref_dtype, 1.0), 1.0)
        basis = max(ref_err * ratio, floor)
        against = "golden"
        ng = _norm(gf)
        ref_angle = side_angle(nr, ng, c_ref)
        port_angle = side_angle(np_, ng, c_port)
    else:
        scale = max(_max_abs(rf), 1e-30)
        ref_err = None
        port_err = max_abs / scale
        # Without a golden the reference's own error is unknown: a float32 reference computed in
        # TF32 is only as exact as TF32's 10-bit mantissa, so it is judged by that floor.
        basis = max(floor, tol.floor("tf32" if ref_tf32 and ref_dtype == "float32" else ref_dtype))
        against = "reference"
        ref_angle, port_angle = 0.0, between
    allowed = tol.pass_factor * basis
    metrics.update(ref_error=ref_err, port_error=port_err, allowed=allowed)
    # Direction: the band is the reference's own angle to the golden, rescaled like the error.
    allowed_angle = None
    if ref["kind"] in _DIRECTED and ref_angle is not None and port_angle is not None:
        # Without a golden the reference's own angle is unknown: the magnitude's floor stands in.
        allowed_angle = tol.pass_factor * (max(ref_angle * ratio, floor) if gf is not None else basis)
        metrics.update(port_cosine=math.cos(port_angle), ref_cosine=math.cos(ref_angle) if gf is not None else None,
                       allowed_angle=allowed_angle)
    judged = allowed < NO_POWER_ERROR or (allowed_angle is not None and allowed_angle < NO_POWER_ANGLE)
    # Only inside the WARN band: beyond it the tensor FAILs anyway, and a wrong value (a mask
    # removed, a clip dropped) is not "precision lost" however many times the reference's error it is.
    if (ref_err is not None and allowed < port_err <= tol.warn_factor * basis and same_kernels
            and _same_precision(ref, port)
            and port_err >= PRECISION_FACTOR * max(ref_err, _EPS.get(port_dtype, 0.0) * 1e-3)):
        times = port_err / ref_err if ref_err > 0 else float("inf")
        rounded = _rounded_copy(rf.double(), pf.double())
        if rounded:
            what = f"precision lost in the port (every value is the original's rounded through {rounded})"
        elif rounded == "":
            what = ("the port computes something else here, or a value went through a lower precision (too few "
                    "values to tell rounding apart)")
        else:
            what = ("not rounding: the port computes something else here (a changed operation, or one fed by a value "
                    "rounded through a lower precision)")
        return done(Verdict.FAIL, f"error {port_err:.2e} is {times:.0f}x the original's own ({ref_err:.2e}) on the same "
                    f"kernels with no autocast or dtype change: {what}{left_out}", **metrics)
    if port_err <= allowed:
        verdict, reason = Verdict.PASS, f"error {port_err:.2e} <= {allowed:.2e} (vs {against}){left_out}"
    elif port_err <= tol.warn_factor * basis:
        verdict, reason = Verdict.WARN, f"error {port_err:.2e} > {allowed:.2e} (vs {against}){left_out}"
    else:
        return done(Verdict.FAIL, f"error {port_err:.2e} > {tol.warn_factor * basis:.2e} (vs {against}){left_out}",
                    **metrics)
    if allowed_angle is not None and port_angle is not None and port_angle > allowed_angle:
        cos = math.cos(port_angle)
        wrong = cos < WRONG_DIRECTION or port_angle > tol.warn_factor / tol.pass_factor * allowed_angle
        own = f"the original's own {math.cos(ref_angle):.3f}" if gf is not None and ref_angle is not None else "vs reference"
        why = (f"direction: cosine {cos:.3f} to the {against} (angle {port_angle:.2g} rad > {allowed_angle:.2g} allowed, "
               f"{own})")
        if wrong:
            return done(Verdict.FAIL, f"{why}; {reason}", **metrics)
        if verdict is Verdict.PASS:
            verdict, reason = Verdict.WARN, f"{why}; {reason}"
    if not judged:
        # A PASS that says little: counted apart (the run is never a bare PASS on too few judged).
        own = f"{ref_err:.2e}" if ref_err is not None else "?"
        return done(Verdict.PASS, f"not judged: the original's own error ({own}) allows {allowed:.2e}, too loose to "
                    f"tell a broken port; {reason}", **metrics, judged=False)
    return done(verdict, reason, **metrics)
