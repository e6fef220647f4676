"""CN103: comparisons of a device with "cuda"."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.engine import Effort, Invalid, Rule, Safety, Valid

from ._device_util import (
    UseKind,
    comparison_safety,
    find_use,
    is_bare_prefix,
    looks_like_cuda_fstring,
    retarget_fstring,
    retarget_string,
)

__all__ = ["CudaDeviceComparison"]

_GUIDANCE = (
    "this test picks a code path written for CUDA; if the branch calls CUDA-only code (custom "
    "kernels, Triton, cuDNN tricks) keep its fallback for Neuron, otherwise compare with "
    '"neuron" (apply with --unsafe-fixes)'
)


class CudaDeviceComparison(Rule):
    """
    ## What it does
    Rewrites the "cuda" side of tests on a device (``==``, ``!=``, ``in``, ``startswith``,
    ``replace``). For example ``x.device.type == "cuda"``, ``device == "cuda"``,
    ``device != "cuda:0"``, ``"cuda" in device``, ``device in ("cuda", "mps")``,
    ``device.startswith("cuda")``, ``str(device).replace("cuda:", "")`` — when the other side
    is named like a device (``device``, ``device_type``, ``args.device``, ``x.device.type``,
    ``str(x.device)``).

    ## Why is this bad?
    Once placement says ``"neuron"``, a test for ``"cuda"`` is always false: pinned memory,
    fused optimizers, autocast device types and synchronisation chosen by it silently take the
    CPU path. LLM trainers derive ``device_type = "cuda" if "cuda" in device else "cpu"`` and
    feed it to autocast (trap 1): the string in the test and the default must change together.

    ## Example
    ```python
    device_type = "cuda" if "cuda" in device else "cpu"
    pin = x.device.type == "cuda"
    ```
    becomes
    ```python
    device_type = "neuron" if "neuron" in device else "cpu"
    pin = x.device.type == "neuron"
    ```

    ## Fix safety
    Safe when the test selects *data* (it is assigned, passed, returned, or picks between two
    plain values or data moves such as ``t.to(rank) if ... else t``). Unsafe when it selects *code* — the test of an ``if``/``while`` or of a
    conditional expression with computed branches: ``if x.device.type == "cuda": fused(x)``
    often guards a CUDA-only kernel with a pure-PyTorch fallback, and the fallback is what must
    run on Neuron (trap 12). Those are reported with guidance and rewritten only with
    ``--unsafe-fixes``. Tests of the bare ``"cuda:"`` prefix are input parsing and always safe,
    so ``spec.startswith("cuda:")`` and ``spec[len("cuda:"):]`` change together. Comparisons with a name that does not say device
    (``impl in ["ref", "cuda"]``) are never touched.
    """

    code = "CN103"
    name = "cuda-device-comparison"
    triggers = ("cuda",)
    emits = ("torch.accelerator.current_accelerator",)
    VALID = (
        'assert impl in ["ref", "cuda"]\n',
        'if args.backend == "cuda":\n    pass\n',
        'if kernel == "cuda":\n    pass\n',
        'print("cuda" in message)\n',
        'if name.startswith("cuda"):\n    pass\n',
        'n = len("cuda")\n',
        'pin = x.device.type == "neuron"\n',
        "import torch\nis_acc = x.device.type == torch.accelerator.current_accelerator().type\n",
        'device = "cuda"\n',  # a placement: CN102
    )
    INVALID = (
        Invalid('pin = x.device.type == "cuda"\n', 'pin = x.device.type == "neuron"\n'),
        Invalid('on_gpu = device == "cuda"\n', 'on_gpu = device == "neuron"\n'),
        Invalid('ok = "cuda:0" != args.device\n', 'ok = "neuron:0" != args.device\n'),
        Invalid('use_fused = "cuda" in device\n', 'use_fused = "neuron" in device\n'),
        Invalid('is_gpu = str(x.device).startswith("cuda")\n', 'is_gpu = str(x.device).startswith("neuron")\n'),
        Invalid('gpu = device in ("cuda", "mps")\n', 'gpu = device in ("neuron", "mps")\n'),
        Invalid('index = int(device.replace("cuda:", ""))\n', 'index = int(device.replace("neuron:", ""))\n'),
        # The bare prefix is a device prefix on any receiver; both literals change together.
        Invalid(
            'if spec.startswith("cuda:"):\n    spec = spec[len("cuda:"):]\n',
            'if spec.startswith("neuron:"):\n    spec = spec[len("neuron:"):]\n',
        ),
        Invalid('spec = spec.removeprefix("cuda:")\n', 'spec = spec.removeprefix("neuron:")\n'),
        Invalid(
            "batch = [t.to(rank) if t.device.type != 'cuda' else t for t in batch]\n",
            "batch = [t.to(rank) if t.device.type != 'neuron' else t for t in batch]\n",
        ),
        Invalid(
            'device_type = "cuda" if "cuda" in device else "cpu"\n',
            'device_type = "cuda" if "neuron" in device else "cpu"\n',
        ),
        Invalid("x = dict(pin_memory=device_type == 'cuda')\n", "x = dict(pin_memory=device_type == 'neuron')\n"),
        Invalid(
            'if x.device.type == "cuda":\n    y = fused_kernel(x)\n',
            'if x.device.type == "neuron":\n    y = fused_kernel(x)\n',
            unsafe=True,
        ),
        Invalid('while not device.startswith("cuda"):\n    pass\n', None),
        Invalid(
            'y = fused(x) if x.device.type == "cuda" else slow(x)\n',
            'y = fused(x) if x.device.type == "neuron" else slow(x)\n',
            unsafe=True,
        ),
        Invalid(
            'import torch\npin = x.device.type == "cuda"\n',
            "import torch\npin = x.device.type == torch.accelerator.current_accelerator().type\n",
            target="accelerator",
        ),
    )

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if "cuda" not in node.value:  # cheap test before any walking
            return
        built = retarget_string(self, node)
        if built is not None:
            self._report(node, built)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        if not looks_like_cuda_fstring(node):
            return
        built = retarget_fstring(self, node)
        if built is not None:
            self._report(node, built)

    def _report(self, node: cst.BaseExpression, built: tuple[cst.BaseExpression, tuple]) -> None:
        use = find_use(self, node)
        if use is None or use.kind is not UseKind.COMPARISON:
            return
        replacement, imports = built
        # Parsing a "cuda:" prefix off user input is string handling, not a CUDA code path; its
        # test and its slice (spec[len("cuda:"):]) must change together, so both are safe.
        safety = Safety.SAFE if is_bare_prefix(node) else comparison_safety(use)
        self.report(
            node,
            f"`{self.context.code(use.user)}` checks a device against \"cuda\"",
            replacement=replacement,
            safety=safety,
            imports=imports,
            guidance="" if safety is Safety.SAFE else _GUIDANCE,
            effort=Effort.NONE if safety is Safety.SAFE else Effort.LOW,
            description="test for the target device",
        )
