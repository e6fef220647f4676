"""CN625: Hugging Face weight quantization that runs only on NVIDIA GPUs (bitsandbytes and others)."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule

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
                    f"`{last}` selects {row.what}, which needs an NVIDIA GPU (it imports {row.package})",
                    guidance=_GUIDANCE,
                    effort=Effort.MEDIUM,
                    ancestors=(*self.context.ancestors, node),
                )
                return  # its own load_in_* arguments are part of this report
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in _SHORTCUTS and not _off(arg.value):
                self.report(
                    arg,
                    f"`{arg.keyword.value}=` quantizes the weights with bitsandbytes, whose kernels need an NVIDIA GPU",
                    guidance=_GUIDANCE,
                    effort=Effort.MEDIUM,
                )
