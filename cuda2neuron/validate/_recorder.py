"""Global hooks that record a run: every nn.Module forward output, each loss, the gradients seen
by each optimizer step, and the initial weights hand-over between runs.

The same recorder serves entry mode (the harness drives the loop) and script mode (the user's
loop runs unmodified): module forward hooks, optimizer step pre/post hooks and a wrapper around
`Tensor.backward` are process-global, so no user code changes.

Skipped steps (fp16 loss scaling): a GradScaler skips `optimizer.step()` when the scaled
gradients overflow. The reference reports every optimizer step's outcome (a `step` frame, sent on
to the other runs); the golden and the port wait for it at their own step and, where the original
skipped, skip too (their parameters and optimizer state are put back after the step): a bf16
port that needs no loss scaling, or the float64 golden that never overflows, would otherwise take
an update the original never took and every later tensor would differ. The skipped step's
gradients (inf/NaN in the original) are not recorded by any run.

Sign alignment (normalising optimizers): Adam's first update is ~lr * g / (|g| + eps) per
element, so where a gradient element is rounding noise — the port's and the original's
computations of it disagree in sign, or in size by more than 1/8, at a size the comparison
already accepts as rounding — the two runs would move that weight by up to 2*lr apart, and every
later forward through it (a LayerScale gamma that starts at 1e-5, a position-embedding row)
would differ by far more than rounding. The reference's step frame therefore carries its
(unscaled) gradients; the golden and the port record their own, then follow the original's
value at exactly those elements (`_rounding_noise`) before their optimizer steps. Gradients are
compared before the alignment, so a wrong gradient still FAILs at its own step; the alignment
never touches an element larger than `SIGN_NOISE` of the tensor's largest, so a wrong learning
rate, a dropped `unscale_` or a wrong loss still diverge.

Loops without a torch.optim optimizer (`p.data.add_(p.grad, alpha=-lr)`, common in older code)
have no step hook: there a step ends with a backward whose gradients the loop then consumed
(`_ManualSteps`).
"""

from __future__ import annotations

import functools
import math
import os
import types
from collections import defaultdict
from typing import Any, Callable

import torch
import torch.nn as nn
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from cuda2neuron.validate._class_lines import class_lines
from cuda2neuron.validate._compare import to_tensor
from cuda2neuron.validate._worker_config import SKIPPED_STEPS_CAP

__all__ = ["Recorder", "StopRun", "tensor_record", "flatten"]


class StopRun(BaseException):
    """Raised inside user code to end a script after K training steps.

    A BaseException so that a user's `except Exception:` cannot swallow it.
    """


def _amp_dtype() -> str | None:
    """The autocast dtype in force right now on any device type, or None."""
    for dev in ("cpu", "cuda", torch._C._get_privateuse1_backend_name()):
        try:
            if torch.is_autocast_enabled(dev):
                return str(torch.get_autocast_dtype(dev)).replace("torch.", "")
        except (RuntimeError, ValueError):
            continue
    return None


def tensor_record(t: torch.Tensor) -> dict[str, Any]:
    """Raw bytes of a tensor: copying only its own elements (pickling a view would copy the whole
    underlying storage), in any dtype including bfloat16 (which numpy lacks)."""
    from cuda2neuron.validate._accounting import paused

    with paused():
        return _tensor_record(t)


def _local(t: torch.Tensor) -> torch.Tensor:
    """A DTensor (FSDP2's sharded parameters and gradients) as this rank's shard; others as is.

    Each rank's shard is what rank r of the port is compared with: the reference shards the same
    way on the same world size.
    """
    import sys

    module = sys.modules.get("torch.distributed.tensor")  # loaded by whoever made a DTensor
    dtensor = getattr(module, "DTensor", None) if module is not None else None
    if dtensor is not None and isinstance(t, dtensor):
        return t.to_local()
    return t


def _tensor_record(t: torch.Tensor) -> dict[str, Any]:
    t = _local(t.detach())
    if t.device.type == "cpu":
        host = t.contiguous()
    elif _CPU_ALIAS is not None and t.device.type == torch._C._get_privateuse1_backend_name():
        # The emulator's memory is host memory: read it in place, no device copy to count.
        host = _CPU_ALIAS(t).contiguous()
    else:
        host = t.to("cpu").contiguous()
    if host.dtype.is_complex:
        host = torch.view_as_real(host)
    return {
        "dtype": str(t.dtype).replace("torch.", ""),
        "shape": tuple(t.shape),
        "device": t.device.type,
        "device_index": t.device.index,  # which device of a multi-device node (one per rank)
        # a bytearray: it travels out of band and arrives writable, read in place (_wire.py)
        "data": bytearray(host.reshape(-1).view(torch.uint8).numpy()),
        "host_dtype": str(host.dtype).replace("torch.", ""),
        "host_shape": tuple(host.shape),
    }


