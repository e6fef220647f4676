"""Per-run settings that change what rules emit (not which rules run)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePath

__all__ = ["AMP_DTYPES", "ProjectFacts", "RunOptions", "Settings", "TARGETS"]

AMP_DTYPES = ("bfloat16", "float16")
TARGETS = ("neuron", "accelerator")


@dataclass(frozen=True)
class ProjectFacts:
    """Names only the whole project knows, collected before any file is processed
    (``cuda2neuron.workspace.project_facts``), so that the per-file rules can use them.

    ``extension_modules``: compiled CUDA extensions the project builds (``CUDAExtension(name=
    "selective_scan_cuda")`` in a setup.py, ``cpp_extension.load(name=...)`` with ``.cu``
    sources), as the dotted names that import them. ``kernel_modules``: the project's own
    modules that import a CUDA-only kernel language (Triton, TileLang, CUTLASS/CuTe), as dotted
    module names relative to the root they were found under.
    """

    extension_modules: frozenset[str] = frozenset()
    kernel_modules: frozenset[str] = frozenset()
    # Functions that JIT-build an extension from sources their caller passes
    # (``def load_ext(name, sources): return cpp_extension.load(name, sources)``), dotted
    # ``module.function``: a call of one with ``.cu`` files builds CUDA code.
    extension_loaders: frozenset[str] = frozenset()
    # The top-level names of the kernel modules that reach a kernel (``pkg.ops.norm.rms_norm``
    # launches one; ``pkg.ops.norm.rms_norm_ref`` is plain torch and is not here). A kernel module
    # with no name recorded here counts as a kernel as a whole.
    kernel_names: frozenset[str] = frozenset()
    # Top-level modules and packages of the project itself: an import of one is the project's
    # own code, never a third-party CUDA package of the same name (mamba_ssm inside mamba).
    own_packages: frozenset[str] = frozenset()
    # Parameters of the project's own functions that reach ``init_process_group``'s backend
    # unchanged, as (function name, position in a call, parameter name): ``def wrap_model(model,
    # rank, backend): dist.init_process_group(backend)`` gives ``("wrap_model", 2, "backend")``.
    # The position leaves out a method's ``self`` and is None for a keyword-only parameter; a
    # name the project defines more than once with such a parameter is left out (ambiguous).
    backend_params: frozenset[tuple[str, int | None, str]] = frozenset()
    # The project's other top-level names that reach CUDA-only code through its modules, as
    # (dotted name, the sink it reaches and where): ``("pkg.model.Block", "`pkg.ops.fused_norm`
    # (a project module that runs GPU kernels), called at pkg/model.py:12")``. A class of one
    # module whose method calls another module's Triton kernel: a device test in a third module
    # in front of it is a kernel gate (``sink``). Kept apart from ``kernel_names``: importing
    # such a name is no kernel import of its own (CN617 stays with the kernel modules).
    sink_names: frozenset[tuple[str, str]] = frozenset()
    # Backend words the project registers as names of its own components, with where:
    # ``@CheckpointEngineRegistry.register("nccl")`` at verl/checkpoint_engine/nccl_engine.py:96
    # gives ``("nccl", "`CheckpointEngineRegistry.register(\"nccl\")` at ...:96")``. There
    # ``backend="nccl"`` handed to the project's code names that component, not a process group.
    registered_names: frozenset[tuple[str, str]] = frozenset()
    # Fields whose value the project hands to a CUDA-only library as a backend, with where:
    # ``initialize_ub(bootstrap_backend=args.tp_comm_bootstrap_backend)`` (Transformer Engine)
    # gives ``("tp_comm_bootstrap_backend", "`transformer_engine...initialize_ub` at
    # megatron/training/initialize.py:245")``. The field's "nccl" default is that library's
    # setting, not a torch process group: "neuron" would name nothing there.
    library_backends: frozenset[tuple[str, str]] = frozenset()
    # Fields whose value the project's registry of "nccl" components looks up, as ("owner.field",
    # where): verl's ``backend = rollout_config.checkpoint_engine.backend`` then
    # ``CheckpointEngineRegistry.new(backend, ...)`` gives ``("checkpoint_engine.backend",
    # "`CheckpointEngineRegistry.new(...)` at verl/checkpoint_engine/base.py:271")``. A "nccl"
    # stored there (``cfg.rollout.checkpoint_engine.backend = "nccl"``) is that registry's key.
    registry_fields: frozenset[tuple[str, str]] = frozenset()
    # The names holding a CUDA word that the project defines in any of its modules and never
    # imports from outside (``_cuda_family_sm_range``; a class member as ``DeviceType.CUDA``), and
    # those an import from outside binds somewhere (``from torch.cuda import ...``): the residual
    # pass (CN902) reads one file and asks these about the names it spells. Not part of the
    # results cache's run key: a file's key holds the answers for the names it spells.
    own_names: frozenset[str] = frozenset()
    foreign_names: frozenset[str] = frozenset()
    # The project's functions that pick CUDA-only code by the literal a parameter holds, as
    # (dotted name, parameter, its position or None for keyword-only, the literals that pick the
    # sink, where): torchtitan's ``make_ffn_config(..., tp_gemm_backend="default")`` builds
    # ``AllGatherFusedFeedForward if tp_gemm_backend == "dist_gemm" else FeedForward``. Such a
    # name is no sink (its default path is plain code); a call handing it one of the literals is
    # (``workspace/_value_readers.py``).
    selections: frozenset[tuple[str, str, int | None, tuple[str, ...], str]] = frozenset()
    # The project's functions and classes whose parameter (a dataclass's field) is read by a
    # device test a safe run leaves as it is, in a chain of tests whose last ``else`` raises: a
    # caller's "cuda" moved to "neuron" reaches the raise (lerobot's
    # ``is_torch_device_available(try_device)``: ``if try_device.startswith("cuda"): return
    # torch.cuda.is_available() ... else: raise ValueError("Unknown device")``, read by
    # ``PreTrainedConfig.__post_init__`` as ``self.device``). As (dotted name, parameter, its
    # position or None, where the test stands, whether its branches call torch only: CN103's
    # fix is then unsafe, and --unsafe-fixes moves the test and the caller's literal together).
    device_readers: frozenset[tuple[str, str, int | None, str, bool]] = frozenset()
    # The project's top-level functions whose return is a device fact (``def
    # is_cuda_available(): return torch.cuda.is_available()``) and whose answer a caller tests in
    # front of CUDA code the port leaves (mmengine's ``assert is_cuda_available() or ...`` before
    # ``torch.cuda.amp.GradScaler``), as (dotted name, where the return stands, the guard and the
    # sink): the return keeps its meaning (``workspace/_value_returns.py``).
    device_returns: frozenset[tuple[str, str, str]] = frozenset()
    # (function, parameter, its position without `self`, where the test stands, where a caller
    # hands "cuda") of each function or method whose raising chain only answers on a parameter
    # against "cuda" (moved by CN103 alone) while a project caller hands it, or a function that
    # hands it a parameter, a "cuda" literal: ColossalAI's `non_model_data_list(self,
    # device_type)` (``workspace/_value_labels.py``). CN103 keeps the test, CN102 the literals.
    label_readers: frozenset[tuple[str, str, int | None, str, str]] = frozenset()
    # The attributes of a parsed command line that such a raising chain tests in a function
    # handed the namespace (``def init_device(args): if args.device == "cuda": ... else: raise``),
    # as (a module that calls that function, attribute, where the test stands, moved by
    # --unsafe-fixes): an ``add_argument("--device", default="cuda")`` there moved alone reaches
    # the raise (``workspace/_value_args.py``).
    option_readers: frozenset[tuple[str, str, str, bool]] = frozenset()
    # The attributes of a parsed command line that a function builds a device from and returns
    # (``def init_device(args): return torch.device(args.device)``), where the caller tests the
    # answer against "cuda" in front of code (``device = init_device(args)``, then ``if
    # device.type == "cuda": scaler = Scaler()``), as (the caller's module, attribute, where the
    # test stands and what returned the device, moved by --unsafe-fixes): a "neuron" default
    # there moved alone takes the test's other branch (``workspace/_value_results.py``).
    returned_options: frozenset[tuple[str, str, str, bool]] = frozenset()
    # Properties that may return a name a subclass gave its base as "cuda" (``super().__init__(
    # name="cuda")``, a literal the port leaves: no device word), beside other answers
    # (``return self.buffer.device.type`` ... ``return current_backend().name``), as (property,
    # where its return stands, where the literal stands): a test of the property against "cuda"
    # cannot move alone (``workspace/_value_properties.py``).
    left_cuda_properties: frozenset[tuple[str, str, str]] = frozenset()
    # The project's own extras that pull a CUDA-only package, from its setup.py or
    # pyproject.toml, as (distribution, extra, package, where), names normalised: llm-foundry's
    # ``("llm-foundry", "gpu", "flash-attn", "setup.py:107")``, which ``pip install .[gpu]``
    # installs (``workspace/_project_extras.py``).
    cuda_extras: frozenset[tuple[str, str, str, str]] = frozenset()

    def cuda_extra(self, distribution: str, extra: str) -> tuple[str, str] | None:
        """(package, where) of the CUDA-only package the project's ``extra`` pulls; None if it
        pulls none. ``distribution`` is the name installed, normalised, or "" for the project's
        folder (``pip install .[gpu]``)."""
        return next(
            ((package, where) for dist, name, package, where in sorted(self.cuda_extras)
             if name == extra and (not distribution or distribution == dist)),
            None,
        )

    def library_backend(self, field: str) -> str | None:
        """Where the project hands ``field`` to a CUDA-only library as a backend; None if it
        does not."""
        return next((where for found, where in sorted(self.library_backends) if found == field), None)

    def registry_field(self, owner: str, field: str) -> str | None:
        """Where the project's registry looks up the value of ``owner.field`` (the last two
        names of an attribute chain); None if it does not."""
        return next((where for found, where in sorted(self.registry_fields) if found == f"{owner}.{field}"), None)

    def registered(self, name: str) -> str | None:
        """Where the project registers ``name`` (lower case) as one of its components; None if
        it does not."""
        return next((where for found, where in sorted(self.registered_names) if found == name), None)

    def backend_param(self, function: str) -> tuple[int | None, str] | None:
        """(position, parameter name) of the backend parameter of the project's one function
        (or method) named ``function``, a callee's last name; None when there is none."""
        return next(((pos, param) for name, pos, param in self.backend_params if name == function), None)

    def builds_extension(self, module: str) -> bool:
        """Whether ``module`` is a compiled extension the project builds: by its dotted name, or
        by its last name (``import fused_adam_cuda`` found under another root), unless a project
        module of its own stands in it. BasicSR's ``basicsr/ops/upfirdn2d/upfirdn2d.py`` imports
        the extension it JIT-builds as ``load("upfirdn2d", ...)``; CN617 named the Python module
        the extension (4 findings of stylegan2_arch.py, and the package's re-export, resolved
        against the file's path as ``work.repos.BasicSR.basicsr.ops.upfirdn2d.upfirdn2d.upfirdn2d``)."""
        if module in self.extension_modules:
            return True
        parent, _, last = module.rpartition(".")
        if last not in self.extension_modules:
            return False
        # A name inside a kernel module (`pkg.ops.upfirdn2d.upfirdn2d`, or a tail or a path-long
        # spelling of it), not the extension named like it.
        return not any(_aligned(m, k) for m in (module, parent) if m for k in self.kernel_modules)

    def kernel_module(self, module: str) -> bool:
        """Whether ``module`` (dotted) is one of the project's kernel modules or inside one."""
        return _matches(module, self.kernel_modules)

    def reaches_kernel(self, dotted: str) -> bool:
        """Whether ``dotted`` (a kernel module, or a name inside one) runs GPU kernels: the module
        itself, a submodule, or a name the sweep saw reach a kernel (every name when it recorded
        none for that module)."""
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            head = ".".join(parts[:i])
            known = next((k for k in self.kernel_modules if head == k or ("." in head and k.endswith("." + head))), None)
            if known is None:
                continue
            if i == len(parts):
                return True
            name = f"{known}.{parts[i]}"
            recorded = any(n.startswith(known + ".") for n in self.kernel_names)
            return not recorded or name in self.kernel_names or name in self.kernel_modules
        return False

    def sink(self, dotted: str) -> str | None:
        """The CUDA-only sink ``dotted`` (an imported name, ``pkg.model.Block``) reaches through
        the project's modules, and where; None for a name that reaches none. A suffix matches
        too (a src layout: the sweep's ``src.pkg.model.Block`` for ``pkg.model.Block``)."""
        if not self.sink_names:
            return None
        return _sink_table(self.sink_names).get(dotted)

    def sinks_in(self, module: str) -> tuple[tuple[str, str], ...]:
        """The top-level names of ``module`` (dotted, or a suffix of one) that reach CUDA-only
        code through the project's modules, as (name, the sink it reaches and where): a file
        that imports the module itself (``from pkg.ops import indexer``) calls them as
        ``indexer.fwd(...)``, which no imported name spells."""
        if not self.sink_names:
            return ()
        return _module_sink_table(self.sink_names).get(module, ())

    def selected(self, dotted: str) -> tuple[tuple[str, int | None, tuple[str, ...], str], ...]:
        """(parameter, position, literals, where) of each selection ``dotted`` (a dotted suffix
        matches, as ``sink`` matches) makes by a parameter's literal; () for most names."""
        if not self.selections:
            return ()
        return _suffix_table(self.selections).get(dotted, ())

    def device_reader(self, dotted: str) -> tuple[tuple[str, int | None, str, bool], ...]:
        """(parameter, position, where, moved by --unsafe-fixes) of each parameter of ``dotted`` that a device test which
        stays reads before raising on any other device; () for most names."""
        if not self.device_readers:
            return ()
        return _suffix_table(self.device_readers).get(dotted, ())

    def guarded_return(self, dotted: str) -> str | None:
        """The guard and the CUDA code the answer of ``dotted`` (a function; a dotted suffix
        matches) fronts in a caller; None for most names."""
        if not self.device_returns:
            return None
        rows = _suffix_table(frozenset((name, guard) for name, _, guard in self.device_returns)).get(dotted, ())
        return rows[0][0] if rows else None
    def option_reader(self, path: str, attribute: str) -> tuple[str, bool] | None:
        """(where, moved by --unsafe-fixes) of the first raising device test that reads a parsed
        command line's ``attribute``, handed by the module at ``path`` (a file's path: its
        module's dotted name is the path's tail); None for most options. Moved by
        --unsafe-fixes only where every such test is."""
        return _option_row(self.option_readers, path, attribute)

    def returned_option(self, path: str, attribute: str) -> tuple[str, bool] | None:
        """(where, moved by --unsafe-fixes) of the first test on a device that a function builds
        from a parsed command line's ``attribute`` and returns to the module at ``path``, as
        ``option_reader``'s."""
        return _option_row(self.returned_options, path, attribute)

    def extension_loader(self, function: str) -> bool:
        """Whether ``function`` (dotted, ``pkg.jit.load_ext``) is one of the project's loaders."""
        return any(function == f or ("." in function and f.endswith("." + function)) for f in self.extension_loaders)

    def own_module(self, module: str) -> bool:
        return module.split(".")[0] in self.own_packages

    def words(self) -> tuple[bytes, ...]:
        """Words a file must hold to import one of these modules or call a loader: the last
        component of each name (``layer_norm`` for ``pkg.ops.layer_norm``), which a relative
        import spells too. They join the trigger words of the rules that use the facts."""
        names = {n.rsplit(".", 1)[-1] for n in (*self.extension_modules, *self.kernel_modules, *self.extension_loaders)}
        return tuple(sorted(n.encode() for n in names if n))


