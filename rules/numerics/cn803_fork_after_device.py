"""CN803: ``fork`` start method for processes in a program that uses the device."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety

from .._shared.args import arg_by_name
from .._shared.names import call_qualname
from .._shared.strings import make_string, string_value

__all__ = ["ForkAfterDevice"]

_MP = ("multiprocessing", "torch.multiprocessing")
_START = frozenset(f"{m}.{f}" for m in _MP for f in ("set_start_method", "get_context"))
_SPAWNERS = frozenset(
    {f"{m}.{f}" for m in _MP for f in ("Process", "Pool")} | {"concurrent.futures.ProcessPoolExecutor"}
)
_SAFE_LAUNCH = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"})
_WAKE_WORDS = (b"set_start_method", b"get_context", b"cuda", b"neuron", b"accelerator")
_GUIDANCE = (
    "The Neuron runtime does not survive fork once the device is initialised. Use the spawn start "
    "method: mp.set_start_method('spawn', force=True) under `if __name__ == '__main__':`, or "
    "ctx = mp.get_context('spawn') and ctx.Process(...) / ctx.Pool(...) "
    "(ProcessPoolExecutor(mp_context=ctx)); torch.multiprocessing.spawn already does this."
)


class ForkAfterDevice(Rule):
    """
    ## What it does
    Rewrites ``set_start_method("fork")`` / ``get_context("fork")`` to ``"spawn"`` (unsafe) and
    reports ``multiprocessing.Process`` / ``Pool`` / ``ProcessPoolExecutor`` created in a file
    that uses a device and never selects the spawn start method.

    ## Why is this bad?
    On Linux the default start method is ``fork``. A child forked after the parent initialised
    the neuron runtime inherits a runtime it cannot use; TorchNeuron needs ``spawn``.

    ## Example
    ```python
    mp.set_start_method("fork")
    ```
    becomes
    ```python
    mp.set_start_method("spawn")
    ```

    ## Fix safety
    Unsafe: with ``spawn`` the child re-imports the main module, so the process target and its
    arguments must be picklable and module-level code must sit under ``if __name__ ==
    "__main__":``. Process creation without a start method is only reported.
    """

    code = "CN803"
    name = "fork-after-device"
    advisory = True  # the start method changes how workers start, not where tensors live: never holds back a group of linked fixes
    fixes = frozenset({Safety.UNSAFE})
    triggers = ("multiprocessing", "ProcessPoolExecutor", "fork")
    VALID = (
        "import multiprocessing as mp\nmp.set_start_method('spawn')\n",
        # No device in this file: forking is fine.
        "import multiprocessing as mp\np = mp.Process(target=work)\n",
        # Spawn chosen in the file.
        "import torch\nimport torch.multiprocessing as mp\nmp.set_start_method('spawn', force=True)\n"
        "model = model.to('neuron')\np = mp.Process(target=work)\n",
        "import torch.multiprocessing as mp\nmp.spawn(main, nprocs=2)\nx = x.cuda()\n",
    )
    INVALID = (
        Invalid(
            "import multiprocessing as mp\nmp.set_start_method('fork')\n",
            "import multiprocessing as mp\nmp.set_start_method('spawn')\n",
            unsafe=True,
        ),
        Invalid(
            'import torch.multiprocessing as mp\nctx = mp.get_context(method="fork")\n',
            'import torch.multiprocessing as mp\nctx = mp.get_context(method="spawn")\n',
            unsafe=True,
        ),
        Invalid("import multiprocessing as mp\nmodel = model.cuda()\np = mp.Process(target=work)\n"),
        Invalid(
            "from concurrent.futures import ProcessPoolExecutor\nx = x.to('neuron')\n"
            "with ProcessPoolExecutor(4) as ex:\n    pass\n"
        ),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        # A report needs a start-method call (its name shows, if only in the import of an
        # alias) or a process started in a file with device evidence (an attribute or a
        # string naming cuda, neuron or the accelerator).
        return any(w in code for w in _WAKE_WORDS)

    def __init__(self, context) -> None:
        super().__init__(context)
        self._device = False
        self._spawn = False
        self._spawners: list[cst.Call] = []

    # Device use: cheap, local evidence collected on the way (one pass).
    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in ("cuda", "neuron", "is_cuda", "is_neuron", "accelerator"):
            self._device = True

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if not self._device and node.value.lstrip("rRuUbBfF")[1:].startswith(("cuda", "neuron")):
            self._device = True

    def visit_Call(self, node: cst.Call) -> None:
        qualified = call_qualname(self, node)
        if qualified is None:
            return
        if qualified in _START:
            method = arg_by_name(node, "method", 0)
            value = string_value(method.value) if method is not None else None
            if value in ("spawn", "forkserver"):
                self._spawn = True
            elif value == "fork" and method is not None:
                self.report(
                    node,
                    "the fork start method breaks the Neuron runtime in child processes",
                    replacement=node.with_changes(
                        args=[
                            a.with_changes(value=make_string("spawn", like=a.value)) if a is method else a
                            for a in node.args
                        ]
                    ),
                    safety=Safety.UNSAFE,
                    guidance=_GUIDANCE,
                    effort=Effort.LOW,
                    description="use the spawn start method",
                )
        elif qualified in _SAFE_LAUNCH:
            self._spawn = True
        elif qualified in _SPAWNERS:
            if qualified.endswith("ProcessPoolExecutor") and arg_by_name(node, "mp_context") is not None:
                return
            self._spawners.append(node)

    def leave_Module(self, original_node: cst.Module) -> None:
        if not self._device or self._spawn:
            return
        for node in self._spawners:
            self.report(
                node,
                "a process started with the default fork method in a program that uses the device",
                guidance=_GUIDANCE,
                effort=Effort.MEDIUM,
            )
