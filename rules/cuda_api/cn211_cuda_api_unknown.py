"""CN211: a ``torch.cuda`` name no other rule ports or reports: the catalog's safety net."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Settings, Valid

from .._shared.detector import AstDetector
from .._shared.names import is_reference
from .._shared.strings import string_value
from . import _refs_ast
from ._helpers import load_moves

__all__ = ["CudaApiUnknown", "HANDLED_ELSEWHERE", "HANDLED_WHEN_CALLED"]

# torch.cuda names another rule reports or rewrites wherever they appear, with that rule's code.
# tests/rules/test_cuda_api_unknown.py checks each row: the named rule must report the name, or
# the row is stale and the name would go unreported. CN201's moves come from its own table.
HANDLED_ELSEWHERE: dict[str, str] = {
    **dict.fromkeys(
        (
            "torch.cuda.get_device_capability",
            "torch.cuda.mem_get_info",
            "torch.cuda.ipc_collect",
            "torch.cuda.get_arch_list",
            "torch.cuda.device_of",
            "torch.cuda.CUDAGraph",
            "torch.cuda.graph",
            "torch.cuda.graph_pool_handle",
            "torch.cuda.make_graphed_callables",
            "torch.cuda.is_current_stream_capturing",
            "torch.cuda.graphs.CUDAGraph",
            "torch.cuda.graphs.graph",
            "torch.cuda.graphs.graph_pool_handle",
            "torch.cuda.graphs.make_graphed_callables",
            "torch.cuda.graphs.is_current_stream_capturing",
        ),
        "CN202",
    ),
    **{
        f"torch.cuda.{kind}Tensor": "CN106"
        for kind in ("BFloat16", "Bool", "Byte", "Char", "Double", "Float", "Half", "Int", "Long", "Short")
    },
    "torch.cuda.OutOfMemoryError": "CN210",
    "torch.cuda.amp.autocast": "CN301",
    "torch.cuda.amp.autocast_mode.autocast": "CN301",
    "torch.cuda.amp.GradScaler": "CN304",
    "torch.cuda.amp.grad_scaler.GradScaler": "CN304",
    "torch.cuda.amp.custom_fwd": "CN306",
    "torch.cuda.amp.custom_bwd": "CN306",
    "torch.cuda.nvtx.range": "CN204",
    "torch.cuda.nvtx.range_push": "CN204",
    "torch.cuda.nvtx.range_pop": "CN204",
    "torch.cuda.nvtx.mark": "CN204",
}
# Names another rule handles only as the callee of a call (`with torch.cuda.device(1):`,
# `torch.cuda.get_rng_state_all()`): a bare reference to them is this rule's.
HANDLED_WHEN_CALLED: dict[str, str] = {
    "torch.cuda.device": "CN105",
    "torch.cuda.get_rng_state_all": "CN206",
    "torch.cuda.set_rng_state_all": "CN206",
    "torch.cuda.random.get_rng_state_all": "CN206",
    "torch.cuda.random.set_rng_state_all": "CN206",
    "torch.cuda.profiler": "CN611",
    "torch.cuda.profiler.start": "CN611",
    "torch.cuda.profiler.stop": "CN611",
    "torch.cuda.profiler.profile": "CN611",
}


@dataclass(frozen=True)
class _Kind:
    why: str
    guidance: str
    effort: Effort


_GUARD = "or keep it only on the CUDA path, behind `if torch.cuda.is_available():`"
_ALLOCATOR = _Kind(
    "TorchNeuron exposes no control of CUDA's caching allocator",
    f"Neuron's runtime manages device memory itself: remove the call, {_GUARD}.",
    Effort.LOW,
)
_MONITORING = _Kind(
    "it reads NVML, which exists only with NVIDIA drivers",
    "On Trainium `neuron-top` / `neuron-monitor` report utilisation, power and memory outside "
    f"the program; in Python, torch.neuron.memory_allocated(). Remove the call, {_GUARD}.",
    Effort.LOW,
)
_KINDS: dict[str, _Kind] = {
    **dict.fromkeys(
        (
            "set_per_process_memory_fraction",
            "get_per_process_memory_fraction",
            "caching_allocator_alloc",
            "caching_allocator_delete",
            "caching_allocator_enable",
            "caching_allocator_disabled",
            "CUDAPluggableAllocator",
            "change_current_allocator",
            "get_allocator_backend",
            "MemPool",
            "use_mem_pool",
            "memory_snapshot",
        ),
        _ALLOCATOR,
    ),
    **dict.fromkeys(
        ("utilization", "temperature", "power_draw", "clock_rate", "list_gpu_processes", "device_memory_used", "memory_usage"),
        _MONITORING,
    ),
    "cudart": _Kind(
        "it is the CUDA runtime's own binding",
        "`cudart().cudaProfilerStart()/Stop()` bracket a CUDA profiler capture: on Trainium use "
        "`torch.profiler.profile(...)` around the same steps, or remove the calls.",
        Effort.LOW,
    ),
    **dict.fromkeys(
        ("CudaError", "AcceleratorError", "DeferredCudaCallError"),
        _Kind(
            "the CUDA runtime's errors are never raised on Neuron",
            "An `except` clause for it is dead on Trainium: catch the error the neuron call raises "
            "(RuntimeError), or drop the clause.",
            Effort.LOW,
        ),
    ),
    **{
        f"{kind}Storage": _Kind(
            "legacy typed CUDA storages do not exist for the neuron device",
            "Use `tensor.untyped_storage()` / `torch.UntypedStorage(n, device=\"neuron\")`.",
            Effort.MEDIUM,
        )
        for kind in ("BFloat16", "Bool", "Byte", "Char", "ComplexDouble", "ComplexFloat", "Double", "Float", "Half", "Int", "Long", "Short")
    },
}
_UNKNOWN = _Kind(
    "TorchNeuron has no counterpart that cuda2neuron knows of (torch.neuron mirrors torch.cuda's "
    "device, RNG, stream/event and memory-statistics APIs only)",
    f"Check TorchNeuron's documentation for an equivalent; otherwise remove the use, {_GUARD}.",
    Effort.MEDIUM,
)
_PRIVATE = _Kind(
    "a private CUDA internal has no Neuron counterpart",
    "Use the public API (torch.neuron.* / torch.accelerator.*) or remove the use.",
    Effort.MEDIUM,
)


class CudaApiUnknown(Rule):
    """
    ## What it does
    Reports every use of a ``torch.cuda`` name that no other rule ports or reports:
    ``torch.cuda.set_per_process_memory_fraction``, ``torch.cuda.memory._record_memory_history``,
    ``torch.cuda.cudart()``, ``torch.cuda.utilization()``, ``except torch.cuda.CudaError``,
    ``torch.cuda.FloatStorage``, and any name a newer torch adds; and ``torch.cuda`` itself used
    as a value (``getattr(torch, device_type, torch.cuda)``, ``hasattr(torch.cuda, "x")``,
    ``mod = torch.cuda``), whose attributes are read later out of sight.

    It is the catalog's safety net: the names the other rules handle (CN201's move table,
    CN202's gaps, CN106's tensor types, the AMP, NVTX, RNG and profiler rules) are left to them.

    ## Why is this bad?
    A ``torch.cuda`` name with no mapping stays CUDA after migrate and fails on Trainium
    (``torch.cuda`` calls raise without a CUDA device). Without this rule such a line is in no
    report, and "nothing reported" would not mean "nothing left".

    ## Example
    ```python
    torch.cuda.set_per_process_memory_fraction(0.9)
    torch.cuda.memory._record_memory_history(True)
    ```
    Both lines are reported, with what to do instead (for the first: Neuron's runtime manages
    device memory, so remove the call or keep it on the CUDA path).

    ## Fix safety
    Display only: there is no name to move to; each finding says why and what to do.
    """

    code = "CN211"
    name = "cuda-api-unknown"
    triggers = ("cuda",)
    VALID = (
        # A patch of torch.cuda by the module object: CN208 reports it (and holds the test with it).
        "import torch\ndef test(monkeypatch):\n    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)\n",
        "import torch\ntorch.cuda.synchronize()\n",  # CN201 moves it
        "import torch\nif torch.cuda.get_device_capability()[0] >= 8:\n    pass\n",  # CN202's
        "import torch\nwith torch.cuda.device(1):\n    pass\n",  # CN105's
        "import torch\nstate = torch.cuda.get_rng_state_all()\n",  # CN206's
        "import torch\ntorch.cuda._lazy_call(cb)\n",  # CN614's
        "from myproject import cuda\ncuda.set_per_process_memory_fraction(0.5)\n",  # not torch's
        "import torch\nx = torch.neuron.memory_allocated()\n",
        Valid("import torch\nn = torch.accelerator.device_count()\n", target="accelerator"),
        # The import is no use of torch.cuda.amp; the decorator is CN306's.
        "from torch.cuda.amp import custom_fwd\n@custom_fwd\ndef f(ctx, x):\n    return x\n",
        "import torch\nbad = getattr(torch.cuda, '_is_in_bad_fork', None)\n",  # CN614's
        "import torch.cuda\n",  # an import, CN212's
    )
    INVALID = (
        Invalid("import torch\ntorch.cuda.set_per_process_memory_fraction(0.9)\n"),
        Invalid("import torch\ntorch.cuda.memory._record_memory_history(True)\n"),
        Invalid("import torch\ntorch.cuda.cudart().cudaProfilerStart()\n"),
        Invalid("import torch\ntry:\n    run()\nexcept torch.cuda.CudaError:\n    pass\n"),
        Invalid("from torch.cuda import utilization\nprint(utilization())\n"),
        Invalid("import torch.cuda as tc\ns = tc.FloatStorage(3)\n"),
        Invalid("import torch\nsaved = torch.cuda.get_rng_state_all\n"),  # a reference, not a call
        Invalid("import torch\ntorch.cuda.memory.memory_snapshot()\n", target="accelerator"),
        # torch.cuda itself as a value (diffusers' device helpers, fairseq's OOM report, tests).
        Invalid("import torch\nmod = getattr(torch, device_type, torch.cuda)\nmod.empty_cache()\n"),
        Invalid("import torch\nif hasattr(torch.cuda, 'memory_summary'):\n    pass\n"),
        Invalid("import torch\nacc = torch.accelerator if hasattr(torch, 'accelerator') else torch.cuda\n"),
    )

    # Local names bound to torch.cuda or a name in it: `import torch.cuda as tc`,
    # `from torch.cuda import utilization` (the cheap pre-test before resolving a name).
    _from_cuda: frozenset[str] = frozenset()

    def visit_Import(self, node: cst.Import) -> None:
        for a in node.names:
            module = _dotted(a.name)
            if a.asname is not None and isinstance(a.asname.name, cst.Name) and module is not None:
                if module == "torch.cuda" or module.startswith("torch.cuda."):
                    self._from_cuda = self._from_cuda | {a.asname.name.value}

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        # `from torch.cuda import utilization`: the bare name is a use of torch.cuda's.
        if node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = _dotted(node.module)
        if module is None or not (module == "torch.cuda" or module.startswith("torch.cuda.")):
            return
        bound = {
            (a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else _dotted(a.name) or "")
            for a in node.names
        }
        self._from_cuda = self._from_cuda | {b for b in bound if b}

    def visit_Attribute(self, node: cst.Attribute) -> None:
        parent = self.context.parent
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return  # only the whole dotted name: `torch.cuda.memory._snapshot` once
        if isinstance(parent, (cst.ImportFrom, cst.ImportAlias)):
            return  # the module path of an import: its uses are what the other rules judge
        if not _may_be_cuda(node, self._from_cuda):
            return
        self._check(node, self.qualname(node))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value not in self._from_cuda:
            return
        parent = self.context.parent
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return  # the head of a dotted name: visit_Attribute reads the whole of it
        if isinstance(parent, (cst.ImportAlias, cst.Attribute)) or not is_reference(self, node):
            return
        self._check(node, self.context.scope.lookup(node.value))

    def _check(self, node: cst.Attribute | cst.Name, qualified: str | None) -> None:
        if qualified == "torch.cuda":
            self._module_value(node)
            return
        if qualified is None or not qualified.startswith("torch.cuda."):
            return
        called = isinstance(self.context.parent, cst.Call) and self.context.parent.func is node
        if _handled(qualified, called):
            return
        parts = qualified.split(".")
        private = next((i for i, p in enumerate(parts) if p.startswith("_")), None)
        if private is not None:
            name = ".".join(parts[: private + 1])
            kind = _PRIVATE
        else:
            name = ".".join(parts[:3])
            kind = _KINDS.get(parts[2], _UNKNOWN)
        self.report(node, f"`{name}`: {kind.why}", guidance=kind.guidance, effort=kind.effort)

    def _module_value(self, node: cst.Attribute | cst.Name) -> None:
        """``torch.cuda`` itself as a value: a lookup's fallback, an object looked into by name,
        a module kept in a variable. Its attributes are read later, out of this rule's sight."""
        parent = self.context.parent
        call = self.context.ancestors[-2] if len(self.context.ancestors) >= 2 else None
        if (
            isinstance(parent, cst.Arg)
            and isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value in ("setattr", "object")
            and len(call.args) >= 2
            and call.args[0] is parent
            and string_value(call.args[1].value) is not None
        ):
            return  # `monkeypatch.setattr(torch.cuda, "is_available", f)`: a patch of it, CN208's
        if isinstance(parent, cst.Arg) and isinstance(call, cst.Call) and isinstance(call.func, cst.Name):
            args = [a for a in call.args if a.keyword is None]
            if call.func.value == "getattr" and len(args) == 3 and args[2] is parent:
                self.report(node, "`torch.cuda` is the fallback of a lookup by device type", guidance=_FALLBACK_GUIDANCE, effort=Effort.LOW)
                return
            if call.func.value in ("getattr", "hasattr") and len(args) >= 2 and args[0] is parent:
                looked_up = string_value(args[1].value)
                if looked_up is not None and looked_up.startswith("_"):
                    return  # a private name: CN614's
                self.report(node, f"`{self.context.code(call)}` looks a name up in the CUDA module", guidance=_LOOKUP_GUIDANCE, effort=Effort.LOW)
                return
        self.report(node, "`torch.cuda` is used as a value: its attributes are read through it later", guidance=_MODULE_GUIDANCE, effort=Effort.LOW)

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        return _Detector(cls, file).findings()


