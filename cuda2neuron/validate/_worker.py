"""The subprocess side of validate: one run (reference, golden or port) of the user's code.

    python -m cuda2neuron.validate._worker '<WorkerConfig as JSON>'

The protocol with the parent: records go out as length-prefixed frames on the pipe named by
`WorkerConfig.fd` (`_emit_record`, the worker's only output); the reference's initial weights
come back on the pipe named by `WorkerConfig.in_fd` for the golden and port runs (stdin is
/dev/null: user code that reads it must not eat the frames). User code's stdout/stderr are left alone (the
parent redirects them to files and shows them on failure).
"""

from __future__ import annotations

import functools
import importlib
import os
import random
import runpy
import sys
import time
import traceback
from typing import Any, BinaryIO

from cuda2neuron.validate._procs import TOKEN_VAR, become_subreaper, die_with_parent, kill_tree
from cuda2neuron.validate._wire import read_frame, write_frame
from cuda2neuron.validate._worker_config import SKIPPED_STEPS_CAP, WorkerConfig

__all__ = ["exit_process", "gpus_short_of_ranks", "main", "tf32_allowed"]


# The learning rate of the SGD an entry's (model, inputs) is trained with when build() returns
# no optimizer (docs/validate.md: "SGD(lr=0.01)").
_ENTRY_LR = 0.01


class _EntryError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _setup_device(role: str, port_device: str, autocast: bool = True) -> tuple[str, bool]:
    """Prepare torch for this run; returns (device label, whether op accounting is wanted).

    ``autocast=False``: a logic run, with every autocast region forced off (`_autocast_off`);
    its port is not audited (the port as written is)."""
    label, accounting = _device(role, port_device)
    if autocast:
        return label, accounting
    from cuda2neuron.validate import _autocast_off

    _autocast_off.install()
    return f"{label}, autocast off", False


