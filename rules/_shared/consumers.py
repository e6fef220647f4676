"""Who receives a CUDA value the port would retarget, and whether the receiver can take Neuron's.

A device or an availability flag handed to torch, or to the project's own code (which the port
rewrites too), means what it says on Trainium once retargeted. Handed elsewhere it means what
the receiver makes of it:

* **A library outside torch** reads its own arguments. ``MergeOptions(cuda=torch.cuda.is_available())``
  asks the library to do its math on the ``cuda`` device: retargeted to ``torch.neuron`` the flag
  is True on Trainium and the library crashes, where the original ran on the CPU. A device string
  or index reaches torch only through a library that hands it over (``pipeline(device=0)``,
  ``from_pretrained(device_map="cuda")``: ``PASS_THROUGH``); others parse it themselves
  (safetensors, ONNX Runtime, ultralytics) and reject ``"neuron"``.
* **A raw pointer** (``x.data_ptr()``, a TensorRT binding): the buffer is for CUDA code only.
* **The test of a CUDA kernel** (a test function that calls one): its inputs are the kernel's.

The last two are left "as is: the callee runs on NVIDIA GPUs only", as a device handed straight
to CUDA-only code is (``kernel_gates.handed_to_kernel``).
"""

from __future__ import annotations

import sys

import libcst as cst

from cuda2neuron.core import Rule, Settings
from cuda2neuron.python import visit_syntax

from .kernel_gates import SETUP_METHODS, fixture_users, is_fixture
from .kernels import kernel_index
from .names import call_qualname
from .values import argument_of, value_user

__all__ = [
    "PASS_THROUGH", "communicator_stream", "device_test_form", "foreign_callee", "kernel_test", "library_callee",
    "library_callee_by_name", "pointer_buffer", "receiving_call", "takes_torch_device",
]  # fmt: skip

# Libraries that hand a device argument to torch unchanged (``torch.device(device)``,
# ``.to(device)``): a ``"neuron"`` device works through them.
PASS_THROUGH = frozenset({
    "transformers", "diffusers", "accelerate", "peft", "trl", "sentence_transformers", "timm",
    "torchvision", "torchaudio", "torchtext", "torchmetrics", "torch_geometric", "lightning",
    "pytorch_lightning", "lightning_fabric", "open_clip", "clip", "whisper", "kornia", "einops",
    "fairseq", "detectron2", "mmcv", "mmdet", "mmengine", "lpips", "segment_anything", "datasets",
    "torchao", "torchtune", "torchrl", "tensordict", "gpytorch", "botorch", "pyro", "dgl",
})  # fmt: skip
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))
# Libraries that hand a value back to the project's own code: a test framework's parameters, a
# command line's or a config's defaults. The project decides what the value becomes.
_HAND_BACK = frozenset({
    "pytest", "hypothesis", "parameterized", "click", "typer", "fire", "hydra", "omegaconf",
    "jsonargparse", "absl", "ml_collections", "simple_parsing", "tyro", "pydantic", "attr", "attrs",
})  # fmt: skip


# Collectives of a communicator object: torch.distributed's take no stream, so a ``stream=``
# handed to one of these names is a library's NCCL communicator (vLLM's PyNcclCommunicator,
# cupy's NcclCommunicator), which drives CUDA streams only.
_COLLECTIVES = frozenset({
    "broadcast", "all_reduce", "allreduce", "all_gather", "allgather", "reduce_scatter", "reduce", "send", "recv",
    "all_to_all", "alltoall",
})  # fmt: skip


def communicator_stream(keyword: str | None, method: str | None, qualified: str | None) -> bool:
    """Is a value handed as ``keyword`` to a call of ``method`` (its last name; ``qualified``:
    the callee resolved, or None) the stream of a library's NCCL communicator? OpenRLHF's
    ``self._model_update_group.broadcast(param, src=0, stream=torch.cuda.current_stream())``
    on the PyNcclCommunicator its own function built: ``torch.neuron.current_stream()`` there is
    a stream that communicator cannot use. Shared by CN201's visitor and its detector."""
    return keyword == "stream" and method in _COLLECTIVES and not (qualified or "").startswith("torch.")


def library_callee(rule: Rule, node: cst.CSTNode, ancestors=None) -> str | None:
    """The qualified name of the callee ``node``'s value is handed to as an argument (through
    ``a if c else b``, ``a or b`` and collections), when that callee is imported from a package
    that is neither torch, nor the project's own, nor the standard library. None otherwise (a
    local or unresolved callee may be the project's, which the port rewrites too)."""
    chain = rule.context.ancestors if ancestors is None else ancestors
    found = argument_of(chain, node)
    return None if found is None else _foreign(rule, found[2])