_FALLBACK_GUIDANCE = (
    'On Trainium `getattr(torch, "neuron")` finds torch.neuron, so this fallback runs only for a '
    "device type torch has no module for; write `torch.neuron` (or use `torch.accelerator`) so "
    "that the port never reaches CUDA."
)
_LOOKUP_GUIDANCE = (
    "The lookup is on CUDA's module, so the branch it guards keeps calling CUDA: look the name up in "
    "`torch.neuron` (it mirrors device, memory-statistics, RNG and stream APIs) or keep it behind "
    "`torch.cuda.is_available()`."
)
_MODULE_GUIDANCE = (
    "Whatever is called through this value stays CUDA: use `torch.neuron` (it mirrors device, "
    "memory-statistics, RNG and stream APIs) or `torch.accelerator`; a test that patches it "
    "(`monkeypatch.setattr(torch.cuda, ...)`) must patch what the ported code calls."
)


def _handled(qualified: str, called: bool) -> bool:
    moves = load_moves()
    parts = qualified.split(".")
    # CN614 reports torch.cuda._x itself; a private name deeper down (torch.cuda.memory._x) is ours.
    if parts[2].startswith("_"):
        return True
    for end in range(3, len(parts) + 1):
        prefix = ".".join(parts[:end])
        if prefix in moves or prefix in HANDLED_ELSEWHERE:
            return True
        if called and end == len(parts) and prefix in HANDLED_WHEN_CALLED:
            return True
    return False