def _device(role: str, port_device: str) -> tuple[str, bool]:
    import torch

    if role == "golden":
        from cuda2neuron.validate import _cuda_shim, _golden

        _cuda_shim.install(golden=True)
        _golden.install()
        return "cpu (float64 golden, CUDA-on-CPU shim)", False
    if role == "reference":
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        short = gpus_short_of_ranks(gpus, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
        if gpus and short is None:
            from cuda2neuron.validate._rng import CpuRandomMode

            CpuRandomMode().__enter__()
            _distributed_rng()
            return f"cuda ({torch.cuda.get_device_name(0)})", False
        from cuda2neuron.validate import _cuda_shim

        _cuda_shim.install()
        return f"cpu (CUDA-on-CPU shim{': ' + short if short else ''})", False
    # port
    if port_device == "cpu":
        # Test-only: run a port on the CPU by redirecting "neuron" devices (no emulator needed).
        from cuda2neuron.validate import _cuda_shim

        torch.utils.rename_privateuse1_backend("neuron")  # so that "neuron" strings parse
        _cuda_shim.install(source="neuron")
        return "cpu (neuron redirected, test mode)", False
    from cuda2neuron.validate._rng import CpuRandomMode

    from cuda2neuron.backend import real_torch_neuronx

    if real_torch_neuronx():  # not the emulator's own torch_neuronx surface (a zygote's)
        import torch_neuronx  # noqa: F401  (real TorchNeuron: the emulator stands down)

        label, accounting = "neuron (torch_neuronx)", False
    else:
        from cuda2neuron import backend
        from cuda2neuron.validate._recorder import use_cpu_alias

        try:
            backend.activate()
        except Exception as exc:  # noqa: BLE001 - BackendUnavailable, no compiler, torch out of range
            raise _EntryError("setup", f"the emulated neuron device cannot start: {exc}") from exc
        use_cpu_alias(backend.cpu_alias)
        backend.install_torch_neuronx()  # the port's torch_neuronx.get_fallback_ops() & co. run here
        label, accounting = "neuron (cuda2neuron emulator)", True
    CpuRandomMode().__enter__()
    _distributed_rng()
    return label, accounting


def _launched_rank() -> tuple[int, int] | None:
    """(local rank, local world size) when validate started this run as one rank of a single-node
    launch (`--nproc N`, `_launch_env`), else None."""
    try:
        local_rank, local_world = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    except (KeyError, ValueError):
        return None
    if os.environ.get("TORCHELASTIC_RUN_ID") != "cuda2neuron-validate" or os.environ.get("GROUP_WORLD_SIZE") != "1":
        return None
    return local_rank, local_world


def _own_rendezvous() -> None:
    """``init_process_group(init_method="tcp://127.0.0.1:23456" | "file:///tmp/pg")`` in a spawned
    worker meets its peers at the address the user gave: the reference, golden and port groups
    all run at once on this machine, so they would meet each other there (or fail with
    EADDRINUSE). Each run's ranks have a rendezvous of their own (MASTER_ADDR / MASTER_PORT,
    `_launch_env`): the address is replaced by it; rank and world size stay as given."""
    import torch.distributed as dist

    if not dist.is_available():  # pragma: no cover - torch built without distributed
        return
    original = dist.init_process_group

    def init_process_group(backend: Any = None, init_method: Any = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(init_method, str) and init_method.startswith(("tcp://", "file://")):
            init_method = "env://"
        return original(backend, init_method, *args, **kwargs)

    dist.init_process_group = init_process_group


def _inline_spawn() -> None:
    """``torch.multiprocessing.spawn(fn, nprocs=N)`` (and ``start_processes``) call ``fn(i, *args)``
    in this process. A spawned child is a fresh interpreter: it had neither the CUDA shim
    (``init_process_group("nccl")`` failed in it) nor the recorder, so nothing it computed was
    compared. ``nprocs`` is ``torch.cuda.device_count()`` in the usual launcher
    (``main_worker(gpu, ...)``), which is 1 in every run unless ``--nproc`` or
    ``CUDA2NEURON_DEVICE_COUNT`` says otherwise: one process calls ``fn(0, *args)``. Under
    ``--nproc N`` validate starts each run as N rank processes (as torchrun does), and
    ``device_count()`` is N there: the script's own ``spawn(fn, nprocs=N)`` in rank r calls
    ``fn(r, *args)``, so each spawned child is one of validate's ranks — started with the shim,
    recorded and compared rank by rank as a torchrun-launched script is — and the address its
    ``init_process_group`` names is replaced by the run's own rendezvous (`_own_rendezvous`).
    Any other count is refused with the way out."""
    import torch.multiprocessing as tmp

    launched = _launched_rank()
    if launched is not None and launched[1] > 1:
        _own_rendezvous()

    class _Done:
        processes: list[Any] = []

        def join(self, timeout: float | None = None) -> bool:
            return True

    def start_processes(fn: Any, args: tuple[Any, ...] = (), nprocs: int = 1, join: bool = True,
                        daemon: bool = False, start_method: str = "spawn") -> Any:
        if launched is not None and nprocs == launched[1] > 1:
            fn(launched[0], *args)
        elif nprocs != 1:
            raise RuntimeError(f"validate: torch.multiprocessing.spawn(nprocs={nprocs}) starts processes validate "
                               "cannot record; let validate launch them as ranks: rerun with "
                               f"cuda2neuron validate --nproc {nprocs} ... (each rank runs one spawned process), "
                               "or spawn one")
        else:
            fn(0, *args)
        return None if join else _Done()

    def spawn(fn: Any, args: tuple[Any, ...] = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
              start_method: str = "spawn") -> Any:
        return start_processes(fn, args, nprocs, join, daemon, start_method)

    tmp.spawn = spawn
    tmp.start_processes = start_processes


def gpus_short_of_ranks(gpus: int, local_ranks: int) -> str | None:
    """Why this machine's GPUs cannot hold the original's ranks, or None when they can.

    The original binds rank N to cuda:N (`set_device(local_rank)`, `device_ids=[local_rank]`):
    on fewer GPUs than ranks it crashes with "invalid device ordinal" before its first step (seen
    on a one-GPU H200 with `--nproc 2`), so the reference then runs on the CUDA-on-CPU shim, which
    gives every rank a device of its own, and says why.
    """
    if gpus and local_ranks > gpus:
        return f"{local_ranks} ranks need {local_ranks} GPUs, this machine has {gpus}"
    return None


def tf32_allowed() -> bool:
    """Does this CUDA reference compute float32 convolutions, RNNs or matmuls in TF32?

    cuDNN's convolutions and RNNs default to TF32 on Ampere and later (torch's
    `torch.backends.cudnn.allow_tf32` is True unless the program turns it off); matmuls when the
    program allows it. TF32 keeps float16's 10-bit mantissa, so such a float32 reference is
    itself ~1e-3 off float32 (measured on an H200: an LSTM's outputs 6e-4 from the CPU's).
    """
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability(0)[0] < 8:
        return False
    return bool(torch.backends.cudnn.allow_tf32) or bool(torch.backends.cuda.matmul.allow_tf32)


def _distributed_rng() -> None:
    """Under a distributed launch (validate --nproc), DTensor draws like the CPU reference."""
    if "WORLD_SIZE" in os.environ:
        import torch.distributed as dist

        if dist.is_available():
            from cuda2neuron.validate._rng import local_dtensor_draws

            local_dtensor_draws()


def _resolve_entry(entry: str, tree: str) -> Any:
    if ":" not in entry:
        raise _EntryError("bad-entry", f"--entry must be 'module:callable', got {entry!r}")
    mod_name, _, attr = entry.partition(":")
    try:
        module = importlib.import_module(mod_name)
    except ModuleNotFoundError as exc:
        if exc.name and (exc.name == mod_name or mod_name.startswith(exc.name + ".")):
            raise _EntryError("entry-not-found", f"entry module {mod_name!r} not found in {tree}") from exc
        raise
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            path = getattr(module, "__file__", mod_name)
            raise _EntryError("entry-not-found", f"{path}: has no attribute {attr!r} (entry {entry!r})")
        obj = getattr(obj, part)
    if not callable(obj):
        raise _EntryError("bad-entry", f"entry {entry!r} is not callable")
    return obj


def _call(model: Any, inputs: Any) -> Any:
    import torch

    if isinstance(inputs, torch.Tensor):
        return model(inputs)
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (list, tuple)):
        return model(*inputs)
    return model(inputs)


def _loss_of(output: Any) -> Any:
    """Scalar output, else the first scalar in a tuple/dict output, else the sum of all outputs."""
    import torch

    from cuda2neuron.validate._recorder import flatten

    if isinstance(output, torch.Tensor) and output.numel() == 1:
        return output.reshape(())
    leaves = [t for _, t in flatten(output) if t.is_floating_point()]
    for t in leaves:
        if t.numel() == 1 and t.requires_grad:
            return t.reshape(())
    if not leaves:
        raise _EntryError("bad-entry", "the model output holds no floating-point tensor to build a loss from")
    total = leaves[0].float().sum()
    for t in leaves[1:]:
        total = total + t.float().sum()
    return total


def _run_entry(config: WorkerConfig, recorder: Any) -> None:
    import torch
    import torch.nn as nn

    from cuda2neuron.validate._recorder import flatten

    assert config.entry is not None
    build = _resolve_entry(config.entry, str(config.tree))
    recorder.paused = True  # build() may call modules; nothing is compared before the weights agree
    try:
        built = build()
    finally:
        recorder.paused = False
    if callable(built) and not isinstance(built, nn.Module):
        # Training-step protocol: build() returned step(); each call does one optimizer step.
        while not recorder.done():  # steps the original's GradScaler skipped do not count (Recorder.done)
            before = recorder.step
            loss = built()
            if recorder.step == before and not recorder.optimizer_seen:
                recorder.end_manual_step()  # a step function that updates the parameters by hand
            if recorder.step == before:
                raise _EntryError("no-training-loop", "the training-step function returned without calling optimizer.step()")
            if isinstance(loss, torch.Tensor):
                recorder.send_tensor(f"s{before}/returned-loss", "loss", loss)
        recorder.send_params()
        return
    optimizer = None
    if isinstance(built, dict):
        model, inputs, optimizer = built.get("model"), built.get("inputs"), built.get("optimizer")
    elif isinstance(built, (tuple, list)) and len(built) in (2, 3):
        model, inputs = built[0], built[1]
        optimizer = built[2] if len(built) == 3 else None
    else:
        raise _EntryError("bad-entry", f"{config.entry} must return (model, inputs), (model, inputs, optimizer), "
                          f"a dict with 'model' and 'inputs', or a training-step function; got {type(built).__name__}")
    if not isinstance(model, nn.Module):
        raise _EntryError("bad-entry", f"{config.entry}: the first element is not an nn.Module ({type(model).__name__})")
    recorder.adopt_root(model)
    if optimizer is None:
        optimizer = torch.optim.SGD(model.parameters(), lr=_ENTRY_LR)
    # Bounded by the loop count too: an optimizer that is no torch.optim.Optimizer never moves
    # the recorder's step.
    for s in range(config.steps + SKIPPED_STEPS_CAP):
        if recorder.done():
            break
        optimizer.zero_grad(set_to_none=True)
        out = _call(model, inputs)
        for suffix, t in flatten(out):
            recorder.send_tensor(f"s{s}/output{suffix}", "output", t)
        loss = _loss_of(out)
        loss.backward()
        optimizer.step()
    recorder.send_params()


def _run_script(config: WorkerConfig, recorder: Any) -> None:
    assert config.script is not None
    script = os.path.join(config.tree, config.script)
    if not os.path.isfile(script):
        raise _EntryError("entry-not-found", f"script {config.script!r} not found in {config.tree}")
    sys.argv = [script, *config.args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    from cuda2neuron.validate._recorder import StopRun

    text = None
    if config.overlay is not None:
        from cuda2neuron.validate import _overlay

        text = _overlay.migrated_text(config.tree, config.overlay, script)
    try:
        if text is None:
            runpy.run_path(script, run_name="__main__")
        else:
            _overlay.run_script(script, text)
    except StopRun:
        # The parameters after the last step, as entry mode sends them: the run stops at the first
        # backward after it, and a loop with two optimizers (a GAN: D's step, then G's) runs that
        # backward (D's, on real data) before G's forward, so G's last update was never judged —
        # pytorch/examples' DCGAN with G's Adam beta1 0.5 -> 0.9 PASSed at --steps 4.
        recorder.send_params()
        return
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    if not recorder.optimizer_seen:
        recorder.end_manual_step()  # the last backward of a loop that updates parameters by hand
    if recorder.step == 0:
        raise _EntryError("no-training-loop", f"{config.script} finished without a training step: script mode needs a "
                          "loop that calls backward() and optimizer.step() or updates the parameters by hand "
                          "(use --entry for inference-only code)")
    recorder.send_params()


def _emit_record(pipe: BinaryIO, record: dict[str, Any]) -> None:
    """The worker's one way out: a frame on the record pipe the parent reads (data, not output)."""
    write_frame(pipe, record)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    config = WorkerConfig.from_json(argv[0])
    # Lifecycle (_procs.py): dies with validate; the user's orphans stay below this process.
    die_with_parent(config.parent)
    become_subreaper()
    # The two protocol pipes are not handed to programs the user's code executes: only a fork
    # (which cannot be helped) shares them, and validate kills those with the run.
    os.set_inheritable(config.fd, False)
    os.set_inheritable(config.in_fd, False)
    out = os.fdopen(config.fd, "wb", buffering=1 << 16)
    inp = os.fdopen(config.in_fd, "rb", buffering=1 << 16)
    emit = functools.partial(_emit_record, out)
    role = config.role
    tree = str(config.tree)
    t0 = time.perf_counter()
    recorder = None
    try:
        import numpy as np
        import torch

        # One thread per run, as OMP_NUM_THREADS=1 from the parent: three runs share the machine.
        torch.set_num_threads(1)
        # The C switch, not torch.use_deterministic_algorithms(): that one also imports
        # torch._inductor (~2 s per run) only to set a config flag for compiled code.
        torch._C._set_deterministic_algorithms(True, warn_only=True)
        label, accounting = _setup_device(role, config.port_device, config.autocast)
        hello = {"type": "hello", "role": role, "device": label}
        if role == "reference" and label.startswith("cuda"):
            hello["tf32"] = tf32_allowed()
        emit(hello)
        seed = config.seed
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        os.chdir(tree)
        sys.path.insert(0, tree)
        if config.overlay is not None:
            from cuda2neuron.validate import _overlay

            _overlay.install(config.tree, config.overlay)
        _inline_spawn()
        from cuda2neuron.validate._recorder import Recorder

        from cuda2neuron.validate import _accounting

        # A logic run follows the reference like the golden does (weights, step outcomes).
        recorder = Recorder(emit, lambda: read_frame(inp), role if config.autocast else f"logic-{role}", config.steps, tree,
                            stop_after_steps=config.mode == "script",
                            on_first_root=_accounting.start if accounting else None, taken_steps=config.taken_steps)
        recorder.install()
        sites = None
        if accounting:
            from cuda2neuron.validate._host_api import SiteCollector

            sites = SiteCollector()
            sites.install()
        try:
            if config.mode == "entry":
                _run_entry(config, recorder)
            else:
                _run_script(config, recorder)
        finally:
            report = _accounting.finish()
            recorder.uninstall()
            if sites is not None:
                sites.uninstall()
        if report is not None:
            from cuda2neuron.backend import op_support

            fallbacks = [{"op": op, "count": count, "locations": list(locs)}
                         for op, (count, locs) in op_support.fallback_ops(since_clear=False).items()]
            emit({"type": "audit", "report": {**_report_dict(report, sites.sites if sites is not None else ()),
                                              "optimizer_host_ops": _accounting.optimizer_host_ops(),
                                              "fallback_ops": fallbacks}})
        if role == "reference" and config.autocast:
            emit({"type": "unexercised", "modules": recorder.unexercised()})
        emit({"type": "done", "seconds": time.perf_counter() - t0, "records": recorder.records})
        return 0
    except _EntryError as exc:
        emit({"type": "error", "kind": exc.kind, "message": str(exc), "traceback": ""})
        return 2
    except BaseException as exc:  # noqa: BLE001 - every failure of user code is reported, typed
        emit({"type": "error", "kind": "crash", "message": _crash_message(exc),
              "traceback": traceback.format_exc(), **_crash_site(exc, str(config.tree))})
        return 2
    finally:
        try:
            out.flush()
        except OSError:
            pass


def _crash_message(exc: BaseException) -> str:
    """``Type: message at file:line`` — the line where it was raised, so that an exception with no
    text (a bare ``assert``, ``raise RuntimeError()``) still says what and where."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else f"{type(exc).__name__} (no message)"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        text += f" at {last.filename}:{last.lineno}"
        if not str(exc) and last.line:
            text += f" ({last.line.strip()})"
    return text


def _crash_site(exc: BaseException, tree: str) -> dict[str, Any]:
    """Where in the run's own tree the exception went through: ``user_frame`` is the innermost
    frame inside the tree (``train.py:42``, None when the traceback never entered it) and
    ``harness`` is true for validate's own errors (their messages start with "validate:") — the
    parent tells a defect of the port (its code raised while the original ran through) from a
    failure of validate. ``crash_path`` lists the tree's frames and the classes (defined in the
    tree) of the objects the raising line uses, where the localisation looks for migrate edits.
    Trap: the innermost Python frame says nothing, an error raised in C++ under validate's
    dispatch modes (`_rng.py`) surfaces in validate's own frame."""
    root = os.path.realpath(tree)
    user = None
    path: list[tuple[str, str, int]] = []
    raising = None
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        full = os.path.realpath(frame.f_code.co_filename)
        if full.startswith(root + os.sep) and "site-packages" not in full:  # not a venv inside the tree
            rel = os.path.relpath(full, root)
            user = f"{rel}:{tb.tb_lineno}"
            path.append((rel, getattr(frame.f_code, "co_qualname", frame.f_code.co_name), tb.tb_lineno))
            raising = (frame, full, tb.tb_lineno)
        tb = tb.tb_next
    if raising is not None:
        for rel, name in _classes_used(*raising, root):
            if (rel, name, 0) not in path:
                path.append((rel, name, 0))
    return {"user_frame": user, "harness": str(exc).startswith("validate:"), "crash_path": path}


def _classes_used(frame: Any, filename: str, lineno: int, root: str) -> list[tuple[str, str]]:
    """(file, class) for each object named on the raising line whose class (or which, as a class
    or function) is defined in the tree: ``loss_scaler.state_dict()["scale"]`` -> the wrapper
    class a scaler edit lives in, even in another module. Read without running user code:
    attributes are looked up statically."""
    import inspect
    import linecache
    import re

    line = linecache.getline(filename, lineno)
    found: list[tuple[str, str]] = []
    for chain in re.findall(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*", line):
        first, *rest = chain.split(".")
        if first in frame.f_locals:
            obj = frame.f_locals[first]
        elif first in frame.f_globals:
            obj = frame.f_globals[first]
        else:
            continue
        for attr in [None, *rest]:
            if attr is not None:
                try:
                    obj = inspect.getattr_static(obj, attr)
                except AttributeError:
                    break
            target = obj if inspect.isclass(obj) or inspect.isfunction(obj) else type(obj)
            try:
                source = inspect.getsourcefile(target)
            except TypeError:
                continue
            full = os.path.realpath(source) if source else ""
            if full.startswith(root + os.sep) and "site-packages" not in full:
                item = (os.path.relpath(full, root), target.__qualname__)
                # A method of a class already listed adds nothing: the class spans it.
                if item not in found and not any(item[0] == f and item[1].startswith(c + ".") for f, c in found):
                    found.append(item)
    return found


def _report_dict(report: Any, api_sites: Any = ()) -> dict[str, Any]:
    def rows(ops: Any) -> list[dict[str, Any]]:
        return [{"op": op.op, "count": op.count, "elements": op.elements, "locations": tuple(op.locations)}
                for op in ops]

    return {
        "device_ops": report.device_ops,
        "device_elements": report.device_elements,
        "cpu_ops": report.cpu_ops,
        "cpu_elements": report.cpu_elements,
        "float64_ops": report.float64_ops,
        "complex_ops": report.complex_ops,
        "cpu_op_details": rows(getattr(report, "cpu_op_details", ())),
        "float64_op_details": rows(getattr(report, "float64_op_details", ())),
        "complex_op_details": rows(getattr(report, "complex_op_details", ())),
        "api_host_sites": sorted(api_sites),
    }


def exit_process(code: int) -> None:
    """End the worker without interpreter finalisation.

    Trap: with torch 2.13 a process whose backward ran on a device with its own autograd thread
    (the emulated neuron device) can abort while the interpreter finalises — "terminate called
    without an active exception" on stderr and SIGABRT instead of the exit status (the device
    thread may drop the last reference to the context `_engine_run_backward` stashes in TLS;
    pytorch/pytorch#180701). The run's result is already in the record pipe by then, so: run
    the user's atexit handlers (and logging's), flush Python's streams, and leave through
    os._exit with the status main() chose.
    """
    import atexit

    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001 - a failing handler must not change the run's status
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or broken by user code
            pass
    _end_descendants()
    os._exit(code)


def _end_descendants() -> None:
    """What the user's code left running (a DataLoader's workers, a daemon it double-forked)
    ends with the run: as a subreaper this process is the parent of every orphan among them."""
    token = os.environ.get(TOKEN_VAR)
    if token:
        try:
            kill_tree(os.getpid(), token)
        except Exception:  # noqa: BLE001 - validate's own sweep ends them too
            pass


if __name__ == "__main__":
    exit_process(main())
