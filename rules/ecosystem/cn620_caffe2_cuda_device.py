"""CN620: a Caffe2 export that places ops on CUDA (``caffe2_pb2.CUDA``, the GPU copy ops)."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Settings, Valid

__all__ = ["Caffe2CudaDevice"]

# Caffe2's CUDA device type and the two ops that move a blob across it, as detectron2's Caffe2
# export (detectron2/export/shared.py, caffe2_export.py) spells them.
_CONSTRUCTS = {
    "caffe2.proto.caffe2_pb2.CUDA": "Caffe2's CUDA device type",
    "torch.ops._caffe2.CopyGPUToCPU": "Caffe2's CUDA-to-host copy op",
    "torch.ops._caffe2.CopyCPUToGPU": "Caffe2's host-to-CUDA copy op",
}
_MEMBERS = frozenset(q.rpartition(".")[2] for q in _CONSTRUCTS)
_GUIDANCE = (
    "Caffe2 has no Neuron device (and recent PyTorch releases no longer ship Caffe2): run the Caffe2 "
    "export on CPU, where these CUDA branches are not taken (model and inputs on \"cpu\", "
    "`caffe2_pb2.CPU` device options), or export with `torch.export` / ONNX instead. Keep the "
    "CUDA branch for exports made on a GPU."
)
# A branch test that picks the CUDA side by a device name or flag: `src.type == "cuda"`,
# `devices[0] == "cuda"`, `t.is_cuda`.
_CUDA_TEST = m.SimpleString(value=m.MatchIfTrue(lambda v: v[1:-1].lower().startswith("cuda"))) | m.Attribute(
    attr=m.Name("is_cuda")
)


class Caffe2CudaDevice(Rule):
    """
    ## What it does
    Reports a Caffe2 export that places ops on CUDA: ``caffe2_pb2.CUDA`` device options and the
    ``torch.ops._caffe2.CopyGPUToCPU`` / ``CopyCPUToGPU`` ops. When the construct is the body of
    an ``if`` / ``elif`` branch chosen by a CUDA device test (``src.type == "cuda"``), the whole
    ``if`` statement is reported, the test with the op it guards.

    ## Why is this bad?
    Caffe2 knows CPU and CUDA devices only. On Trainium the CUDA tests read false, so a neuron
    tensor or device name reaching this code falls through to the CPU-only path or to the
    ``Can't cast tensor from device`` error, while nothing in the port said the export cannot
    target the device.

    ## Example
    ```python
    if src.type == "cuda" and dst.type == "cpu":
        return torch.ops._caffe2.CopyGPUToCPU(t)
    ```
    is reported: export on CPU, or use ``torch.export`` / ONNX.

    ## Fix safety
    No fix: the TorchNeuron target API has no Caffe2 device; which exporter the project moves to
    is the user's decision (effort low when the export can simply run on CPU).
    """

    code = "CN620"
    name = "caffe2-cuda-device"
    # The copy ops are spelled GPU, never CUDA; a Caffe2 file without the word holds no CUDA
    # construct for a port to leave behind, so the cheap word is the one to wake on.
    triggers = ("cuda", "CUDA")
    VALID = (
        "from caffe2.proto import caffe2_pb2\nopt = caffe2_pb2.DeviceOption(device_type=caffe2_pb2.CPU)\n",
        # Another library's CUDA member and the project's own op of the same name.
        "import mylib\nkind = mylib.proto.CUDA\n",
        "def CopyGPUToCPU(t):\n    return t.cpu()\nif t.is_cuda:\n    t = CopyGPUToCPU(t)\n",
        Valid("import torch\nx = torch.ops._caffe2.AliasWithName(x, 'out')\n", target="accelerator"),
    )
    INVALID = (
        Invalid(
            "from caffe2.proto import caffe2_pb2\nfrom caffe2.python import core\n"
            "opt = core.DeviceOption(caffe2_pb2.CUDA, 0)\n"
        ),
        # The device test goes with the op it guards: the whole if/elif chain is reported once.
        Invalid(
            "import torch\n"
            "def to_device(t, name):\n"
            "    src, dst = t.device, torch.device(name)\n"
            "    if src == dst:\n"
            "        return t\n"
            "    elif src.type == 'cuda' and dst.type == 'cpu':\n"
            "        return torch.ops._caffe2.CopyGPUToCPU(t)\n"
            "    elif src.type == 'cpu' and dst.type == 'cuda':\n"
            "        return torch.ops._caffe2.CopyCPUToGPU(t)\n"
        ),
        Invalid(
            "from caffe2.proto import caffe2_pb2 as pb\nif devices[0] == 'cuda':\n"
            "    op.device_option.CopyFrom(core.DeviceOption(pb.CUDA, 0))\n",
            target="accelerator",
        ),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """A gate: no finding where the text never writes ``caffe2`` (every name of
        ``_CONSTRUCTS`` is reached through an import or an attribute chain that spells it:
        ``caffe2.proto``, ``torch.ops._caffe2``), unsure elsewhere (libcst runs)."""
        return [] if "caffe2" not in file.text else None

    def visit_Module(self, node: cst.Module) -> None:
        # One report per anchor: both copy ops of one if/elif chain point at the same statement.
        self._anchors: set[int] = set()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value not in _MEMBERS:
            return
        qualified = self.qualname(node)
        what = _CONSTRUCTS.get(qualified) if qualified is not None else None
        if what is None:
            return
        anchor = self._cuda_branch(node)
        if anchor is None:
            self.report(node, f"`{qualified}` is {what}: the Caffe2 export targets CUDA", guidance=_GUIDANCE)
            return
        if id(anchor) in self._anchors:
            return
        self._anchors.add(id(anchor))
        self.report(
            anchor,
            f"`{qualified}` is {what}, chosen by a CUDA device test: the Caffe2 export targets CUDA",
            guidance=_GUIDANCE,
            ancestors=self.context.chain_above(anchor),
        )

    def _cuda_branch(self, node: cst.CSTNode) -> cst.If | None:
        """The top of the if/elif chain whose CUDA-testing branch holds ``node``, if any.

        Only the innermost statement counts: an op under a `with` or a loop inside the branch is
        reported where it stands.
        """
        chain = self.context.ancestors
        child: cst.CSTNode = node
        for i in range(len(chain) - 1, -1, -1):
            parent = chain[i]
            if isinstance(parent, cst.If) and child is parent.body:
                if not m.findall(parent.test, _CUDA_TEST):
                    return None
                # Climb elif links: an `elif` is the `orelse` of the If above it.
                while i > 0 and isinstance(chain[i - 1], cst.If) and chain[i - 1].orelse is chain[i]:
                    i -= 1
                return chain[i]  # type: ignore[return-value]
            if isinstance(parent, (cst.BaseCompoundStatement, cst.Module)):
                return None
            child = parent
        return None
