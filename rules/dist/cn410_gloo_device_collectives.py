"""CN410: a gloo process group whose collectives take the program's device tensors."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule

from .._shared.args import arg_by_name
from .._shared.names import call_qualname, terminal_name
from .._shared.strings import string_value
from ._helpers import is_backend_named

__all__ = ["GlooDeviceCollectives"]

_INIT = frozenset({"torch.distributed.init_process_group", "torch.distributed.new_group"})
_COLLECTIVES = frozenset(
    f"torch.distributed.{name}"
    for name in (
        "all_reduce", "all_gather", "all_gather_into_tensor", "broadcast", "reduce", "reduce_scatter",
        "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather", "scatter",
    )
)  # fmt: skip
_COLLECTIVE_WORDS = tuple({q.rsplit(".", 1)[1].encode() for q in _COLLECTIVES})
# Calls a group may be handed to without carrying a tensor: the object collectives pickle
# Python objects through CPU tensors of their own (a gloo group's job), barriers carry nothing,
# and the rest ask about the group or free it.
_OBJECT_ONLY = frozenset(
    f"torch.distributed.{name}"
    for name in (
        "all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list",
        "send_object_list", "recv_object_list", "barrier", "monitored_barrier", "destroy_process_group",
        "get_rank", "get_world_size", "get_backend", "get_process_group_ranks",
    )
)  # fmt: skip
# The accelerator the program runs on, before or after the port: its tensors are device tensors.
_DEVICE_WORDS = frozenset({"cuda", "neuron"})
_GUIDANCE = (
    'gloo reduces CUDA tensors but has no neuron support: a collective on a neuron tensor stops '
    '("No backend type associated with device type neuron"). Use backend="neuron" on Trainium, '
    'or "cpu:gloo,neuron:neuron" for a group that also reduces CPU tensors; keep gloo where the '
    "collectives only ever see CPU tensors."
)


class GlooDeviceCollectives(Rule):
    """
    ## What it does
    Reports ``init_process_group`` / ``new_group`` with the gloo backend (the literal, or a
    backend setting whose default is ``"gloo"``: ``backend: str = "gloo"``,
    ``add_argument("--backend", default="gloo")``) where the code that runs with the group
    runs collectives (``dist.all_reduce``, ``all_gather``, ``broadcast``, ...) and puts its data
    on the accelerator. That code is the group's *unit*: the module's top-level code, a function,
    or a class, joined with every unit that calls or names it (a callback handed to a launcher
    counts). A test class's ``test_*`` methods are units of their own (pytest runs each alone,
    with the class's setup methods): torchtune's worker that creates a gloo group only to check
    its backend is not the test beside it that reduces CUDA tensors under another group.

    A ``new_group`` does not replace the default group: its collectives are the ones handed it
    (``group=pg``). A gloo group assigned to a name is reported only where a tensor collective is
    handed that name, or where the name is handed on under another one (an argument the rule
    cannot follow); one that only carries Python objects (``all_gather_object``,
    ``broadcast_object_list``) and barriers needs no port.

    ## Why is this bad?
    gloo runs collectives on CPU tensors, and on CUDA tensors too: a GPU program can reduce its
    device gradients over gloo (cleanrl's multi-GPU PPO does). It has no neuron support, so the
    port stops at its first collective on Trainium, with nothing in the device rules' report.

    ## Example
    ```python
    @dataclass
    class Args:
        backend: str = "gloo"

    dist.init_process_group(args.backend)
    grads = torch.ones(4, device="cuda")
    dist.all_reduce(grads)
    ```

    ## Fix safety
    No fix: whether the collectives see device or CPU tensors is decided at run time, and
    ``"neuron"`` / ``"cpu:gloo,neuron:neuron"`` need the Neuron runtime where gloo ran anywhere.
    """

    code = "CN410"
    name = "gloo-device-collectives"
    triggers = ("gloo",)
    VALID = (
        # CPU collectives: nothing on the accelerator.
        "import torch.distributed as dist\ndist.init_process_group('gloo')\ndist.all_reduce(t)\n",
        # No collective: a gloo group for barriers only.
        "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\nx = torch.ones(2, device='cuda')\ndist.barrier()\n",
        # A backend setting whose default is another backend.
        "import torch\nimport torch.distributed as dist\nBACKEND = 'nccl'\ndist.init_process_group(BACKEND)\n"
        "dist.all_reduce(torch.ones(2, device='cuda'))\n",
        # torchtune's test_distributed.py: the gloo worker runs alone; the device test beside it
        # reduces under the harness's own group.
        "import torch\nimport torch.distributed as dist\n\nclass TestDistributed:\n"
        "    @staticmethod\n    def _worker():\n        dist.init_process_group(backend='gloo')\n"
        "        assert dist.get_backend() == 'gloo'\n\n    def test_launch(self, launch):\n        launch(self._worker)\n\n"
        "    def test_reduce(self):\n        t = torch.ones(2, device='cuda')\n        dist.all_reduce(t)\n",
        # xtuner's model base: a gloo group for Python objects beside device collectives on the
        # default group (the group is stored under its own name and read back from there).
        "import torch\nimport torch.distributed as dist\n\nclass Model:\n    def _init_pg(self):\n"
        "        pg = dist.new_group(backend='gloo')\n        dist.barrier(group=pg)\n"
        "        self.res = Resources(pg=pg)\n\n    def gather(self, obj):\n        out = [None] * 2\n"
        "        dist.all_gather_object(out, obj, group=self.res.pg)\n        return out\n\n"
        "    def step(self, loss):\n        dist.all_reduce(loss.cuda())\n",
    )
    INVALID = (
        # cleanrl's ppo_atari_multigpu.py: the default of the backend field is gloo.
        Invalid(
            "import torch\nimport torch.distributed as dist\nfrom dataclasses import dataclass\n\n"
            "@dataclass\nclass Args:\n    backend: str = 'gloo'\n\nargs = Args()\n"
            "dist.init_process_group(args.backend)\ng = torch.ones(4, device='cuda')\ndist.all_reduce(g)\n"
        ),
        Invalid(
            "import torch\nimport torch.distributed as dist\ndist.init_process_group(backend='gloo')\n"
            "dist.all_reduce(model.weight.grad)\nmodel.cuda()\n"
        ),
        Invalid(
            "import argparse\nimport torch\nimport torch.distributed as dist\np = argparse.ArgumentParser()\n"
            "p.add_argument('--dist-backend', default='gloo')\nargs = p.parse_args()\n"
            "dist.init_process_group(args.dist_backend)\ndist.broadcast(torch.ones(1).to('neuron'), 0)\n",
            target="accelerator",
        ),
        # A gloo group handed to a tensor collective, and one handed on under another name.
        Invalid(
            "import torch\nimport torch.distributed as dist\npg = dist.new_group(backend='gloo')\n"
            "dist.all_gather_object(out, meta, group=pg)\ndist.all_reduce(torch.ones(2).cuda(), group=pg)\n"
        ),
        Invalid(
            "import torch\nimport torch.distributed as dist\npg = dist.new_group(backend='gloo')\n"
            "sync(pg)\n\ndef sync(group):\n    dist.all_reduce(torch.ones(2).cuda(), group=group)\n"
        ),
        # The group is made in one function and used in another that the same caller runs.
        Invalid(
            "import torch\nimport torch.distributed as dist\n\ndef setup():\n    dist.init_process_group('gloo')\n\n"
            "def train(model):\n    model.cuda()\n    dist.all_reduce(model.weight.grad)\n\n"
            "def main():\n    setup()\n    train(build())\n"
        ),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        # Most files that say gloo run CPU process groups: a collective and a device must be there too.
        return (b"cuda" in code or b"neuron" in code) and any(c in code for c in _COLLECTIVE_WORDS)

    def __init__(self, context) -> None:  # noqa: ANN001 - RuleContext
        super().__init__(context)
        # Decided when the module is left: the three facts may come in any order.
        self._inits: list[tuple[cst.Call, tuple[cst.CSTNode, ...], str, str]] = []
        self._gloo_settings: set[str] = set()  # backend settings whose default is "gloo"
        # What each unit does (its collectives, its device use) and which units it names.
        self._collective: set[str] = set()
        self._device: set[str] = set()
        self._names: dict[str, set[str]] = {}
        self._units: dict[str, set[str]] = {}  # a def's or class's name -> the units it is part of
        self._setup_units: dict[str, set[str]] = {}  # a test class -> its setup methods' units
        self._tests: dict[str, set[str]] = {}  # a test class -> its test methods' units
        # new_group's result by the name it is assigned to (`pg`, `self.finalize_pg`): the names
        # handed to tensor collectives (with their units), and those handed on under another name.
        self._group_of_call: dict[int, str] = {}
        self._tensor_group_names: dict[str, set[str]] = {}
        self._escaped_names: set[str] = set()

    def _unit(self) -> str:
        """The unit the visited node belongs to: ``<module>``, a top-level function, a class, or
        a test class's method (``Class.method``)."""
        defs = [a for a in self.context.ancestors if isinstance(a, (cst.FunctionDef, cst.ClassDef))]
        if not defs:
            return "<module>"
        top = defs[0]
        if isinstance(top, cst.ClassDef) and _is_test_class(top) and len(defs) > 1:
            return f"{top.name.value}.{defs[1].name.value}"
        return top.name.value

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._define(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._define(node)

    def _define(self, node: cst.FunctionDef | cst.ClassDef) -> None:
        defs = [a for a in self.context.ancestors if isinstance(a, (cst.FunctionDef, cst.ClassDef))]
        if defs and isinstance(defs[0], cst.ClassDef) and _is_test_class(defs[0]) and len(defs) == 1:
            cls, unit = defs[0].name.value, f"{defs[0].name.value}.{node.name.value}"
            if node.name.value in _SETUP_METHODS:
                self._setup_units.setdefault(cls, set()).add(unit)
            elif node.name.value.startswith("test"):
                self._tests.setdefault(cls, set()).add(unit)
        else:
            unit = defs[0].name.value if defs else node.name.value
        self._units.setdefault(node.name.value, set()).add(unit)

    def visit_Name(self, node: cst.Name) -> None:
        self._names.setdefault(self._unit(), set()).add(node.value)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if value is not None and (value in _DEVICE_WORDS or value.split(":")[0] in _DEVICE_WORDS):
            self._device.add(self._unit())

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._names.setdefault(self._unit(), set()).add(node.attr.value)
        if node.attr.value in _DEVICE_WORDS:  # torch.cuda, x.cuda()
            self._device.add(self._unit())

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        # `backend: str = "gloo"` (a dataclass / tyro field)
        if node.value is not None and string_value(node.value) == "gloo" and is_backend_named(node.target):
            self._gloo_settings.add(terminal_name(node.target) or "")

    def visit_Assign(self, node: cst.Assign) -> None:
        if string_value(node.value) == "gloo":
            for t in node.targets:
                if is_backend_named(t.target):
                    self._gloo_settings.add(terminal_name(t.target) or "")

    def visit_Call(self, node: cst.Call) -> None:
        name = terminal_name(node.func)
        if name == "add_argument":
            default = arg_by_name(node, "default")
            option = node.args[0].value if node.args else None
            if default is not None and string_value(default.value) == "gloo" and option is not None:
                flag = string_value(option) or ""
                if "backend" in flag:
                    self._gloo_settings.add(flag.lstrip("-").replace("-", "_"))
            return
        qualified = call_qualname(self, node)
        if qualified in _COLLECTIVES:
            self._collective.add(self._unit())
            for a in node.args:
                name = terminal_name(a.value)
                if name:
                    self._tensor_group_names.setdefault(name, set()).add(self._unit())
        elif qualified not in _OBJECT_ONLY:
            # A name handed on under another one (`sync(pg)`, `Wrapper(group=pg)`) may reach a
            # tensor collective the rule cannot follow; `Resources(pg=pg)` keeps it readable.
            for a in node.args:
                name = terminal_name(a.value)
                if name and (a.keyword is None or a.keyword.value != name):
                    self._escaped_names.add(name)
        if qualified in _INIT:
            backend = arg_by_name(node, "backend", 0 if qualified.endswith("init_process_group") else 2)
            if backend is None:
                return
            literal = string_value(backend.value)
            if literal is not None:
                key = "gloo" if literal == "gloo" else ""
            else:
                key = terminal_name(backend.value) or ""  # `args.backend`: decided by its default
            if key:
                ancestors = tuple(a for a in self.context.ancestors if a is not node)
                if qualified.endswith("new_group") and ancestors:
                    assigned = _assigned_name(ancestors[-1], node)
                    if assigned:
                        self._group_of_call[id(node)] = assigned
                self._inits.append((node, ancestors, key, self._unit()))

    def leave_Module(self, original_node: cst.Module) -> None:
        if not (self._collective and self._device):
            return
        together = self._joined_units()
        for call, ancestors, key, unit in self._inits:
            group = together(unit)
            if not (group & self._collective and group & self._device):
                continue
            name = self._group_of_call.get(id(call))
            if name and name not in self._escaped_names and not group & self._tensor_group_names.get(name, set()):
                continue  # its collectives carry Python objects and barriers only
            if key == "gloo" or key in self._gloo_settings:
                self.report(
                    call,
                    "a gloo process group runs collectives on the program's device tensors; gloo has no neuron support",
                    guidance=_GUIDANCE,
                    effort=Effort.LOW,
                    ancestors=ancestors,
                )

    def _joined_units(self):  # noqa: ANN202 - unit -> the units that run with it
        """Units are joined when one names the other (a call, a callback, a method through
        ``self.``), and a test class's setup methods join each of its tests."""
        parent: dict[str, str] = {}

        def find(u: str) -> str:
            while parent.setdefault(u, u) != u:
                parent[u] = parent[parent[u]]
                u = parent[u]
            return u

        def join(a: str, b: str) -> None:
            parent[find(a)] = find(b)

        for unit, names in self._names.items():
            for name in names:
                for other in self._units.get(name, ()):
                    join(unit, other)
        for cls, setups in self._setup_units.items():
            for setup in setups:
                for test in self._tests.get(cls, ()):
                    join(setup, test)
        units = set(parent) | self._collective | self._device

        def together(unit: str) -> set[str]:
            root = find(unit)
            return {u for u in units if find(u) == root}

        return together


def _assigned_name(parent: cst.CSTNode, call: cst.Call) -> str | None:
    """The name ``call``'s result is assigned to (``pg`` / ``self.pg`` of ``pg = call``)."""
    if isinstance(parent, cst.Assign) and parent.value is call and len(parent.targets) == 1:
        return terminal_name(parent.targets[0].target)
    if isinstance(parent, cst.AnnAssign) and parent.value is call:
        return terminal_name(parent.target)
    return None


_SETUP_METHODS = frozenset({"setUp", "setUpClass", "setup_method", "setup_class", "setup"})


def _is_test_class(node: cst.ClassDef) -> bool:
    """A class pytest or unittest collects: its test methods run one by one."""
    return node.name.value.startswith("Test") or any(
        (terminal_name(b.value) or "").endswith("TestCase") for b in node.bases
    )
