"""CN401: the ``"nccl"`` process-group backend, in every shape it reaches ``init_process_group``."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Invalid, ProjectFacts, Rule, Safety, Valid
from cuda2neuron.python import dotted_name

from .._shared.args import arg_by_name
from .._shared.kernel_gates import report_kernel_gate
from .._shared.library_settings import library_calls
from .._shared.names import call_qualname, terminal_name
from .._shared.strings import string_value
from .._shared.values import argument_of, value_user
from ._helpers import ACCELERATOR_BACKEND_EMITS, backend_expr, is_backend_named

__all__ = ["NcclBackend"]

# Calls whose argument at this position (or keyword ``backend``) is a process-group backend.
_BACKEND_PARAMS: dict[str, int] = {
    "torch.distributed.init_process_group": 0,
    "torch.distributed.new_group": 2,
    "torch.distributed.new_subgroups": 3,
    "torch.distributed.Backend": 0,
    "torch.distributed.is_backend_available": 0,
}
_BACKEND_PARAMS.update(
    {k.replace("torch.distributed.", "torch.distributed.distributed_c10d."): v for k, v in list(_BACKEND_PARAMS.items())}
)
_BACKEND_FUNCS = frozenset(q.rsplit(".", 1)[1] for q in _BACKEND_PARAMS)
_NCCL_ENUM = frozenset({"torch.distributed.Backend.NCCL", "torch.distributed.distributed_c10d.Backend.NCCL"})
# ``os.environ.get("DIST_BACKEND", "nccl")``, ``cfg.get("backend", "nccl")``: the default is a backend.
_LOOKUPS = frozenset({"get", "getenv", "setdefault", "pop"})
# argparse keywords that hold option values.
_ARGPARSE_VALUES = frozenset({"default", "choices", "const"})

# The project's one ``wrap_model`` hands its third argument (or ``pg=``) to init_process_group.
_WRAPPER = (("project", ProjectFacts(backend_params=frozenset({("wrap_model", 2, "pg")}))),)
_REGISTRY = (("project", ProjectFacts(registered_names=frozenset({("nccl", '`Engines.register("nccl")` at engines.py:9')}))),)
# ... and looks the component up by a config field: `Engines.new(cfg.engine.backend)`.
_REGISTRY_FIELD = (
    ("project", ProjectFacts(
        registered_names=frozenset({("nccl", '`Engines.register("nccl")` at engines.py:9')}),
        registry_fields=frozenset({("engine.backend", "`Engines.new(...)` at workers.py:30")}),
    )),
)  # fmt: skip

# A literal's replacement and the imports it needs, or None where the target cannot express it.
_Plan = tuple[cst.BaseExpression, tuple[tuple[str, str | None], ...]] | None

_MESSAGE = 'process-group backend "nccl" exists only for CUDA; Trainium uses the "neuron" backend'
_GUIDANCE = (
    'Use `init_process_group(backend="neuron")` on Trainium; for code that must also run on CUDA, '
    "use `torch.distributed.get_default_backend_for_device(torch.accelerator.current_accelerator())` "
    "(torch >= 2.6)."
)


def _composite_for_neuron(value: str) -> str | None:
    """``"cpu:gloo,cuda:nccl"`` -> ``"cpu:gloo,neuron:neuron"``; None if not that shape."""
    pairs = [p.strip().partition(":") for p in value.split(",")]
    if not all(sep and dev and be for dev, sep, be in pairs):
        return None
    out = []
    for dev, _, be in pairs:
        if be.lower() == "nccl":
            if dev.lower() != "cuda":
                return None
            dev, be = "neuron", "neuron"
        out.append(f"{dev}:{be}")
    return ",".join(out)


class NcclBackend(Rule):
    """
    ## What it does
    Rewrites the ``"nccl"`` process-group backend to ``"neuron"`` where the string provably
    names a backend.

    Recognised: the ``backend`` argument of ``init_process_group`` / ``new_group``
    (positional or keyword), a variable, attribute, parameter or dict entry named like a backend
    (``backend = "nccl"``, ``args.dist_backend = "nccl"``, ``self.backend = ...``), a plain
    variable later passed as the backend, argparse options named like a backend
    (``add_argument("--dist-backend", default="nccl")``) and their ``choices``, the members of a
    backend field's ``Literal[...]`` type (the values it accepts), conditional forms
    (``"nccl" if ... else "gloo"``, ``"gloo" if os.name == "nt" else "nccl"``), comparisons with a
    backend (``backend == "nccl"``, ``dist.get_backend() == "nccl"``), composite backends
    (``"cpu:gloo,cuda:nccl"``) and ``dist.Backend.NCCL``. In a project, also the argument of a
    call of the project's own function (or method) that passes that parameter on as the
    backend, defined in any file (``strategy.wrap_model(model, 0, "nccl")`` with ``def
    wrap_model(self, model, rank, pg): dist.init_process_group(pg)``); only when the project
    defines one function of that name that does so.

    ## Why is this bad?
    NCCL is NVIDIA's collective library; TorchNeuron registers its own process-group backend
    named ``"neuron"``. A comparison such as ``backend == "nccl"`` must change together with the
    value it tests, or the branch it guards silently stops running. Other ``"nccl"`` strings (log
    messages, docs) are not backends and stay.

    ## Example
    ```python
    parser.add_argument("--dist-backend", default="nccl")
    backend = "nccl" if dist.is_nccl_available() else "gloo"
    dist.init_process_group(backend=backend)
    ```
    becomes
    ```python
    parser.add_argument("--dist-backend", default="neuron")
    backend = "neuron" if dist.is_nccl_available() else "gloo"   # CN403 rewrites the test
    dist.init_process_group(backend=backend)
    ```
    With ``--target accelerator`` the backend becomes
    ``torch.distributed.get_default_backend_for_device(torch.accelerator.current_accelerator() or "cpu")``
    (torch >= 2.6): NCCL on CUDA, neuron on Trainium, and gloo on a machine with no accelerator
    (without the ``or "cpu"`` a CPU-only run would crash where it used to assign a string).

    ## Fix safety
    Safe: ``"neuron"`` is the backend AWS documents for ``init_process_group`` on Trainium, and
    the literal is only changed where it is traced to a backend position, so values and the
    comparisons that test them move together. Backend strings that arrive at run time (a launch
    script passing ``--dist-backend nccl``) are outside the source and must be changed there.
    A comparison that selects CUDA-only code (``use_ipc = backend == "nccl" and colocated``,
    then a CUDA-IPC weight sync) is reported without a fix: it keeps asking for NCCL, so that
    Trainium takes the other path, as it would have before the port. A comparison of a
    parameter typed by a module-level ``Literal[...]`` alias (``def get_service(backend:
    ServiceName)``) stays too: the alias lists what callers pass, and nothing moves it. So is a
    ``"nccl"`` handed to the project's own code in a project that registers a component of its
    own under that name (``@EngineRegistry.register("nccl")``, found in any file): there it is a
    registry key the project looks up, and ``"neuron"`` would name nothing; so is one stored in
    a field whose value such a registry looks up (``cfg.checkpoint_engine.backend = "nccl"``
    with ``EngineRegistry.new(cfg.checkpoint_engine.backend)`` in another file).
    A field the project hands to a CUDA-only library as its backend (Megatron's
    ``tp_comm_bootstrap_backend``, read as ``initialize_ub(bootstrap_backend=...)`` of Transformer
    Engine in another module) is reported and left the same way: it is that library's setting.
    """

    code = "CN401"
    name = "nccl-backend"
    fixes = frozenset({Safety.SAFE})
    triggers = ("nccl", "NCCL")
    emits = ACCELERATOR_BACKEND_EMITS
    VALID = (
        # A backend typed by a Literal alias nothing moves: its comparison stays with the alias.
        'from typing import Literal\n\nName = Literal["nccl", "gloo"]\n\ndef pick(backend: Name):\n    return backend == "nccl"\n',
        # A field whose name says nothing about a backend keeps its default.
        'from dataclasses import field\n\nclass Cfg:\n    kernel: str = field(default="nccl")\n',
        'dist.init_process_group(backend="neuron")\n',
        'print("using nccl")\nlogger.info("nccl")\n',
        'LIBS = ["nccl", "cudnn"]\n',
        'status = "nccl"  # not a backend: never reaches a backend position\n',
        # ray.util.collective has no "neuron" backend (CN627 reports the group)
        'from ray.util import collective\ncollective.init_collective_group(4, 0, backend="nccl", group_name="g")\n',
        '"""Launch with backend="nccl"."""\n',
        # a device map is CN402's business: the "cuda" entry stays for CUDA runs
        'BACKENDS = {"cuda": "nccl", "cpu": "gloo", "neuron": "neuron"}\n',
        # DDP ordinals are not backends: nothing here for this rule
        "model = DDP(model, device_ids=[local_rank], output_device=local_rank)\n",
        'parser.add_argument("--log-level", default="nccl")\n',
        "import torch.distributed as dist\nB = {'cuda': dist.Backend.NCCL, 'neuron': 'neuron'}\n",
        # Another position of the project's wrapper, or a wrapper the project does not define.
        Valid('strategy.wrap_model(model, "nccl", 0)\n', options=_WRAPPER),
        Valid('strategy.wrap_model(model, 0, "nccl")\n'),
        Valid(
            "import torch.distributed as dist\n"
            "dist.init_process_group(backend=dist.get_default_backend_for_device("
            'torch.accelerator.current_accelerator() or "cpu"))\n',
            target="accelerator",
        ),
    )
    INVALID = (
        # The project names a component of its own "nccl" (a registry key, not a process group):
        # reported, not rewritten; torch's own backend argument still moves.
        Invalid('manager = EngineManager(backend="nccl", trainer=trainer)\n', options=_REGISTRY),
        # ... and where it is stored in a field the registry looks up; another field still moves.
        Invalid('cfg.rollout.engine.backend = "nccl" if use_cuda else "gloo"\n', options=_REGISTRY_FIELD),
        Invalid(
            'cfg.rollout.engine.backend = "nccl"\ncfg.trainer.dist.backend = "nccl"\n',
            'cfg.rollout.engine.backend = "nccl"\ncfg.trainer.dist.backend = "neuron"\n',
            options=_REGISTRY_FIELD,
        ),
        Invalid(
            'import torch.distributed as dist\ndist.init_process_group(backend="nccl")\n',
            'import torch.distributed as dist\ndist.init_process_group(backend="neuron")\n',
            options=_REGISTRY,
        ),
        # A parameter's default handed on to a Ray collective group, whose backends are "nccl"
        # and "gloo": kept (report only); a default handed to torch still moves.
        Invalid(
            "import ray.util.collective as cc\n\n"
            'def join(world, rank, backend: str = "nccl"):\n'
            '    cc.init_collective_group(world_size=world, rank=rank, backend=backend, group_name="g")\n',
            None,
        ),
        # The same, the Ray module imported inside the method on the path that uses it (a vLLM
        # worker extension's weight-sync group): kept too.
        Invalid(
            "class Worker:\n"
            '    def join(self, world, rank, backend="nccl", use_ray=False):\n'
            "        if use_ray:\n"
            "            from ray.util import collective\n\n"
            '            collective.init_collective_group(world, rank, backend=backend, group_name="g")\n',
            None,
        ),
        Invalid(
            'import torch.distributed as dist\n\ndef join(backend: str = "nccl"):\n    dist.init_process_group(backend=backend)\n',
            'import torch.distributed as dist\n\ndef join(backend: str = "neuron"):\n    dist.init_process_group(backend=backend)\n',
        ),
        # A backend test in front of CUDA IPC keeps NCCL's name (report only).
        Invalid(
            "from torch.multiprocessing.reductions import reduce_tensor\n\n"
            'def sync(param, backend, peer):\n    if backend == "nccl":\n        peer.send(reduce_tensor(param))\n',
            None,
        ),
        # A config dataclass's field default.
        Invalid(
            'from dataclasses import field\n\nclass Cfg:\n    distributed_backend: str = field(default="nccl", metadata={})\n',
            'from dataclasses import field\n\nclass Cfg:\n    distributed_backend: str = field(default="neuron", metadata={})\n',
        ),
        # The field's type lists the values it accepts (Megatron turns it into argparse choices):
        # it moves with the default.
        Invalid(
            'from typing import Literal\n\nclass Cfg:\n    distributed_backend: Literal["nccl", "gloo"] = "nccl"\n',
            'from typing import Literal\n\nclass Cfg:\n    distributed_backend: Literal["neuron", "gloo"] = "neuron"\n',
        ),
        Invalid(
            'import torch.distributed as dist\ndist.init_process_group("nccl")\n',
            'import torch.distributed as dist\ndist.init_process_group("neuron")\n',
        ),
        Invalid(
            "import torch.distributed as dist\ndist.init_process_group(backend='nccl', init_method='env://')\n",
            "import torch.distributed as dist\ndist.init_process_group(backend='neuron', init_method='env://')\n",
        ),
        Invalid(
            'from torch.distributed import init_process_group\ninit_process_group(backend="nccl")\n',
            'from torch.distributed import init_process_group\ninit_process_group(backend="neuron")\n',
        ),
        Invalid('backend = "nccl"  # or gloo\n', 'backend = "neuron"  # or gloo\n'),
        Invalid('args.dist_backend = "nccl"\n', 'args.dist_backend = "neuron"\n'),
        Invalid(
            'class T:\n    def __init__(self):\n        self.backend = "nccl"\n',
            'class T:\n    def __init__(self):\n        self.backend = "neuron"\n',
        ),
        Invalid(
            'parser.add_argument("--dist-backend", default="nccl", type=str)\n',
            'parser.add_argument("--dist-backend", default="neuron", type=str)\n',
        ),
        Invalid(
            'parser.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")\n',
            'parser.add_argument("--backend", choices=["neuron", "gloo"], default="neuron")\n',
        ),
        Invalid(
            'import torch.distributed as dist\nbackend = "nccl" if dist.is_nccl_available() else "gloo"\n',
            'import torch.distributed as dist\nbackend = "neuron" if dist.is_nccl_available() else "gloo"\n',
        ),
        Invalid(
            'import os\nbackend = "gloo" if os.name == "nt" else "nccl"\n',
            'import os\nbackend = "gloo" if os.name == "nt" else "neuron"\n',
        ),
        Invalid('if args.backend == "nccl":\n    pass\n', 'if args.backend == "neuron":\n    pass\n'),
        Invalid(
            'import torch.distributed as dist\nif dist.get_backend() != "nccl":\n    pass\n',
            'import torch.distributed as dist\nif dist.get_backend() != "neuron":\n    pass\n',
        ),
        Invalid('def setup(rank, backend="nccl"):\n    pass\n', 'def setup(rank, backend="neuron"):\n    pass\n'),
        Invalid('cfg = {"dist_backend": "nccl"}\n', 'cfg = {"dist_backend": "neuron"}\n'),
        Invalid(
            'import os\nbackend = os.environ.get("DIST_BACKEND", "nccl")\n',
            'import os\nbackend = os.environ.get("DIST_BACKEND", "neuron")\n',
        ),
        Invalid(
            'def get_backend():\n    return "nccl"\n',
            'def get_backend():\n    return "neuron"\n',
        ),
        # A plain name is a backend when it is passed as one.
        Invalid(
            'import torch.distributed as dist\npg = "nccl"\ndist.init_process_group(pg)\n',
            'import torch.distributed as dist\npg = "neuron"\ndist.init_process_group(pg)\n',
        ),
        # The project's own function that passes its parameter on as the backend.
        Invalid('strategy.wrap_model(model, 0, "nccl")\n', 'strategy.wrap_model(model, 0, "neuron")\n', options=_WRAPPER),
        Invalid('wrap_model(model, 0, pg="nccl")\n', 'wrap_model(model, 0, pg="neuron")\n', options=_WRAPPER),
        Invalid(
            'import torch.distributed as dist\ng = dist.new_group([0, 1], None, "nccl")\n',
            'import torch.distributed as dist\ng = dist.new_group([0, 1], None, "neuron")\n',
        ),
        Invalid(
            'import torch.distributed as dist\ndist.init_process_group("cpu:gloo,cuda:nccl")\n',
            'import torch.distributed as dist\ndist.init_process_group("cpu:gloo,neuron:neuron")\n',
        ),
        Invalid(
            "import torch.distributed as dist\ndist.init_process_group(dist.Backend.NCCL)\n",
            'import torch.distributed as dist\ndist.init_process_group("neuron")\n',
        ),
        Invalid(
            "from torch.distributed import Backend\nif backend == Backend.NCCL:\n    pass\n",
            'if backend == "neuron":\n    pass\n',
        ),
        Invalid(
            'import torch.distributed as dist\ndist.init_process_group(backend="nccl")\n',
            "import torch.distributed as dist\nimport torch\n\n"
            "dist.init_process_group(backend=dist.get_default_backend_for_device("
            'torch.accelerator.current_accelerator() or "cpu"))\n',
            target="accelerator",
        ),
        # torch < 2.6 has no portable spelling of "the accelerator's backend": report only.
        Invalid(
            'import torch.distributed as dist\ndist.init_process_group(backend="nccl")\n',
            target="accelerator",
            options=(("min_torch", (2, 5)),),
        ),
    )

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        # ``pg = "nccl"`` is a backend only if ``pg`` is later passed as one: literals assigned to
        # plain names wait here (with their fix, built in their own scope, and their ancestor
        # chain), and names seen in backend positions are collected, until the end of the module
        # (one walk, no second pass).
        self._pending: list[tuple[str, cst.SimpleString, _Plan, tuple[cst.CSTNode, ...]]] = []
        self._passed_names: set[str] = set()

    # -- the literal ----------------------------------------------------------------------------
    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if "nccl" not in node.value.lower():  # cheap textual test before any tree work
            return
        value = string_value(node)
        if value is None:
            return
        if value.lower() == "nccl":
            composite = None
        else:
            composite = _composite_for_neuron(value) if "nccl" in value.lower() else None
            if composite is None:
                return
        verdict = self._sink(node)
        if verdict is True and _compared(self.context.ancestors) and report_kernel_gate(
            self, node, lambda kernel: f"{_MESSAGE}; this test selects CUDA-only code: {kernel}"
        ):
            # `use_cuda_ipc = backend == "nccl" and colocated`: the test picks a CUDA-IPC weight
            # sync; asked about "neuron" it would run that path on Trainium. It keeps NCCL's name.
            return
        if verdict is True and composite is None:
            component = self._own_component(node)
            if component is not None:
                # verl's `CheckpointEngineManager(backend="nccl")` picks the engine registered
                # as "nccl"; "neuron" is no key of that registry, and the engine is CUDA's.
                self.report(
                    node,
                    f'"nccl" names the project\'s own component registered by {component}, not a process group',
                    guidance='Left as is: the project looks the component up by this name, and "neuron" names none. '
                    "If that component runs NCCL (or CUDA) code, give Trainium one of its own and select it here.",
                )
                return
            handed = self._handed_to_library(node) or self._default_handed_to_library(node)
            if handed is not None:
                # Megatron's `tp_comm_bootstrap_backend: Literal["nccl", ...] = "nccl"` is read
                # by Transformer Engine's `initialize_ub(bootstrap_backend=...)` in another module:
                # a CUDA-only library's own bootstrap, where "neuron" names nothing.
                field, where = handed
                self.report(
                    node,
                    f'"nccl" is a value of `{field}`, which the project hands to {where} as its backend',
                    guidance='Left as is: that library is CUDA-only and runs its own NCCL setup with this value; '
                    '"neuron" is no backend it knows. On Trainium do without the library and its setting.',
                )
                return
        if verdict is True:
            self._report_literal(node, self._plan(node, composite), tuple(self.context.ancestors))
        elif isinstance(verdict, str):
            self._pending.append((verdict, node, self._plan(node, composite), tuple(self.context.ancestors)))

    def _own_component(self, node: cst.SimpleString) -> str | None:
        """Where the project registers "nccl" as the name of one of its own components, when
        the literal is an argument of the project's own code (not torch's backend argument, nor
        a parameter the sweep saw handed to ``init_process_group``); None otherwise. A value
        the project keeps elsewhere (``return "nccl"`` in ``get_backend``) may be either, and
        still moves."""
        project = self.context.settings.project
        where = project.registered("nccl")
        if where is None:
            return None
        found = argument_of(self.context.ancestors, node)
        if found is None:
            return self._registry_field(node, where)
        _, arg, call = found
        position = self._backend_position(call)
        if position is not None and arg_by_name(call, "backend", position) is arg:
            return None
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        if name is not None and self._reaches_own_backend_param(call, arg, name):
            return None
        qualified = call_qualname(self, call)
        return where if qualified is None or project.own_module(qualified) else None

    def _registry_field(self, node: cst.SimpleString, where: str) -> str | None:
        """``where``, naming the field, when the literal is stored in an attribute whose value
        the project's registry looks up (``cfg.rollout.checkpoint_engine.backend = "nccl" if
        cuda else "hccl"``, read as ``CheckpointEngineRegistry.new(backend)`` in another
        module: the sweep's ``ProjectFacts.registry_fields``); None otherwise."""
        found = value_user(self.context.ancestors, node)
        if found is None:
            return None
        i, child = found
        stored = self.context.ancestors[i]
        if not isinstance(stored, (cst.Assign, cst.AnnAssign)) or child is not stored.value:
            return None
        targets = [t.target for t in stored.targets] if isinstance(stored, cst.Assign) else [stored.target]
        project = self.context.settings.project
        for target in targets:
            if isinstance(target, cst.Attribute) and isinstance(target.value, (cst.Name, cst.Attribute)):
                holder = target.value.value if isinstance(target.value, cst.Name) else target.value.attr.value
                lookup = project.registry_field(holder, target.attr.value)
                if lookup is not None:
                    return f"{where}, stored in `{holder}.{target.attr.value}`, which {lookup} looks up"
        return None

    def _handed_to_library(self, node: cst.SimpleString) -> tuple[str, str] | None:
        """(field, where) when the literal is the default or a ``Literal[...]`` member of a
        field the project hands to a CUDA-only library as a backend (the sweep's
        ``ProjectFacts.library_backends``); None otherwise."""
        project = self.context.settings.project
        if not project.library_backends:
            return None
        for outer in reversed(self.context.ancestors):
            if isinstance(outer, cst.AnnAssign):
                target = outer.target
                field = target.value if isinstance(target, cst.Name) else target.attr.value if isinstance(target, cst.Attribute) else None
                where = project.library_backend(field) if field else None
                return (field, where) if field and where else None
            if isinstance(outer, cst.BaseStatement):
                return None
        return None

    def _default_handed_to_library(self, node: cst.SimpleString) -> tuple[str, str] | None:
        """(parameter, where) when the literal is a parameter's default and its function hands
        that parameter as the backend to a library that names its own engines (CN627's table:
        ``ray.util.collective.init_collective_group``). ColossalAI's ``def
        init_collective_group(self, world_size, rank, backend: str = "nccl", ...):
        cc.init_collective_group(..., backend=backend, ...)``: a Ray collective group has the
        backends "nccl" and "gloo", and "neuron" there raises. None otherwise."""
        anc = self.context.ancestors
        param = anc[-1] if anc and isinstance(anc[-1], cst.Param) and anc[-1].default is node else None
        func = next((a for a in reversed(anc) if isinstance(a, cst.FunctionDef)), None)
        if param is None or func is None:
            return None
        name = param.name.value
        rows = library_calls()
        found = _calls_in(func.body)
        for call in found.found:
            for arg in call.args:
                if not (isinstance(arg.value, cst.Name) and arg.value.value == name):
                    continue
                if arg.keyword is None or "backend" not in arg.keyword.value.lower():
                    continue
                # The default is read where the function is defined, before its body binds
                # anything: an import inside the body (OpenRLHF's vLLM worker imports
                # ``ray.util.collective`` only on the path that uses it) names the callee there.
                qualified = call_qualname(self, call) or found.qualify(dotted_name(call.func))
                row = rows.get(qualified or "")
                if row is not None and row.backend:
                    line = self.context.mark(call)
                    return name, f"`{qualified}` at {line} ({row.what})"
        return None

    def _plan(self, node: cst.SimpleString, composite: str | None) -> _Plan:
        """The literal's replacement and the imports it needs; None if the target can't say it."""
        if composite:
            if self.context.settings.target != "neuron":
                return None
            return node.with_changes(value=_requote(node, composite)), ()
        built = backend_expr(self, node)
        if built is None:
            return None
        replacement, imports = built
        if node.lpar:
            replacement = replacement.with_changes(lpar=node.lpar, rpar=node.rpar)
        return replacement, imports

    def _report_literal(self, node: cst.SimpleString, plan: _Plan, chain: tuple[cst.CSTNode, ...]) -> None:
        if plan is None:
            self.report(node, _MESSAGE, ancestors=chain, guidance=_GUIDANCE)
            return
        replacement, imports = plan
        self.report(
            node,
            _MESSAGE,
            ancestors=chain,
            replacement=replacement,
            safety=Safety.SAFE,
            imports=imports,
            description='use the "neuron" process-group backend',
        )

    def _sink(self, literal: cst.SimpleString) -> bool | str:
        """True if the literal provably names a backend; a variable name if that depends on the
        name being passed as a backend later; False otherwise."""
        anc = self.context.ancestors
        if self._in_backend_choices(literal):
            return True
        # Through the shapes that carry a value unchanged: conditionals, ``or`` defaults, and the
        # elements of a choices list or membership tuple (the device rules walk the same way).
        found = value_user(anc, literal)
        if found is None:
            return False
        i, child = found
        node = anc[i]
        if isinstance(node, cst.Arg) and node.value is child and i >= 1 and isinstance(anc[i - 1], cst.Call):
            # A dataclass field's default (``distributed_backend: str = field(default="nccl")``)
            # is the field's value, as in ``distributed_backend: str = "nccl"``.
            call = anc[i - 1]
            if (
                i >= 2
                and isinstance(anc[i - 2], cst.AnnAssign)
                and anc[i - 2].value is call
                and node.keyword is not None
                and node.keyword.value == "default"
                and self.qualname(call.func) == "dataclasses.field"
            ):
                return is_backend_named(anc[i - 2].target)
            return self._arg_is_backend(call, node)
        if isinstance(node, cst.Assign) and node.value is child:
            targets = [t.target for t in node.targets]
            if any(is_backend_named(t) for t in targets):
                return True
            if len(targets) == 1 and isinstance(targets[0], cst.Name):
                return targets[0].value
            return False
        if isinstance(node, cst.AnnAssign) and node.value is child:
            return is_backend_named(node.target)
        if isinstance(node, (cst.Comparison, cst.ComparisonTarget)):
            comparison = node if isinstance(node, cst.Comparison) else anc[i - 1]
            assert isinstance(comparison, cst.Comparison)
            operands = [comparison.left, *(t.comparator for t in comparison.comparisons)]
            others = [op for op in operands if op is not child]
            if any(self._typed_by_literal_alias(op, anc[:i]) for op in others):
                return False
            return any(is_backend_named(op) for op in others)
        if isinstance(node, cst.Param) and node.default is child:
            return "backend" in node.name.value.lower()
        if isinstance(node, cst.DictElement) and node.value is child:
            key = string_value(node.key)
            return key is not None and "backend" in key.lower()
        if isinstance(node, cst.Return):
            for outer in reversed(anc[:i]):
                if isinstance(outer, (cst.FunctionDef, cst.Lambda)):
                    return isinstance(outer, cst.FunctionDef) and "backend" in outer.name.value.lower()
        return False

    def _typed_by_literal_alias(self, operand: cst.BaseExpression, ancestors: list[cst.CSTNode]) -> bool:
        """Is ``operand`` a parameter whose type is a module-level ``Literal[...]`` alias
        (``RefitBackendName = Literal["nccl", "gloo"]``, ``def get_service(backend:
        RefitBackendName)``)? The alias lists the values callers pass (Megatron-LM's
        ``--refit-method`` choices say "nccl" too): a comparison moved to "neuron" while the
        alias keeps "nccl" sends ``backend="nccl"`` to the "unknown backend" error. The alias is no
        backend field, so nothing moves it: the comparison stays with it."""
        if not isinstance(operand, cst.Name):
            return False
        func = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)
        if func is None:
            return False
        params = (*func.params.posonly_params, *func.params.params, *func.params.kwonly_params)
        param = next((p for p in params if p.name.value == operand.value), None)
        alias = param.annotation.annotation if param is not None and param.annotation is not None else None
        if not isinstance(alias, cst.Name):
            return False
        for stmt in self.context.module.body:
            small = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ()
            for assign in small:
                if not isinstance(assign, cst.Assign) or not isinstance(assign.value, cst.Subscript):
                    continue
                if any(isinstance(t.target, cst.Name) and t.target.value == alias.value for t in assign.targets):
                    return self.qualname(assign.value.value) in ("typing.Literal", "typing_extensions.Literal")
        return False

    def _in_backend_choices(self, literal: cst.SimpleString) -> bool:
        """Is the literal a member of the ``Literal[...]`` type of a backend field or parameter
        (``distributed_backend: Literal["nccl", "gloo"] = "nccl"``)? The type is the set of
        values the field accepts: Megatron builds its command line from such fields (the
        ``Literal`` becomes argparse's ``choices``), so a default moved to "neuron" while the
        type still lists "nccl" leaves ``--distributed-backend neuron`` rejected, as a
        ``choices=`` list left behind its ``default=`` would."""
        anc = self.context.ancestors
        k = len(anc) - 1
        # literal <- Index <- SubscriptElement <- Subscript (Literal[...]) <- Annotation <- field
        while k >= 0 and isinstance(anc[k], (cst.Index, cst.SubscriptElement)):
            k -= 1
        if k < 2 or not isinstance(anc[k], cst.Subscript) or not isinstance(anc[k - 1], cst.Annotation):
            return False
        if self.qualname(anc[k].value) not in ("typing.Literal", "typing_extensions.Literal"):
            return False
        owner = anc[k - 2]
        if isinstance(owner, cst.AnnAssign) and owner.annotation is anc[k - 1]:
            return is_backend_named(owner.target)
        if isinstance(owner, cst.Param) and owner.annotation is anc[k - 1]:
            return "backend" in owner.name.value.lower()
        return False

    def _arg_is_backend(self, call: cst.Call, arg: cst.Arg) -> bool:
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword is not None and "backend" in keyword.lower():
            # A library that names its own engines by backend takes "nccl" as its key, never
            # "neuron": ray.util.collective's groups ("nccl" or "gloo"), vLLM's
            # WeightTransferConfig ("nccl" or "ipc"). CN627's table says which; CN627 reports them.
            last = terminal_name(call.func)
            rows = library_calls()
            if last is not None and any(name.endswith("." + last) for name in rows):
                row = rows.get(call_qualname(self, call) or "")
                if row is not None and row.backend:
                    return False
            return True  # backend=..., dist_backend=... in any call
        func = call.func
        func_name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        position = self._backend_position(call)
        if position is not None and arg_by_name(call, "backend", position) is arg:
            return True
        if func_name is not None and self._reaches_own_backend_param(call, arg, func_name):
            return True
        if func_name == "add_argument" and keyword in _ARGPARSE_VALUES:
            return any(
                (flag := string_value(a.value)) is not None and "backend" in flag.lower()
                for a in call.args
                if a.keyword is None
            )
        if func_name in _LOOKUPS and keyword is None and len(call.args) >= 2 and call.args[1] is arg:
            key = string_value(call.args[0].value)
            return key is not None and "backend" in key.lower()
        return False

    def _reaches_own_backend_param(self, call: cst.Call, arg: cst.Arg, func_name: str) -> bool:
        """``strategy.wrap_model(model, 0, "nccl")`` where the project's one ``wrap_model`` hands
        that parameter on to ``init_process_group`` (the project sweep found it, in any file)."""
        found = self.context.settings.project.backend_param(func_name)
        if found is None:
            return False
        position, param = found
        return arg_by_name(call, param, position) is arg

    def _backend_position(self, call: cst.Call) -> int | None:
        """Position of the backend parameter if ``call`` is a torch.distributed backend taker."""
        func = call.func
        # Cheap filter first: a dotted call must end in a known name; a bare name may be an
        # alias (``from torch.distributed import init_process_group as ipg``) and is resolved.
        if isinstance(func, cst.Attribute):
            if func.attr.value not in _BACKEND_FUNCS:
                return None
        elif not isinstance(func, cst.Name):
            return None
        return _BACKEND_PARAMS.get(self.qualname(func) or "")

    # -- names passed as a backend --------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        position = self._backend_position(node)
        if position is None:
            return
        arg = arg_by_name(node, "backend", position)
        if arg is not None and isinstance(arg.value, cst.Name):
            self._passed_names.add(arg.value.value)

    def leave_Module(self, original_node: cst.Module) -> None:
        for name, literal, plan, chain in self._pending:
            if name in self._passed_names:
                self._report_literal(literal, plan, chain)

    # -- dist.Backend.NCCL ------------------------------------------------------------------------
    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "NCCL" or self.qualname(node) not in _NCCL_ENUM:
            return
        parent = self.context.parent
        if isinstance(parent, cst.DictElement) and parent.value is node and string_value(parent.key) == "cuda":
            return  # {"cuda": Backend.NCCL}: the CUDA entry of a device table stays (CN402 adds one)
        built = backend_expr(self)
        if built is None:
            self.report(node, "`Backend.NCCL` is the CUDA process-group backend", guidance=_GUIDANCE)
            return
        replacement, imports = built
        self.report(
            node,
            "`Backend.NCCL` is the CUDA process-group backend",
            replacement=replacement,
            safety=Safety.SAFE,
            imports=imports,
            # ``from torch.distributed import Backend`` may be left unused; only ask for the removal
            # (a full scope analysis of the file) when ``Backend`` is such a bare name.
            unused_imports=(("torch.distributed", "Backend"),) if isinstance(node.value, cst.Name) else (),
            description='use the "neuron" process-group backend',
        )


