"""Helpers of the YAML config rules (CN73x)."""

from __future__ import annotations

from cuda2neuron.core import Effort, TextReport

__all__ = ["CONFIG_EXAMPLE", "report_value"]


# The path the examples use: config kinds are matched by path.
CONFIG_EXAMPLE = "config/train.yaml"


def report_value(entry, message: str, settings, neuron_value: str, description: str, accelerator_guidance: str) -> TextReport:
    """The value rewritten on the neuron target; reported with guidance on the accelerator target."""
    if settings.target == "neuron":
        return TextReport(
            entry.start, entry.end, message,
            replacement=f"{entry.quote}{neuron_value}{entry.quote}",
            description=description,
        )
    return TextReport(entry.start, entry.end, message, guidance=accelerator_guidance, effort=Effort.LOW)

