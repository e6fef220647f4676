"""CN739: a config that builds an object from a CUDA-only package by its dotted path."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, TextReport, Valid

from ..._shared.kernels import OWN_RULE_PACKAGES, kernel_packages
from .._helpers import TextRule
from ._helpers import CONFIG_EXAMPLE, CONFIG_KINDS

__all__ = ["ConfigCudaOnlyComponent"]

# A whole value that is a dotted Python path (`bitsandbytes.optim.PagedAdamW`): what torchtune's
# `_component_:`, Hydra's `_target_:` and jsonargparse's `class_path:` import and build.
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
# What the packages with a rule of their own (CN601-CN613) are replaced by, for the message;
# the other packages' rows say it themselves (cuda_kernels.toml `instead`).
_INSTEAD = {
    "bitsandbytes": "torch.optim.AdamW for its optimizers (bf16 weights on Trainium); unquantized bf16 layers for its modules",
    "apex": "torch.optim.AdamW for FusedAdam, torch.nn.LayerNorm / RMSNorm for its fused norms",
    "flash_attn": "torch.nn.functional.scaled_dot_product_attention",
    "xformers": "torch.nn.functional.scaled_dot_product_attention",
    "triton": "plain PyTorch ops, or an NKI kernel",
}


def _package(dotted: str) -> tuple[str, str] | None:
    """(the CUDA-only package ``dotted`` lives in, what to use instead), or None."""
    rows = kernel_packages()
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):  # the last part is the object the config builds
        module = ".".join(parts[:i])
        if module in rows:
            return module, rows[module].instead
        if module in OWN_RULE_PACKAGES:
            return module, _INSTEAD.get(module, "plain PyTorch ops")
    return None


class ConfigCudaOnlyComponent(TextRule):
    """
    ## What it does
    Reports a config value that is the dotted path of an object in a CUDA-only package
    (bitsandbytes, apex, flash_attn, xformers, triton, and the packages of
    ``rules/_shared/cuda_kernels.toml``: liger_kernel, transformer_engine, mamba_ssm, ...):
    torchtune's ``_component_: bitsandbytes.optim.PagedAdamW``, Hydra's ``_target_:``,
    jsonargparse's ``class_path:``.

    ## Why is this bad?
    The program imports the path and builds the object from it, so the config chooses the CUDA
    package without any word of CUDA: the run stops at the import on Trainium (torchtune's
    single-device configs pick bitsandbytes' paged optimizers to save GPU memory).

    ## Example
    ```yaml
    optimizer:
      _component_: bitsandbytes.optim.PagedAdamW8bit
      lr: 2e-5
    ```
    is reported: point it at ``torch.optim.AdamW``.

    ## Fix safety
    Report only: the replacement changes the optimizer's memory and numerics, or the layer's.
    """

    code = "CN739"
    name = "config-cuda-only-component"
    file_kinds = CONFIG_KINDS
    # The import names' words the config prefilter knows ("flash", "transformer", "nvml", ...).
    triggers = (
        "bitsandbytes", "apex.", "flash_attn", "xformers.", "triton.", "liger_kernel.", "transformer_engine.",
        "mamba_ssm.", "causal_conv1d.", "flashinfer.", "sageattention.", "deepspeed.ops",
    )
    VALID = (
        Valid("optimizer:\n  _component_: torch.optim.AdamW\n  fused: True\n", path=CONFIG_EXAMPLE),
        Valid("description: uses bitsandbytes.optim.PagedAdamW for memory\n", path=CONFIG_EXAMPLE),
        Valid("package: bitsandbytes\n", path=CONFIG_EXAMPLE),  # a name, not a path to build
        Valid("optimizer:\n  _component_: mylib.bitsandbytes.Adam\n", path=CONFIG_EXAMPLE),
    )
    INVALID = (
        # torchtune's low-memory single-device configs
        Invalid("optimizer:\n  _component_: bitsandbytes.optim.PagedAdamW8bit\n  lr: 1e-5\n", path="recipes/configs/8B_full_single_device.yaml"),
        Invalid("model:\n  norm:\n    _target_: apex.normalization.FusedRMSNorm\n", path="conf/model.yaml"),
        Invalid('{"loss": {"class_path": "liger_kernel.transformers.LigerCrossEntropyLoss"}}\n', path="cfg.json"),
    )

    @classmethod
    def check_text(cls, doc, settings) -> list[TextReport]:
        out = []
        for s in doc.scalars:
            value = s.value.strip()
            if not _DOTTED.fullmatch(value):
                continue
            found = _package(value)
            if found is None:
                continue
            package, instead = found
            out.append(TextReport(
                s.start, s.end,
                f"`{value}` is built from {package}, a CUDA-only package",
                guidance=f"on Trainium use {instead}", effort=Effort.LOW,
            ))
        return out
