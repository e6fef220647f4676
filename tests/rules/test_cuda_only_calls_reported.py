"""The kernel gates count torch's CUDA-only calls (``kernels.TORCH_CUDA_ONLY_CALLS``) as code that
must not run on Neuron; each of them must also be reported where it is called, or a gate would
keep a test CUDA in front of a call the report never names (CN202 / CN624, and CN211 for the
caching-allocator controls). One row per name."""

from __future__ import annotations

import pytest

from cuda2neuron.rules._shared.kernels import TORCH_CUDA_ONLY_CALLS
from cuda2neuron.workspace import lint_source


@pytest.mark.parametrize("qualified", sorted(TORCH_CUDA_ONLY_CALLS))
def test_each_cuda_only_call_is_reported(qualified):
    findings = lint_source(f"import torch\nx = {qualified}()\n", "m.py")
    assert any(f.span.start_line == 2 and f.code in ("CN202", "CN211", "CN624") for f in findings), findings
