"""Float64 golden mode: the original program computed in float64 with autocast off.

Every run is compared against this golden; the port's error must stay within a small factor of
the reference's own error. Mechanism: default dtype float64, explicit low-precision dtypes and
`.float()/.half()/.bfloat16()` casts mapped to float64, and floating tensor arguments that still
arrive in low precision (numpy data, loaded checkpoints) upcast on the way into each op.
Trap: the *target* of an in-place op (`x.add_`, `x[i] = v`, `out=`) is never upcast — that
would write into a temporary copy and silently drop the update.
Trap: a tensor rebuilt over an existing storage keeps the storage's dtype. torch builds it as an
empty tensor `of the storage's dtype` and then `set_`s the storage in; with that dtype mapped to
float64 the float32 bytes were read as float64 (8 bytes an element: twice the storage), so every
float32 batch a DataLoader worker collated in shared memory (a numpy dataset, a spawn context) and
every float32 checkpoint `torch.load` read made the golden raise "Trying to resize storage that is
not resizable". The rebuilt tensor stays float32 and is upcast on its way into each op.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from cuda2neuron.validate._rng import RANDOM_OPS

__all__ = ["Float64Mode", "install"]

_LOW = (torch.float32, torch.float16, torch.bfloat16)
_CASTS = {"float", "half", "bfloat16"}
_INPLACE_NAMES = {"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "set_"}


def _up(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.double() if value.dtype in _LOW else value
    if isinstance(value, (list, tuple)) and value and any(isinstance(v, torch.Tensor) for v in value):
        return type(value)(_up(v) for v in value) if not hasattr(value, "_fields") else value
    return value


class Float64Mode(TorchFunctionMode):
    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        if name in _CASTS and args and isinstance(args[0], torch.Tensor) and len(args) == 1:
            return args[0].double() if args[0].is_floating_point() else func(*args, **kwargs)
        if kwargs.get("dtype") in _LOW:
            kwargs["dtype"] = torch.float64
        if name == "to":
            args = tuple(torch.float64 if a in _LOW else a for a in args)
        inplace = name.endswith("_") or name in _INPLACE_NAMES or "out" in kwargs
        args = tuple(a if (inplace and i == 0) else _up(a) for i, a in enumerate(args))
        kwargs = {k: (v if k == "out" else _up(v)) for k, v in kwargs.items()}
        return func(*args, **kwargs)


class Float32DrawsMode(TorchDispatchMode):
    """Random draws into float64 tensors are made in float32 and upcast.

    Trap: float64 draws consume the generator differently from float32 (uniform_ takes 53-bit
    draws), which would shift every later random number — the golden would see other initial
    weights, inputs and dropout masks than the runs it judges. At the ATen level so that draws
    inside composites (nn.init.kaiming_uniform_, dropout) are caught too.
    """

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket not in RANDOM_OPS:
            return func(*args, **kwargs)
        if func._schema.is_mutable and args and args[0].dtype == torch.float64:
            tmp = torch.empty(args[0].shape, dtype=torch.float32, device=args[0].device)
            func(tmp, *args[1:], **kwargs)
            args[0].copy_(tmp)
            return args[0]
        dtype = kwargs.get("dtype")
        if dtype is None and func.overloadpacket in _FACTORIES:
            dtype = torch.get_default_dtype()
        if dtype == torch.float64 or (
            dtype is None and func.overloadpacket in _LIKE and args[0].dtype == torch.float64
        ):
            kwargs = {**kwargs, "dtype": torch.float32}
            return func(*args, **kwargs).to(torch.float64)
        return func(*args, **kwargs)


_LIKE = {torch.ops.aten.rand_like, torch.ops.aten.randn_like}
_FACTORIES = {torch.ops.aten.rand, torch.ops.aten.randn}


def _rebuild_keeping_dtype(rebuild: Any) -> Any:
    """torch._utils._rebuild_tensor with the dtype mapping off: the storage's bytes are of its dtype."""

    def _rebuild_tensor(storage, storage_offset, size, stride):
        with torch._C.DisableTorchFunction():
            return rebuild(storage, storage_offset, size, stride)

    return _rebuild_tensor


def install() -> Float64Mode:
    # Both the unpickling of tensors sent between processes (torch.multiprocessing.reductions) and
    # torch.load reach it as torch._utils._rebuild_tensor, looked up at call time.
    torch._utils._rebuild_tensor = _rebuild_keeping_dtype(torch._utils._rebuild_tensor)
    torch.set_default_dtype(torch.float64)
    Float32DrawsMode().__enter__()
    mode = Float64Mode()
    mode.__enter__()
    return mode
