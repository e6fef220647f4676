"""CN622: ONNX Runtime's CUDA and TensorRT execution providers."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule

from .._shared.kernels import CUDA_PROVIDERS
from .._shared.strings import string_value

__all__ = ["OnnxRuntimeCudaProvider"]


_GUIDANCE = (
    "ONNX Runtime has no execution provider for Trainium: an InferenceSession asked for this "
    "provider falls back to the CPU (or fails when the list has no CPU entry). Run the PyTorch "
    'model on the neuron device instead (torch.compile(model, backend="neuron")), or list '
    '"CPUExecutionProvider" if the ONNX path is only a reference.'
)


class OnnxRuntimeCudaProvider(Rule):
    """
    ## What it does
    Reports ONNX Runtime's ``"CUDAExecutionProvider"`` and ``"TensorrtExecutionProvider"``
    wherever the code names them: ``providers=[...]`` of an ``InferenceSession``, a
    ``provider=`` argument of a pipeline loader, a check against
    ``onnxruntime.get_available_providers()``.

    ## Why is this bad?
    Both providers run on NVIDIA GPUs only. On Trainium the session runs on the CPU, or refuses
    to start, while the rest of the port runs on the neuron device.

    ## Example
    ```python
    session = ort.InferenceSession(path, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    ```
    is reported: run the model with PyTorch on the neuron device, or keep ONNX Runtime on the CPU.

    ## Fix safety
    Display only: whether the ONNX path should move to PyTorch or stay on the CPU is the user's call.
    """

    code = "CN622"
    name = "onnxruntime-cuda-provider"
    triggers = ("ExecutionProvider",)
    VALID = (
        'session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])\n',
        'def f():\n    """Pass "CUDAExecutionProvider" to run on a GPU."""\n',
    )
    INVALID = (
        Invalid('session = ort.InferenceSession(path, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])\n'),
        Invalid('pipe = OnnxStableDiffusionPipeline.from_pretrained(repo, provider="CUDAExecutionProvider")\n'),
        Invalid('if "TensorrtExecutionProvider" in ort.get_available_providers():\n    pass\n', target="accelerator"),
    )

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if "ExecutionProvider" not in node.value:
            return
        value = string_value(node)
        if value not in CUDA_PROVIDERS:
            return
        parent = self.context.parent
        if isinstance(parent, cst.Expr):
            return  # a docstring
        self.report(node, f'ONNX Runtime\'s "{value}" runs on NVIDIA GPUs only', guidance=_GUIDANCE, effort=Effort.LOW)
