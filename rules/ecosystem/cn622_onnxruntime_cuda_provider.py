"""CN622: ONNX Runtime's CUDA and TensorRT execution providers."""

from __future__ import annotations

import ast

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Settings

from .._shared.ast_names import one_literal
from .._shared.consumers import receiving_call
from .._shared.detector import AstDetector
from .._shared.kernels import CUDA_PROVIDER_SHORT_NAMES, CUDA_PROVIDERS, ONNXRUNTIME_PACKAGES
from .._shared.packages import imports_package
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
    ``onnxruntime.get_available_providers()``; and their short names (``"cuda"``,
    ``"tensorrt"``) where a call of ONNX Runtime (GenAI) receives them, the call's receiver
    resolved (``config = og.Config(path)`` then ``config.append_provider("cuda")``): there
    ``"cuda"`` is ONNX Runtime's provider, not torch's device, and CN109 leaves it to this rule.

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
    triggers = ("ExecutionProvider", "onnxruntime")
    VALID = (
        'session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])\n',
        # "cuda" handed to a call that is not ONNX Runtime's
        'import onnxruntime_genai as og\n\ndef f(path, model):\n    config = og.Config(path)\n    model.to("cuda")\n',
        'import onnxruntime_genai as og\n\ndef f(path):\n    config = og.Config(path)\n    config.append_provider("dml")\n',
        'def f():\n    """Pass "CUDAExecutionProvider" to run on a GPU."""\n',
    )
    INVALID = (
        Invalid('session = ort.InferenceSession(path, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])\n'),
        Invalid('pipe = OnnxStableDiffusionPipeline.from_pretrained(repo, provider="CUDAExecutionProvider")\n'),
        Invalid('if "TensorrtExecutionProvider" in ort.get_available_providers():\n    pass\n', target="accelerator"),
        # ONNX Runtime GenAI's short provider names, the receiver resolved through its binding
        Invalid('import onnxruntime_genai as og\n\ndef f(path):\n    config = og.Config(path)\n    config.append_provider("cuda")\n'),
        Invalid('import onnxruntime_genai as og\nog.Config(path).set_provider_option("cuda", "device_id", "0")\n'),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """The full names on CPython's ``ast`` (``_Detector``): each string literal whose text
        holds "ExecutionProvider" and whose value is a CUDA provider, docstrings aside. The short
        names are a gate: a call resolved into ONNX Runtime must receive them, which takes an
        absolute import of it; where the file has one and a string that may be a short name,
        unsure (libcst runs)."""
        text = file.text
        if "onnxruntime" in text and imports_package(file.tree, tuple(ONNXRUNTIME_PACKAGES)) and _short_names(file):
            return None
        if "ExecutionProvider" not in text:
            return []
        return _Detector(cls, file).made_findings()

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if "ExecutionProvider" not in node.value:
            self._short_name(node)
            return
        value = string_value(node)
        if value not in CUDA_PROVIDERS:
            return
        parent = self.context.parent
        if isinstance(parent, cst.Expr):
            return  # a docstring
        self.report(node, f'ONNX Runtime\'s "{value}" runs on NVIDIA GPUs only', guidance=_GUIDANCE, effort=Effort.LOW)

    def _short_name(self, node: cst.SimpleString) -> None:
        if "onnxruntime" not in self.context.source:  # cheap: almost no file imports it
            return
        value = string_value(node)
        if value is None or value.lower() not in CUDA_PROVIDER_SHORT_NAMES:
            return
        callee = receiving_call(self, node)
        if callee is None or callee.split(".")[0] not in ONNXRUNTIME_PACKAGES:
            return
        self.report(
            node, f'`{self.context.code(node)}` handed to `{callee}` names ONNX Runtime\'s {value} execution provider, which runs on NVIDIA GPUs only',
            guidance=_GUIDANCE, effort=Effort.LOW,
        )


def _short_names(file) -> bool:  # noqa: ANN001 - python.AstFile
    """Could a string literal of ``file`` be a short provider name (``"cuda"``)? A literal whose
    value is one, or a concatenation or f-string whose value holds one (a part may be it)."""
    for node in ast.walk(file.tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value.lower()
            if value in CUDA_PROVIDER_SHORT_NAMES:
                return True
            if any(n in value for n in CUDA_PROVIDER_SHORT_NAMES) and not one_literal(file, node):
                return True
        elif isinstance(node, ast.JoinedStr):
            if any(isinstance(v, ast.Constant) and any(n in str(v.value).lower() for n in CUDA_PROVIDER_SHORT_NAMES) for v in node.values):
                return True
    return False


class _Detector(AstDetector):
    """``visit_SimpleString``'s full names on ``ast``: unsure at a concatenation or an f-string
    whose text holds "ExecutionProvider" (libcst reports each literal part alone)."""

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        if "ExecutionProvider" in self._text(node):
            from cuda2neuron.python import Unsure

            raise Unsure("an f-string beside a provider's name")

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str) or "ExecutionProvider" not in self._text(node):
            return
        if not one_literal(self.file, node):
            from cuda2neuron.python import Unsure

            raise Unsure("a provider's name in a concatenation")
        if node.value in CUDA_PROVIDERS and not isinstance(self.ctx.parent, ast.Expr):
            self._reports.append((node, node.value, tuple(self.ctx.ancestors)))

    def _text(self, node: ast.AST) -> str:
        start, end = self.file.bounds(node)
        return self.file.text[start:end]

    def _finding(self, node: ast.AST, value: str, ancestors: tuple) -> Finding:
        return self.finding(node, f'ONNX Runtime\'s "{value}" runs on NVIDIA GPUs only', _GUIDANCE, Effort.LOW)
