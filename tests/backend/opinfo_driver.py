"""PyTorch's OpInfo database (shipped in the torch wheel) run on CPU and on the emulated device.

Every (op, mode, dtype, sample) *case* runs the sample on CPU, then the same sample copied to
``neuron`` (same sizes, strides and storage offset, same seed), and compares every output:
device (``neuron`` where CPU gives ``cpu``), dtype, shape, strides, and values bit for bit (NaN
equal to NaN). The emulator runs CPU kernels on the very same memory layout, so any difference is
a bug of the emulator — except the few differences by design listed in ``BY_DESIGN``.

Modes: ``forward`` (float32, bfloat16, int64, bool: the dtypes the op supports on CPU),
``backward`` (float32: gradients of every differentiable input for a fixed grad_output),
``inplace`` (the op's in-place variant, same dtypes as forward). foreach ops are ops of
``foreach_db`` and go through the same modes.

The input is the database in the wheel (``op_db``, ``python_ref_db``, ``foreach_db`` of
``torch.testing._internal.common_methods_invocations``); nothing of PyTorch's test files is copied.
Used by tests/backend/test_opinfo.py (a fixed subset, in-process) and bench/opinfo_sweep.py
(everything, one subprocess per chunk of ops so that an abort is recorded, not fatal).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import queue
import signal
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "int64": torch.int64, "bool": torch.bool}
MODES = ("forward", "backward", "inplace")
FOREACH_DBS = ("foreach_unary_op_db", "foreach_binary_op_db", "foreach_pointwise_op_db", "foreach_reduce_op_db",
               "foreach_other_op_db")

#: Outcomes of one case. Only these count as agreeing: "identical"; "both_raise"; "by_design" (a
#: difference the real device has too, see ``BY_DESIGN`` and the float64 rule in ``compare``);
#: "undefined_values" (OpInfo itself marks the op's values as not comparable across devices, e.g.
#: ``empty``: everything but the values is compared); "on_cpu" (the sample itself puts the result
#: on CPU — ``device="cpu"``, ``.to("cpu")``, a factory given no device — so both runs are CPU runs,
#: compared like any other).
#: "cpu_unstable" (the op does not reproduce itself: a CPU rerun of the same sample differs from the
#: first CPU run, or a device rerun from the first device run, within ``UNSTABLE_RERUNS`` reruns —
#: linalg.lstsq's gelsy gives another float32 result in about one CPU run in eight: nothing to
#: compare the device with).
AGREE = frozenset({"identical", "both_raise", "by_design", "undefined_values", "on_cpu", "cpu_unstable"})


@dataclasses.dataclass(frozen=True)
class Result:
    op: str
    mode: str
    dtype: str
    index: int
    outcome: str  # an AGREE outcome | mismatch | meta | neuron_raises | cpu_raises | no_samples | abort | timeout
    detail: str = ""
    #: The device outputs' bits (``digest``), "" when the device raised: two sweeps (or a sweep with
    #: CUDA2NEURON_POISON=1) compared case by case show any result that varies between runs.
    digest: str = ""

    @property
    def key(self) -> str:
        return f"{self.op}|{self.mode}|{self.dtype}|{self.index}"


def _ops():
    from torch.testing._internal import common_methods_invocations as cmi

    # foreach_db is the union of these five lists (the wheel exports them, not the union).
    foreach = [op for part in FOREACH_DBS for op in getattr(cmi, part)]
    return [*cmi.op_db, *cmi.python_ref_db, *foreach]


def full_name(op: Any) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def all_ops() -> dict[str, Any]:
    """Every OpInfo by full name, in database order (first entry wins on a duplicate name)."""
    out: dict[str, Any] = {}
    for op in _ops():
        out.setdefault(full_name(op), op)
    return out


def plans(op: Any) -> list[tuple[str, str]]:
    """The (mode, dtype) pairs that apply to an op: the dtypes it supports on CPU."""
    out = []
    cpu = op.supported_dtypes("cpu")
    for name, dt in DTYPES.items():
        if dt in cpu:
            out.append(("forward", name))
    if op.supports_autograd and torch.float32 in op.supported_backward_dtypes("cpu"):
        out.append(("backward", "float32"))
    if op.inplace_variant is not None:
        for name, dt in DTYPES.items():
            if dt in cpu:
                out.append(("inplace", name))
    return out


# ---- moving a sample to the device --------------------------------------------------------------


def _same_layout(t: torch.Tensor, device: str) -> torch.Tensor:
    """``t`` on ``device`` with the same sizes, strides and storage offset (a plain ``.to`` would
    make a non-dense input dense and so change the output strides)."""
    if t.layout != torch.strided:
        return t.to(device)
    if t.is_conj() or t.is_neg():
        return t.to(device)
    nbytes = t.untyped_storage().nbytes()
    n = nbytes // t.element_size()
    flat = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (n,), (1,))
    dev = flat.to(device, copy=True)  # a copy on CPU too: an op may write its input (max_norm=)
    out = dev.as_strided(t.shape, t.stride(), t.storage_offset())
    return out.detach().requires_grad_(t.requires_grad)


def to_device(x: Any, device: str) -> Any:
    def move(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return _same_layout(v, device)
        if isinstance(v, torch.device) and v.type == "cpu":
            return torch.device(device)
        return v

    return tree_map(move, x)


def _device_kwargs(kwargs: dict[str, Any], device: str) -> dict[str, Any]:
    # Factory samples name their device ("device": "cpu"): it follows the inputs.
    return {k: (device if k == "device" and v in ("cpu", torch.device("cpu")) else v) for k, v in kwargs.items()}


# ---- running one case ---------------------------------------------------------------------------


def _inputs_of(sample: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]


def _run(fn: Callable[..., Any], sample: Any, mode: str, device: str, seed: int) -> Any:
    inp, args, kwargs = sample.input, sample.args, sample.kwargs
    # Both runs get copies: the CPU run must not change the sample the device run copies next
    # (embedding_bag with max_norm renormalises its weight in place).
    inp, args, kwargs = to_device((inp, args, kwargs), device)
    if device != "cpu":
        kwargs = _device_kwargs(kwargs, device)
    torch.manual_seed(seed)
    if mode == "inplace":
        # An in-place variant writes its first input: run it on a copy, compare that and the result.
        if isinstance(inp, torch.Tensor):
            inp = inp.detach().clone()
        elif isinstance(inp, (list, tuple)):
            inp = type(inp)(t.detach().clone() if isinstance(t, torch.Tensor) else t for t in inp)
        out = fn(inp, *args, **kwargs)
        return (out, inp)
    out = fn(inp, *args, **kwargs)
    if mode == "forward":
        return out
    # backward: gradients of every input that requires grad, for a fixed grad_output.
    wrt = _inputs_of(type(sample)(inp, args=args, kwargs=kwargs))
    outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor) and o.requires_grad]
    if not outs or not wrt:
        return ("no-grad", out)
    gen = torch.Generator().manual_seed(seed + 1)
    grads_out = [
        torch.randn(o.shape, generator=gen, dtype=torch.float32).to(o.dtype).to(o.device)
        if o.dtype.is_floating_point
        else torch.ones_like(o)
        for o in outs
    ]
    grads = torch.autograd.grad(outs, wrt, grads_out, allow_unused=True)
    return (out, grads)


def digest(x: Any) -> str:
    """A hash of every output's dtype, shape and bits (NaN payloads and -0.0 included)."""
    h = hashlib.blake2b(digest_size=8)
    for leaf in tree_flatten(x)[0]:
        if not isinstance(leaf, torch.Tensor):
            h.update(repr(leaf).encode())
            continue
        try:
            t = leaf.detach().cpu()
            if t.layout != torch.strided:
                t = t.to_dense()
            t = t.resolve_conj().resolve_neg().contiguous()
            h.update(f"{t.dtype}{tuple(t.shape)}".encode())
            if t.numel():
                h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        except Exception as e:  # noqa: BLE001 — a layout without bytes (quantized, nested): named, not hashed
            h.update(f"{type(leaf).__name__}:{_describe(e)}".encode())
    return h.hexdigest()


