"""CN625: Hugging Face weight quantization that runs only on NVIDIA GPUs (bitsandbytes and others)."""

from __future__ import annotations

import ast

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Settings

from .._shared.detector import AstDetector
from .._shared.kernels import quantization_configs
from .._shared.names import call_qualname, terminal_name

__all__ = ["GpuQuantizationConfig"]

# The libraries that export the quantization config classes (transformers, and diffusers,
# which re-exports them); a project's own class of the same name is not one.
_LIBRARIES = ("transformers", "diffusers")
# from_pretrained's shortcuts for a BitsAndBytesConfig (deprecated in transformers 4.x, still read).
_SHORTCUTS = ("load_in_8bit", "load_in_4bit")
_GUIDANCE = (
    "No 4-/8-bit weight-quantization kernel of these libraries runs on Trainium: load the model "
    "unquantized in bfloat16 (torch_dtype=torch.bfloat16, moved to the neuron device) and keep the "
    "adapters (peft's LoRA trains on the unquantized model); the weights then take 2 bytes each"
)


_CONFIG_MESSAGE = "`{last}` selects {what}, which needs an NVIDIA GPU (it imports {package})"
_SHORTCUT_MESSAGE = "`{}=` quantizes the weights with bitsandbytes, whose kernels need an NVIDIA GPU"


def _off(value: cst.BaseExpression) -> bool:
    """``False`` / ``None`` / ``0``: the shortcut asks for nothing."""
    return (isinstance(value, cst.Name) and value.value in ("False", "None")) or (
        isinstance(value, cst.Integer) and value.value == "0"
    )


class GpuQuantizationConfig(Rule):
    """
    ## What it does
    Reports Hugging Face quantization that runs only on NVIDIA GPUs: constructing one of the
    quantization configs of the table ``[quantization_config.*]`` in
    ``rules/_shared/cuda_kernels.toml`` (``BitsAndBytesConfig``, ``GPTQConfig``, ``AwqConfig``,
    ``EetqConfig``, FP8 configs, ...) from ``transformers`` or ``diffusers``, and the
    ``load_in_8bit=`` / ``load_in_4bit=`` shortcuts of ``from_pretrained`` (and of any call that
    forwards them) unless they are ``False``.

    ## Why is this bad?
    QLoRA fine-tuning never says "cuda": ``BitsAndBytesConfig(load_in_4bit=True, ...)`` and
    ``from_pretrained(..., quantization_config=bnb_config)`` quantize the weights with
    bitsandbytes, whose kernels are CUDA-only; transformers raises "No GPU found. A GPU is needed
    for quantization." on a host without CUDA (its quantizers' ``validate_environment``).

    ## Example
    ```python
    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(name, quantization_config=bnb)
    ```
    is reported at the config: load the model in bfloat16 without a quantization config.

    ## Fix safety
    No fix: dropping the quantization multiplies the weights' memory by 4 (8 for 4-bit), a
    decision about the instance size that the user makes.
    """

    code = "CN625"
    name = "gpu-quantization-config"
    triggers = (*sorted(quantization_configs()), *_SHORTCUTS)
    VALID = (
        "from transformers import AutoModelForCausalLM\nm = AutoModelForCausalLM.from_pretrained('x', load_in_8bit=False)\n",
        "from transformers import QuantoConfig\nq = QuantoConfig(weights='int8')\n",  # runs on the host too
        "from mylib import BitsAndBytesConfig\nc = BitsAndBytesConfig()\n",  # a project's own class
        "def load(load_in_8bit=False):\n    pass\n",
    )
    INVALID = (
        Invalid("from transformers import BitsAndBytesConfig\nc = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='nf4')\n"),
        Invalid("import transformers\nc = transformers.GPTQConfig(bits=4, dataset='c4')\n"),
        Invalid("from diffusers import BitsAndBytesConfig\nc = BitsAndBytesConfig(load_in_8bit=True)\n"),
        Invalid(
            "from transformers import AutoModelForCausalLM\n"
            "m = AutoModelForCausalLM.from_pretrained('x', load_in_8bit=True, device_map='auto')\n"
        ),
        Invalid(
            "from transformers import AutoModelForCausalLM\n"
            "m = AutoModelForCausalLM.from_pretrained(args.model, load_in_4bit=args.bits == 4)\n"
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        last = terminal_name(node.func)
        rows = quantization_configs()
        if last in rows:
            qualified = call_qualname(self, node)
            if qualified is not None and qualified.split(".")[0] in _LIBRARIES and qualified.endswith("." + last):
                row = rows[last]
                self.report(
                    node,
                    _CONFIG_MESSAGE.format(last=last, what=row.what, package=row.package),
                    guidance=_GUIDANCE,
                    effort=Effort.MEDIUM,
                    ancestors=(*self.context.ancestors, node),
                )
                return  # its own load_in_* arguments are part of this report
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in _SHORTCUTS and not _off(arg.value):
                self.report(
                    arg,
                    _SHORTCUT_MESSAGE.format(arg.keyword.value),
                    guidance=_GUIDANCE,
                    effort=Effort.MEDIUM,
                )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        return _Detector(cls, file).findings()


class _Detector(AstDetector):
    """``visit_Call`` above on CPython's ``ast`` (``python/_ast_walk.py``), for files the engine
    does not parse with libcst: the same calls and ``load_in_*=`` arguments, at the same spans
    (an ``ast.keyword`` spans ``name=value``, as libcst's ``Arg`` does)."""

    def findings(self) -> list[Finding] | None:
        reports = self.reports()
        if reports is None:
            return None
        return [self.finding(node, message, _GUIDANCE, Effort.MEDIUM) for node, message, _ in reports]

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        rows = quantization_configs()
        if last in rows:
            qualified = self.ctx.call_qualname(node)
            if qualified is not None and qualified.split(".")[0] in _LIBRARIES and qualified.endswith("." + last):
                row = rows[last]
                message = _CONFIG_MESSAGE.format(last=last, what=row.what, package=row.package)
                self._reports.append((node, message, tuple(self.ctx.ancestors)))
                return
        for arg in self.ctx.args(node):
            if arg.keyword is not None and arg.keyword in _SHORTCUTS and not self._off(arg.value):
                self._reports.append((arg.source, _SHORTCUT_MESSAGE.format(arg.keyword), tuple(self.ctx.ancestors)))

    def _off(self, value: ast.expr) -> bool:
        """``_off``: ``False`` / ``None`` / an integer written ``0`` (``0x0`` is no libcst ``0``)."""
        if not isinstance(value, ast.Constant):
            return False
        if value.value is False or value.value is None:
            return True
        if type(value.value) is int and value.value == 0:
            start, end = self.file.bounds(value)
            return self.file.text[start:end] == "0"
        return False
