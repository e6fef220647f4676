"""`cuda2neuron validate`: run the original and the port side by side and compare them.

The engine returns a frozen `ValidationResult`; only the CLI command (`_command.py`) prints.
Importing this package does not import torch: the runs happen in subprocesses, and the parent
imports torch lazily when it compares tensors.
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

__all__ = [
    "CpuOpFinding",
    "Divergence",
    "EditFinding",
    "HandEdit",
    "ResidencyAudit",
    "RunFailure",
    "RunInfo",
    "TensorComparison",
    "Tolerances",
    "ValidateRequest",
    "ValidationResult",
    "Verdict",
    "run_validation",
]


def __getattr__(name: str):
    # Lazy: the runner imports torch (for the comparisons); `cuda2neuron --help` must not.
    if name in ("ValidateRequest", "run_validation"):
        from cuda2neuron.validate import _runner

        return getattr(_runner, name)
    raise AttributeError(name)
