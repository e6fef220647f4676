"""RNN handling on the emulated device (filled in once the probe shows what fails)."""

from __future__ import annotations

__all__ = ["install"]


def install() -> None:
    return None
