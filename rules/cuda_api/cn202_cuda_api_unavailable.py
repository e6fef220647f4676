"""CN202: ``torch.cuda`` APIs with no TorchNeuron equivalent, reported with what to do instead."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Settings, Valid

from . import _refs_ast
from ._helpers import MemberReferences
from ._refs_ast import name_parts, written_names

__all__ = ["CudaApiUnavailable"]


@dataclass(frozen=True)
class _Gap:
    why: str
    guidance: str
    effort: Effort


_GRAPHS = _Gap(
    "CUDA graphs are not in TorchNeuron's initial release",
    "Run the captured region eagerly, or compile it with `torch.compile(model, backend=\"neuron\", "
    "fullgraph=True)`, which removes most launch overhead the graph was saving; delete the "
    "capture/replay code (static input buffers, warm-up streams).",
    Effort.HIGH,
)

_GAPS: dict[str, _Gap] = {
    "torch.cuda.get_device_capability": _Gap(
        "Neuron devices have no CUDA compute capability",
        "Branches on the capability pick CUDA kernels or dtypes by GPU generation: on Trainium take "
        "the bfloat16 path (Trn2 supports it) and drop the check, or test "
        "`x.device.type == \"neuron\"` instead.",
        Effort.LOW,
    ),
    "torch.cuda.mem_get_info": _Gap(
        "TorchNeuron has no mem_get_info()",
        "Estimate free memory as `torch.neuron.get_device_properties(i).total_memory - "
        "torch.neuron.memory_reserved(i)`.",
        Effort.LOW,
    ),
    "torch.cuda.ipc_collect": _Gap(
        "CUDA IPC memory has no Neuron counterpart",
        "Remove the call: Neuron tensors are not shared through CUDA IPC handles.",
        Effort.LOW,
    ),
    "torch.cuda.get_arch_list": _Gap(
        "the list of CUDA architectures torch was built for means nothing on Neuron",
        "Drop the check; use `torch.neuron.is_available()` to test for the device.",
        Effort.LOW,
    ),
    "torch.version.cuda": _Gap(
        "a Neuron build of torch has no CUDA version (`torch.version.cuda` is None)",
        "Branches on the CUDA version take their non-CUDA path on Trainium; test "
        "`torch.neuron.is_available()` if the branch is about the device, or remove it.",
        Effort.LOW,
    ),
    # fairseq's NAT models wrap host-side loops in it. On a neuron (or CPU) tensor it selects
    # device -1, a no-op, so the block still runs: only what relied on the tensor's CUDA device
    # being current (an index-less torch.cuda call, a CUDA extension launch) changes.
    "torch.cuda.device_of": _Gap(
        "TorchNeuron has no device_of(); on a neuron tensor torch.cuda.device_of selects no device",
        "Write `with torch.neuron.device(t.device.index):` (with `--target accelerator`, "
        "`torch.accelerator.device_index(t.device.index)`, torch >= 2.8) where calls in the block "
        "need the tensor's device to be current; where the block only runs host code on CPU "
        "tensors, drop the `with`.",
        Effort.LOW,
    ),
    "torch.cuda.CUDAGraph": _GRAPHS,
    "torch.cuda.graph": _GRAPHS,
    "torch.cuda.graphs.graph": _GRAPHS,
    "torch.cuda.make_graphed_callables": _GRAPHS,
    "torch.cuda.graphs.make_graphed_callables": _GRAPHS,
    "torch.cuda.graph_pool_handle": _GRAPHS,
    "torch.cuda.is_current_stream_capturing": _GRAPHS,
    # The same names through their defining module (`torch.cuda.graphs.graph_pool_handle()`).
    "torch.cuda.graphs.CUDAGraph": _GRAPHS,
    "torch.cuda.graphs.graph_pool_handle": _GRAPHS,
    "torch.cuda.graphs.is_current_stream_capturing": _GRAPHS,
    # Inductor's CUDA graph trees (compile mode "reduce-overhead"): diffusers' pipelines call it
    # before each denoising step of a compiled UNet.
    **dict.fromkeys(
        (
            "torch.compiler.cudagraph_mark_step_begin",
            "torch._inductor.cudagraph_mark_step_begin",
            "torch._inductor.cudagraph_trees.cudagraph_mark_step_begin",
        ),
        _Gap(
            "it marks a new iteration for inductor's CUDA graphs, which the neuron backend never records",
            "Remove the call on the Trainium path (it has nothing to mark there), or keep it behind "
            "`if torch.cuda.is_available():` for the GPU run.",
            Effort.LOW,
        ),
    ),
    # The memory pool of inductor's CUDA graph trees (torchtitan's graph trainer captures into it).
    "torch._inductor.cudagraph_trees._use_cuda_memory_pool_manager": _GRAPHS,
    # gpt-fast calls it before profiling a compiled decode step: it warms the profiler up for CUDA
    # graph capture (CUPTI), which a Trainium host has neither of.
    "torch.profiler._utils._init_for_cuda_graphs": _Gap(
        "it prepares torch's CUDA profiler for CUDA graph capture, neither of which exists on Trainium",
        "Remove the call on the Trainium path; profile with the Neuron profiler.",
        Effort.LOW,
    ),
}
_MEMBERS = frozenset(q.rpartition(".")[2] for q in _GAPS)
_GAP_PARTS = name_parts(_GAPS)


class CudaApiUnavailable(MemberReferences, Rule):
    """
    ## What it does
    Reports ``torch.cuda`` APIs with no TorchNeuron equivalent, each with what to write instead.
    They are ``get_device_capability``, ``mem_get_info``, ``ipc_collect``, ``get_arch_list``,
    ``torch.version.cuda``, ``device_of`` and CUDA graphs (``CUDAGraph``, ``graph``, ``make_graphed_callables``,
    inductor's ``torch.compiler.cudagraph_mark_step_begin``, the profiler's
    ``torch.profiler._utils._init_for_cuda_graphs``).

    ## Why is this bad?
    These calls raise or return meaningless values on Trainium, and code that branches on them
    (hardware sniffing such as ``get_device_capability()[0] >= 8``) silently takes the wrong path.

    ## Example
    ```python
    if torch.cuda.get_device_capability()[0] >= 8:
        dtype = torch.bfloat16
    g = torch.cuda.CUDAGraph()
    ```
    Both lines are reported: the first with "take the bfloat16 path and drop the check", the
    second with "run eagerly or compile with `torch.compile(backend=\\"neuron\\")`".

    ## Fix safety
    Display only: there is no mechanical replacement; each finding carries guidance and an effort
    estimate (CUDA graph code is high effort: its static buffers and capture streams go too).
    """

    code = "CN202"
    name = "cuda-api-unavailable"
    members = _MEMBERS
    triggers = ("cuda",)
    VALID = (
        "import torch\ntorch.neuron.get_device_properties(0).total_memory\n",
        # The project's own version module: it only shares the name, so it stays.
        "from myproject import version\nprint(version.cuda)\n",
        # A member of some other object.
        "from torch.cuda import graph\nplan.graph()\n",
        Valid("import torch\nn = torch.accelerator.device_count()\n", target="accelerator"),
        "import torch\ntorch.cuda.synchronize()\n",  # moved by CN201, not reported here
    )
    INVALID = (
        Invalid("import torch\nif torch.cuda.get_device_capability()[0] >= 8:\n    pass\n"),
        Invalid("import torch as th\nfree, total = th.cuda.mem_get_info()\n"),
        Invalid("import torch\ntorch.cuda.ipc_collect()\n"),
        Invalid("import torch\nprint(torch.version.cuda)\n"),
        Invalid("import torch\nwith torch.cuda.device_of(tokens):\n    ids = tokens.tolist()\n"),
        Invalid("from torch.cuda import device_of\nwith device_of(x):\n    pass\n", target="accelerator"),
        Invalid("import torch\ng = torch.cuda.CUDAGraph()\n"),
        Invalid("from torch.cuda import make_graphed_callables\nm = make_graphed_callables(m, (x,))\n"),
        Invalid("import torch\nwith torch.cuda.graph(g):\n    y = m(x)\n"),
        Invalid("import torch\npool = torch.cuda.graphs.graph_pool_handle()\n"),
        Invalid("import torch\narchs = torch.cuda.get_arch_list()\n", target="accelerator"),
        Invalid("import torch\nfor t in steps:\n    torch._inductor.cudagraph_mark_step_begin()\n    y = unet(x)\n"),
        Invalid("import torch\ntorch.compiler.cudagraph_mark_step_begin()\n", target="accelerator"),
        Invalid("import torch\ntorch.profiler._utils._init_for_cuda_graphs()\n"),
        Invalid(
            "from torch._inductor.cudagraph_trees import _use_cuda_memory_pool_manager\n"
            "with _use_cuda_memory_pool_manager(device, pool, stream):\n    run()\n"
        ),
    )

    def check_reference(self, node: cst.Attribute | cst.Name) -> None:
        qualified = self.qualname(node)
        gap = _GAPS.get(qualified) if qualified is not None else None
        if gap is None:
            return
        self.report(node, f"`{qualified}`: {gap.why}", guidance=gap.guidance, effort=gap.effort)

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        if not written_names(file.text, _GAP_PARTS):
            return []
        return _Detector(cls, file).findings()


class _Detector(_refs_ast.AstMemberReferences):
    """The visits above (``MemberReferences``'s) on CPython's ``ast``: every finding is a report
    with no fix, no group and no hold, so the detector decides every file the walk can read."""

    members = _MEMBERS

    def findings(self) -> list[Finding] | None:
        reports = self.reports()
        if reports is None:
            return None
        return [self.finding(node, message, gap.guidance, gap.effort) for node, message, gap, _ in reports]

    def check_reference(self, node: ast.Attribute | ast.Name) -> None:
        qualified = self.ctx.qualname(node)
        gap = _GAPS.get(qualified) if qualified is not None else None
        if gap is not None:
            self._reports.append((node, f"`{qualified}`: {gap.why}", gap, tuple(self.ctx.ancestors)))
