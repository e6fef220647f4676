"""Helpers of the container / cluster / CI rules (CN76x)."""

from __future__ import annotations

from ..config._helpers import CONFIG_KINDS

__all__ = ["INFRA_KINDS", "key_start"]

# Compose, Kubernetes and CI files are YAML; a JSON Kubernetes manifest reads the same.
INFRA_KINDS = CONFIG_KINDS


def key_start(s) -> int:  # noqa: ANN001 - a documents.structured.Scalar
    """Where a finding on a mapping value starts: at its key when it has one."""
    return s.key_start if s.key_start >= 0 else s.start