def _describe(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def _equal_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.is_complex():
        a, b = torch.view_as_real(a.resolve_conj().resolve_neg()), torch.view_as_real(b.resolve_conj().resolve_neg())
    if a.dtype.is_floating_point:
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return bool((a == b).all())


def _float64_close(c: torch.Tensor, d: torch.Tensor) -> bool:
    """A float64 CPU result against the device's float32 one: equal up to float32 rounding."""
    return bool(torch.allclose(c.to(torch.float32), d.to(torch.float32), rtol=1e-5, atol=1e-6, equal_nan=True))


def compare(cpu: Any, dev: Any, device: str, *, values: bool = True, cpu_ok: bool = False) -> tuple[str, str]:
    """("identical", "") or (outcome, what differs) for two output trees.

    ``values=False`` compares everything but the values (device, dtype, shape, strides), for ops
    whose values are undefined; a value difference is then "undefined_values". A float64 CPU
    output that the device gives as float32 — same shape and strides, equal up to float32
    rounding — is "by_design": the device has no float64 (neuron-target-api.md: float64 is
    downcast to float32), so that is what the real device returns too. ``cpu_ok``: the sample
    names the CPU device, so an output CPU gives on CPU may be on CPU on the device run too (the
    result of ``.to("cpu")``) or on the device (the gradient of a device input)."""
    ca, cspec = tree_flatten(cpu)
    da, dspec = tree_flatten(dev)
    if cspec != dspec:
        return "meta", f"output structure {cspec} vs {dspec}"
    outcome, detail = "identical", ""
    for i, (c, d) in enumerate(zip(ca, da)):
        if isinstance(c, torch.Tensor) != isinstance(d, torch.Tensor):
            return "meta", f"output {i}: {type(c).__name__} vs {type(d).__name__}"
        if not isinstance(c, torch.Tensor):
            if c != d and not (isinstance(c, float) and isinstance(d, float) and math.isnan(c) and math.isnan(d)):
                return "mismatch", f"output {i}: {c!r} vs {d!r}"
            continue
        want_dev = device if c.device.type == "cpu" else c.device.type
        if d.device.type != want_dev and not (cpu_ok and d.device.type == "cpu"):
            return "meta", f"output {i}: device {d.device} (CPU gives {c.device})"
        float64 = c.dtype == torch.float64 and d.dtype == torch.float32
        if c.dtype != d.dtype and not float64:
            return "meta", f"output {i}: dtype {d.dtype} (CPU gives {c.dtype})"
        if c.shape != d.shape:
            return "meta", f"output {i}: shape {tuple(d.shape)} (CPU gives {tuple(c.shape)})"
        if c.layout != torch.strided or d.layout != torch.strided:
            if c.layout != d.layout:
                return "meta", f"output {i}: layout {d.layout} (CPU gives {c.layout})"
            c, d = c.to_dense(), d.to_dense()
        elif c.numel() > 1 and c.stride() != d.stride():
            return "meta", f"output {i}: strides {d.stride()} (CPU gives {c.stride()})"
        if float64:
            if values and not _float64_close(c.detach(), d.detach().cpu()):
                return "mismatch", f"output {i}: float64 stored as float32, values beyond float32 rounding"
            if outcome == "identical":
                outcome, detail = "by_design", f"output {i}: float64 stored as float32"
            continue
        if not _equal_values(c.detach(), d.detach().cpu()):
            if values:
                return "mismatch", f"output {i}: values differ ({c.dtype}, shape {tuple(c.shape)})"
            if outcome == "identical":
                outcome, detail = "undefined_values", f"output {i}: values differ (undefined: not compared)"
    return outcome, detail


def values_defined(op: Any, dtype: str) -> bool:
    """False where OpInfo itself says the op's values cannot be compared with CPU: the database
    skips its cross-device value test (``TestCommon.test_compare_cpu``) for the op, e.g. ``empty*``
    (uninitialised memory). A device-specific skip (for CUDA) does not count."""
    dt = DTYPES[dtype]
    for d in getattr(op, "decorators", ()):
        if getattr(d, "test_name", None) == "test_compare_cpu" and d.is_active("TestCommon", "test_compare_cpu",
                                                                               None, dt, {}):
            return False
    return True


def names_cpu(sample: Any) -> bool:
    """The sample itself puts its result on CPU: it passes the CPU device as a value (``.to("cpu")``,
    ``device="cpu"`` of a method), or it is a factory call with no tensor and no device (the
    default device is CPU on every backend)."""
    leaves, _ = tree_flatten((sample.input, sample.args, {k: v for k, v in sample.kwargs.items() if k != "device"}))
    if any(isinstance(v, str) and v.split(":")[0] == "cpu" for v in leaves):
        return True
    has_tensor = any(isinstance(v, torch.Tensor) for v in leaves)
    return not has_tensor and "device" not in sample.kwargs


def cases(op: Any, mode: str, dtype: str) -> Iterator[Any]:
    """The samples of one (op, mode, dtype), generated on CPU with a fixed seed."""
    torch.manual_seed(0)
    dt = DTYPES[dtype]
    samples = op.sample_inputs("cpu", dt, requires_grad=(mode == "backward"))
    yield from samples


def _on_cpu(x: Any) -> Any:
    return tree_map(lambda t: t.detach().cpu() if isinstance(t, torch.Tensor) else t, x)


#: Reruns of each side before a mismatch counts as one: an op that gives another result once in
#: eight runs (linalg.lstsq, gelsy) passes one rerun seven times in eight, 2 x 32 once in 5,000.
UNSTABLE_RERUNS = 32


def _cpu_unstable(fn: Callable[..., Any], sample: Any, mode: str, seed: int, cpu: Any, dev: Any, op: Any,
                  dtype: str, device: str = "neuron") -> bool:
    """The op does not reproduce itself: a CPU rerun differs from the first CPU run, or a device
    rerun from the first device run (the device runs the CPU kernel, so whichever side drew the
    rare result shows it), in at most ``UNSTABLE_RERUNS`` reruns of each. Only mismatching cases
    get here, so a stable op costs nothing."""
    values = values_defined(op, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(UNSTABLE_RERUNS):
            try:
                again_cpu = _run(fn, sample, mode, "cpu", seed)
                again_dev = _run(fn, sample, mode, device, seed)
            except Exception:  # noqa: BLE001 — raising on a rerun is unstable as well
                return True
            if compare(cpu, again_cpu, "cpu", values=values)[0] != "identical":
                return True
            if compare(_on_cpu(dev), _on_cpu(again_dev), "cpu", values=values)[0] != "identical":
                return True
    return False


def run_case(op: Any, mode: str, dtype: str, index: int, sample: Any, device: str = "neuron") -> Result:
    name = full_name(op)
    fn = op.inplace_variant if mode == "inplace" else op.op
    seed = 1234 + index
    cpu_err = dev_err = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            cpu = _run(fn, sample, mode, "cpu", seed)
        except Exception as e:  # noqa: BLE001 — any CPU error is an expected outcome
            cpu_err = e
        try:
            dev = _run(fn, sample, mode, device, seed)
        except Exception as e:  # noqa: BLE001
            dev_err = e
    by_design = BY_DESIGN.get(name)
    if cpu_err is not None and dev_err is not None:
        return Result(name, mode, dtype, index, "both_raise", _describe(dev_err))
    if dev_err is not None:
        outcome = "by_design" if by_design and by_design.matches(mode, dtype, dev_err) else "neuron_raises"
        return Result(name, mode, dtype, index, outcome, _describe(dev_err))
    bits = digest(dev)
    if cpu_err is not None:
        return Result(name, mode, dtype, index, "cpu_raises", _describe(cpu_err), bits)
    if names_cpu(sample):
        outcome, detail = compare(cpu, dev, device, values=values_defined(op, dtype), cpu_ok=True)
        return Result(name, mode, dtype, index, "on_cpu" if outcome == "identical" else outcome, detail,
                      bits)
    outcome, detail = compare(cpu, dev, device, values=values_defined(op, dtype))
    if outcome in ("mismatch", "meta") and by_design and by_design.explains(fn, sample, mode, dtype, seed, cpu, dev, device):
        return Result(name, mode, dtype, index, "by_design", f"{detail}: {by_design.why}", bits)
    if outcome == "mismatch" and _cpu_unstable(fn, sample, mode, seed, cpu, dev, op, dtype, device):
        return Result(name, mode, dtype, index, "cpu_unstable", f"{detail}: a rerun differs from its first run",
                      bits)
    return Result(name, mode, dtype, index, outcome, detail, bits)


def run_plan(op: Any, mode: str, dtype: str, *, before: Callable[[str], None] | None = None) -> Iterator[Result]:
    """Runs every sample of one (op, mode, dtype); ``before(key)`` is called ahead of each case
    (the sweep's worker writes it out, so that an abort names its case)."""
    name = full_name(op)
    try:
        it = iter(cases(op, mode, dtype))
        index = 0
        while True:
            try:
                sample = next(it)
            except StopIteration:
                return
            if before is not None:
                before(f"{name}|{mode}|{dtype}|{index}")
            yield run_case(op, mode, dtype, index, sample)
            index += 1
    except Exception as e:  # noqa: BLE001 — the database cannot make samples: not the device's fault
        yield Result(name, mode, dtype, -1, "no_samples", _describe(e))


# ---- differences by design ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ByDesign:
    """A difference the real device has too (documented in docs/backend.md, asserted by
    tests/backend/test_opinfo.py): the device raises ``error`` (a substring of its message) where
    CPU computes, or — with ``values`` — its values differ from CPU's but equal what ``values``
    says the device computes, or — with ``cpu_as_device`` — they equal bit for bit a CPU rerun
    inside that context (which makes CPU take the path the device takes)."""

    why: str
    error: str = ""
    values: Callable[[Any, str, Any, Any], bool] | None = None  # (sample, dtype, cpu result, device result)
    cpu_as_device: Callable[[], Any] | None = None  # () -> a context manager

    def matches(self, mode: str, dtype: str, err: BaseException) -> bool:
        return bool(self.error) and self.error in str(err)

    def explains(self, fn: Callable[..., Any], sample: Any, mode: str, dtype: str, seed: int, cpu: Any, dev: Any,
                 device: str) -> bool:
        if self.values is not None and self.values(sample, dtype, cpu, dev):
            return True
        if self.cpu_as_device is None:
            return False
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                with self.cpu_as_device():
                    want = _run(fn, sample, mode, "cpu", seed)
            except Exception:  # noqa: BLE001 — the device's path raising on CPU explains nothing
                return False
        return compare(want, dev, device)[0] == "identical"


class Float64ResultsAsFloat32(TorchDispatchMode):
    """CPU computing as the device does without float64: every op runs its CPU kernel as asked
    (``dtype=torch.float64`` too), and each float64 result is rounded to float32 before the next op
    sees it — the device's own rule (fallback.cpp ``to_neuron_result``: a float64 result is
    stored as float32). So an op that computes through float64 internally (renorm's backward
    accumulates in ``toAccumulateType(float, device)``, double on CPU and on PrivateUse1; a
    reference's float64 steps cut to int64) gives on CPU, in this mode, the device's bits."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        return tree_map(lambda t: t.to(torch.float32) if isinstance(t, torch.Tensor) and t.dtype == torch.float64
                        else t, out)


@contextlib.contextmanager
def linear_cross_entropy_options_off_cpu() -> Iterator[None]:
    """CPU resolving ``LinearCrossEntropyOptions``' "auto" settings as for a device that is neither
    CPU nor CUDA: torch's ``_resolve_auto_acc_dtype`` picks float32 accumulation for bfloat16 /
    float16 only on ``device.type`` "cpu" or "cuda" (else the input dtype), and ``_AUTO_DEFAULTS``
    is keyed by device type. The chunked kernels themselves branch only on CUDA and MPS, so with
    the options resolved as for neuron, CPU computes what the device computes."""
    from torch.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions as Options

    adjust = Options._adjust

    # torch 2.14 added `prob_target=` after `device`: passed on as given (a fixed signature made
    # every chunked case raise inside the CPU rerun, a mismatch on 2.14).
    def as_off_cpu(self: Any, num_batches: int, in_features: int, num_classes: int, dtype: Any,
                   device: Any = None, *more: Any, **keywords: Any) -> Any:
        return adjust(self, num_batches, in_features, num_classes, dtype, torch.device("neuron"), *more, **keywords)

    Options._adjust = as_off_cpu
    try:
        yield
    finally:
        Options._adjust = adjust


def logspace_float32_steps(start: Any, end: Any, steps: int, base: float = 10.0, *, dtype: Any = None,
                           **_: Any) -> torch.Tensor:
    """What ``_refs.logspace`` gives on a device without float64: the reference computes the
    exponents with ``linspace(dtype=float64)``, which the device computes as float32, and raises
    ``base`` to those float32 exponents (CPU raises it to float64 ones, then rounds)."""
    def scalar(v: Any) -> Any:
        return v.item() if isinstance(v, torch.Tensor) else v

    exps = torch.linspace(scalar(start), scalar(end), steps, dtype=torch.float32)
    return torch.pow(base, exps).to(dtype or torch.get_default_dtype())


def _equals_float32_logspace(sample: Any, dtype: str, cpu: Any, dev: Any) -> bool:
    want = logspace_float32_steps(sample.input, *sample.args, **sample.kwargs)
    return isinstance(dev, torch.Tensor) and _equal_values(want, dev.detach().cpu())


def _float32_rounding_of(sample: Any, dtype: str, cpu: Any, dev: Any) -> bool:
    """Every output equal to CPU's up to float32 rounding (same dtypes and shapes): what an op that
    computes in float64 inside (``dtype=torch.float64``, ``float_power``) gives where float64 is
    computed as float32."""
    ca, da = tree_flatten(cpu)[0], tree_flatten(dev)[0]
    for c, d in zip(ca, da):
        if isinstance(c, torch.Tensor):
            if not isinstance(d, torch.Tensor) or c.shape != d.shape or not c.dtype.is_floating_point:
                return False
            if not _float64_close(c.detach(), d.detach().cpu()):
                return False
    return len(ca) == len(da)


def _layer_norm_stats_as_off_cpu(sample: Any, dtype: str, cpu: Any, dev: Any) -> bool:
    """``_refs.native_layer_norm`` rounds mean and rstd to the input dtype only when its input is
    on CPU (``input.device.type in ["cpu", "mtia"]``): on any other device they stay float32. So
    the device gives float32 statistics which, rounded, are CPU's; the normalised output is CPU's."""
    out_c, mean_c, rstd_c = cpu
    out_d, mean_d, rstd_d = (t.detach().cpu() for t in dev)
    return (_equal_values(out_c, out_d) and mean_d.dtype == rstd_d.dtype == torch.float32
            and _equal_values(mean_c, mean_d.to(mean_c.dtype)) and _equal_values(rstd_c, rstd_d.to(rstd_c.dtype)))


def group_norm_off_cpu(x: torch.Tensor, weight: Any, bias: Any, n: int, c: int, hxw: int, groups: int,
                       eps: float) -> torch.Tensor:
    """The output ``_refs.native_group_norm`` computes for an input that is not on CPU: it takes
    ``(x - mean) * rstd * weight + bias``; for a CPU input with a weight it folds rstd, weight and
    bias into one scale and shift first (``input.device.type == "cpu"``), which rounds differently."""
    acc = x.float().reshape(n, groups, c // groups, hxw)
    var, mean = torch.var_mean(acc, dim=[2, 3], unbiased=False, keepdim=True)
    out = ((acc - mean) * torch.rsqrt(var + eps)).view(x.shape)
    dims = [0] + list(range(2, x.ndim))
    shape = [1 if i in dims else s for i, s in enumerate(x.shape)]
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out.to(x.dtype)


def _group_norm_as_off_cpu(sample: Any, dtype: str, cpu: Any, dev: Any) -> bool:
    want = group_norm_off_cpu(sample.input, *sample.args)
    return _equal_values(want, dev[0].detach().cpu()) and all(
        _equal_values(c, d.detach().cpu()) for c, d in zip(cpu[1:], dev[1:]))


_SPARSE = ByDesign("the device has no sparse layouts: making one raises NotImplementedError",
                   error="tensors are not supported on the device")
_WHY_CPU_INDICES = ("tensor_split takes a tensor of indices only on CPU (as on CUDA): the indices move to "
                    "the device with the sample, so the device run raises PyTorch's own error")
_F64_INSIDE = ByDesign("the op computes in float64 (the sample's dtype=torch.float64, float_power, a "
                       "reference's float64 steps), which the device computes as float32",
                       values=_float32_rounding_of)
_F64_EACH_OP = ByDesign("the op computes through float64 (renorm's backward accumulates in double, a "
                        "reference's float64 steps cut to an integer dtype, torch 2.14's quantile ranks); the "
                        "device rounds each float64 result to float32", cpu_as_device=Float64ResultsAsFloat32)
_LCE_OPTIONS = ByDesign("LinearCrossEntropyOptions resolve acc_dtype='auto' to float32 only on CPU and CUDA "
                        "(torch's own device rule): elsewhere the chunked loss accumulates in bfloat16",
                        cpu_as_device=linear_cross_entropy_options_off_cpu)
_LOGSPACE = ByDesign("the Python reference computes the exponents in float64, stored as float32 on the "
                     "device", values=_equals_float32_logspace)

#: Ops whose difference from CPU is by design (see docs/backend.md "Differences by design").
#: float64 results stored as float32 are by design for every op (``compare``).
BY_DESIGN: dict[str, ByDesign] = {
    "to_sparse": _SPARSE,
    "sparse.mm.reduce": _SPARSE,
    "sparse.sampled_addmm": _SPARSE,
    "tensor_split": ByDesign(_WHY_CPU_INDICES, error="expected tensor_indices_or_sections to be on cpu"),
    "_refs.tensor_split": ByDesign(_WHY_CPU_INDICES, error="it must be on the CPU"),
    "_refs.logspace": _LOGSPACE,
    "_refs.native_layer_norm": ByDesign("the Python reference keeps float32 statistics off CPU (its own device "
                                        "rule, as on CUDA)", values=_layer_norm_stats_as_off_cpu),
    "_refs.native_group_norm": ByDesign("the Python reference computes the output another way off CPU (its own "
                                        "device rule, as on CUDA)", values=_group_norm_as_off_cpu),
    **{name: _F64_INSIDE for name in ("float_power", "_refs.float_power", "softmax.with_dtype",
                                      "log_softmax.with_dtype", "nn.functional.softmin.with_dtype",
                                      "_foreach_norm", "_refs.arange")},
    "_refs.linspace.tensor_overload": _F64_EACH_OP,
    "renorm": _F64_EACH_OP,
    # torch >= 2.14: ranks q.double() * (n - 1) and weights rank - floor(rank) in float64 (2.13: in
    # the input's dtype, which gave the device's bits on CPU too)
    "quantile": _F64_EACH_OP,
    "nanquantile": _F64_EACH_OP,
    "nn.functional.linear_cross_entropy.chunked": _LCE_OPTIONS,
    "nn.functional.linear_cross_entropy.chunked_none": _LCE_OPTIONS,
    "_refs.logspace.tensor_overload": _LOGSPACE,
}


# ---- the worker: cases in a subprocess, so that an abort is recorded ------------------------------


def worker(ops: list[str], after: str | None) -> int:
    """Runs the cases of ``ops`` in order (after ``after``, a case key, when given), writing a
    ``B key`` line before each case and an ``R json`` line after it. Each (op, mode, dtype) runs in
    a forked child: a case that kills the child is written as an ``abort`` result and a new child
    resumes after it (a fork costs milliseconds, a fresh interpreter with torch seconds)."""
    import cuda2neuron.backend as backend

    backend.activate()
    torch.set_num_threads(1)
    db = all_ops()
    skip_op, skip_plan, skip_index = None, None, -1
    if after is not None:
        skip_op, mode, dtype, index = after.split("|")
        skip_plan, skip_index = (mode, dtype), int(index)
    skipping = after is not None
    for name in ops:
        if skipping and name != skip_op:
            continue
        op = db[name]
        for plan in plans(op):
            if skipping and plan != skip_plan:
                continue
            start = skip_index + 1 if skipping else 0
            skipping = False
            while start is not None:
                start = _forked_plan(op, name, plan, start)
    return 0


def _forked_plan(op: Any, name: str, plan: tuple[str, str], start: int) -> int | None:
    """Runs the samples ``start``... of one plan in a forked child; the index to resume from when
    the child died, else None."""
    sys.stdout.flush()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, report through the pipe, leave without cleanup
        os.close(r)
        out = os.fdopen(w, "w")
        try:
            try:
                samples = list(cases(op, *plan))
            except Exception as e:  # noqa: BLE001 — the database cannot make samples here
                emit(out, Result(name, *plan, -1, "no_samples", _describe(e)))
                samples = []
            for index, sample in enumerate(samples):
                if index < start:
                    continue
                out.write(f"B {name}|{plan[0]}|{plan[1]}|{index}\n")
                out.flush()
                emit(out, run_case(op, *plan, index, sample))
            out.flush()
        finally:
            os._exit(0)
    os.close(w)
    last_begin = None
    with os.fdopen(r) as pipe:
        for line in pipe:
            sys.stdout.write(line)
            last_begin = line[2:].strip() if line.startswith("B ") else None
    sys.stdout.flush()
    _, status = os.waitpid(pid, 0)
    if last_begin is None:
        return None
    index = int(last_begin.rsplit("|", 1)[1])
    how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.waitstatus_to_exitcode(status)}"
    emit(sys.stdout, Result(name, *plan, index, "abort", f"process died ({how})"))
    return index + 1


def emit(out: Any, r: Result) -> None:
    out.write("R " + json.dumps(dataclass_dict(r)) + "\n")
    out.flush()


def dataclass_dict(r: Result) -> dict[str, Any]:
    return dataclasses.asdict(r)


def run_chunk(ops: list[str], timeout: float = 600, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Runs a chunk in workers until it is done; each abort becomes a result and the next worker
    resumes after the aborted case. ``timeout`` bounds one case (seconds without a line from the
    worker), not the chunk: a case that runs past it is killed and recorded as ``timeout``, and the
    next worker resumes after it. ``env`` adds to the workers' environment (CUDA2NEURON_POISON=1)."""
    results: list[dict] = []
    after: str | None = None
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", **(env or {})}
    while True:
        cmd = [sys.executable, str(Path(__file__).resolve()), ",".join(ops)] + ([after] if after else [])
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=lambda: [*map(lines.put, proc.stdout), lines.put(None)], daemon=True).start()
        err_tail: list[str] = []
        threading.Thread(target=lambda: err_tail.extend(proc.stderr), daemon=True).start()
        last_begin = last_done = None
        timed_out = False
        while True:
            try:
                line = lines.get(timeout=timeout)
            except queue.Empty:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)  # the worker and its forked child
                break
            if line is None:
                break
            if line.startswith("B "):
                last_begin = line[2:].strip()
            elif line.startswith("R "):
                r = json.loads(line[2:])
                results.append(r)
                last_begin = None
                if r["index"] >= 0:
                    last_done = f"{r['op']}|{r['mode']}|{r['dtype']}|{r['index']}"
        rc = proc.wait()
        if rc == 0 and not timed_out:
            return results
        if last_begin is None:
            if timed_out and last_done is not None:  # slow between cases (sample generation): go on
                after = last_done
                continue
            # died outside a case (import, build, sample generation): record it against the chunk
            why = f"no output for {timeout:.0f} s" if timed_out else f"exit {rc}"
            results.append({"op": ops[0], "mode": "-", "dtype": "-", "index": -1, "outcome": "abort",
                            "detail": f"worker {why} outside a case: {[x.strip() for x in err_tail[-1:]]}"})
            return results
        op, mode, dtype, index = last_begin.split("|")
        if timed_out:
            results.append({"op": op, "mode": mode, "dtype": dtype, "index": int(index), "outcome": "timeout",
                            "detail": f"case ran over {timeout:.0f} s (killed)"})
        else:
            results.append({"op": op, "mode": mode, "dtype": dtype, "index": int(index), "outcome": "abort",
                            "detail": f"process died (exit {rc})"})
        after = last_begin


if __name__ == "__main__":
    # python opinfo_driver.py OP1,OP2,... [AFTER]: the worker of run_chunk (results on stdout)
    raise SystemExit(worker(sys.argv[1].split(","), sys.argv[2] if len(sys.argv) > 2 else None))
