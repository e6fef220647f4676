"""CN110: a test gated on a number of CUDA GPUs (Lightning's ``RunIf(min_cuda_gpus=N)``)."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule

__all__ = ["CudaTestGate"]

# The keyword of Lightning's test gate (`RunIf`, `_runif_reasons`), which projects forward
# through helpers of their own (litgpt's `_RunIf(**kwargs)`): no call of it takes another sense.
_KEYWORD = "min_cuda_gpus"
_GUIDANCE = (
    "On Trainium this test is skipped: the gate counts CUDA GPUs. If it should run on Neuron, "
    "gate it on the target instead (a condition of your own such as "
    "`torch.neuron.device_count() >= N`); if it tests CUDA-only code, leave it."
)


class CudaTestGate(Rule):
    """
    ## What it does
    Reports tests gated on a number of CUDA GPUs: ``@RunIf(min_cuda_gpus=1)`` and
    ``_runif_reasons(min_cuda_gpus=2)`` (Lightning's test helpers), also through a project's
    own wrapper that forwards the keyword (litgpt's ``@_RunIf(min_cuda_gpus=1)``) or in a list
    of marks (``pytest.param(..., marks=[_RunIf(min_cuda_gpus=1)])``).

    ## Why is this bad?
    The gate counts CUDA GPUs, and a Neuron host has none: every such test is skipped on
    Trainium without a word, so the tests that exercise the accelerator path are the ones the
    port never runs.

    ## Example
    ```python
    @RunIf(min_cuda_gpus=2, standalone=True)
    def test_fsdp_checkpoint(tmp_path): ...
    ```
    is reported: gate it on the neuron device count, or keep it for CUDA-only code.

    ## Fix safety
    Report only: Lightning's gate has no keyword for the neuron device, and whether a test
    belongs on Neuron is the project's decision.
    """

    code = "CN110"
    name = "cuda-test-gate"
    triggers = (_KEYWORD,)
    VALID = (
        "from tests.helpers import RunIf\n@RunIf(min_torch='2.1')\ndef test_x():\n    pass\n",
        # The option's name in a table or a string is not a gate.
        'options = {"min_cuda_gpus": "RUN_ONLY_CUDA_TESTS"}\n',
        "def _runif_reasons(min_cuda_gpus=0):\n    return []\n",  # its definition
    )
    INVALID = (
        Invalid("from tests.helpers import RunIf\n@RunIf(min_cuda_gpus=2, standalone=True)\ndef test_x():\n    pass\n"),
        Invalid(
            "import pytest\nfrom pkg.utils import _RunIf\n"
            "@pytest.mark.parametrize('d', [pytest.param('cuda', marks=[_RunIf(min_cuda_gpus=1)])])\n"
            "def test_y(d):\n    pass\n"
        ),
        Invalid("from lightning.fabric.utilities.testing import _runif_reasons\nreasons, kw = _runif_reasons(min_cuda_gpus=1)\n"),
    )

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is None or node.keyword.value != _KEYWORD:
            return
        if isinstance(node.value, cst.Integer) and node.value.evaluated_value == 0:
            return  # `min_cuda_gpus=0`: no GPU asked for
        self.report(
            node,
            f"`{_KEYWORD}={self.context.code(node.value)}` skips this test on Trainium: the gate counts CUDA GPUs",
            guidance=_GUIDANCE,
            effort=Effort.LOW,
        )
