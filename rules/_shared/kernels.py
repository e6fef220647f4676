"""CUDA-only kernels: which modules hold them, and which names of a file call into one.

Several rules ask the same question: "is this call CUDA-only code?" CN616 reports the imports
of third-party kernel packages (the table ``cuda_kernels.toml``), CN617 those of the project's
own compiled extensions and kernel modules (the project sweep's facts in ``Settings.project``),
CN618 hub kernels, and CN104 must not retarget a device test that guards such a call (that
would send neuron tensors into the kernel). ``kernel_index`` answers it once per file from code:
names bound by imports to a CUDA-only module, functions decorated as kernels
(``@triton.jit``, ``@tilelang.jit``, ``@cute.kernel``, ``@helion.kernel``), handles of ``kernels.get_kernel(...)``,
the ``torch.ops.<namespace>`` ops of an extension the file builds from CUDA at run time without a
Python handle (``load(..., is_python_module=False)``), and the file's own functions that call any
of those (to a fixed point), never from words in comments, strings or messages.

The trap it names: a relative import (``from ..ops.triton.layer_norm import rms_norm``) binds
nothing the name resolver can follow (it marks the user's own code), so relative modules are
resolved here against the file's path and matched with the sweep's dotted module names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePath

import libcst as cst

from cuda2neuron.core import ProjectFacts, Rule
from cuda2neuron.python import dotted_name, visit_syntax

from ..files.deps._helpers import cuda_only_package
from .packages import in_package
from .process_gpus import launches_on_gpu
from .strings import string_value
from .tables import read_table

__all__ = [
    "DYNAMIC_IMPORTS",
    "HUB_LOADERS",
    "KERNEL_LANGUAGES",
    "KernelIndex",
    "KernelPackage",
    "OWN_RULE_PACKAGES",
    "QuantizationConfig",
    "TrainerOptimizer",
    "CUDA_IPC_CALLS",
    "CUDA_PROVIDERS",
    "CUDA_PROVIDER_SHORT_NAMES",
    "ONNXRUNTIME_PACKAGES",
    "TORCH_CUDA_ALLOCATOR_CALLS",
    "TORCH_CUDA_ONLY_CALLS",
    "TORCH_CUDA_ONLY_MODULES",
    "TORCH_DEVICE_FREE_MEMBERS",
    "cuda_operator",
    "TORCH_INT4_OPS",
    "dynamic_import",
    "jit_cuda_build",
    "kernel_index",
    "kernel_packages",
    "library_sink",
    "library_sink_words",
    "torch_cuda_only_module",
    "local_kernel_package",
    "package_of",
    "quantization_configs",
    "trainer_optimizers",
    "relative_module",
]

TABLE = "cuda_kernels.toml"

# Kernel languages whose decorators mark a function as a GPU kernel.
KERNEL_LANGUAGES = ("triton", "tilelang", "cutlass", "helion")
# Packages that other rules of the ecosystem family report themselves; a call into one still
# counts as CUDA-only code for a guard.
# vLLM's NCCL communicator is CN408's: a project function that builds one (OpenRLHF's
# `stateless_init_process_group(..., device)`) is CUDA-only, and a device handed to it stays.
OWN_RULE_PACKAGES = (
    "triton", "flash_attn", "flash_attn_2_cuda", "xformers", "apex", "amp_C", "bitsandbytes",
    "cupy", "cupyx", "torch.library.triton_op", "torch.library.wrap_triton",
    "vllm.distributed.device_communicators.pynccl",
)  # fmt: skip
_AUTOGRAD_FUNCTION = "torch.autograd.Function"
# torch's own CUDA APIs that have no TorchNeuron twin (CN202, CN624 report them) and raise where torch
# has no CUDA device (checked against the CPU build: "Torch not compiled with CUDA enabled",
# "Tried to instantiate dummy base class CUDAGraph"). A branch that calls one is CUDA-only code:
# `if torch.cuda.is_available(): cc = torch.cuda.get_device_capability()` turned into a Neuron
# test would run the call on Trainium and raise (xformers: ten test modules failed to import).
# get_arch_list, device_of, is_bf16_supported and torch.version.cuda answer without a device.
# tinygemm's int4 weight-only packing and matmul (CN624 reports them): CUDA kernels only; the
# CPU build raises NotImplementedError, and its `_for_cpu` twins do not run on the neuron device.
TORCH_INT4_OPS = frozenset(
    f"{prefix}.{op}" for prefix in ("torch", "torch.ops.aten") for op in ("_convert_weight_to_int4pack", "_weight_int4pack_mm")
)
# CUDA's caching-allocator controls (CN211 reports them, display only): each raises without CUDA
# ("Torch not compiled with CUDA enabled", no `torch._C._cuda_getAllocatorBackend`), so a test
# of the allocator (InvokeAI's `test_torch_cuda_allocator.py`) is a test of CUDA-only code and
# its `skipif(not torch.cuda.is_available())` must keep skipping on Trainium.
TORCH_CUDA_ALLOCATOR_CALLS = frozenset(
    f"torch.cuda.{m}{name}" for m in ("", "memory.") for name in (
        "get_allocator_backend", "set_per_process_memory_fraction", "get_per_process_memory_fraction",
        "memory_snapshot", "caching_allocator_alloc", "caching_allocator_delete", "change_current_allocator",
        "MemPool", "use_mem_pool",
    )
)  # fmt: skip
TORCH_CUDA_ONLY_CALLS = frozenset(
    {
        "torch.cuda.get_device_capability",
        "torch.cuda.mem_get_info",
        "torch.cuda.ipc_collect",
        *TORCH_INT4_OPS,
        *TORCH_CUDA_ALLOCATOR_CALLS,
        *(f"torch.cuda.{m}{name}" for m in ("", "graphs.") for name in (
            "CUDAGraph", "graph", "graph_pool_handle", "make_graphed_callables", "is_current_stream_capturing",
        )),
    }
)  # fmt: skip
_TORCH_CUDA_ONLY_MEMBERS = frozenset(q.rpartition(".")[2] for q in TORCH_CUDA_ONLY_CALLS)
# torch's own modules whose code runs only on CUDA (torch 2.13's sources), module -> how a finding
# names it. Symmetric memory allocates through NVSHMEM, CUDA or NCCL (`set_backend` takes no
# other), registers each `torch.ops.symm_mem` op for "CUDA" (and Meta) alone and pipelines them on
# `torch.cuda` streams: a CPU / gloo run dies in the dispatcher. NUMA binding finds the node of a
# GPU from `torch.cuda.get_device_properties(i).pci_bus_id`; without CUDA it raises, or with
# `should_fall_back_if_binding_fails` logs the traceback as an error and binds nothing. A test of
# code that reaches one (torchtitan's fused all-gather linears, two modules from its tests; its
# `if device_type != "cuda": return` before binding) must keep answering for CUDA on Trainium.
TORCH_CUDA_ONLY_MODULES = {
    "torch.distributed._symmetric_memory": "symmetric memory: NVSHMEM, CUDA or NCCL buffers on CUDA streams",
    "torch.ops.symm_mem": "a symmetric-memory op, registered for CUDA only",
    "torch.numa.binding": "NUMA binding to a GPU's node, found from its CUDA device properties",
}
# The members of those modules that answer without a device (checked in the same sources): a
# fake-mode switch, availability and group queries, the allocator backend's setting; the
# binding's option records.
TORCH_DEVICE_FREE_MEMBERS = {
    "torch.distributed._symmetric_memory": frozenset({
        "_test_mode", "is_nvshmem_available", "is_symm_mem_enabled_for_group", "enable_symm_mem_for_group",
        "set_backend", "get_backend",
    }),
    "torch.numa.binding": frozenset({"NumaOptions", "AffinityMode"}),
}  # fmt: skip
# Calls that share a device tensor's memory with another process (CUDA IPC): a weight-sync path
# built on them (RLHF trainers handing weights to a colocated inference engine) is CUDA-only. Not
# a reported API (the same calls share CPU tensors through shared memory): a device test in front
# of one only keeps asking about CUDA.
CUDA_IPC_CALLS = frozenset({"torch.multiprocessing.reductions.reduce_tensor"})
# Operator namespaces of torch itself and of libraries with CPU kernels: `torch.ops.aten.relu`
# runs on any device. Any other `torch.ops.<namespace>` in a file that builds a CUDA extension
# at run time without a Python handle is that extension's (`_Collector.resolve_torch_calls`).
_PORTABLE_OP_NAMESPACES = frozenset({
    "aten", "prims", "prim", "quantized", "_quantized", "c10d", "_c10d_functional",
    "_c10d_functional_autograd", "profiler", "higher_order", "rngprims", "mkldnn", "onednn",
    "inductor", "_inductor_test", "debugprims", "_dtensor", "streams", "symm_mem",
    "torchvision", "torchaudio",
})  # fmt: skip
# ONNX Runtime's execution providers that run only on NVIDIA GPUs (CN622 reports them): a branch
# that picks one (`providers = ["CUDAExecutionProvider"] if cuda else [...]`) selects CUDA-only code.
CUDA_PROVIDERS = frozenset({"CUDAExecutionProvider", "TensorrtExecutionProvider"})
# The same providers by the short names ONNX Runtime GenAI takes (``Config.append_provider("cuda")``),
# lower case, and the packages whose calls read them: another runtime's device words, not torch's.
CUDA_PROVIDER_SHORT_NAMES = frozenset({"cuda", "tensorrt", "nvtensorrtrtx"})
ONNXRUNTIME_PACKAGES = frozenset({"onnxruntime", "onnxruntime_genai"})


def _provider(node: cst.SimpleString) -> str | None:
    """The CUDA execution provider a literal names (a cheap word test before evaluating it)."""
    if "ExecutionProvider" not in node.value:
        return None
    value = string_value(node)
    return value if value in CUDA_PROVIDERS else None


# A requirement as a string: a distribution name (extras allowed) and an optional version.
_REQUIREMENT = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*((?:[<>=!~]=?|===)\s*[\w.*+!-]+\s*,?\s*)*")


def _cuda_requirement(node: cst.SimpleString) -> str | None:
    """What a literal that spells a requirement of a CUDA-only distribution installs (CN711's
    table): ``check_requirements("onnxruntime-gpu" if cuda else "onnxruntime")`` installs the
    CUDA build where the original, on a machine without CUDA, installed the portable one
    (ultralytics/yolov5's ONNX export). Only a spelling no identifier has — a hyphenated name
    or a version (``"onnxruntime-gpu"``, ``"bitsandbytes>=0.41"``) — counts: a bare
    ``"triton"`` or ``"kernels"`` is as often a backend's or a key's name."""
    text = node.value
    if "-" not in text and not any(c in text for c in "<>=~"):
        return None  # the cheap test: most literals of a module are neither
    value = string_value(node)
    if not isinstance(value, str) or _REQUIREMENT.fullmatch(value.strip()) is None:
        return None
    name = value.strip()
    bare = re.split(r"[\[<>=!~\s]", name, maxsplit=1)[0]
    if bare == name and "-" not in name:
        return None
    normalized = re.sub(r"[-_.]+", "-", bare).lower()
    found = cuda_only_package(normalized)
    return f"`{value}`: {found[0]}, which runs only on NVIDIA GPUs" if found is not None else None


def _cuda_only_string(node: cst.SimpleString) -> str | None:
    """The CUDA-only code a literal selects (an ONNX Runtime CUDA provider, a CUDA-only
    requirement), described for a finding; None for any other literal."""
    value = _provider(node)
    if value is not None:
        return f"ONNX Runtime's {value}, which runs only on NVIDIA GPUs"
    return _cuda_requirement(node)
# `kernels.get_kernel("org/name")` downloads a compiled CUDA kernel from the Hugging Face hub.
HUB_LOADERS = ("kernels.get_kernel", "kernels.get_local_kernel", "kernels.load_kernel")


class KernelTableError(ValueError):
    """cuda_kernels.toml is malformed (raised at import of the rules that read it)."""


@dataclass(frozen=True)
class KernelPackage:
    module: str
    what: str
    kind: str  # "language", "kernels" or "engine"
    instead: str


@lru_cache(maxsize=1)
def kernel_packages() -> dict[str, KernelPackage]:
    """The rows of cuda_kernels.toml keyed by dotted module."""
    rows = {}
    for module, row in _table().get("package", {}).items():
        if set(row) != {"what", "kind", "instead"} or row["kind"] not in ("language", "kernels", "engine"):
            raise KernelTableError(f"{TABLE}: [package.{module}] needs exactly what, kind (language|kernels|engine), instead")
        rows[module] = KernelPackage(module, row["what"], row["kind"], row["instead"])
    return rows


@dataclass(frozen=True)
class TrainerOptimizer:
    """A Hugging Face Trainer optimizer name that selects a CUDA-only implementation."""

    name: str
    package: str
    what: str
    instead: str  # the Trainer's name for the torch optimizer doing the same job; "" if none
    same_update: bool  # whether ``instead`` computes the same update (then the fix is safe)


@dataclass(frozen=True)
class QuantizationConfig:
    """A Hugging Face quantization config class whose kernels run only on NVIDIA GPUs."""

    name: str
    package: str
    what: str


@lru_cache(maxsize=1)
def _table() -> dict:
    return read_table(Path(__file__).with_name(TABLE))


@lru_cache(maxsize=1)
def trainer_optimizers() -> dict[str, TrainerOptimizer]:
    """The ``[trainer_optim.*]`` rows of cuda_kernels.toml keyed by the optimizer name."""
    rows = {}
    for name, row in _table().get("trainer_optim", {}).items():
        if set(row) != {"package", "what", "instead", "same_update"} or not isinstance(row["same_update"], bool):
            raise KernelTableError(f"{TABLE}: [trainer_optim.{name}] needs exactly package, what, instead, same_update (bool)")
        if not row["instead"] and row["same_update"]:
            raise KernelTableError(f"{TABLE}: [trainer_optim.{name}] has no replacement, so same_update must be false")
        rows[name] = TrainerOptimizer(name, row["package"], row["what"], row["instead"], row["same_update"])
    return rows


@lru_cache(maxsize=1)
def quantization_configs() -> dict[str, QuantizationConfig]:
    """The ``[quantization_config.*]`` rows of cuda_kernels.toml keyed by class name."""
    rows = {}
    for name, row in _table().get("quantization_config", {}).items():
        if set(row) != {"package", "what"}:
            raise KernelTableError(f"{TABLE}: [quantization_config.{name}] needs exactly package, what")
        rows[name] = QuantizationConfig(name, row["package"], row["what"])
    return rows


def package_of(qualified: str | None, facts: ProjectFacts, path: str | None = None) -> KernelPackage | None:
    """The table row ``qualified`` lives in; None for the project's own modules of that name
    (with ``path``, the importing file's, also a package of the project that Python finds
    beside or above that file: ``local_kernel_package``)."""
    if qualified is None or facts.own_module(qualified) or _inside(qualified, facts.extension_modules):
        return None  # the project's own code: CN617 reports it
    if path is not None and local_kernel_package(qualified, facts, path) is not None:
        return None
    rows = kernel_packages()
    parts = qualified.split(".")
    for i in range(len(parts), 0, -1):
        row = rows.get(".".join(parts[:i]))
        if row is not None:
            return row
    return None


# How many folders above an importing file's own Python may find a package in: the script's
# folder, then the folders a package run from above it could start from (``kinds/_local_imports``).
_MAX_UP = 3


def local_kernel_package(
    qualified: str, facts: ProjectFacts, path: str, inserted: tuple[tuple[str, ...], ...] = (),
) -> str | None:
    """``qualified`` as the project's dotted name (``unsloth.kernels.moe.grouped_gemm.kernels``)
    when its first name is a package of the project, one that holds some of its kernel modules,
    in the folder of the file at ``path`` or a folder above it (at most ``_MAX_UP``), or in one
    of the folders ``inserted`` (those the file puts on ``sys.path``: ``sys_path.sys_path_folders``),
    where Python finds it first; None otherwise.

    unsloth ships its own Triton grouped GEMM as ``unsloth/kernels/moe/grouped_gemm/`` and its MoE
    tests and benchmarks, one folder down, import it as ``grouped_gemm.kernels.forward``: the
    name of the third-party CUTLASS package, so CN616 called 108 uses of the project's own
    Triton kernels CUTLASS and advised a torch.matmul loop for its pure-torch reference helpers.
    The project's kernel modules are CN617's. The trap: a package of the same name elsewhere
    in the tree (a test's stub) does not shadow the library for a file Python would not find it
    from, so the folders must line up with the file's; and a file inside the package is the
    package's own business (``from axolotl.utils import x`` in ``src/axolotl/``)."""
    top = qualified.split(".", 1)[0]
    folders = PurePath(path).parent.parts
    for module in sorted(facts.kernel_modules):
        parts = module.split(".")
        for i, part in enumerate(parts[:-1]):
            if part != top or i == 0:
                continue  # a top-level package of the project is ``own_module``'s
            parent = tuple(parts[:i])
            # unsloth's models/glm4_moe.py: sys.path.insert(0, <its package>/kernels/moe), then
            # `import grouped_gemm` finds the project's folder there.
            if any(folder[len(folder) - len(parent):] == parent for folder in inserted if len(folder) >= len(parent)):
                return ".".join((*parent, qualified))
            for up in range(_MAX_UP + 1):
                here = folders[: len(folders) - up]
                if len(here) < len(parent) or here[len(here) - len(parent) :] != parent:
                    continue
                if up and folders[len(here)] == top:
                    # The file lies inside that package: its own top-level package, installed
                    # (axolotl's src layout) or run from above, which the exact names cover.
                    break
                return ".".join((*parent, qualified))
    return None


def _describe_torch_call(qualified: str) -> str:
    return f"`{qualified}`, which has no Neuron counterpart and raises without a CUDA device"


def _inside(qualified: str, modules: frozenset[str]) -> bool:
    return any(qualified == m or qualified.startswith(m + ".") for m in modules)


def relative_module(path: str, level: int, module: str | None) -> tuple[str, ...]:
    """Dotted names a relative import may mean, longest first: the file's folders (as many as
    the dots allow) joined with the module. ``pkg/models/a.py`` + ``from ..ops import x`` gives
    ``pkg.ops``, ``ops``; the sweep's names are relative to a root the file's path may extend."""
    folders = PurePath(path).parent.parts
    if level > 1:
        folders = folders[: len(folders) - (level - 1)] if level - 1 <= len(folders) else ()
    tail = tuple(module.split(".")) if module else ()
    parts = tuple(p for p in folders if p not in ("/", "\\") and not p.endswith(":\\")) + tail
    return tuple(".".join(parts[i:]) for i in range(len(parts)) if parts[i:])


def project_module(facts: ProjectFacts, candidates: tuple[str, ...]) -> str | None:
    """The one of ``candidates`` that is (or lies inside) a compiled extension the project builds
    or a kernel module, the deepest such module winning; exact names only (a last name alone
    matches nothing).

    Deepest, not first: ``relative_module`` also offers the folders above the project's root,
    and where the checkout's folder bears the package's own name (``unsloth/unsloth/kernels``,
    run as ``check /abs/unsloth``) the longest candidate ``unsloth.unsloth.kernels.utils.f`` lies
    inside the kernel package ``unsloth`` and, not being one of its names, answered None: an
    absolute path lost 112 of unsloth's findings that ``check .`` kept."""
    for name in candidates:
        if _inside(name, facts.extension_modules):
            return name
    # Deepest module first; inside the same module, the shortest reading (the one relative to
    # the root: ``unsloth.fast_rope``, not ``unsloth.unsloth.fast_rope``).
    best: tuple[int, int, str] | None = None
    for name in candidates:
        depth = max((k.count(".") + 1 for k in facts.kernel_modules if _inside(name, frozenset({k}))), default=0)
        score = (depth, -name.count("."), name)
        if depth and (best is None or score[:2] > best[:2]):
            best = score
    if best is None:
        return None
    return best[2] if facts.reaches_kernel(best[2]) else None


def describe_module(qualified: str, facts: ProjectFacts) -> str | None:
    """How a finding names the CUDA-only module ``qualified`` lives in, or None."""
    if qualified in TORCH_CUDA_ONLY_CALLS:
        return _describe_torch_call(qualified)
    if torch_cuda_only_module(qualified) is not None:
        return _describe_torch_module_member(qualified)
    if facts.builds_extension(qualified) or _inside(qualified, facts.extension_modules):
        return f"`{qualified}`, from a compiled CUDA extension the project builds"
    if facts.kernel_module(qualified):
        if not facts.reaches_kernel(qualified):
            return None  # plain torch in a kernel module (`rms_norm_ref`)
        return f"`{qualified}`, from a project module that runs GPU kernels"
    row = package_of(qualified, facts)
    if row is not None:
        return f"`{qualified}` ({row.what})"
    if in_package(qualified, OWN_RULE_PACKAGES):
        return f"`{qualified}` (a CUDA-only package)"
    return None


def library_sink(qualified: str, facts: ProjectFacts) -> str | None:
    """How a finding names ``qualified`` when it is CUDA-only code outside the project: torch's
    CUDA-only calls and modules (symmetric memory), a third-party CUDA-only package (bitsandbytes,
    flash_attn, xformers, apex, deep_gemm, Transformer Engine: ``cuda_kernels.toml`` and
    ``OWN_RULE_PACKAGES``) or CUDA IPC;
    None for the project's own modules (the sweep follows those itself) and for the kernel
    languages, whose importers are the project's kernel modules already. The project sweep
    starts its chains across modules here (``workspace/_project.py``)."""
    if qualified in TORCH_CUDA_ONLY_CALLS:
        return _describe_torch_call(qualified)
    if qualified in CUDA_IPC_CALLS:
        return f"`{qualified}` (CUDA IPC: hands a device tensor's memory to another process)"
    if torch_cuda_only_module(qualified) is not None:
        return _describe_torch_module_member(qualified)
    if facts.own_module(qualified) or in_package(qualified, KERNEL_LANGUAGES) or in_package(qualified, ("triton",)):
        return None
    row = package_of(qualified, facts)
    if row is not None:
        return f"`{qualified}` ({row.what})" if row.kind == "kernels" else None
    if in_package(qualified, OWN_RULE_PACKAGES) and not in_package(qualified, ("torch",)):
        return f"`{qualified}` (a CUDA-only package)"
    return None


def torch_cuda_only_module(qualified: str) -> str | None:
    """The module of ``TORCH_CUDA_ONLY_MODULES`` that ``qualified`` is or lies inside, or None."""
    return next((m for m in TORCH_CUDA_ONLY_MODULES if qualified == m or qualified.startswith(m + ".")), None)


def _describe_torch_module_member(qualified: str) -> str | None:
    """How a finding names a member of one of torch's CUDA-only modules; None for the module
    itself, for its device-free members and outside them."""
    module = torch_cuda_only_module(qualified)
    if module is None:
        return None
    member = qualified[len(module) + 1 :].partition(".")[0]
    if not member or member in TORCH_DEVICE_FREE_MEMBERS.get(module, ()):
        return None
    return f"`{qualified}` ({TORCH_CUDA_ONLY_MODULES[module]})"


@lru_cache(maxsize=1)
def library_sink_words() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(top-level packages, call names, torch's CUDA-only modules by their last two names) that
    ``library_sink`` answers for: a file must import one of the packages or spell one of the
    calls or modules to hold such a sink (the sweep's cheap test before parsing a file). Two
    names, as code spells the module (``ops.symm_mem``, ``numa.binding``): ``binding`` alone is
    a word of many files."""
    packages = {m.split(".")[0] for m, row in kernel_packages().items() if row.kind == "kernels"}
    packages |= {p.split(".")[0] for p in OWN_RULE_PACKAGES if not p.startswith(("torch", "triton"))}
    calls = {q.rpartition(".")[2] for q in (*TORCH_CUDA_ONLY_CALLS, *CUDA_IPC_CALLS)}
    modules = {".".join(m.split(".")[-2:]) for m in TORCH_CUDA_ONLY_MODULES}
    return tuple(sorted(packages)), tuple(sorted(calls)), tuple(sorted(modules))


DYNAMIC_IMPORTS = frozenset({"importlib.import_module", "builtins.__import__"})


def dynamic_import(call: cst.Call, qualified: str | None) -> str | None:
    """The module ``importlib.import_module("fused_adam_cuda")`` / ``__import__("x")`` imports,
    when its name is a literal (``qualified``: the call's resolved name); None otherwise. A
    relative name (``import_module(".ops", pkg)``) is left alone: its package is a value."""
    if qualified not in DYNAMIC_IMPORTS and not (isinstance(call.func, cst.Name) and call.func.value == "__import__"):
        return None
    first = call.args[0] if call.args else None
    if first is None or first.keyword is not None or first.star:
        return None
    value = first.value.evaluated_value if isinstance(first.value, cst.SimpleString) else None
    if not isinstance(value, str) or not value or value.startswith(".") or not all(p.isidentifier() for p in value.split(".")):
        return None
    return value


class KernelIndex:
    """Names of one module that reach CUDA-only code, each with how a finding names it."""

    def __init__(
        self,
        names: dict[str, str],
        hubs: frozenset[str] = frozenset(),
        providers: bool = False,
        own: dict[str, cst.FunctionDef] | None = None,
        selected: dict[str, tuple[tuple[str, int | None, tuple[str, ...], str], ...]] | None = None,
    ) -> None:
        self.names = names
        # Another module's functions that pick CUDA-only code by a parameter's literal
        # (`make_ffn_config(tp_gemm_backend="dist_gemm")`), by local name: a call handing one of
        # the literals is a call of that code (`call_target`), the default is plain code.
        self.selected = selected or {}
        # The file's own functions among them (CUDA-only because their body calls a kernel
        # somewhere), by name: a caller asks whether an argument reaches that call (`own_callee`).
        self.own = own or {}
        # The names among them that hold a kernel downloaded by kernels.get_kernel.
        self.hubs = hubs
        # A literal of the module names CUDA-only code (ONNX Runtime's CUDA execution provider, a
        # CUDA-only requirement): a branch choosing it is CUDA-only.
        self.providers = providers

    def __bool__(self) -> bool:
        """Whether anything in the module is CUDA-only code (most modules: nothing)."""
        return bool(self.names) or self.providers or bool(self.selected)

    def hub_handle(self, node: cst.BaseExpression) -> str | None:
        """The hub handle ``node`` (``ops.gelu``, ``self._na3d``) is reached through, or None."""
        dotted = dotted_name(node.value if isinstance(node, cst.Subscript) else node)
        if dotted is None:
            return None
        parts = dotted.split(".")
        return next((".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in self.hubs), None)

    def call_target(self, call: cst.Call) -> str | None:
        """What CUDA-only code ``call`` runs: ``kernel[grid](...)``, ``ext.fwd(...)``,
        ``self._op(...)``, ``rms_norm(...)``; None for anything else."""
        func: cst.BaseExpression = call.func
        if isinstance(func, cst.Subscript):  # a Triton launch: kernel[grid](args)
            func = func.value
        return self.target(func) or (self._selection(call) if self.selected else None)

    def _selection(self, call: cst.Call) -> str | None:
        """What ``call`` picks when it hands a selecting parameter one of the literals that pick
        CUDA-only code (the sweep's ``ProjectFacts.selections``); None for any other value."""
        dotted = dotted_name(call.func)
        for parameter, position, literals, where in self.selected.get(dotted or "", ()):
            positional = [a for a in call.args if a.keyword is None and not a.star]
            arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == parameter), None)
            if arg is None and position is not None and position < len(positional):
                arg = positional[position]
            value = string_value(arg.value) if arg is not None and isinstance(arg.value, cst.SimpleString) else None
            if value in literals:
                return f'`{dotted}` with `{parameter}="{value}"`, which picks {where}'
        return None

    def target(self, node: cst.BaseExpression) -> str | None:
        dotted = dotted_name(node)
        if dotted is None:
            return None
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            found = self.names.get(".".join(parts[:i]))
            if found is not None:
                return found
        return None

    def own_callee(self, call: cst.Call) -> cst.FunctionDef | None:
        """The file's own function ``call`` runs, where it is CUDA-only only through a kernel
        call somewhere in its body (None for a kernel, an extension or anything else)."""
        dotted = dotted_name(call.func)
        return self.own.get(dotted) if dotted is not None else None

    def first_call(self, nodes: list[cst.CSTNode]) -> str | None:
        """What the first CUDA-only call under ``nodes`` runs (None: none does)."""
        finder = _FirstCall(self)
        for node in nodes:
            visit_syntax(node, finder)  # read-only: the fast walk, not libcst's rebuilding visit
            if finder.found is not None:
                return finder.found
        return None


class _FirstCall(cst.CSTVisitor):
    def __init__(self, index: KernelIndex) -> None:
        self.index = index
        self.found: str | None = None

    def visit_Call(self, node: cst.Call) -> bool:
        if self.found is None:
            self.found = self.index.call_target(node)
        # A kernel handed to a call runs there: `spmd.local_map(...)(_kernel_fwd)(x)`,
        # `_run_tuned(_rope_kernel, config, x)` (torchtitan's Helion RoPE).
        for arg in node.args:
            if self.found is None and isinstance(arg.value, (cst.Name, cst.Attribute)):
                self.found = self.index.target(arg.value)
        return self.found is None

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if self.found is None and self.index.providers:
            self.found = _cuda_only_string(node)

    # `if use_kernel: att = self.cuda_att_seq` / `else: att = self.att_seq`, then `att(x)` after
    # the branch (RWKV's strategy code): binding the kernel is what the branch does, as an
    # import is below.
    def visit_Assign(self, node: cst.Assign) -> None:
        if self.found is None and isinstance(node.value, (cst.Name, cst.Attribute)):
            self.found = self.index.target(node.value)

    # `if p.is_cuda: from ext_cuda import train as op` / `else: from ext_cpu import ...`, then
    # `op(p)` after the branch: importing a CUDA-only module is what the branch does.
    def visit_Import(self, node: cst.Import) -> bool:
        self._imports(node)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        self._imports(node)
        return False

    def _imports(self, node: cst.Import | cst.ImportFrom) -> None:
        # By the name it binds, not the module: `if not p.is_cuda: from ext_cpu import op`
        # rebinds a name the module's CUDA import also binds, and the call after the branch
        # runs whichever was bound, so the test still picks the kernel path.
        if self.found is None and not (isinstance(node, cst.ImportFrom) and isinstance(node.names, cst.ImportStar)):
            names = node.names if isinstance(node.names, (list, tuple)) else ()
            for alias in names:
                bound = alias.asname.name if alias.asname is not None else alias.name
                local = dotted_name(bound) if isinstance(bound, (cst.Name, cst.Attribute)) else None
                found = self.index.names.get((local or "").split(".")[0]) if local else None
                if found is not None:
                    self.found = found
                    return


def _imported(node: cst.Import | cst.ImportFrom, path: str) -> list[tuple[str, tuple[str, ...]]]:
    """(local name, dotted names it may mean) for each name an import binds."""
    out: list[tuple[str, tuple[str, ...]]] = []
    if isinstance(node, cst.Import):
        for alias in node.names:
            full = dotted_name(alias.name) or ""
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                out.append((alias.asname.name.value, (full,)))
            else:
                out.append((full.split(".")[0], (full.split(".")[0],)))
        return out
    if isinstance(node.names, cst.ImportStar):
        return out
    module = dotted_name(node.module) if node.module is not None else None
    for alias in node.names:
        name = dotted_name(alias.name) or ""
        local = (
            alias.asname.name.value
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name)
            else name.split(".")[0]
        )
        if node.relative:
            bases = relative_module(path, len(node.relative), module)
            out.append((local, tuple(f"{b}.{name}" for b in bases)))
        elif module:
            out.append((local, (f"{module}.{name}",)))
    return out


class _Collector(cst.CSTVisitor):
    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.facts = rule.context.settings.project
        self.path = rule.context.path
        self.imports: dict[str, str] = {}  # local name -> dotted (absolute imports only)
        self.names: dict[str, str] = {}
        self.hubs: set[str] = set()
        self.functions: list[cst.FunctionDef] = []
        self.methods: set[int] = set()  # id() of the functions defined directly in a class body
        # `class _Fn(torch.autograd.Function)`: `_Fn.apply(x)` runs its forward.
        self.functions_classes: list[cst.ClassDef] = []
        self.providers = False  # a literal names CUDA-only code (a CUDA provider or requirement)
        self.torch_spellings: set[str] = set()  # `x.cuda.get_device_capability`-like chains
        # `load(name=..., sources=[..., "k.cu"], is_python_module=False)`: the builder of an
        # extension whose ops are reached only as `torch.ops.<namespace>.<op>` (the namespace is
        # the C++ `TORCH_LIBRARY`'s, which Python never spells), and the `torch.ops.<ns>` chains.
        self.op_builders: list[str] = []
        self.selected: dict[str, tuple[tuple[str, int | None, tuple[str, ...], str], ...]] = {}
        self.op_spellings: set[str] = set()
        # Plain names bound to an object a kernel name builds, and how often each name is bound.
        self.built: dict[str, str] = {}
        self.bound: dict[str, int] = {}

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self.providers = self.providers or _cuda_only_string(node) is not None

    def _bind_imports(self, node: cst.Import | cst.ImportFrom) -> None:
        for local, candidates in _imported(node, self.path):
            if isinstance(node, cst.Import) or not node.relative:
                self.imports[local] = candidates[0]
                what = describe_module(candidates[0], self.facts)
                if what is None and isinstance(node, cst.ImportFrom) and node.module is not None:
                    module = dotted_name(node.module) or ""
                    # A project kernel module has answered for the name already: plain code beside
                    # its kernels (`from pkg.layers import Linear` beside `DeformConv`) stays plain.
                    if not self.facts.kernel_module(module):
                        what = describe_module(module, self.facts)
            else:
                found = project_module(self.facts, candidates)
                what = describe_module(found, self.facts) if found else None
            if what is None:
                # `from pkg.model import Block` where Block's forward calls another module's
                # kernel (the sweep's chains across modules): named with the line it enters it.
                found = next(((c, s) for c in candidates if (s := self.facts.sink(c)) is not None), None)
                what = f"`{found[0]}`, which reaches {found[1]}" if found is not None else None
            if what is None:
                # `from pkg.ops import indexer`, then `indexer.fwd(q)`: the module is bound, and
                # its names that reach a kernel through other modules are called through it.
                inside = next((c for c in candidates if self.facts.sinks_in(c)), None)
                for name, sink in self.facts.sinks_in(inside) if inside else ():
                    self.names.setdefault(f"{local}.{name}", f"`{inside}.{name}`, which reaches {sink}")
            if what is None and self.facts.selections:
                picks = next((found for c in candidates if (found := self.facts.selected(c))), ())
                if picks:
                    self.selected[local] = picks
            if what is None and candidates[0] in CUDA_IPC_CALLS:
                what = f"`{candidates[0]}` (CUDA IPC: hands a device tensor's memory to another process)"
            if what is not None:
                self.names[local] = what

    def visit_Import(self, node: cst.Import) -> None:
        self._bind_imports(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._bind_imports(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        # `torch.cuda.get_device_capability`, `th.cuda.CUDAGraph`: by how the module spells it,
        # resolved once the whole module's imports are known (`resolve_torch_calls`). Not through
        # the rule's scope: that is wherever the rule walk stands when the index is built, so
        # `import torch` inside a method would resolve or not depending on which rule asked first.
        if node.attr.value in _TORCH_CUDA_ONLY_MEMBERS:
            spelled = dotted_name(node)
            if spelled is not None:
                self.torch_spellings.add(spelled)
        inner = node.value
        if (isinstance(inner, cst.Attribute) and inner.attr.value == "ops"
                and node.attr.value not in _PORTABLE_OP_NAMESPACES):
            spelled = dotted_name(node)
            if spelled is not None:
                self.op_spellings.add(spelled)

    def visit_Expr(self, node: cst.Expr) -> None:
        # Only the builds that bind no handle (`visit_Assign` takes `x = load(...,
        # is_python_module=False)`): `_ext = load(...)`'s functions are called through `_ext`.
        if not isinstance(node.value, cst.Call):
            return
        dotted = dotted_name(node.value.func)
        head, _, rest = (dotted or "").partition(".")
        qualified = f"{self.imports[head]}.{rest}".rstrip(".") if head in self.imports else ""
        if jit_cuda_build(node.value, qualified):
            self.op_builders.append(qualified.rpartition(".")[2])

    def resolve_torch_calls(self) -> None:
        for spelled in self.torch_spellings:
            head, _, rest = spelled.partition(".")
            module = self.imports.get(head)
            qualified = f"{module}.{rest}" if module and rest else module
            if qualified in TORCH_CUDA_ONLY_CALLS:
                self.names[spelled] = _describe_torch_call(qualified)
        # RWKV's `if 'cuda' in str(dev): ATT = self.cuda_att_seq`, whose `cuda_wkv` calls
        # `torch.ops.rwkv.wkv_forward`: ops registered by the file's run-time CUDA build.
        for spelled in self.op_spellings if self.op_builders else ():
            head, _, rest = spelled.partition(".")
            if self.imports.get(head) == "torch" and rest.startswith("ops."):
                namespace = rest.removeprefix("ops.")
                self.names[spelled] = (
                    f"`torch.ops.{namespace}` (the ops of a CUDA extension built at run time by {self.op_builders[0]})"
                )

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        self.methods.update(id(s) for s in body if isinstance(s, cst.FunctionDef))
        if any(self.rule.qualname(b.value) == _AUTOGRAD_FUNCTION for b in node.bases):
            self.functions_classes.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node)
        for deco in node.decorators:
            expr = deco.decorator.func if isinstance(deco.decorator, cst.Call) else deco.decorator
            dotted = dotted_name(expr)
            if dotted is None:
                continue
            head, _, rest = dotted.partition(".")
            qualified = f"{self.imports[head]}.{rest}".rstrip(".") if head in self.imports else ""
            language = next((k for k in KERNEL_LANGUAGES if in_package(qualified, (k,))), None)
            if language is not None:
                # Named with its place (file:line): the finding that cites it may sit far away.
                self.names[node.name.value] = f"the {language} kernel `{node.name.value}` at {self.rule.context.mark(node.name)}"

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                self.bound[target.target.value] = self.bound.get(target.target.value, 0) + 1
        # `ops = get_kernel("org/ops")`, `self._op = get_kernel("org/x").op`: a hub kernel handle.
        value = node.value
        while isinstance(value, cst.Attribute):
            value = value.value
        if not isinstance(value, cst.Call):
            return
        dotted = dotted_name(value.func)
        if dotted is None:
            return
        head, _, rest = dotted.partition(".")
        qualified = f"{self.imports[head]}.{rest}".rstrip(".") if head in self.imports else ""
        operator = cuda_operator(value, qualified)
        if operator is not None:
            # `op = torch._C._jit_get_operation("aten::cudnn_convolution_backward_weight")`
            # (StyleGAN2-ADA's conv2d_gradfix): a cuDNN / CUDA operator looked up by its name.
            for target in node.targets:
                name = dotted_name(target.target)
                if name is not None:
                    self.names[name] = f"the CUDA operator `{operator}`"
            return
        if jit_cuda_build(value, qualified):
            if _no_python_module(value):
                self.op_builders.append(qualified.rpartition(".")[2])
            # `_ext = load_inline(..., cuda_sources=...)`: the handle's functions are CUDA kernels,
            # so `if not x.is_cuda: raise` in front of `_ext.fused(x)` guards CUDA-only code.
            for target in node.targets:
                name = dotted_name(target.target)
                if name is not None:
                    self.names[name] = f"the CUDA extension `{name}` (built at run time by {qualified.rpartition('.')[2]})"
            return
        module = dynamic_import(value, qualified)
        if module is not None:
            # `ext = importlib.import_module("fused_adam_cuda")`: an import spelled as a call.
            what = describe_module(module, self.facts)
            for target in node.targets:
                name = dotted_name(target.target)
                if what is not None and name is not None:
                    self.names[name] = what
            return
        if qualified in HUB_LOADERS:
            repo = value.args[0].value if value.args else None
            label = repo.value if isinstance(repo, cst.SimpleString) else "a hub repository"
            for target in node.targets:
                name = dotted_name(target.target)
                if name is not None:
                    self.names[name] = f"the hub kernel {label} (`{name}`, downloaded by kernels.get_kernel)"
                    self.hubs.add(name)
            return
        # `op = ROIAlignRotated(...)`, then `op.forward(x.cuda(), rois.cuda())` under
        # `if torch.cuda.is_available():` (detectron2's tests): the object an imported kernel
        # name builds runs the kernel when it is called. Only names the imports bound (read
        # before the body), and only plain names (`resolve_built`: bound once in the module).
        if value is node.value and dotted in self.names:
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    self.built.setdefault(target.target.value, f"`{target.target.value}`, built by {self.names[dotted]}")

    def resolve_built(self) -> None:
        # The index is one per module, not per function: `attention = MHA(...)` in one test
        # and `attention = nn.MultiheadAttention(...)` in the next would make the second
        # test's guard hold too. A name bound more than once is left out: which binding a read
        # sees is a question of flow, and left out, its guards move as they did before.
        for name, what in self.built.items():
            if self.bound.get(name) == 1 and name not in self.names:
                self.names[name] = what


# Operators looked up by name whose kernels exist for CUDA only (cuDNN, and aten ops named for CUDA).
_OPERATOR_LOOKUPS = frozenset({"torch._C._jit_get_operation"})


_JIT_BUILDERS = frozenset({"torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline"})


def jit_cuda_build(call: cst.Call, qualified: str) -> bool:
    """``load_inline(cuda_sources=...)``, ``load(sources=["k.cu"])``: an extension built from CUDA
    code at run time (a C++-only one runs anywhere; its handle is not CUDA-only)."""
    if qualified not in _JIT_BUILDERS:
        return False
    for arg in call.args:
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword in ("cuda_sources", "extra_cuda_cflags") or (keyword == "with_cuda" and _true(arg.value)):
            return True
        if keyword in (None, "sources") and any(_cu_file(s) for s in _strings(arg.value)):
            return True
    return False


def _no_python_module(call: cst.Call) -> bool:
    """``is_python_module=False``: the build registers ops and returns no module."""
    return any(
        a.keyword is not None and a.keyword.value == "is_python_module" and isinstance(a.value, cst.Name)
        and a.value.value == "False" for a in call.args
    )


def _true(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def _strings(node: cst.BaseExpression) -> list[str]:
    """The file names a ``sources=`` argument spells. A source is seldom a bare literal: it is
    joined to the module's folder (``os.path.join(here, "src", "k.cu")``, ``here / "k.cu"``,
    ``here + "/k.cu"``, ``f"{here}/k.cu"``), so each path expression counts by its last literal
    part; missing those left BasicSR's ``if not x.is_cuda: raise`` in front of its deformable
    convolution's CUDA extension open to Trainium."""
    if isinstance(node, cst.SimpleString):
        text = string_value(node)
        return [text] if text is not None else []
    if isinstance(node, (cst.List, cst.Tuple)):
        return [t for e in node.elements for t in _strings(e.value)]
    if isinstance(node, cst.Call) and node.args:
        # os.path.join(...), Path(...), str(...): the file is named by the last argument.
        return _strings(node.args[-1].value)
    if isinstance(node, cst.BinaryOperation):
        return _strings(node.right)
    if isinstance(node, cst.FormattedString) and node.parts and isinstance(node.parts[-1], cst.FormattedStringText):
        return [node.parts[-1].value]
    return []


def _cu_file(text: str) -> bool:
    return text.endswith((".cu", ".cuh"))


def cuda_operator(call: cst.Call, qualified: str) -> str | None:
    """``torch._C._jit_get_operation("aten::cudnn_...")``: the operator's name when it is one."""
    if qualified not in _OPERATOR_LOOKUPS or not call.args:
        return None
    first = call.args[0].value
    names = [first.body, first.orelse] if isinstance(first, cst.IfExp) else [first]
    for name in names:
        text = name.evaluated_value if isinstance(name, cst.SimpleString) else None
        if isinstance(text, str) and ("cudnn" in text or "cuda" in text.split("::")[-1]):
            return text
    return None


def kernel_index(rule: Rule) -> KernelIndex:
    """The index of the module the rule is visiting, built once per pass and shared by rules."""
    memo = rule.context.__dict__.setdefault("_kernel_index", {})
    key = id(rule.context.module)
    if key not in memo:
        collector = _Collector(rule)
        visit_syntax(rule.context.module, collector)
        collector.resolve_torch_calls()
        collector.resolve_built()
        names = collector.names
        # `env["CUDA_VISIBLE_DEVICES"] = str(i)` then `subprocess.Popen(cmd, env=env)`: another
        # program on a CUDA GPU (audiocraft's TensorFlow embedding processes).
        for func in collector.functions:
            name = f"self.{func.name.value}" if id(func) in collector.methods else func.name.value
            if name not in names and launches_on_gpu(func, collector.imports):
                names[name] = f"`{name}` at {rule.context.mark(func.name)}, which starts a process on the CUDA GPU its `CUDA_VISIBLE_DEVICES` names"
        # The file's own functions that call a kernel are CUDA-only too (`def rms_norm(x):
        # return _rms_kernel[grid](x)`), to a fixed point; a method by the `self.f()` that calls
        # it (detectron2's `test_x_cuda` runs `self.test_x_cpu(device="cuda")`, which calls the
        # kernel; a same-named method of another class of the file then counts too: a report
        # where a rewrite might have done, never the reverse).
        changed = bool(names) or collector.providers or bool(collector.selected)
        own: dict[str, cst.FunctionDef] = {}
        while changed:
            changed = False
            index = KernelIndex(names, providers=collector.providers, selected=collector.selected)
            for func in collector.functions:
                name = f"self.{func.name.value}" if id(func) in collector.methods else func.name.value
                if name in names:
                    continue
                inner = index.first_call([func.body])
                if inner is not None:
                    names[name] = f"`{name}` at {rule.context.mark(func.name)}, which calls {inner}"
                    own[name] = func
                    changed = True
            # An autograd Function whose forward or backward launches a kernel: `_Fn.apply(x)`
            # (the way Triton kernels are wrapped for autograd) runs it.
            for cls in collector.functions_classes:
                if cls.name.value not in names:
                    inner = index.first_call([cls.body])
                    if inner is not None:
                        names[cls.name.value] = f"`{cls.name.value}.apply` at {rule.context.mark(cls.name)}, which calls {inner}"
                        changed = True
        memo[key] = KernelIndex(dict(names), frozenset(collector.hubs), collector.providers, own, collector.selected)
    return memo[key]
