"""CN201: same-name ``torch.cuda.X`` APIs, moved by the data in ``cuda_api.toml``."""

from __future__ import annotations

import ast

import libcst as cst

from cuda2neuron.core import Effort, Finding, Fix, Invalid, ProjectFacts, Rule, Safety, Settings, Valid
from cuda2neuron.python import dotted_name

from .._shared.detector import may_be_linked
from .._shared.kernel_free import kernel_free, plain_import
from .._shared.kernel_gates import report_kernel_gate
from .._shared.names import call_qualname, import_to_drop, terminal_name
from .._shared.consumers import communicator_stream, foreign_callee, library_callee
from .._shared.selected import opened_code, selected_code
from .._shared.target import guarded_call
from .._shared.values import argument_of
from . import _refs_ast
from ._helpers import ApiMove, MemberReferences, accelerator_name_for, load_moves, neuronx_release, neuronx_text

__all__ = ["CudaApiMove"]

_MOVES = load_moves()
_KERNEL_GUIDANCE = (
    "left as is: on Neuron this reads as 'no CUDA', so the CUDA-only code it guards (or the test "
    "it skips) does not run there. Port the kernel (NKI, or the plain PyTorch path), then test for "
    "the target device."
)
# Cheap pre-check before any name resolution: the last component of every covered name.
_MEMBERS = frozenset(move.name for move in _MOVES.values())
# Calls made for their effect that no rule but this one reports: an availability test in front
# of only these is decided on ``ast`` (``_Detector._guards_moves_only``).
_BRANCH_CALLS = frozenset({
    "empty_cache", "synchronize", "manual_seed", "manual_seed_all", "reset_peak_memory_stats",
    "reset_max_memory_allocated", "reset_accumulated_memory_stats",
})


