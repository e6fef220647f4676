"""CN405: ``CUDA_VISIBLE_DEVICES`` in ``os.environ`` -> ``NEURON_RT_VISIBLE_CORES``."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety, Valid
from cuda2neuron.python import visit_syntax

from .._shared.strings import make_string, string_value
from .._shared.names import call_qualname
from .._shared.visible_devices import LAUNCHER_GUIDANCE, MULTI_PROCESS_LAUNCHER_RE, launcher_caveat, visible_cores
from ._helpers import EnvAccess, EnvSite, env_keyword_site, env_site

__all__ = ["CudaVisibleDevices"]

_CUDA = "CUDA_VISIBLE_DEVICES"
_NEURON = "NEURON_RT_VISIBLE_CORES"
_MESSAGE = f"`{_CUDA}` has no effect on Trainium; NeuronCores are chosen with `{_NEURON}`"
_RANGE_GUIDANCE = (
    f"`{_NEURON}` takes one core index (\"2\") or an inclusive consecutive range (\"0-3\"), not "
    "a comma list; `NEURON_RT_NUM_CORES=n` asks for any n cores instead."
)


# "" and "-1" hide every GPU so that the program falls back to the CPU.
_HIDE_ALL_GUIDANCE = (
    "This value hides every GPU to force a CPU run. There is no Neuron variable with that "
    "meaning here: choose the CPU device in code (e.g. `torch.device(\"cpu\")`) on that path, "
    "and remove the setting."
)


# Calls that start one process per device, each inheriting os.environ (as torchrun's ranks do),
# and the call that makes the file one rank of several: its write runs in every rank, before the
# neuron process group would have given each rank its own core.
_RANKS = frozenset(
    {"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes", "torch.distributed.init_process_group"}
)


def _hides_all(value: str) -> bool:
    return value.strip() in ("", "-1")


class _Swap(cst.CSTTransformer):
    """Replace a few nodes, found by identity, inside the small node a fix rewrites."""

    def __init__(self, swaps: dict[int, cst.CSTNode]) -> None:
        self.swaps = swaps

    def on_leave(self, original_node, updated_node):  # type: ignore[no-untyped-def,override]
        return self.swaps.get(id(original_node), updated_node)


class _SplitOf(cst.CSTVisitor):
    """Whether ``name.split(...)`` is called: the value read into ``name`` is parsed as a list."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "split"
            and isinstance(func.value, cst.Name)
            and func.value.value == self.name
        ):
            self.found = True


