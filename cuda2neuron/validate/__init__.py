"""`cuda2neuron validate`: run the original and the port side by side and compare them.

The engine returns a frozen `ValidationResult` and prints nothing: `build_request` turns options
and the project's `[tool.cuda2neuron.validate]` table into a `ValidateRequest`,
`run_validation(request, on_progress=...)` runs it. The command and its output live in
`cuda2neuron.cli._validate`. Importing this package does not import torch: the runs happen in
subprocesses, and the parent imports torch lazily when it compares tensors.
"""

from __future__ import annotations

from cuda2neuron.validate._model import (
    CpuOpFinding,
    Divergence,
    EditFinding,
    HandEdit,
    ResidencyAudit,
    RunFailure,
    RunInfo,
    TensorComparison,
    Tolerances,
    ValidationResult,
    Verdict,
)
from cuda2neuron.validate._request import RequestError, ValidateRequest, build_request

__all__ = [
    "CpuOpFinding",
    "Divergence",
    "EditFinding",
    "HandEdit",
    "RequestError",
    "ResidencyAudit",
    "RunFailure",
    "RunInfo",
    "TensorComparison",
    "Tolerances",
    "ValidateRequest",
    "ValidationResult",
    "Verdict",
    "build_request",
    "run_validation",
]


def __getattr__(name: str):
    # Lazy: the runner imports torch (for the comparisons); `cuda2neuron --help` must not.
    if name == "run_validation":
        from cuda2neuron.validate import _runner

        return getattr(_runner, name)
    raise AttributeError(name)