def _aligned(module: str, kernel: str) -> bool:
    """``module`` names ``kernel``: the same, a tail of it, or it with a longer root before."""
    return module == kernel or kernel.endswith("." + module) or module.endswith("." + kernel)


@lru_cache(maxsize=4)
def _sink_table(sinks: frozenset[tuple[str, str]]) -> dict[str, str]:
    """``sinks`` keyed by every dotted suffix of at least two parts, built once per run (the
    frozenset keeps its hash): a lookup per import, not a scan of the project's names."""
    table: dict[str, str] = {}
    for dotted, sink in sorted(sinks):
        parts = dotted.split(".")
        for i in range(len(parts) - 1):
            table.setdefault(".".join(parts[i:]), sink)
    return table


@lru_cache(maxsize=4)
def _module_sink_table(sinks: frozenset[tuple[str, str]]) -> dict[str, tuple[tuple[str, str], ...]]:
    """``sinks`` grouped by their module, keyed by every dotted suffix of it (as ``_sink_table``
    keys the names): built once per run, a lookup per module import."""
    grouped: dict[str, list[tuple[str, str]]] = {}
    for dotted, sink in sorted(sinks):
        module, _, name = dotted.rpartition(".")
        parts = module.split(".") if module else []
        for i in range(len(parts)):
            grouped.setdefault(".".join(parts[i:]), []).append((name, sink))
    return {module: tuple(names) for module, names in grouped.items()}