class CudaVisibleDevices(Rule):
    """
    ## What it does
    Rewrites the ``CUDA_VISIBLE_DEVICES`` environment variable to ``NEURON_RT_VISIBLE_CORES``,
    turning comma lists into ranges.

    Covered, wherever the code sets or reads the variable: ``os.environ[...] = ...``, ``os.environ.setdefault``,
    ``os.putenv``, ``os.environ.get`` / ``os.getenv`` / ``pop``, ``del os.environ[...]``,
    ``... in os.environ``, env dicts handed to subprocesses and ``update(CUDA_VISIBLE_DEVICES=...)``.
    Literal comma lists become ranges: ``"0,1,2,3"`` -> ``"0-3"``, ``"2"`` -> ``"2"``.

    ## Why is this bad?
    The Neuron runtime ignores ``CUDA_VISIBLE_DEVICES``: a script that restricts itself to some
    GPUs would grab every NeuronCore (or collide with its neighbours). The Neuron variable only
    accepts one index or a consecutive range, so ``"0,2"`` has no Neuron spelling and is reported.

    ## Example
    ```python
    os.environ["CUDA_VISIBLE_DEVICES"] = "0,1,2,3"
    ```
    becomes
    ```python
    os.environ["NEURON_RT_VISIBLE_CORES"] = "0-3"
    ```

    ## Fix safety
    Safe for literal values that convert exactly and for reads and deletions whose value is not
    parsed. Unsafe when the value is computed (``str(args.gpu)``, ``",".join(...)``): only the
    key is renamed, and a computed comma list would be rejected by the runtime; also unsafe for
    reads that split the value on commas (at once, or through the name it is read into:
    ``devs = os.environ.get(...)`` then ``devs.split(",")``), which misparse a range. The sites
    of the variable in one function (or at module level) are linked: a read renamed while a write
    of the same variable is left (or the other way round) would name two variables, so they are
    applied together at the weakest safety among them, or reported together. A write in a file
    that starts several processes (a ``torchrun`` / ``torch.distributed.run`` / ``accelerate
    launch`` / ``deepspeed`` command it runs, ``torch.multiprocessing.spawn``) or that is one rank
    of several (it calls ``torch.distributed.init_process_group``) is unsafe with its linked
    sites: each process would reserve the whole range, since TorchNeuron gives each rank its own
    core only when the variable is unset (CN701 says more). Non-consecutive, empty or
    UUID lists are reported without a fix. With ``--target accelerator`` the finding is
    report-only: CUDA still needs its variable, so set both.
    """

    code = "CN405"
    name = "cuda-visible-devices"
    fixes = frozenset({Safety.SAFE, Safety.UNSAFE})
    triggers = (_CUDA,)
    VALID = (
        'os.environ["NEURON_RT_VISIBLE_CORES"] = "0-3"\n',
        'print("set CUDA_VISIBLE_DEVICES to pick GPUs")\n',
        'HELP = "CUDA_VISIBLE_DEVICES"\n',  # a constant, not a key position
        "# os.environ['CUDA_VISIBLE_DEVICES'] = '0'\n",
        'parser.add_argument("--gpus", help="like CUDA_VISIBLE_DEVICES=0,1")\n',
        # the word looked for in a script's or a function's text, not in an environment
        'def test_launcher(script):\n    content = script.read_text()\n    assert "CUDA_VISIBLE_DEVICES" in content\n',
        'import inspect\n\ndef test_probe(f):\n    src = inspect.getsource(f)\n    assert "CUDA_VISIBLE_DEVICES" not in src\n',
        # what a call returns, searched elsewhere for a word no key holds (`=`): a message's text
        # (unsloth's crash-message tests)
        (
            'class TestAdvice:\n    def test_vulkan(self):\n        message = self._message("vulkan")\n'
            '        assert "BACKEND=cpu" in message\n\n    def test_unknown(self):\n'
            '        message = self._message(None)\n        assert "CUDA_VISIBLE_DEVICES" not in message\n'
        ),
        Valid('os.environ["NEURON_RT_VISIBLE_CORES"] = "0-3"\n', target="accelerator"),
    )
    INVALID = (
        Invalid(
            'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "0,1,2,3"\n',
            'import os\nos.environ["NEURON_RT_VISIBLE_CORES"] = "0-3"\n',
        ),
        Invalid(
            "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '2'\n",
            "import os\nos.environ['NEURON_RT_VISIBLE_CORES'] = '2'\n",
        ),
        Invalid(
            'import os\nos.environ.setdefault("CUDA_VISIBLE_DEVICES", "4, 5")\n',
            'import os\nos.environ.setdefault("NEURON_RT_VISIBLE_CORES", "4-5")\n',
        ),
        Invalid(
            'import os\nos.putenv("CUDA_VISIBLE_DEVICES", "0,1")\n',
            'import os\nos.putenv("NEURON_RT_VISIBLE_CORES", "0-1")\n',
        ),
        Invalid(
            'import os\ngpus = os.environ.get("CUDA_VISIBLE_DEVICES", "0")\n',
            'import os\ngpus = os.environ.get("NEURON_RT_VISIBLE_CORES", "0")\n',
        ),
        Invalid(
            'import os\nif "CUDA_VISIBLE_DEVICES" not in os.environ:\n    pass\n',
            'import os\nif "NEURON_RT_VISIBLE_CORES" not in os.environ:\n    pass\n',
        ),
        # a call's result searched only for keys may be an environment
        Invalid(
            'def check(self):\n    env = self._env()\n    assert "CUDA_VISIBLE_DEVICES" not in env\n',
            'def check(self):\n    env = self._env()\n    assert "NEURON_RT_VISIBLE_CORES" not in env\n',
        ),
        # a name bound to a text and then to something else may hold an environment
        Invalid(
            'import os\n\ndef pick(p):\n    env = p.read_text()\n    env = dict(os.environ)\n    return "CUDA_VISIBLE_DEVICES" in env\n',
            'import os\n\ndef pick(p):\n    env = p.read_text()\n    env = dict(os.environ)\n    return "NEURON_RT_VISIBLE_CORES" in env\n',
        ),
        Invalid(
            'import os\ndel os.environ["CUDA_VISIBLE_DEVICES"]\n',
            'import os\ndel os.environ["NEURON_RT_VISIBLE_CORES"]\n',
        ),
        Invalid(
            'env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1"}\n',
            'env = {**os.environ, "NEURON_RT_VISIBLE_CORES": "0-1"}\n',
        ),
        Invalid(
            'import os\nos.environ.update(CUDA_VISIBLE_DEVICES="3")\n',
            'import os\nos.environ.update(NEURON_RT_VISIBLE_CORES="3")\n',
        ),
        # non-consecutive: not expressible
        Invalid('import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "0,2"\n'),
        # The environment handed to torchrun's ranks: each would reserve cores 0-1.
        Invalid(
            'import os\nimport subprocess\nenv = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1"}\n'
            'subprocess.run(["torchrun", "--nproc_per_node=2", "train.py"], env=env)\n',
            'import os\nimport subprocess\nenv = {**os.environ, "NEURON_RT_VISIBLE_CORES": "0-1"}\n'
            'subprocess.run(["torchrun", "--nproc_per_node=2", "train.py"], env=env)\n',
            unsafe=True,
        ),
        Invalid(
            'import os\nimport torch.multiprocessing as mp\nos.environ["CUDA_VISIBLE_DEVICES"] = "0,1"\n'
            "mp.spawn(worker, nprocs=2)\n",
            'import os\nimport torch.multiprocessing as mp\nos.environ["NEURON_RT_VISIBLE_CORES"] = "0-1"\n'
            "mp.spawn(worker, nprocs=2)\n",
            unsafe=True,
        ),
        # One rank of a torchrun job: every rank sets the range before the process group starts.
        Invalid(
            'import os\nimport torch.distributed as dist\nos.environ["CUDA_VISIBLE_DEVICES"] = "0,1,2,3"\n'
            'dist.init_process_group("neuron")\n',
            'import os\nimport torch.distributed as dist\nos.environ["NEURON_RT_VISIBLE_CORES"] = "0-3"\n'
            'dist.init_process_group("neuron")\n',
            unsafe=True,
        ),
        # empty (hide every GPU): no Neuron spelling either
        Invalid('import os\nos.environ["CUDA_VISIBLE_DEVICES"] = ""\n'),
        # computed value: key renamed only with --unsafe-fixes
        Invalid(
            'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = str(args.gpu)\n',
            'import os\nos.environ["NEURON_RT_VISIBLE_CORES"] = str(args.gpu)\n',
            unsafe=True,
        ),
        # a read parsed as a comma list misreads "0-3"
        Invalid(
            'import os\nn = len(os.environ["CUDA_VISIBLE_DEVICES"].split(","))\n',
            'import os\nn = len(os.environ["NEURON_RT_VISIBLE_CORES"].split(","))\n',
            unsafe=True,
        ),
        Invalid('import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "0,1"\n', target="accelerator"),
        # read into a name that is split on commas, then written back: one group, unsafe
        Invalid(
            'import os\n\ndef visible():\n    devs = os.environ.get("CUDA_VISIBLE_DEVICES", "")\n'
            '    ids = devs.split(",")\n    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(ids[:2])\n',
            'import os\n\ndef visible():\n    devs = os.environ.get("NEURON_RT_VISIBLE_CORES", "")\n'
            '    ids = devs.split(",")\n    os.environ["NEURON_RT_VISIBLE_CORES"] = ",".join(ids[:2])\n',
            unsafe=True,
        ),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        # The reports of each function (or of the module), made when the module is left: each
        # is linked to the other sites of the variable in its scope.
        self._sites: dict[int, list[dict]] = {}
        self._scopes: list[cst.CSTNode] = []  # kept alive: their ids key _sites
        # The multi-process launcher the file starts (a `torchrun` command string handed to
        # subprocess, torch.multiprocessing.spawn): a write of the variable then reaches every rank.
        self._launcher: str | None = None  # (or the init_process_group call of one rank)

    def _emit(self, node: cst.CSTNode, message: str, **kwargs) -> None:
        kwargs.setdefault("ancestors", tuple(self.context.ancestors))
        scope = next((a for a in reversed(self.context.ancestors) if isinstance(a, cst.FunctionDef)), self.context.module)
        self._scopes.append(scope)
        self._sites.setdefault(id(scope), []).append({"node": node, "message": message, **kwargs})

    def leave_Module(self, original_node: cst.Module) -> None:
        for sites in self._sites.values():
            launched = self._launcher is not None and any(site.pop("write", False) for site in sites)
            for site in sites:
                site.pop("write", None)
                if launched and site.get("replacement") is not None:
                    # A job-wide range reaching several ranks: each would reserve all of it.
                    assert self._launcher is not None
                    site["message"] += launcher_caveat(self._launcher)
                    site["safety"] = Safety.UNSAFE
                    site["guidance"] = f"{site['guidance'].rstrip('.')}. {LAUNCHER_GUIDANCE}" if site["guidance"] else LAUNCHER_GUIDANCE
                others = tuple(o["node"] for o in sites if o is not site)
                self.report(depends=others, **site)

    def visit_Call(self, node: cst.Call) -> None:
        if self._launcher is None and call_qualname(self, node) in _RANKS:
            self._launcher = call_qualname(self, node)

    def _parsed_later(self, site: EnvSite) -> bool:
        """``devs = os.environ.get(K)`` ... ``devs.split(",")`` in the same function."""
        chain = self.context.chain_above(site.node)
        assign = chain[-1] if chain else None
        if not (isinstance(assign, cst.Assign) and assign.value is site.node and len(assign.targets) == 1):
            return False
        target = assign.targets[0].target
        if not isinstance(target, cst.Name):
            return False
        scope = next((a for a in reversed(chain) if isinstance(a, cst.FunctionDef)), self.context.module)
        finder = _SplitOf(target.value)
        visit_syntax(scope, finder)
        return finder.found

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if self._launcher is None and (found := MULTI_PROCESS_LAUNCHER_RE.search(node.value)) is not None:
            self._launcher = " ".join(found.group(0).split())  # `["torchrun", ...]`, "torchrun ..."
        if _CUDA not in node.value or string_value(node) != _CUDA:
            return
        site = env_site(self, node)
        if site is not None:
            self._handle(site, node)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and node.keyword.value == _CUDA:
            self._handle(env_keyword_site(node), node.keyword)

    def _handle(self, site: EnvSite, key: cst.CSTNode) -> None:
        if self.context.settings.target != "neuron":
            self._emit(
                key,
                _MESSAGE,
                guidance=f"Code meant for CUDA and Trainium should set both variables; {_RANGE_GUIDANCE}",
            )
            return
        new_key: cst.CSTNode = (
            cst.Name(_NEURON) if isinstance(key, cst.Name) else make_string(_NEURON, like=key)  # type: ignore[arg-type]
        )
        swaps: dict[int, cst.CSTNode] = {id(key): new_key}
        safety = Safety.SAFE
        guidance = ""
        value = site.value
        literal = string_value(value) if value is not None else None
        if site.access is EnvAccess.WRITE:
            if literal is not None:
                cores = visible_cores(literal)
                if cores is None:
                    self._emit(
                        site.node,
                        f"{_MESSAGE}, and {literal!r} is not one index or a consecutive range",
                        ancestors=self.context.chain_above(site.node),
                        guidance=_HIDE_ALL_GUIDANCE if _hides_all(literal) else
                        f"{_RANGE_GUIDANCE} Pick a consecutive range, or start one process per core.",
                        effort=Effort.LOW,
                    )
                    return
                assert value is not None
                swaps[id(value)] = make_string(cores, like=value)
            else:
                safety = Safety.UNSAFE
                guidance = f"The value is computed here: make sure it is a single index or a range. {_RANGE_GUIDANCE}"
        elif site.access is EnvAccess.READ:
            if literal is not None and value is not None and (cores := visible_cores(literal)) is not None:
                swaps[id(value)] = make_string(cores, like=value)
            if site.parsed or self._parsed_later(site):
                safety = Safety.UNSAFE
                guidance = f"The value is split on commas here, which misreads a range. {_RANGE_GUIDANCE}"
        replacement = site.node.visit(_Swap(swaps))
        # site.node may be an ancestor of the visited key (the whole ``os.environ[K] = v``).
        self._emit(
            site.node,
            _MESSAGE,
            ancestors=self.context.chain_above(site.node),
            replacement=replacement,  # type: ignore[arg-type]
            safety=safety,
            guidance=guidance,
            description=f"use {_NEURON}",
            write=site.access is EnvAccess.WRITE,
        )