def receiving_call(rule: Rule, node: cst.CSTNode) -> str | None:
    """The qualified name of the call ``node``'s value is an argument of, its receiver resolved
    too: ``og.Config(path).append_provider("cuda")`` and ``config.append_provider("cuda")`` after
    ``config = og.Config(path)`` in the same function are ``onnxruntime_genai.Config.append_provider``
    (an instance's method, named through the class that made it). None where nothing resolves."""
    found = argument_of(rule.context.ancestors, node)
    if found is None:
        return None
    call = found[2]
    qualified = call_qualname(rule, call)
    if qualified is not None or not isinstance(call.func, cst.Attribute):
        return qualified
    receiver, method = call.func.value, call.func.attr.value
    if isinstance(receiver, cst.Name):
        receiver = _bound_call(rule, receiver.value)
    if not isinstance(receiver, cst.Call):
        return None
    made_by = call_qualname(rule, receiver)
    return None if made_by is None else f"{made_by}.{method}"


def _bound_call(rule: Rule, name: str) -> cst.Call | None:
    """The call the enclosing function binds ``name`` to, where it binds it once (``config =
    og.Config(path)``); None otherwise."""
    function = next((a for a in reversed(rule.context.ancestors) if isinstance(a, cst.FunctionDef)), None)
    body = function.body if function is not None else rule.context.module
    bound = [
        stmt.value
        for line in getattr(body, "body", ())
        for stmt in (line.body if isinstance(line, cst.SimpleStatementLine) else ())
        if isinstance(stmt, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name for t in stmt.targets)
    ]
    return bound[0] if len(bound) == 1 and isinstance(bound[0], cst.Call) else None


def _foreign(rule: Rule, call: cst.Call) -> str | None:
    """The qualified name of ``call``'s callee when it is imported from a package that is
    neither torch, nor the project's own, nor the standard library, nor one that hands values
    back to the project."""
    return foreign_callee(call_qualname(rule, call), rule.context.settings)


def foreign_callee(qualified: str | None, settings: Settings) -> str | None:
    """``qualified`` (a callee's name) when it is imported from a package that is neither torch,
    nor the project's own, nor the standard library, nor one that hands values back; None
    otherwise. ``_foreign``'s test, for the detectors that resolve the callee on ``ast``."""
    if qualified is None:
        return None
    top = qualified.split(".")[0]
    if top == "torch" or top in _STDLIB or top in _HAND_BACK or top in settings.project.own_packages:
        return None
    return qualified


def library_callee_by_name(rule: Rule, node: cst.CSTNode) -> str | None:
    """The library (not known to hand devices to torch) that a function's local name is handed
    to, where ``node`` is (inside) the value bound to that name: ``device = "cuda" if
    torch.cuda.is_available() else "cpu"``, then ``WhisperModel("small", device=device)``.
    faster-whisper parses the device itself and rejects ``"neuron"``, where the original took
    the CPU path on a machine without CUDA (coqui-ai/TTS's dataset formatter); the name's
    readers decide what its value may become, as ``library_callee`` does for a value handed
    straight on. One walk per function, kept for the pass."""
    chain = rule.context.ancestors
    found = value_user(chain, node)
    if found is None:
        return None
    i, child = found
    assign = chain[i]
    if not isinstance(assign, cst.Assign) or assign.value is not child:
        return None
    names = sorted(t.target.value for t in assign.targets if isinstance(t.target, cst.Name))
    func = next((a for a in reversed(chain[:i]) if isinstance(a, cst.FunctionDef)), None)
    if not names or func is None:
        return None
    memo: dict[tuple[int, int], dict[str, str]] = rule.context.__dict__.setdefault("_library_names", {})
    key = (id(rule.context.module), id(func))
    if key not in memo:
        readers = _LibraryArguments(rule)
        visit_syntax(func.body, readers)
        memo[key] = readers.handed
    handed = memo[key]
    return next((handed[n] for n in names if n in handed), None)


class _LibraryArguments(cst.CSTVisitor):
    """The plain names a function hands, as arguments (through ``a if c else b``, ``a or b`` and
    collections), to a library that reads devices itself, each with that library's callee."""

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.handed: dict[str, str] = {}

    def visit_Call(self, node: cst.Call) -> None:
        names = [n for arg in node.args for n in _names_in(arg.value)]
        if not names:
            return  # most calls hand on no plain name: nothing to resolve
        callee = _foreign(self.rule, node)
        if callee is None or takes_torch_device(callee):
            return
        for name in names:
            self.handed.setdefault(name, callee)


def _names_in(node: cst.BaseExpression) -> list[str]:
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, cst.IfExp):
        return _names_in(node.body) + _names_in(node.orelse)
    if isinstance(node, cst.BooleanOperation):
        return _names_in(node.left) + _names_in(node.right)
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        return [n for e in node.elements for n in _names_in(e.value)]
    return []