_CPU_ALIAS: Any = None


def use_cpu_alias(fn: Any) -> None:
    global _CPU_ALIAS
    _CPU_ALIAS = fn


def flatten(obj: Any, prefix: str = "") -> list[tuple[str, torch.Tensor]]:
    """Tensor leaves of a module output: tensors, tuples/lists, dicts, ModelOutput-style objects."""
    out: list[tuple[str, torch.Tensor]] = []
    if isinstance(obj, torch.Tensor):
        out.append((prefix, obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(flatten(v, f"{prefix}.{k}"))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out.extend(flatten(v, f"{prefix}.{i}"))
    return out


class Recorder:
    def __init__(
        self,
        emit: Callable[[dict[str, Any]], None],
        receive: Callable[[], Any],
        role: str,
        steps: int,
        tree_root: str,
        stop_after_steps: bool,
        on_first_root: Callable[[], None] | None = None,
        taken_steps: int | None = None,
    ) -> None:
        self.emit = emit
        self.receive = receive
        self.role = role
        self.steps = steps
        self.taken_steps = taken_steps
        self.tree_root = tree_root
        self.stop_after_steps = stop_after_steps
        self.on_first_root = on_first_root
        self.step = 0
        self.depth = 0
        self.roots: list[nn.Module] = []
        self.names: dict[int, tuple[int, str]] = {}
        self.param_names: dict[int, str] = {}
        self.calls: dict[str, int] = defaultdict(int)
        self.loss_calls = 0
        self.classes_sent: set[type] = set()
        self.class_spans: dict[str, dict[str, Any]] = {}
        self.records = 0
        self.paused = False
        self.amp: str | None = None
        self._handles: list[Any] = []
        self._orig_backward: Any = None
        self._in_backward = False
        self._scaled: tuple[torch.Tensor, torch.Tensor] | None = None
        self.optimizer_seen = False
        self._manual = _ManualSteps()
        # Frames from the parent that arrived before they were asked for (init_state / step).
        self._inbox: list[dict[str, Any]] = []
        self._reference_done = False
        # Set in _opt_pre when the reference skipped this step: what to put back in _opt_post.
        self._restore: tuple[Any, list[tuple[torch.Tensor, torch.Tensor]], dict[Any, Any]] | None = None
        self.skipped_steps: list[int] = []
        self.scaler_depth = 0
        # Modules whose forward ran, and the ones holding weights seen so far that never did
        # (`unexercised`): an EMA kept for evaluation only is neither forwarded nor compared.
        self.called: set[int] = set()
        self._unseen: dict[int, tuple[str, Any]] = {}
        # Flat tensors made of the roots' parameters or gradients (apex O2-style fp32 master
        # weights: `_flatten_dense_tensors`, `parameters_to_vector`): (storage address, numel) ->
        # the parameters' names and shapes in order (`_segments`).
        self._flat: dict[tuple[int, int], list[torch.Size]] = {}

    # -- installation -------------------------------------------------------------------------
    def install(self) -> None:
        # Never traced by torch.compile: dynamo inlines global hooks into the user's graph, and
        # recording (host copies, bytes, pipe writes) compiled into it crashed the reference in
        # AOTAutograd's output-alias replay (a compiled nn.Sequential, any backend).
        eager = functools.partial(torch.compiler.disable, recursive=True)
        self._handles.append(nn.modules.module.register_module_forward_pre_hook(eager(self._pre)))
        self._handles.append(nn.modules.module.register_module_forward_hook(eager(self._post), always_call=True))
        self._handles.append(register_optimizer_step_pre_hook(eager(self._opt_pre)))
        self._handles.append(register_optimizer_step_post_hook(eager(self._opt_post)))
        self._orig_backward = torch.Tensor.backward
        recorder = self
        self._orig_flatten = _patch_flatteners(recorder)
        orig = self._orig_backward

        def backward(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            # Trap: with a TorchFunctionMode active, Tensor.backward re-dispatches through the
            # mode and lands here again — count the user's call once.
            if recorder._in_backward:
                return orig(self, *args, **kwargs)
            recorder.on_backward(self)
            recorder._in_backward = True
            try:
                result = orig(self, *args, **kwargs)
            finally:
                recorder._in_backward = False
            recorder.after_backward()
            return result

        torch.Tensor.backward = backward  # type: ignore[method-assign]
        # The loss is recorded before loss scaling: a bf16 port legitimately disables the
        # GradScaler that the fp16 original runs with, so scaled losses would never agree.
        self._scaler_classes = [torch.amp.grad_scaler.GradScaler]
        try:
            from cuda2neuron.validate._golden_scaler import GoldenGradScaler

            self._scaler_classes.append(GoldenGradScaler)
        except ImportError:  # pragma: no cover
            pass
        self._orig_scale = [cls.scale for cls in self._scaler_classes]
        self._orig_step = [cls.step for cls in self._scaler_classes]
        # Only the class's own unscale_ (a subclass that inherits it must not be wrapped twice).
        self._orig_unscale = [cls.__dict__.get("unscale_") for cls in self._scaler_classes]
        for cls, orig_scale, orig_step in zip(self._scaler_classes, self._orig_scale, self._orig_step):
            cls.scale = _scale_wrapper(recorder, orig_scale)  # type: ignore[method-assign]
            cls.step = _step_wrapper(recorder, orig_step)  # type: ignore[method-assign]
        for cls, orig_unscale in zip(self._scaler_classes, self._orig_unscale):
            if orig_unscale is not None:
                cls.unscale_ = _unscale_wrapper(orig_unscale)  # type: ignore[method-assign]

    def uninstall(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        for owner, attr, fn in getattr(self, "_orig_flatten", ()):
            setattr(owner, attr, fn)
        self._orig_flatten = []
        if self._orig_backward is not None:
            torch.Tensor.backward = self._orig_backward  # type: ignore[method-assign]
            for cls, orig_scale, orig_step in zip(self._scaler_classes, self._orig_scale, self._orig_step):
                cls.scale = orig_scale  # type: ignore[method-assign]
                cls.step = orig_step  # type: ignore[method-assign]
            for cls, orig_unscale in zip(self._scaler_classes, self._orig_unscale):
                if orig_unscale is not None:
                    cls.unscale_ = orig_unscale  # type: ignore[method-assign]

    # -- recording ----------------------------------------------------------------------------
    def send_tensor(self, key: str, kind: str, t: torch.Tensor, module_path: str | None = None,
                    module_class: str | None = None) -> None:
        if self.paused:
            return
        self.emit(self.tensor_frame(key, kind, t, module_path, module_class))

    def tensor_frame(self, key: str, kind: str, t: torch.Tensor, module_path: str | None = None,
                     module_class: str | None = None) -> dict[str, Any]:
        """The record frame of one tensor (counted as recorded: the caller sends it)."""
        rec = tensor_record(t)
        amp = _amp_dtype()
        # Sticky: gradients and losses computed outside the autocast block still carry the
        # precision of the forward that produced them.
        self.amp = amp or self.amp
        rec.update(type="tensor", key=key, kind=kind, step=self.step, module_path=module_path,
                   module_class=module_class, amp=self.amp)
        self.records += 1
        return rec

    def adopt_root(self, module: nn.Module) -> int:
        """Register a top-level module; hand the reference's initial weights to the other runs."""
        idx = len(self.roots)
        self.roots.append(module)
        # Submodules an earlier root already holds (a loss module keeping the model, as
        # `DetectionLoss(model)` does): their weights were handed over with that root, and loading
        # them again — in place, after the model's forward — broke the golden's and the port's
        # backward ("modified by an inplace operation").
        held = [path for path, sub in module.named_modules() if path and id(sub) in self.names]
        for path, sub in module.named_modules():
            self.names.setdefault(id(sub), (idx, path))
            cls = type(sub)
            if cls not in self.classes_sent:
                self.classes_sent.add(cls)
                info = class_lines(cls, self.tree_root, self.class_spans)
                if info is not None:
                    self.emit({"type": "class", "class": cls.__qualname__, **info})
        for path, p in module.named_parameters():
            self.param_names.setdefault(id(p), f"{idx}:{path}")
        shared: dict[int, list[str]] = defaultdict(list)
        for path, p in module.named_parameters(remove_duplicate=False):
            shared[id(p)].append(path)
        self.emit({"type": "ties", "root": idx, "groups": sorted(tuple(g) for g in shared.values() if len(g) > 1)})
        self.paused = True
        try:
            if self.role == "reference":
                state = {k: tensor_record(v) for k, v in module.state_dict().items() if not _under(k, held)}
                self.emit({"type": "init_state", "root": idx, "state": state})
            else:
                msg = self._receive_kind("init_state")
                if not msg or msg.get("root") != idx:
                    raise RuntimeError(f"validate: expected the reference's initial weights for module #{idx}")
                from cuda2neuron.validate._accounting import paused

                with paused():  # validate's copy, not the port's work
                    try:
                        _load_state(module, msg["state"], held)
                    except RuntimeError as exc:
                        # validate's own step: never "the port raised at <the user's forward>".
                        text = str(exc).removeprefix("validate: ")
                        raise RuntimeError(f"validate: handing the original's initial weights to the {self.role}'s "
                                           f"{type(module).__qualname__} (module #{idx}) failed — validate's own "
                                           f"step, not a line of the port: {text}") from exc
        finally:
            self.paused = False
        if idx == 0 and self.on_first_root is not None:
            # Residency is measured from here on: building the model and its data on the host
            # before moving them to the device is how PyTorch code is written, not a porting bug.
            self.on_first_root()
        return idx

    def _transparent(self, module: nn.Module) -> bool:
        """Modules that are not the user's model and are not recorded, their inner modules taking
        their place: a graph torch.compile made (an fx GraphModule run inside a user module's
        forward; not made alike in every run, the backends differ), and nn.DataParallel and
        DistributedDataParallel — a port drops the first (CN411) and may drop the second (one
        device, or a hand-written all_reduce), so the model it wraps is the root in every run, its
        weights handed over under the same names (the wrapper's "module." prefix made the port's
        load fail, shown as a crash of the port at the user's forward)."""
        if isinstance(module, (nn.DataParallel, nn.parallel.DistributedDataParallel)):
            return True
        return self.depth > 0 and isinstance(module, torch.fx.GraphModule) and id(module) not in self.names

    def _pre(self, module: nn.Module, args: Any) -> None:
        if self._transparent(module):
            return
        self.called.add(id(module))
        if self.depth == 0 and not self.paused:
            # A hand-written loop zeroes its gradients before the next forward: the step ends
            # there, so the next step's forward outputs are not filed under this one.
            if not self.optimizer_seen and self._manual.consumed(self._root_params()):
                self.end_manual_step()
            if id(module) not in self.names:
                self.adopt_root(module)
        self.depth += 1

    def _post(self, module: nn.Module, args: Any, output: Any) -> None:
        if self._transparent(module):
            return  # the depth is what it was at its _pre, which returned early too
        self.depth = max(0, self.depth - 1)
        if self.paused:
            return
        root, path = self.names.get(id(module), (-1, f"?{type(module).__name__}"))
        name = f"{root}:{path}"
        n = self.calls[name]
        self.calls[name] += 1
        cls = type(module).__qualname__
        for suffix, t in flatten(output):
            self.send_tensor(f"s{self.step}/fwd/{name}#{n}{suffix}", "forward", t, name, cls)

    def _root_params(self) -> list[tuple[str, torch.Tensor]]:
        return [(f"{idx}:{path}", p) for idx, root in enumerate(self.roots) for path, p in root.named_parameters()]

    def after_backward(self) -> None:
        if not self.optimizer_seen and not self.paused:
            self._manual.snapshot(self._root_params())

    def end_manual_step(self) -> None:
        """Close a pending manual step: its gradients as they were right after its backward."""
        grads = self._manual.take()
        if grads is None:
            return
        for name, rec in grads:
            rec.update(type="tensor", key=f"s{self.step}/grad/{name}", kind="grad", step=self.step,
                       module_path=name, module_class=None, amp=self.amp)
            self.records += 1
            self.emit(rec)
        self._opt_post(None, (), {})

    def done(self) -> bool:
        """All steps recorded: ``taken_steps`` (the logic pair) or ``steps`` optimizer steps that
        the original did not skip. Its GradScaler skips the first steps of fp16 training (a tiny
        model at the default scale 65536 overflows for several): those compare no gradients, and
        a run that counted them could end before its first compared update — a PASS that judged
        no step. So the run steps on, up to ``SKIPPED_STEPS_CAP`` skipped steps past ``steps``."""
        target = self.taken_steps if self.taken_steps is not None else self.steps
        if self.step - len(self.skipped_steps) >= target:
            return True
        return self.step >= self.steps + SKIPPED_STEPS_CAP

    def on_backward(self, loss: torch.Tensor) -> None:
        if not self.optimizer_seen and self._manual.consumed(self._root_params()):
            self.end_manual_step()
        if self.stop_after_steps and self.done():
            self.look_for_unexercised()
            raise StopRun()
        if self._scaled is not None and self._scaled[0] is loss:
            loss = self._scaled[1]
        self._scaled = None
        if loss.numel() == 1:
            self.send_tensor(f"s{self.step}/loss#{self.loss_calls}", "loss", loss)
        self.loss_calls += 1

    # -- step alignment (see the module docstring) --------------------------------------------
    def _receive_kind(self, kind: str) -> dict[str, Any] | None:
        """The next frame of this kind from the parent (others are kept for later); None at EOF."""
        for i, msg in enumerate(self._inbox):
            if msg.get("type") == kind:
                return self._inbox.pop(i)
        while True:
            msg = self.receive()
            if not msg:
                return None
            if msg.get("type") == "reference_done":
                self._reference_done = True
                if kind == "step":
                    return None
                continue
            if msg.get("type", "init_state") == kind:
                return msg
            self._inbox.append(msg)

    def reference_step(self, step: int) -> dict[str, Any] | None:
        """Golden / port: the reference's outcome of optimizer step ``step`` (waits for it): whether
        its GradScaler skipped it and, when it stepped, its gradients. None when the reference
        has no such step."""
        if self.role == "reference" or self._reference_done:
            return None
        while True:
            msg = self._receive_kind("step")
            if msg is None:
                return None
            if msg["step"] == step:
                return msg
            # an earlier step's outcome this run consumed no step for: not expected, skip it

    def reference_skipped(self, step: int) -> bool:
        """Golden / port: did the reference skip optimizer step ``step``? (waits for its outcome)."""
        outcome = self.reference_step(step)
        return bool(outcome and outcome["skipped"])

    def scaler_skipped(self, scaler: Any) -> None:
        """A GradScaler's step() returned without calling optimizer.step() (inf/NaN gradients)."""
        self.optimizer_seen = True  # an optimizer defines the steps, even one that never stepped yet
        self._manual.take()
        if self.paused:
            return
        if self.role == "reference":
            self.emit({"type": "step", "step": self.step, "skipped": True, "scale": _scale_of(scaler)})
        else:
            self.reference_skipped(self.step)  # consume the reference's outcome of this step
        self.skipped_steps.append(self.step)
        self._opt_post(None, (), {})

    def _opt_pre(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self.optimizer_seen = True
        self._manual.take()  # an optimizer defines the steps; the post-backward snapshot is moot
        if self.paused:
            return
        named = [(self.param_names.get(id(p), f"?group{gi}.{pi}"), p)
                 for gi, group in enumerate(optimizer.param_groups) for pi, p in enumerate(group["params"])
                 if p.grad is not None]
        if self._flat:
            named = self._segments(named)
        if self.role == "reference":
            # The gradients travel in the step frame: the parent records them and hands them on
            # to the other runs for the sign alignment (module docstring).
            grads = [self.tensor_frame(f"s{self.step}/grad/{name}", "grad", p.grad, name) for name, p in named]
            self.emit({"type": "step", "step": self.step, "skipped": False, "grads": grads})
            return
        outcome = self.reference_step(self.step)
        if outcome is not None and outcome["skipped"]:
            self.skipped_steps.append(self.step)
            self._restore = (optimizer, *_snapshot(optimizer))
            return  # its gradients are not compared: the original's were inf/NaN
        for name, p in named:
            self.send_tensor(f"s{self.step}/grad/{name}", "grad", p.grad, name)
        if outcome is not None and outcome.get("grads"):
            aligned = _follow_reference_signs(named, {g["module_path"]: g for g in outcome["grads"]})
            if aligned:
                self.emit({"type": "aligned", "step": self.step, "elements": aligned})
        from cuda2neuron.validate import _accounting

        _accounting.optimizer_step(starting=True)

    def _opt_post(self, optimizer: torch.optim.Optimizer | None, args: Any, kwargs: Any) -> None:
        if optimizer is not None and self.role != "reference":
            from cuda2neuron.validate import _accounting

            _accounting.optimizer_step(starting=False)
        if self._restore is not None and optimizer is self._restore[0]:
            _, params, state = self._restore
            self._restore = None
            _put_back(optimizer, params, state)
        self.step += 1
        self.calls.clear()
        self.loss_calls = 0
        if self.done():
            # The last step: the training loop's frames (and what they hold) are alive now; a
            # script that ends on its own has dropped them by the time the run ends.
            self.look_for_unexercised()

    def look_for_unexercised(self) -> None:
        """Note the modules with parameters or buffers that the run's code holds (the roots' own,
        and any other module alive) and that no forward has run so far; whether one runs later is
        decided at the end (`unexercised`)."""
        if self.role != "reference" or self.paused:
            return
        import gc
        import sys

        held: set[int] = set()
        for root in self.roots:
            held.update(id(m) for m in root.modules())
        names = _frame_names(sys._getframe(1))
        for idx, root in enumerate(self.roots):
            for path, sub in root.named_modules():
                if path and _weights(sub):
                    self._unseen.setdefault(id(sub), (f"{idx}:{path}", sub))
        # type(), not isinstance: a dead weakref.proxy among gc's objects raises ReferenceError
        # on its __class__ (torch.compile's caches hold such proxies).
        loose = [m for m in gc.get_objects() if issubclass(type(m), nn.Module) and id(m) not in held and _weights(m)]
        inner = {id(sub) for m in loose for sub in m.modules() if sub is not m}
        for m in loose:
            if id(m) not in inner:
                self._unseen.setdefault(id(m), (names.get(id(m)) or type(m).__qualname__, m))

    def unexercised(self) -> list[str]:
        """The modules noted by `look_for_unexercised` that neither they nor anything inside them
        ever ran a forward, outermost only: ``"ema (ViT, 52 parameters)"``, ``"0:aux_head (...)"``."""
        out: list[str] = []
        skip: set[int] = set()
        for key, (name, m) in self._unseen.items():
            if key in skip:
                continue
            subs = list(m.modules())
            if any(id(sub) in self.called for sub in subs):
                continue
            skip.update(id(sub) for sub in subs)
            n_params = sum(1 for _ in m.parameters())
            n_buffers = sum(1 for _ in m.buffers())
            out.append(f"{name} ({type(m).__qualname__}, {n_params} parameters, {n_buffers} buffers)")
        return out

    def flattened(self, tensors: list[Any], flat: torch.Tensor) -> None:
        """``flat`` was made by concatenating ``tensors`` (their shapes are kept: the model that
        owns them is often built, but not yet forwarded, when its master weights are made)."""
        if len(tensors) > 1 and all(isinstance(t, torch.Tensor) for t in tensors):
            self._flat[(flat.untyped_storage().data_ptr(), flat.numel())] = [t.shape for t in tensors]

    def _names_of(self, shapes: list[torch.Size]) -> list[tuple[str, torch.Size]] | None:
        """The parameters of a root whose shapes are, in order, ``shapes`` (all of them, or the
        ones that train), by name."""
        for idx, root in enumerate(self.roots):
            params = list(root.named_parameters())
            for subset in (params, [(n, p) for n, p in params if p.requires_grad]):
                if [p.shape for _, p in subset] == shapes:
                    return [(f"{idx}:{n}", p.shape) for n, p in subset]
        return None

    def _segments(self, named: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        """Each gradient of a flat master parameter as one record per parameter it holds: one
        record for the whole model, normalised by its largest gradient, read a 50-90% error in a
        few layers as 3e-4, and the sign alignment then took the original's values there — the
        defect vanished. The views write through to the flat gradient (the alignment)."""
        out: list[tuple[str, Any]] = []
        for name, p in named:
            grad = p.grad
            shapes = None
            if grad.dim() == 1:
                shapes = (self._flat.get((grad.untyped_storage().data_ptr(), grad.numel()))
                          or (self._flat.get((p.untyped_storage().data_ptr(), p.numel()))
                              if isinstance(p, torch.Tensor) and grad.numel() == p.numel() else None))
            segments = self._names_of(shapes) if shapes else None
            if segments is None:
                out.append((name, p))
                continue
            offset = 0
            for seg_name, shape in segments:
                n = shape.numel()
                out.append((seg_name, types.SimpleNamespace(grad=grad[offset:offset + n].view(shape))))
                offset += n
        return out

    def send_params(self) -> None:
        for idx, root in enumerate(self.roots):
            for path, p in root.named_parameters():
                self.send_tensor(f"final/param/{idx}:{path}", "param", p, f"{idx}:{path}")


def _patch_flatteners(recorder: Recorder) -> list[tuple[Any, str, Any]]:
    """Wrap the functions that flatten a model's tensors into one (``torch._utils.
    _flatten_dense_tensors``, apex's and DeepSpeed's master weights; ``torch.nn.utils.
    parameters_to_vector``) so the recorder knows the segments; the originals, to put back."""
    import torch._utils as tu
    import torch.nn.utils as nu
    import torch.nn.utils.convert_parameters as cp

    saved: list[tuple[Any, str, Any]] = []

    def wrap(fn: Any) -> Any:
        @functools.wraps(fn)
        def flatten(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            tensors = list(tensors)  # parameters_to_vector takes a generator
            flat = fn(tensors, *args, **kwargs)
            if isinstance(flat, torch.Tensor) and not recorder.paused:
                recorder.flattened(tensors, flat)
            return flat

        return flatten

    for owner, attr in ((tu, "_flatten_dense_tensors"), (nu, "parameters_to_vector"),
                        (cp, "parameters_to_vector")):
        fn = getattr(owner, attr, None)
        if fn is not None:
            saved.append((owner, attr, fn))
    wrapped = {id(fn): wrap(fn) for _, _, fn in saved}
    for owner, attr, fn in saved:
        setattr(owner, attr, wrapped[id(fn)])
    return saved


def _weights(module: nn.Module) -> bool:
    """The module holds a parameter or a buffer (itself or inside)."""
    return next(module.parameters(), None) is not None or next(module.buffers(), None) is not None


def _frame_names(frame: Any) -> dict[int, str]:
    """The names the user's frames on the stack give their modules: ``ema`` for a local, and
    ``self.ema`` / ``trainer.ema`` for an attribute of one."""
    names: dict[int, str] = {}
    while frame is not None:
        if not frame.f_code.co_filename.startswith(_OWN):
            for var, value in list(frame.f_locals.items()):
                if isinstance(value, nn.Module):
                    names.setdefault(id(value), var)
                elif not isinstance(value, (type, types.ModuleType)):
                    try:
                        attrs = list(vars(value).items())
                    except Exception:  # noqa: BLE001 - no __dict__, or a proxy that refuses it
                        continue
                    for attr, inner in attrs:
                        if isinstance(inner, nn.Module):
                            names.setdefault(id(inner), f"{var}.{attr}")
        frame = frame.f_back
    return names


_OWN = os.path.dirname(os.path.abspath(__file__))  # validate's own frames name nothing of the user's


class _ManualSteps:
    """Step boundaries of a loop that updates parameters by hand.

    After each backward (while no optimizer has stepped) the gradients are copied. At the next
    top-level forward or backward the previous one was a finished step if the loop consumed its
    gradients in between:
    a gradient set to None or replaced (`zero_grad()`), or changed in place (`grad.zero_()`,
    clipping). Gradients left untouched mean accumulation: same step. Trap: waiting for the
    next backward to decide is what keeps an optimizer loop out of this — with a live fp16
    GradScaler the post-backward gradients are scaled and would never match a bf16 port.
    Trap: an in-place change is detected by value only, never by the version counter: under a
    TorchDispatchMode (the port's and the CUDA reference's CpuRandomMode) foreach ops such as
    clip_grad_norm_'s `_foreach_mul_` leave the counter alone, so a clip by 1.0 (the norm was
    under the limit) bumped it in the shim reference only and the runs split steps differently.
    """

    def __init__(self) -> None:
        self._grads: list[tuple[str, dict[str, Any]]] | None = None
        # The gradient tensor itself is held (not its id): a freed id can be reused.
        self._marks: dict[int, tuple[torch.Tensor, bytes]] = {}

    def snapshot(self, params: list[tuple[str, torch.Tensor]]) -> None:
        grads = [(name, p, p.grad) for name, p in params if p.grad is not None]
        self._grads = [(name, tensor_record(g)) for name, _, g in grads]
        self._marks = {id(p): (g, rec["data"]) for (_, p, g), (_, rec) in zip(grads, self._grads)}

    def consumed(self, params: list[tuple[str, torch.Tensor]]) -> bool:
        if self._grads is None:
            return False
        for _, p in params:
            mark = self._marks.get(id(p))
            if mark is None:
                continue
            grad, data = mark
            if p.grad is not grad or tensor_record(grad)["data"] != data:
                return True
        return False

    def take(self) -> list[tuple[str, dict[str, Any]]] | None:
        grads, self._grads, self._marks = self._grads, None, {}
        return grads


def _scale_wrapper(recorder: Recorder, orig_scale: Any) -> Any:
    def scale(self: Any, outputs: Any) -> Any:
        scaled = orig_scale(self, outputs)
        if isinstance(outputs, torch.Tensor) and isinstance(scaled, torch.Tensor):
            recorder._scaled = (scaled, outputs)
        return scaled

    return scale


def _unscale_wrapper(orig_unscale: Any) -> Any:
    """GradScaler.unscale_ with the op accounting paused: torch's own bookkeeping there
    (``self._scale.double().reciprocal().float()``, a one-element float64 op on every device)
    made every migrated port with a live fp16 GradScaler WARN "float64 ops" in the residency
    audit. The unscale itself runs on the gradients' device; nothing of the user's is hidden."""

    def unscale_(self: Any, optimizer: Any) -> Any:
        from cuda2neuron.validate._accounting import paused

        with paused():
            return orig_unscale(self, optimizer)

    return unscale_


def _step_wrapper(recorder: Recorder, orig_step: Any) -> Any:
    """GradScaler.step that tells the recorder when it skipped optimizer.step() (overflow)."""

    def step(self: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        if recorder.scaler_depth:  # a subclass's step calling the base one through super()
            return orig_step(self, optimizer, *args, **kwargs)
        recorder.scaler_depth = 1
        before = recorder.step
        try:
            result = orig_step(self, optimizer, *args, **kwargs)
        finally:
            recorder.scaler_depth = 0
        if recorder.step == before and self.is_enabled():
            recorder.scaler_skipped(self)
        return result

    return step


#: Largest size, relative to the gradient tensor's largest element, at which an element may follow
#: the original's value: 1/16 is the bfloat16 pass bound of the comparison (4 x its 1.6e-2 floor),
#: the rounding a correct bf16 port of an fp16/fp32 original is allowed on a gradient.
SIGN_NOISE = 1.0 / 16


#: An element the two computations give to worse than 1/8 of its size: its value is rounding
#: noise too, sign or not (the parent's final-parameter mask uses the same ratio, `_compare.py`).
RATIO_NOISE = 1.0 / 8


def _rounding_noise(own: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Elements both computations give at rounding level (max(|own|, |ref|) <= SIGN_NOISE *
    max|ref|) and disagree on: in sign, or by at least RATIO_NOISE of the original's value.

    The size matters as much as the sign: AdamW's first update is lr * g / (|g| + eps), so a
    noise-level element that lands near eps in one run and not in the other moves its weight by
    0.84 lr against 0.075 lr (xcit's LayerScale gamma: 5.3e-8 in the fp16 original, 8.1e-10 in
    the bf16 port, same sign) — a false WARN on everything downstream. On the host, in the
    tensors' own dtypes (no float64 copies); a NaN or an infinity is never below the bound."""
    top = float(ref.abs().max()) if ref.numel() else 0.0
    if not top or not math.isfinite(top):
        return torch.zeros(own.shape, dtype=torch.bool)
    bound = SIGN_NOISE * top
    small = (own.abs() <= bound) & (ref.abs() <= bound)
    if not bool(small.any()):
        return small
    return small & ((torch.sign(own) != torch.sign(ref)) | ((own - ref).abs() >= RATIO_NOISE * ref.abs()))


def _follow_reference_signs(named: list[tuple[str, torch.Tensor]], ref_grads: dict[str, dict[str, Any]]) -> int:
    """Golden / port: take the reference's gradient value at its sign-noise elements (module
    docstring); the number of elements changed. validate's own work: not counted as the port's."""
    from cuda2neuron.validate._accounting import paused

    changed = 0
    with paused(), torch.no_grad():
        for name, p in named:
            rec = ref_grads.get(name)
            grad = _local(p.grad)
            if rec is None or tuple(rec["shape"]) != tuple(grad.shape) or not grad.is_floating_point():
                continue
            ref = to_tensor(rec)
            own = grad.detach().cpu()
            mask = _rounding_noise(own, ref)
            n = int(mask.sum())
            if n:
                grad.copy_(torch.where(mask, ref.to(own.dtype), own))
                changed += n
    return changed


def _scale_of(scaler: Any) -> float | None:
    try:
        return float(scaler.get_scale())
    except Exception:  # noqa: BLE001 - a scaler without a readable scale: the note omits it
        return None


def _snapshot(optimizer: Any) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], dict[Any, Any]]:
    """The parameters and optimizer state before a step the run must not take (validate's own
    copies: not counted as the port's work)."""
    from cuda2neuron.validate._accounting import paused

    with paused(), torch.no_grad():
        params = [(p, p.detach().clone()) for g in optimizer.param_groups for p in g["params"]]
        state = {p: {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in st.items()}
                 for p, st in optimizer.state.items()}
    return params, state


def _put_back(optimizer: Any, params: list[tuple[torch.Tensor, torch.Tensor]], state: dict[Any, Any]) -> None:
    from cuda2neuron.validate._accounting import paused

    with paused(), torch.no_grad():
        for p, saved in params:
            p.copy_(saved)
        optimizer.state.clear()
        optimizer.state.update(state)


def _under(key: str, prefixes: list[str]) -> bool:
    return any(key.startswith(prefix + ".") for prefix in prefixes)


def _load_state(module: nn.Module, state: dict[str, dict[str, Any]], held: list[str] | None = None) -> None:
    tensors = {k: to_tensor(rec) for k, rec in state.items()}
    # load_state_dict copies into the existing parameters in place (casting dtype, moving device),
    # so an optimizer that already holds them keeps working.
    current = module.state_dict()
    sharded = {k for k, v in current.items() if _local(v) is not v}
    if held:
        # Part of the module was loaded with an earlier root: the rest must match exactly.
        missing, unexpected = module.load_state_dict(tensors, strict=False)
        if [k for k in missing if not _under(k, held)] or unexpected:
            raise RuntimeError(f"validate: initial weights do not match the module (missing "
                               f"{sorted(k for k in missing if not _under(k, held))}, unexpected {sorted(unexpected)})")
        return
    if not sharded:
        module.load_state_dict(tensors, strict=True)
        return
    # FSDP2: each rank got the reference rank's own shards; copy them into the local shards
    # (load_state_dict would mix a plain tensor into a DTensor copy).
    with torch.no_grad():
        for k in sharded:
            _local(current[k]).copy_(tensors.pop(k))
    missing, unexpected = module.load_state_dict(tensors, strict=False)
    if set(missing) - sharded or unexpected:
        raise RuntimeError(f"validate: initial weights do not match the module (missing {sorted(set(missing) - sharded)}, "
                           f"unexpected {sorted(unexpected)})")
