"""Errors of the emulated neuron device."""

from __future__ import annotations

__all__ = ["BackendUnavailable"]


class BackendUnavailable(RuntimeError):
    """The emulated neuron device cannot be activated in this process (and why)."""