def _option_row(rows: frozenset[tuple[str, str, str, bool]], path: str, attribute: str) -> tuple[str, bool] | None:
    """The first (where, moved by --unsafe-fixes) of ``rows`` (module, attribute, where, moved)
    for ``attribute`` in the module at ``path`` (a file's path: its module's dotted name is the
    path's tail); moved only where every such test is."""
    if not rows:
        return None
    stem = PurePath(path).with_suffix("").as_posix()
    found = sorted(
        (where, unsafe) for module, name, where, unsafe in rows
        if name == attribute and module and (stem == module.replace(".", "/") or stem.endswith("/" + module.replace(".", "/")))
    )
    if not found:
        return None
    return found[0][0], all(r[1] for r in found)


@lru_cache(maxsize=8)
def _suffix_table(rows: frozenset[tuple]) -> dict[str, tuple[tuple, ...]]:
    """``rows`` (dotted name first) keyed by every dotted suffix of at least two parts, the rest
    of each row grouped: built once per run, as ``_sink_table``."""
    table: dict[str, list[tuple]] = {}
    for row in sorted(rows, key=repr):
        parts = row[0].split(".")
        for i in range(len(parts) - 1):
            table.setdefault(".".join(parts[i:]), []).append(row[1:])
    return {name: tuple(found) for name, found in table.items()}


