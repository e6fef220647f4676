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
(other kernels, other summation orders) the usual WARN band stays.
"""

from __future__ import annotations

from typing import Any

import torch

from cuda2neuron.validate._model import TensorComparison, Tolerances, Verdict

__all__ = ["compare_records", "to_tensor"]

#: How many times the reference's own error the port's may reach, on the same kernels, before it is
#: precision lost rather than rounding (an fp16 round trip of fp32 data is ~1000x).
PRECISION_FACTOR = 100.0

_EPS = {"float64": 2.2e-16, "float32": 1.2e-7, "float16": 9.8e-4, "bfloat16": 7.8e-3}
_HALF = {"float16", "bfloat16"}


def to_tensor(rec: dict[str, Any]) -> torch.Tensor:
    raw = rec["data"]
    host = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
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
    r64, o64 = r.double(), o.double()
    size = r64.abs()
    tiny = size <= _NOISE_SCALE * float(size.max())
    noisy = tiny & ((r64 - o64).abs() > _NOISE_DISAGREEMENT * size)
    return noisy if bool(noisy.any()) else None


def below_port_error(golden: dict[str, Any] | None, port: dict[str, Any] | None) -> torch.Tensor | None:
    """Elements of a gradient smaller than the port's own largest error on that gradient (vs the
    golden), or None: their sign, which a normalising optimizer follows, is noise at the port's
    precision, so the final parameters are compared without them."""
    if golden is None or port is None or tuple(golden["shape"]) != tuple(port["shape"]):
        return None
    g, p = to_tensor(golden).double(), to_tensor(port).double()
    if not g.is_floating_point() or g.numel() == 0:
        return None
    finite = torch.isfinite(g) & torch.isfinite(p)
    if not bool(finite.any()):
        return None
    err = float((p - g)[finite].abs().max())
    below = finite & (g.abs() <= err) & (torch.sign(g) != torch.sign(p))
    return below if bool(below.any()) else None


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
) -> TensorComparison:
    """Compare one recorded tensor; ``ignore`` marks elements left out (noise-level gradients);
    ``same_kernels``: the port ran the reference's kernels (the emulator against the CPU shim);
    ``ref_tf32``: the reference ran on a GPU that computes float32 in TF32 (cuDNN's default)."""
    base = dict(
        key=key, kind=ref["kind"], step=ref["step"], module_path=ref.get("module_path"),
        module_class=ref.get("module_class"), shape_ref=tuple(ref["shape"]), dtype_ref=ref["dtype"],
        device_ref=ref["device"],
    )
    if port is None:
        return TensorComparison(**base, shape_port=None, dtype_port=None, device_port=None, max_abs=float("nan"),
                                max_rel=float("nan"), cosine=float("nan"), ref_error=None, port_error=None, allowed=None,
                                nonfinite_mismatch=0, verdict=Verdict.FAIL, reason="not produced by the port")
    base.update(shape_port=tuple(port["shape"]), dtype_port=port["dtype"], device_port=port["device"])

    def done(verdict: Verdict, reason: str, **metrics: Any) -> TensorComparison:
        full = dict(max_abs=float("nan"), max_rel=float("nan"), cosine=float("nan"), ref_error=None, port_error=None,
                    allowed=None, nonfinite_mismatch=0)
        full.update(metrics)
        return TensorComparison(**base, **full, verdict=verdict, reason=reason)

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
    r64, p64 = r.double(), p.double()
    g64 = to_tensor(golden).double() if golden is not None and tuple(golden["shape"]) == tuple(ref["shape"]) else None
    bad_r, bad_p = ~torch.isfinite(r64), ~torch.isfinite(p64)
    nonfinite_mismatch = int((bad_r != bad_p).sum())
    finite = ~(bad_r | bad_p)
    left_out = ""
    if ignore is not None and ignore.shape == finite.shape:
        finite = finite & ~ignore
        left_out = f"; {int(ignore.sum())} element(s) left out: their gradients were rounding noise"
    diff = (r64 - p64)[finite].abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    denom = r64[finite].abs().clamp_min(1e-12)
    max_rel = float((diff / denom).max()) if diff.numel() else 0.0
    rf, pf = r64[finite].reshape(-1), p64[finite].reshape(-1)
    nr, np_ = float(rf.norm()), float(pf.norm())
    cosine = float((rf @ pf) / (nr * np_)) if nr > 0 and np_ > 0 else (1.0 if nr == np_ else 0.0)
    metrics = dict(max_abs=max_abs, max_rel=max_rel, cosine=cosine, nonfinite_mismatch=nonfinite_mismatch)
    if nonfinite_mismatch:
        return done(Verdict.FAIL, f"{nonfinite_mismatch} NaN/Inf values appear in only one run", **metrics)
    port_dtype, ref_dtype = _effective(port), _effective(ref)
    floor = tol.floor(port_dtype)
    if g64 is not None:
        gf = g64[finite]
        scale = max(float(gf.abs().max()) if gf.numel() else 0.0, 1e-30)
        ref_err = float((rf - gf.reshape(-1)).abs().max()) / scale if gf.numel() else 0.0
        port_err = float((pf - gf.reshape(-1)).abs().max()) / scale if gf.numel() else 0.0
        ratio = _EPS.get(port_dtype, 1.0) / _EPS.get(ref_dtype, 1.0)
        basis = max(ref_err * max(ratio, 1.0), floor)
        against = "golden"
    else:
        scale = max(float(r64[finite].abs().max()) if finite.any() else 0.0, 1e-30)
        ref_err = None
        port_err = max_abs / scale
        # Without a golden the reference's own error is unknown: a float32 reference computed in
        # TF32 is only as exact as TF32's 10-bit mantissa, so it is judged by that floor.
        basis = max(floor, tol.floor("tf32" if ref_tf32 and ref_dtype == "float32" else ref_dtype))
        against = "reference"
    allowed = tol.pass_factor * basis
    metrics.update(ref_error=ref_err, port_error=port_err, allowed=allowed)
    # Only inside the WARN band: beyond it the tensor FAILs anyway, and a wrong value (a mask
    # removed, a clip dropped) is not "precision lost" however many times the reference's error it is.
    if (ref_err is not None and allowed < port_err <= tol.warn_factor * basis and same_kernels
            and _same_precision(ref, port)
            and port_err >= PRECISION_FACTOR * max(ref_err, _EPS.get(port_dtype, 0.0) * 1e-3)):
        times = port_err / ref_err if ref_err > 0 else float("inf")
        return done(Verdict.FAIL, f"error {port_err:.2e} is {times:.0f}x the original's own ({ref_err:.2e}) on the same "
                    f"kernels with no autocast or dtype change: precision lost in the port (a value rounded through "
                    f"a lower precision?){left_out}", **metrics)
    if port_err <= allowed:
        return done(Verdict.PASS, f"error {port_err:.2e} <= {allowed:.2e} (vs {against}){left_out}", **metrics)
    if port_err <= tol.warn_factor * basis:
        return done(Verdict.WARN, f"error {port_err:.2e} > {allowed:.2e} (vs {against}){left_out}", **metrics)
    return done(Verdict.FAIL, f"error {port_err:.2e} > {tol.warn_factor * basis:.2e} (vs {against}){left_out}",
                **metrics)