class _Calls(cst.CSTVisitor):
    # At module level: a class made inside a function is a reference cycle (the class and its
    # methods), and its closure over the list would keep the file's tree alive until the cycle
    # collector runs (tests/engine/test_tree_freed.py).
    def __init__(self) -> None:
        self.found: list[cst.Call] = []
        self.imported: dict[str, str] = {}  # name bound by an import in the body -> module or name

    def visit_Call(self, call: cst.Call) -> None:
        self.found.append(call)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            module = dotted_name(alias.name)
            if module is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.imported.setdefault(alias.asname.name.value, module)
            else:
                head = module.split(".")[0]
                self.imported.setdefault(head, head)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = dotted_name(node.module) if node.module is not None else None
        if module is None or node.relative or isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = dotted_name(alias.name)
            bound = alias.asname.name if alias.asname is not None else alias.name
            if name is not None and isinstance(bound, cst.Name):
                self.imported.setdefault(bound.value, f"{module}.{name}")

    def qualify(self, dotted: str | None) -> str | None:
        """``dotted`` (a callee as spelled) through the body's own imports; None where its
        head is no name they bind."""
        head, _, rest = (dotted or "").partition(".")
        module = self.imported.get(head)
        if module is None:
            return None
        return f"{module}.{rest}" if rest else module


def _calls_in(node: cst.CSTNode) -> _Calls:
    """The calls of a function's body (nested functions included: a closure hands the
    parameter on as well), and the names the body's imports bind."""
    calls = _Calls()
    node.visit(calls)
    return calls


def _compared(ancestors: list[cst.CSTNode]) -> bool:
    """Is the literal an operand of a comparison (``backend == "nccl"``)?"""
    return bool(ancestors) and isinstance(ancestors[-1], (cst.Comparison, cst.ComparisonTarget))


def _requote(like: cst.SimpleString, value: str) -> str:
    quote = like.value.lstrip("rRuUfFbB")[0]
    return f"{quote}{value}{quote}"