def _matches(module: str, names: frozenset[str]) -> bool:
    """``module`` is one of ``names``, inside one, or a suffix of one or inside such a suffix (a
    src layout, or a module found under a different root): never only the last name. A nested
    project is the trap: detectron2's ``projects/TensorMask`` builds ``tensormask._C`` with a
    setup.py of its own, and its tests import ``tensormask.layers.swap_align2nat.SwapAlign2Nat``,
    which the sweep, run from the repository's root, knows as
    ``projects.TensorMask.tensormask.layers.swap_align2nat``."""
    parts = module.split(".")
    tails = [".".join(parts[:i]) for i in range(2, len(parts) + 1)]
    return any(
        module == k or module.startswith(k + ".") or any(k.endswith("." + tail) for tail in tails)
        for k in names
    )


@dataclass(frozen=True)
class Settings:
    # "neuron" emits TorchNeuron names; "accelerator" emits device-agnostic torch.accelerator code.
    target: str = "neuron"
    # dtype emitted for autocast; bf16 is what AWS recommends and needs no loss scaling.
    amp_dtype: str = "bfloat16"
    # Oldest torch the user's code must run on (accelerator target gates names by it).
    min_torch: tuple[int, int] = (2, 9)
    # Oldest torch-neuronx the code must run on, e.g. (2, 14, 3, 0); None when unknown. Features
    # new in a TorchNeuron release (torch.accelerator memory functions: 2.13.3.1 / 2.14.3.1) are
    # gated by it on the accelerator target, as min_torch gates torch's names.
    min_torch_neuronx: tuple[int, ...] | None = None
    # What the project-level sweep found (empty for a lone source text).
    project: ProjectFacts = field(default_factory=ProjectFacts)

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(f"unknown target {self.target!r}; expected one of {', '.join(TARGETS)}")
        if self.amp_dtype not in AMP_DTYPES:
            raise ValueError(
                f"unknown amp dtype {self.amp_dtype!r}; expected one of {', '.join(AMP_DTYPES)}"
            )


@dataclass(frozen=True)
class RunOptions:
    """What one run does with the fixes it finds (settings say what rules emit; these, what is
    written): ``fix`` applies safe fixes, ``unsafe`` also the unsafe ones."""

    fix: bool = False
    unsafe: bool = False

    @classmethod
    def from_config(cls, config, *, fix: bool) -> RunOptions:  # noqa: ANN001 - Config, a peer module
        return cls(fix=fix, unsafe=fix and config.unsafe_fixes)