def _version(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


class CudaApiMove(MemberReferences, Rule):
    """
    ## What it does
    Moves the ``torch.cuda`` APIs TorchNeuron provides under the same name to ``torch.neuron``
    (``torch.accelerator`` with ``--target accelerator``). The list — device count, current/set
    device, synchronize, seeding and RNG state, streams and events, memory statistics,
    ``empty_cache``, ``is_bf16_supported``, device name/properties — is the data file
    ``rules/cuda_api.toml``, with CUDA's deprecated aliases moved to the API each one calls
    (``memory_cached`` -> ``memory_reserved``, ``reset_max_memory_allocated`` ->
    ``reset_peak_memory_stats``); for the accelerator target it holds the name valid for each
    ``min-torch``. Calls and plain references (``isinstance(s, torch.cuda.Stream)``) alike, through
    ``import torch as th``, ``from torch import cuda`` and ``from torch.cuda import X``.

    ## Why is this bad?
    ``torch.cuda.*`` talks to the CUDA runtime. On Trainium it reports no device
    (``is_available()`` is False, so code silently takes its CPU path) or raises.

    ## Example
    ```python
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    ```
    becomes
    ```python
    if torch.neuron.is_available():
        torch.neuron.synchronize()
    ```
    With ``--target accelerator --min-torch 2.7``: ``torch.accelerator.is_available()`` and
    ``torch.accelerator.synchronize()``; ``torch.cuda.current_device()`` becomes
    ``torch.accelerator.current_device_index()`` (``current_device_idx()`` for 2.6), and
    ``torch.cuda.empty_cache()`` is reported until ``min-torch`` is 2.9
    (``torch.accelerator.memory.empty_cache()``). The accelerator port must also run where there
    is no accelerator, and ``torch.accelerator.*`` raises there: a call made for its effect
    (``synchronize``, ``empty_cache``, ``set_device``, ...) is guarded by
    ``if torch.accelerator.is_available():`` and a memory statistic reads 0 there, as CUDA's do
    before CUDA is initialised (the ``accelerator-no-device`` column). Calls already behind an
    ``is_available()`` check are left as they are.

    A check that guards CUDA-only code (``if torch.cuda.is_available():`` around a Triton
    launch, ``@pytest.mark.skipif(not torch.cuda.is_available())`` on a kernel's test, a flag
    computed from it that picks the kernel) is reported and left as is: on Neuron it must keep
    answering "no CUDA" until the kernel is ported.

    ## Fix safety
    Safe on the ``neuron`` target: ``torch.neuron.X`` has the signature of ``torch.cuda.X``
    (two documented differences are stated in the message: ``get_device_name`` returns
    ``"neuron:i"`` and ``get_device_properties`` has only ``.name`` and ``.total_memory``).
    On the ``accelerator`` target the seeding moves (``manual_seed[_all]`` -> ``torch.manual_seed``,
    ``seed[_all]`` -> ``torch.seed``) are unsafe: they also reseed the CPU generator. A call whose
    keywords the accelerator API names differently (``device=`` vs ``device_index=``), or an API
    the chosen torch version lacks, is reported with what to write instead. The
    ``torch.accelerator.memory.*`` functions work on Trainium only from torch-neuronx 2.13.3.1 /
    2.14.3.1 (Neuron 2.34's release notes): with ``--min-torch-neuronx`` older than its torch
    family's release the use is reported, not rewritten; unset, the finding names that release.
    """

    code = "CN201"
    name = "cuda-api-move"
    fixes = frozenset({Safety.SAFE, Safety.UNSAFE})
    members = _MEMBERS
    triggers = ("cuda",)
    # Every qualified name this rule can write (checked against the emulated backend and torch).
    emits = tuple(
        sorted(
            {m.neuron_name for m in _MOVES.values()}
            | {q for m in _MOVES.values() for _, q in m.accelerator}
        )
    )
    VALID = (
        "import torch\ntorch.neuron.synchronize()\n",
        # Already device-agnostic code (torch.accelerator.*) stays as it is.
        Valid("import torch\ntorch.accelerator.synchronize()\n", target="accelerator"),
        "import torch\nif torch.accelerator.is_available():\n    n = torch.accelerator.device_count()\n",
        # A member called like a torch.cuda API on some other object.
        "from torch.cuda import synchronize\nclock.synchronize()\n",
        # A parameter named `torch` shadows the import.
        "import torch\ndef f(torch):\n    torch.cuda.synchronize()\n",
        # A project's own helper module named cuda: not torch.cuda, so it stays.
        "from myproject import cuda\ncuda.synchronize()\n",
        # Keywords called like the API are not uses of it.
        "from torch.cuda import synchronize\nrun(synchronize=True)\n",
        # APIs handled by other rules (AMP, no-equivalent) are not moves.
        "import torch\ntorch.cuda.amp.autocast()\ntorch.cuda.get_device_capability()\n",
    )
    INVALID = (
        # xformers' tests/utils.py: a shared skip marker, in a project with CUDA-only kernels
        # (sweep facts); the tests it marks in other modules may launch them. Reported, kept.
        Invalid(
            "import pytest\nimport torch\n"
            "cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason='requires CUDA')\n",
            None,
            options=(("project", ProjectFacts(kernel_modules=frozenset({"pkg.ops.rmsnorm_kernels"}))),),
        ),
        # Without kernels in the project the marker moves (the table of examples shows it).
        Invalid(
            "import pytest\nimport torch\n"
            "cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason='requires CUDA')\n",
            "import pytest\nimport torch\n"
            "cuda_only = pytest.mark.skipif(not torch.neuron.is_available(), reason='requires CUDA')\n",
        ),
        # A build script's gate picks the CUDA builder (detectron2's setup.py): it decides whether
        # .cu sources are compiled, so it is reported and kept (False on Trainium: the CPU build).
        Invalid(
            "import torch\nfrom torch.utils.cpp_extension import CUDA_HOME, CppExtension, CUDAExtension\n"
            "extension = CppExtension\n"
            "if torch.cuda.is_available() and CUDA_HOME is not None:\n    extension = CUDAExtension\n",
            None,
        ),
        Invalid(
            "import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n",
            "import torch\nif torch.neuron.is_available():\n    torch.neuron.synchronize()\n",
        ),
        Invalid("import torch as th\nth.cuda.manual_seed_all(0)\n", "import torch as th\nth.neuron.manual_seed_all(0)\n"),
        Invalid(
            "from torch.cuda import empty_cache\nempty_cache()\n",
            "import torch\n\ntorch.neuron.empty_cache()\n",
        ),
        Invalid(
            "from torch import cuda\nn = cuda.device_count()\n",
            "import torch\n\nn = torch.neuron.device_count()\n",
        ),
        Invalid(
            "import torch\nok = isinstance(s, torch.cuda.Stream)\n",
            "import torch\nok = isinstance(s, torch.neuron.Stream)\n",
        ),
        Invalid(
            "import torch\nstart = torch.cuda.Event(enable_timing=True)\n",
            "import torch\nstart = torch.neuron.Event(enable_timing=True)\n",
        ),
        Invalid(
            "from torch.cuda.memory import memory_allocated\nm = memory_allocated(0)\n",
            "import torch\n\nm = torch.neuron.memory_allocated(0)\n",
        ),
        # A deprecated CUDA alias moves to the API it calls.
        Invalid(
            "import torch\ntorch.cuda.reset_max_memory_allocated()\nm = torch.cuda.memory_cached(0)\n",
            "import torch\ntorch.neuron.reset_peak_memory_stats()\nm = torch.neuron.memory_reserved(0)\n",
        ),
        Invalid(
            "import torch\nname = torch.cuda.get_device_name(0)\n",
            "import torch\nname = torch.neuron.get_device_name(0)\n",
        ),
        Invalid(
            "import torch\ntorch.cuda.synchronize()\n",
            "import torch\nif torch.accelerator.is_available():\n    torch.accelerator.synchronize()\n",
            target="accelerator",
        ),
        Invalid(
            "import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n",
            "import torch\nif torch.accelerator.is_available():\n    torch.accelerator.synchronize()\n",
            target="accelerator",
        ),
        Invalid(
            "import torch\nmb = torch.cuda.max_memory_allocated() / 2**20\n",
            "import torch\nmb = (torch.accelerator.memory.max_memory_allocated() if torch.accelerator.is_available() else 0) / 2**20\n",
            target="accelerator",
        ),
        # Not a statement of its own: the guard is a conditional expression.
        Invalid(
            "import torch\nif flag: torch.cuda.synchronize()\n",
            "import torch\nif flag: torch.accelerator.synchronize() if torch.accelerator.is_available() else None\n",
            target="accelerator",
        ),
        Invalid(
            "import torch\ni = torch.cuda.current_device()\n",
            "import torch\ni = torch.accelerator.current_device_idx()\n",
            target="accelerator",
            options=(("min_torch", (2, 6)),),  # type: ignore[arg-type]
        ),
        Invalid(
            "import torch\ni = torch.cuda.current_device()\n",
            "import torch\ni = torch.accelerator.current_device_index()\n",
            target="accelerator",
        ),
        Invalid(
            "import torch\ntorch.cuda.empty_cache()\n",
            "import torch\nif torch.accelerator.is_available():\n    torch.accelerator.memory.empty_cache()\n",
            target="accelerator",
        ),
        # torch 2.8 has no torch.accelerator.memory: reported, not rewritten.
        Invalid(
            "import torch\ntorch.cuda.empty_cache()\n",
            target="accelerator",
            options=(("min_torch", (2, 8)),),  # type: ignore[arg-type]
        ),
        # torch-neuronx 2.14.3.0 (Neuron 2.33) has no torch.accelerator memory functions on Trainium.
        Invalid(
            "import torch\ntorch.cuda.empty_cache()\n",
            target="accelerator",
            options=(("min_torch_neuronx", (2, 14, 3, 0)),),  # type: ignore[arg-type]
        ),
        Invalid(
            "import torch\ntorch.cuda.empty_cache()\n",
            "import torch\nif torch.accelerator.is_available():\n    torch.accelerator.memory.empty_cache()\n",
            target="accelerator",
            options=(("min_torch_neuronx", (2, 14, 3, 1)),),  # type: ignore[arg-type]
        ),
        Invalid(
            "import torch\ntorch.cuda.manual_seed(0)\n",
            "import torch\ntorch.manual_seed(0)\n",
            target="accelerator",
            unsafe=True,
        ),
        # torch.accelerator.* calls its parameter device_index: a `device=` keyword is reported.
        Invalid("import torch\ntorch.cuda.synchronize(device=d)\n", target="accelerator"),
        # torch.Event takes `device` first.
        Invalid("import torch\ne = torch.cuda.Event(True)\n", target="accelerator"),
        # Checks in front of CUDA-only kernels keep their meaning: reported, never moved.
        Invalid(
            "import torch\nimport triton\n\n@triton.jit\ndef k(x):\n    pass\n\n"
            "def f(x):\n    if torch.cuda.is_available():\n        return k[(1,)](x)\n    return x\n",
            None,
        ),
        Invalid(
            "import pytest\nimport torch\nfrom causal_conv1d import causal_conv1d_fn\n\n"
            "@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')\n"
            "def test_conv(x):\n    causal_conv1d_fn(x, x)\n",
            None,
        ),
        # Too few GPUs for the job: the skip is taken on Trainium (no CUDA device counts), so the
        # kernel after it stays off Trainium (Megatron's unit tests).
        Invalid(
            "import pytest\nimport torch\nfrom causal_conv1d import causal_conv1d_fn\n\n"
            "def test_conv(x, tp, pp):\n    if tp * pp > torch.cuda.device_count():\n"
            "        pytest.skip('not enough GPUs')\n    causal_conv1d_fn(x, x)\n",
            None,
        ),
        Invalid(
            "import torch\nfrom causal_conv1d import causal_conv1d_fn\n\n"
            "use_kernels = torch.cuda.is_available()\n\n"
            "def f(x):\n    return causal_conv1d_fn(x, x) if use_kernels else x\n",
            None,
            target="accelerator",
        ),
        Invalid("import torch\ntorch.cuda.memory_summary()\n", target="accelerator"),
        # A deprecated alias assigned: its successor's name would be another target (and two
        # aliases of one name would collapse into one assigned twice).
        Invalid("import torch\ntorch.cuda.memory_cached = my_reserved\n"),
        # The stream of an NCCL communicator's collective (torch.distributed's take no stream):
        # reported, not moved (OpenRLHF's weight sync over vLLM's PyNcclCommunicator).
        Invalid("import torch\n\ndef push(comm, t):\n    comm.broadcast(t, src=0, stream=torch.cuda.current_stream())\n", None),
        # A library's own flag: reported, not moved (mergekit merges on `cuda` when it is True).
        Invalid("import torch\nfrom mergekit.options import MergeOptions\nopts = MergeOptions(cuda=torch.cuda.is_available())\n"),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        if settings.target != "neuron":
            return None  # the accelerator target's guards, versions and argument checks stay libcst's
        return _Detector(cls, file, settings).findings()

    def check_reference(self, node: cst.Attribute | cst.Name) -> None:
        qualified = self.qualname(node)
        move = _MOVES.get(qualified) if qualified is not None else None
        if move is None:
            return
        message = f"`{qualified}` is CUDA-only"
        # `if torch.cuda.is_available(): <triton kernel>` retargeted would run the kernel on
        # Neuron; a skipif on a kernel's test would run the test there.
        if report_kernel_gate(self, node, lambda kernel: f"{message} and guards CUDA-only code: {kernel}", _KERNEL_GUIDANCE):
            return
        if self._renamed_target(node, qualified, move.neuron_name if self.context.settings.target == "neuron" else None):
            return
        if self._handed_to_library(node, qualified, message):
            return
        if self.context.settings.target == "neuron":
            self._move(node, move, move.neuron_name, message, Safety.SAFE, note=move.neuron_note)
            return
        target = accelerator_name_for(move, self.context.settings.min_torch)
        if target is None:
            self._report_accelerator_gap(node, move, message)
            return
        problem = self._argument_problem(node, move)
        if problem:
            self.report(node, f"{message}; {problem}", guidance=f"Write `{target}(...)` by hand: {problem}.", depends=self._selects(node), needs=opened_code(self.context.ancestors, node))
            return
        safety = Safety.UNSAFE if move.accelerator_unsafe else Safety.SAFE
        note = move.accelerator_note if move.accelerator_unsafe else ""
        if move.accelerator_neuronx:
            # A TorchNeuron feature, not a torch one: the torch version says nothing about it.
            have = self.context.settings.min_torch_neuronx
            needed = neuronx_text(move.accelerator_neuronx)
            if have is not None and not neuronx_release(move.accelerator_neuronx, have):
                shown = ".".join(map(str, have))
                self.report(
                    node,
                    f"{message}; `{target}` works on Trainium from torch-neuronx {needed} (Neuron 2.34), "
                    f"min-torch-neuronx is {shown}",
                    guidance=f"Raise min-torch-neuronx to {needed} and use `{target}`, or keep a device-specific branch.",
                    effort=Effort.LOW,
                    depends=self._selects(node), needs=opened_code(self.context.ancestors, node),
                )
                return
            if have is None:
                note = "; ".join(filter(None, (note, f"on Trainium it needs torch-neuronx >= {needed} (Neuron 2.34)")))
        self._move(node, move, target, message, safety, note=note)

    def _renamed_target(self, node: cst.Attribute | cst.Name, qualified: str, target: str | None) -> bool:
        """``torch.cuda.memory_cached = f``: an assignment to a deprecated alias. Moved to its
        successor's name it would patch another attribute, and two aliases of one successor
        (``memory_cached``, ``memory_reserved``) would collapse into one target assigned twice.
        Reported, not moved."""
        parent = self.context.parent
        if not (isinstance(parent, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)) and parent.target is node):
            return False
        if target is None or target.rsplit(".", 1)[-1] == qualified.rsplit(".", 1)[-1]:
            return False
        self.report(
            node,
            f"`{qualified}` is assigned: a deprecated alias of `{target.rsplit('.', 1)[-1]}`",
            guidance=(
                "Left as is: moved to the new name it would patch another attribute (and two aliases "
                "of one name would be assigned twice). Patch what the program reads on Trainium by hand."
            ),
            effort=Effort.LOW,
        )
        return True

    def _handed_to_library(self, node: cst.Attribute | cst.Name, qualified: str, message: str) -> bool:
        """``MergeOptions(cuda=torch.cuda.is_available())``: the call's answer is an argument of a
        library outside torch, which reads it itself (True: do the work on ``cuda``). Asked about
        Neuron, it is True on Trainium and the library takes a CUDA path it cannot run; left, it
        is False there and the library keeps its CPU path. Reported, not moved."""
        ancestors = self.context.ancestors
        call = ancestors[-1] if ancestors else None
        if not (isinstance(call, cst.Call) and call.func is node):
            return False
        callee = library_callee(self, call, ancestors[:-1])
        if callee is None:
            return self._handed_to_communicator(node, call, ancestors[:-1], message)
        self.report(
            node,
            f"{message}; its answer is handed to `{callee}`, which decides what to do with it",
            guidance=(
                f"Left as is: `{callee.split('.')[0]}` is not torch, and reads this value itself (True: "
                "use its own CUDA path). On Trainium it stays False, as the library's CPU path "
                "needs; if the library can run on a torch device, give it the neuron device instead."
            ),
            effort=Effort.LOW,
        )
        return True

    def _handed_to_communicator(self, node: cst.CSTNode, call: cst.Call, ancestors: list[cst.CSTNode], message: str) -> bool:
        """``comm.broadcast(t, src=0, stream=torch.cuda.current_stream())``: the stream of a
        library's NCCL communicator (``communicator_stream``), which has no neuron counterpart;
        moved, it hands that communicator a stream it cannot use. Reported, not moved."""
        found = argument_of(ancestors, call)
        if found is None:
            return False
        _, arg, outer = found
        keyword = arg.keyword.value if arg.keyword is not None else None
        method = terminal_name(outer.func)
        if not communicator_stream(keyword, method, call_qualname(self, outer)):
            return False
        spelled = dotted_name(outer.func) or str(method)
        self.report(
            node,
            f"{message}; its answer is the stream of `{spelled}(...)`, a communicator's collective "
            "(torch.distributed's take no stream: an NCCL communicator such as vLLM's PyNcclCommunicator)",
            guidance=(
                "Left as is: the communicator drives NCCL on CUDA streams and has no neuron "
                "counterpart. Send the tensors with torch.distributed collectives on the neuron "
                "process group instead, and drop the stream."
            ),
            effort=Effort.MEDIUM,
        )
        return True

    def _move(
        self,
        node: cst.Attribute | cst.Name,
        move: ApiMove,
        target: str,
        message: str,
        safety: Safety,
        note: str,
    ) -> None:
        spelled = self.spell(target)
        if spelled is None:  # `torch` is shadowed here: nothing we can write
            self.report(node, message, guidance=f"Use `{target}` instead.")
            return
        expr, imports = spelled
        at, replacement, ancestors, description = node, expr, None, f"use `{target}`"
        call = self.context.parent
        on_accelerator = self.context.settings.target != "neuron"
        if on_accelerator and move.accelerator_no_device and isinstance(call, cst.Call) and call.func is node:
            guarded = guarded_call(self, call, call.with_changes(func=expr), move.accelerator_no_device)
            if guarded is not None:
                at, replacement, ancestors, more = guarded
                imports = tuple(dict.fromkeys((*imports, *more)))
                description += " where an accelerator is available"
        self.report(
            at,
            f"{message}; {note}" if note else message,
            replacement=replacement,
            safety=safety,
            imports=imports,
            unused_imports=import_to_drop(self, node),
            guidance=f"Use `{target}` instead." + (f" {note}" if note else ""),
            description=description,
            ancestors=ancestors,
            depends=self._selects(node), needs=opened_code(self.context.ancestors, node),
        )

    def _selects(self, node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
        """What ``torch.cuda.is_available()`` decides, when it is a branch's test (its move may
        be unsafe or absent on the accelerator target: the branch then waits for it); and the
        CUDA device string a value is spelled into, with the call that takes it."""
        return (*selected_code(self.context.ancestors, node), *self._spelled_into(node))

    def _spelled_into(self, node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
        """``v.cuda(f"cuda:{torch.cuda.current_device()}")``: the index is half of a CUDA device
        string, and moved alone it names a NeuronCore's index inside a "cuda:" that stays where
        the call's own fix waits (CN101 moves ``.cuda(<f-string>)`` only with --unsafe-fixes).
        The f-string and its call go together with it (ColossalAI's roberta pretraining, 5
        such lines)."""
        ancestors = self.context.ancestors
        for i in range(len(ancestors) - 1, -1, -1):
            outer = ancestors[i]
            if isinstance(outer, (cst.FunctionDef, cst.Lambda, cst.BaseStatement)):
                return ()
            if not isinstance(outer, cst.FormattedString):
                continue
            head = outer.parts[0] if outer.parts else None
            if not (isinstance(head, cst.FormattedStringText) and head.value.startswith("cuda")):
                return ()
            if i >= 2 and isinstance(ancestors[i - 1], cst.Arg) and isinstance(ancestors[i - 2], cst.Call):
                return (ancestors[i - 2],)
            return (outer,)
        return ()

    def _argument_problem(self, node: cst.CSTNode, move: ApiMove) -> str:
        parent = self.context.parent
        if not (isinstance(parent, cst.Call) and parent.func is node):
            return ""
        for arg in parent.args:
            if arg.star == "**":
                return "`**kwargs` may name parameters the accelerator API spells differently"
            if arg.keyword is None and not move.accelerator_positional:
                return move.accelerator_note or "positional arguments change meaning"
            if arg.keyword is not None and arg.keyword.value not in move.accelerator_keywords:
                keyword = arg.keyword.value
                if keyword == "device":
                    return "torch.accelerator functions take `device_index=`, not `device=`; pass the index positionally"
                return f"the accelerator API has no `{keyword}=` parameter"
        return ""

    def _report_accelerator_gap(self, node: cst.CSTNode, move: ApiMove, message: str) -> None:
        min_torch = self.context.settings.min_torch
        if move.accelerator:
            version, name = move.accelerator[0]
            why = f"`{name}` needs torch >= {_version(version)} (min-torch is {_version(min_torch)})"
            guidance = f"Raise min-torch to {_version(version)} and use `{name}`, or keep a device-specific branch."
        else:
            why = "torch.accelerator has no equivalent"
            guidance = move.accelerator_note
        self.report(
            node,
            f"{message}; {why}",
            guidance=guidance,
            effort=Effort.LOW,
            depends=self._selects(node), needs=opened_code(self.context.ancestors, node),
        )


class _Detector(_refs_ast.AstMemberReferences):
    """``check_reference`` on CPython's ``ast`` for the neuron target, where it decides a move
    from the use alone: ``torch.cuda.X`` (through ``import torch [as th]``) used where no hold can
    apply, moved to ``torch.neuron.X`` spelled as ``spell`` spells it, with no import to add or
    drop. Everywhere else the file goes to libcst (``Unsure``):

    * a bare name (``from torch.cuda import synchronize``): its move adds ``import torch`` and may
      drop the from-import, which only libcst's fix writes;
    * a use outside ``_plain_use``'s shapes: a branch's test, a flag or value assigned, a return,
      an assert, a decorator, a boolean operand, a lambda... (``report_kernel_gate``'s positions,
      the kernel index's holds, ``selected_code``'s groups and ``_renamed_target``'s assignments
      all start there);
    * a call handed as an argument to a library outside torch (``_handed_to_library``), or as the
      ``stream=`` of a communicator's collective (``_handed_to_communicator``).

    A decided file thus holds no report with a group (``depends``/``needs``): its findings are the
    visitor's whatever other rule reports beside them."""

    members = _MEMBERS

    def __init__(self, rule: type[Rule], file, settings: Settings) -> None:  # noqa: ANN001 - python.AstFile
        super().__init__(rule, file)
        self.settings = settings

    def findings(self) -> list[Finding] | None:
        reports = self.reports()
        if reports is None:
            return None
        return [self.finding(node, message, guidance, effort, fix) for node, message, guidance, effort, fix, _ in reports]

    def check_reference(self, node: ast.Attribute | ast.Name) -> None:
        from cuda2neuron.python import Unsure

        qualified = self.ctx.qualname(node)
        move = _MOVES.get(qualified) if qualified is not None else None
        if move is None:
            return
        if not isinstance(node, ast.Attribute):
            raise Unsure("a bare name: its move adds an import")
        head = node.value
        while isinstance(head, ast.Attribute):
            head = head.value
        if not (isinstance(head, ast.Name) and "." not in (self.ctx.qualname(head) or ".")):
            raise Unsure("reached through a from-import the move may leave unused")  # import_to_drop
        if not self._plain_use(node) and not self._guards_moves_only(node, qualified):
            raise Unsure("a use a hold or a group may apply to")
        message = f"`{qualified}` is CUDA-only"
        target = move.neuron_name
        note = move.neuron_note
        spelled = _refs_ast.spelled(self.ctx.scope, target)
        ancestors = tuple(self.ctx.ancestors)
        if spelled is None:  # `torch` is shadowed here: nothing to write (``_move``)
            self._reports.append((node, message, f"Use `{target}` instead.", Effort.LOW, None, ancestors))
            return
        text, needs_import = spelled
        if needs_import:
            raise Unsure("the move adds an import")
        if self._binds(ancestors) and may_be_linked(self.file, node, ancestors):
            raise Unsure("a value bound to a name the program pass may link to its readers")
        self._reports.append((
            node,
            f"{message}; {note}" if note else message,
            f"Use `{target}` instead." + (f" {note}" if note else ""),
            Effort.NONE,
            self._fix(node, ancestors, text, f"use `{target}`"),
            ancestors,
        ))

    @staticmethod
    def _binds(ancestors: tuple[object, ...]) -> bool:
        """Is the use in an annotated or augmented assignment's value (``_plain_use``'s only
        bindings), which ``_flows._link_readers`` may tie to the tests that read the name?"""
        statement = next((a for a in reversed(ancestors) if isinstance(a, ast.stmt)), None)
        return isinstance(statement, (ast.AnnAssign, ast.AugAssign))

    def _fix(self, node: ast.Attribute, ancestors: tuple[object, ...], text: str, description: str) -> Fix:
        """The visitor's fix, the whole reference (its own parentheses included) replaced by
        ``text``, noted for the span path where the written bounds can be told (``edit``); a
        plain fix elsewhere, which the span path leaves to libcst."""
        from cuda2neuron.python import Unsure, written_bounds

        try:
            start, end = written_bounds(self.file, node, ancestors)
            return self.edit(node, ancestors, start, end - start, text, Safety.SAFE, description)
        except Unsure:
            return Fix(Safety.SAFE, text, description)

    def _guards_moves_only(self, node: ast.Attribute, qualified: str) -> bool:
        """``if torch.cuda.is_available():`` in front of nothing but moved calls
        (``torch.cuda.empty_cache()``), in a module whose kernel index is provably empty
        (``kernel_free``): no kernel gate can apply (``guarded_kernel`` asks the index for every
        shape but a return, an assignment, a named package's branch and a CUDA build, none of
        which this is), and the group the move forms with its branch (``selected_code``) holds
        only this rule's safe moves, as every call in the branch is one (``_BRANCH_CALLS``, names
        no other rule reports; their arguments are names or numbers, no literal a group could
        strand). The branch's statements are visited after the test and decided by
        ``_plain_use`` in their turn."""
        if qualified != "torch.cuda.is_available":
            return False
        ancestors = self.ctx.ancestors
        if len(ancestors) < 2:
            return False
        call, branch = ancestors[-1], ancestors[-2]
        if not (isinstance(call, ast.Call) and call.func is node and not call.args and not call.keywords):
            return False
        if not (isinstance(branch, ast.If) and branch.test is call):
            return False
        if not all(self._moved_call(stmt, numbers=False) for stmt in branch.body):
            return False
        for anc in reversed(ancestors[:-2]):
            if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                break
            if isinstance(anc, ast.If) and any(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in ast.walk(anc.test)):
                return False  # a package's branch chosen by its dotted name (`_named_package_branch`)
        if kernel_free(self.file, self.settings):
            return True
        # The index may hold something: the gate asks it for the first kernel call of the test,
        # the branch and its ``else`` (``index.first_call``), which finds none where there is no
        # ``else``, no argument is a name (``_FirstCall`` looks each one up), and the moved
        # calls' head (``torch``) is bound by its plain import alone: every key of the index is
        # a name the file binds (an import, an assignment or a dotted target, a function, a
        # class) or a torch spelling of a CUDA-only member, and none is then a prefix of
        # ``torch.cuda.X``.
        head = node.value
        while isinstance(head, ast.Attribute):
            head = head.value
        return (
            not branch.orelse
            and all(self._moved_call(stmt, numbers=True) for stmt in branch.body)
            and isinstance(head, ast.Name)
            and self._bound_by_plain_import(head.id)
        )

    def _bound_by_plain_import(self, name: str) -> bool:
        """Does the file bind ``name`` nowhere but by ``import torch [as name]`` (or ``import
        torch.utils.checkpoint``, which the index reads as ``import torch``: ``kernels._imported``),
        and is that import one the index records nothing for (``kernel_free._plain``)?"""
        if not plain_import("torch", self.settings):
            return False
        for n in ast.walk(self.file.tree):
            if isinstance(n, ast.Import):
                if any(
                    (a.asname or a.name.split(".")[0]) == name
                    and not (a.name.split(".")[0] == "torch" and (a.asname is None or a.name == "torch"))
                    for a in n.names
                ):
                    return False
            elif isinstance(n, ast.ImportFrom):
                if any((a.asname or a.name) == name for a in n.names):
                    return False
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if n.name == name:
                    return False
            elif isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, (ast.Store, ast.Del)):
                # A dotted target is a key only for what is spelled through it: `torch.cuda.X`
                # is reached through `torch`, `torch.cuda` and itself, not `torch.backends...`.
                parts: list[str] = []
                root = n
                while isinstance(root, ast.Attribute):
                    parts.insert(0, root.attr)
                    root = root.value
                if isinstance(root, ast.Name) and root.id == name and parts[:1] in ([], ["cuda"]):
                    return False
        return True

    def _moved_call(self, stmt: ast.stmt, numbers: bool) -> bool:
        """Is ``stmt`` ``torch.cuda.X(a, 0)``, an expression statement calling a move of
        ``_BRANCH_CALLS`` with names and numbers only (``numbers``: numbers only)?"""
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            return False
        call = stmt.value
        if call.keywords or not isinstance(call.func, ast.Attribute):
            return False
        move = _MOVES.get(self.ctx.qualname(call.func) or "")
        if move is None or move.name not in _BRANCH_CALLS:
            return False
        return all(
            (isinstance(a, ast.Name) and not numbers) or (isinstance(a, ast.Constant) and isinstance(a.value, (int, float)))
            for a in call.args
        )

    def _plain_use(self, node: ast.Attribute) -> bool:
        """Is ``node`` used where neither a device test's hold nor a group applies: up to its
        statement only calls (of it, or given it as an argument), attribute reads, subscripts and
        arithmetic, in an expression statement, an augmented or annotated assignment's value, a
        ``with`` item or a ``for`` loop's iterable? Those are no gate position
        (``kernel_gates._gate_position``: decorators, asserts, assignments, returns and branch
        tests), no test a branch depends on (``_branches._deciding``, ``_short_circuited``), no
        assignment target (``_renamed_target``); a call of ``node`` given to another call is
        handed on only to torch, the standard library or the project (``_handed_to_library``)."""
        from cuda2neuron.python import ArgNode

        ancestors = self.ctx.ancestors
        child: object = node
        for i in range(len(ancestors) - 1, -1, -1):
            anc = ancestors[i]
            if isinstance(anc, ArgNode):
                if isinstance(child, ast.Call) and child.func is node:
                    outer = ancestors[i - 1]
                    if foreign_callee(self.ctx.call_qualname(outer), self.settings) is not None:  # type: ignore[arg-type]
                        return False
                    method = outer.func.attr if isinstance(outer.func, ast.Attribute) else getattr(outer.func, "id", None)  # type: ignore[union-attr]
                    if communicator_stream(anc.keyword, method, self.ctx.call_qualname(outer)):  # type: ignore[arg-type]
                        return False
            elif isinstance(anc, ast.Call):
                pass  # its callee (``child`` is ``func``) or, through ``ArgNode``, an argument
            elif isinstance(anc, (ast.Attribute, ast.Subscript)):
                if anc.value is not child and not (isinstance(anc, ast.Subscript) and anc.slice is child):
                    return False
            elif isinstance(anc, ast.BinOp):
                pass
            elif isinstance(anc, ast.Expr):
                return True
            elif isinstance(anc, (ast.AugAssign, ast.AnnAssign)):
                return anc.value is child
            elif isinstance(anc, ast.withitem):
                if anc.context_expr is not child:
                    return False
            elif isinstance(anc, (ast.With, ast.AsyncWith)):
                return True
            elif isinstance(anc, (ast.For, ast.AsyncFor)):
                return anc.iter is child
            else:
                return False
            child = anc
        return False