def takes_torch_device(qualified: str) -> bool:
    return qualified.split(".")[0] in PASS_THROUGH


def device_test_form(rule: Rule) -> str | None:
    """The name of the test function the visited node sits in when its name says it tests the
    integer form of a device (``test_init_communicator_with_device_int``): that form is what it
    is about, and the port keeps it."""
    func = next((a for a in reversed(rule.context.ancestors) if isinstance(a, cst.FunctionDef)), None)
    if func is None or not func.name.value.startswith("test"):
        return None
    words = set(func.name.value.lower().split("_"))
    return func.name.value if words & {"int", "integer", "ordinal", "index", "idx"} else None


def kernel_test(rule: Rule) -> str | None:
    """What CUDA-only code the test function the visited node sits in runs (``def test_x():
    y = ext.add_one(torch.randn(4, device="cuda"))``): its tensors are the kernel's inputs."""
    ancestors = rule.context.ancestors
    at = next((i for i in range(len(ancestors) - 1, -1, -1) if isinstance(ancestors[i], cst.FunctionDef)), None)
    if at is None:
        return None
    func = ancestors[at]
    scope: cst.CSTNode = func.body
    if func.name.value in SETUP_METHODS:
        # `def setUp(self): self.device = torch.device("cuda")`: the tensors the class's tests
        # make on `self.device` are the kernel's inputs.
        owner = ancestors[at - 2] if at >= 2 and isinstance(ancestors[at - 1], cst.IndentedBlock) else None
        if not isinstance(owner, cst.ClassDef):
            return None
        scope = owner.body
    elif is_fixture(rule, func):
        # `@pytest.fixture def device(): return torch.device("cuda")`: the tests that take it.
        index = kernel_index(rule)
        return index.first_call([t.body for t in fixture_users(rule.context.module, func)]) if index else None
    elif not func.name.value.startswith("test"):
        return None
    index = kernel_index(rule)
    return index.first_call([scope]) if index else None


class _PointerUse(cst.CSTVisitor):
    """The names (``x``, ``self.x``) whose ``.data_ptr`` is taken somewhere below."""

    def __init__(self) -> None:
        self.targets: set[str] = set()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "data_ptr":
            target = _dotted(node.value)
            if target is not None:
                self.targets.add(target)


def _dotted(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
        return f"{node.value.value}.{node.attr.value}"
    return None


# Tensor methods that keep the tensor (a copy or a view of it in the same place): a chain of them
# on the way to the name that holds the tensor.
_KEEPS = frozenset({"contiguous", "half", "float", "bfloat16", "int", "long", "view", "reshape", "detach", "clone", "to", "cuda", "flatten", "squeeze", "unsqueeze"})


def pointer_buffer(rule: Rule, node: cst.CSTNode) -> bool:
    """Is ``node`` (a device, or the ``.cuda()`` call) where a tensor is made or moved that is
    then bound to a name whose raw pointer is taken (``out = torch.empty(..., device="cuda")``
    ... ``bindings = [out.data_ptr()]`` ... ``context.execute_v2(bindings)``)? Such a tensor is a
    buffer of CUDA-only code (a TensorRT engine, a CUDA extension called with pointers)."""
    chain = list(rule.context.ancestors)
    child: cst.CSTNode = node
    # Up to the call that makes or moves the tensor.
    while chain and not isinstance(child, cst.Call):
        child = chain.pop()
    # Then through methods that keep it (`.contiguous().to("cuda").half()`).
    while len(chain) >= 2 and isinstance(chain[-1], cst.Attribute) and chain[-1].value is child and isinstance(chain[-2], cst.Call):
        if chain[-1].attr.value not in _KEEPS:
            return False
        child = chain[-2]
        chain = chain[:-2]
    if not chain or not isinstance(chain[-1], cst.Assign) or chain[-1].value is not child:
        return False
    assign = chain[-1]
    if len(assign.targets) != 1:
        return False
    target = _dotted(assign.targets[0].target)
    if target is None:
        return False
    if target.startswith("self."):
        scope = next((a for a in reversed(chain) if isinstance(a, cst.ClassDef)), None)
    else:
        scope = next((a for a in reversed(chain) if isinstance(a, cst.FunctionDef)), None)
    where = scope if scope is not None else rule.context.module
    # One look per scope, whatever the number of tensors made in it.
    memo: dict[int, set[str]] = rule.context.__dict__.setdefault("_pointer_targets", {})
    if id(where) not in memo:
        finder = _PointerUse()
        visit_syntax(where, finder)
        memo[id(where)] = finder.targets
    return target in memo[id(where)]