def _may_be_cuda(node: cst.Attribute, from_cuda: frozenset[str]) -> bool:
    """Cheap test before resolving: a `cuda` part, or a head bound by a torch.cuda import."""
    expr: cst.BaseExpression = node
    while isinstance(expr, cst.Attribute):
        if expr.attr.value == "cuda":
            return True
        expr = expr.value
    return isinstance(expr, cst.Name) and (expr.value == "cuda" or expr.value in from_cuda)


def _dotted(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        head = _dotted(expr.value)
        return None if head is None else f"{head}.{expr.attr.value}"
    return None


class _Detector(AstDetector):
    """The visits above on CPython's ``ast``: each method is its namesake's. Every finding is a
    report with no fix, no group and no hold. The one text a message quotes (the lookup call,
    ``self.context.code(call)``) is generated as libcst writes it, or the walk is unsure."""

    def __init__(self, rule: type[Rule], file) -> None:  # noqa: ANN001 - python.AstFile
        super().__init__(rule, file)
        self._from_cuda: frozenset[str] = frozenset()

    def findings(self) -> list[Finding] | None:
        reports = self.reports()
        if reports is None:
            return None
        return [self.finding(node, message, kind.guidance, kind.effort) for node, message, kind, _ in reports]

    def _report(self, node: ast.AST, message: str, kind: _Kind) -> None:
        self._reports.append((node, message, kind, tuple(self.ctx.ancestors)))

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.asname is not None and (a.name == "torch.cuda" or a.name.startswith("torch.cuda.")):
                self._from_cuda = self._from_cuda | {a.asname}

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        # libcst's `module` drops a relative import's dots: `from .torch.cuda import x` counts too.
        module = node.module
        if module is None or any(a.name == "*" for a in node.names):
            return
        if not (module == "torch.cuda" or module.startswith("torch.cuda.")):
            return
        self._from_cuda = self._from_cuda | {a.asname or a.name for a in node.names}

    def visit_Attribute(self, node: ast.Attribute) -> None:
        parent = self.ctx.parent
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return
        if not _ast_may_be_cuda(node, self._from_cuda):
            return
        self._check(node, self.ctx.qualname(node))

    def visit_Name(self, node: ast.Name) -> None:
        if node.id not in self._from_cuda:
            return
        parent = self.ctx.parent
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return
        if not _refs_ast.is_reference(self.ctx, node):
            return
        self._check(node, self.ctx.scope.lookup(node.id))

    def _check(self, node: ast.Attribute | ast.Name, qualified: str | None) -> None:
        if qualified == "torch.cuda":
            self._module_value(node)
            return
        if qualified is None or not qualified.startswith("torch.cuda."):
            return
        parent = self.ctx.parent
        called = isinstance(parent, ast.Call) and parent.func is node
        if _handled(qualified, called):
            return
        parts = qualified.split(".")
        private = next((i for i, p in enumerate(parts) if p.startswith("_")), None)
        if private is not None:
            name = ".".join(parts[: private + 1])
            kind = _PRIVATE
        else:
            name = ".".join(parts[:3])
            kind = _KINDS.get(parts[2], _UNKNOWN)
        self._report(node, f"`{name}`: {kind.why}", kind)

    def _module_value(self, node: ast.Attribute | ast.Name) -> None:
        from cuda2neuron.python import ArgNode, generated_text

        ancestors = self.ctx.ancestors
        parent = self.ctx.parent
        call = ancestors[-2] if len(ancestors) >= 2 else None
        if isinstance(parent, ArgNode) and isinstance(call, ast.Call):
            args = self.ctx.args(call)
            if (
                isinstance(call.func, ast.Attribute)
                and call.func.attr in ("setattr", "object")
                and len(args) >= 2
                and args[0] is parent
                and _ast_string(args[1].value) is not None
            ):
                return
            if isinstance(call.func, ast.Name):
                positional = [a for a in args if a.keyword is None]
                if call.func.id == "getattr" and len(positional) == 3 and positional[2] is parent:
                    self._report(node, "`torch.cuda` is the fallback of a lookup by device type", _Kind("", _FALLBACK_GUIDANCE, Effort.LOW))
                    return
                if call.func.id in ("getattr", "hasattr") and len(positional) >= 2 and positional[0] is parent:
                    looked_up = _ast_string(positional[1].value)
                    if looked_up is not None and looked_up.startswith("_"):
                        return
                    start, end = self.file.bounds(call)
                    code = generated_text(self.file, call, ancestors[:-2], start, 0, "")
                    self._report(node, f"`{code}` looks a name up in the CUDA module", _Kind("", _LOOKUP_GUIDANCE, Effort.LOW))
                    return
        self._report(node, "`torch.cuda` is used as a value: its attributes are read through it later", _Kind("", _MODULE_GUIDANCE, Effort.LOW))


def _ast_string(node: ast.expr) -> str | None:
    """``string_value`` on ``ast``: a str literal, implicit concatenations included (an f-string
    among the parts makes a ``JoinedStr``, which libcst's evaluates to None too)."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _ast_may_be_cuda(node: ast.Attribute, from_cuda: frozenset[str]) -> bool:
    expr: ast.expr = node
    while isinstance(expr, ast.Attribute):
        if expr.attr == "cuda":
            return True
        expr = expr.value
    return isinstance(expr, ast.Name) and (expr.id == "cuda" or expr.id in from_cuda)
