"""Per-run settings that change what rules emit (not which rules run)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AMP_DTYPES", "RunOptions", "Settings", "TARGETS"]

AMP_DTYPES = ("bfloat16", "float16")
TARGETS = ("neuron", "accelerator")


@dataclass(frozen=True)
class Settings:
    # "neuron" emits TorchNeuron names; "accelerator" emits device-agnostic torch.accelerator code.
    target: str = "neuron"
    # dtype emitted for autocast; bf16 is what AWS recommends and needs no loss scaling.
    amp_dtype: str = "bfloat16"
    # Oldest torch the user's code must run on (accelerator target gates names by it).
    min_torch: tuple[int, int] = (2, 9)

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(f"unknown target {self.target!r}; expected one of {', '.join(TARGETS)}")
        if self.amp_dtype not in AMP_DTYPES:
            raise ValueError(
                f"unknown amp dtype {self.amp_dtype!r}; expected one of {', '.join(AMP_DTYPES)}"
            )


@dataclass(frozen=True)
class RunOptions:
    """What one run does with the fixes it finds (settings say what rules emit; these, what is
    written): ``fix`` applies safe fixes, ``unsafe`` also the unsafe ones."""

    fix: bool = False
    unsafe: bool = False

    @classmethod
    def from_config(cls, config, *, fix: bool) -> RunOptions:  # noqa: ANN001 - Config, a peer module
        return cls(fix=fix, unsafe=fix and config.unsafe_fixes)
