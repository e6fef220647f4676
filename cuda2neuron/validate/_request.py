"""What to validate: a frozen `ValidateRequest`, and the rules that build one from the options a
caller gives and the project's `[tool.cuda2neuron.validate]` table (explicit options win).

Torch-free: a bad request is refused before anything is imported or run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda2neuron.validate._model import Tolerances
from cuda2neuron.validate._trees import Trees

__all__ = ["RequestError", "ValidateRequest", "build_request"]

# Defaults when neither an option nor the config table gives a value (docs/validate.md).
DEFAULT_STEPS = 3
DEFAULT_TIMEOUT = 600.0
DEFAULT_SEED = 0


@dataclass(frozen=True)
class ValidateRequest:
    original: Path
    port: Path
    mode: str  # entry | script
    entry: str | None = None
    script: str | None = None
    args: tuple[str, ...] = ()
    steps: int = DEFAULT_STEPS
    timeout: float = DEFAULT_TIMEOUT
    seed: int = DEFAULT_SEED
    golden: bool = True
    port_device: str = "neuron"  # "cpu" only for tests that run without the emulator
    tolerances: Tolerances = field(default_factory=Tolerances)
    original_label: str = ""
    port_label: str = ""

    @property
    def target(self) -> str:
        return self.entry or " ".join([self.script or "", *self.args]).strip()


class RequestError(ValueError):
    """A request that cannot run. ``option`` names the option at fault when one is (``"--tolerance"``)."""

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


def build_request(
    trees: Trees,
    table: Mapping[str, Any],
    *,
    entry: str | None = None,
    script: str | None = None,
    args: tuple[str, ...] = (),
    steps: int | None = None,
    timeout: float | None = None,
    seed: int | None = None,
    tolerances: Mapping[str, float] | None = None,
    golden: bool = True,
    port_device: str = "neuron",
) -> ValidateRequest:
    """The request for ``trees``; ``None`` options fall back to ``table``, then to the defaults.

    The mode comes from the table only when neither ``entry`` nor ``script`` is given, and the
    table's ``args`` only when no ``args`` are given.
    """
    if entry and script:
        raise RequestError("--entry and --script are exclusive")
    if not entry and not script:
        entry, script = table.get("entry"), table.get("script")
        if not args:
            args = tuple(table.get("args", ()))
        if entry and script:
            raise RequestError("[tool.cuda2neuron.validate] sets both entry and script; pick one")
    if not entry and not script:
        raise RequestError("give --entry module:callable or --script train.py "
                           "(or set entry/script in [tool.cuda2neuron.validate])")
    if args and not script:
        raise RequestError("arguments after -- are for --script only")
    try:
        tol = Tolerances().with_overrides(**{**table.get("tolerances", {}), **(tolerances or {})})
    except ValueError as exc:
        raise RequestError(str(exc), option="--tolerance") from None
    return ValidateRequest(
        original=trees.original, port=trees.port, mode="entry" if entry else "script", entry=entry, script=script,
        args=tuple(args), steps=steps or int(table.get("steps", DEFAULT_STEPS)),
        timeout=timeout or float(table.get("timeout", DEFAULT_TIMEOUT)),
        seed=seed if seed is not None else int(table.get("seed", DEFAULT_SEED)), golden=golden,
        port_device=port_device, tolerances=tol, original_label=trees.original_label, port_label=trees.port_label,
    )
