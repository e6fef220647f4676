from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

PROJECTS = Path(__file__).parent / "projects"
REPO = Path(__file__).resolve().parents[2]


def port_device() -> str:
    """"neuron" once the emulated device is in this build; "cpu" (test-only redirect) before.

    Override with CUDA2NEURON_VALIDATE_TEST_PORT_DEVICE.
    """
    forced = os.environ.get("CUDA2NEURON_VALIDATE_TEST_PORT_DEVICE")
    if forced:
        return forced
    try:
        from cuda2neuron import backend
    except ImportError:
        return "cpu"
    if not hasattr(backend, "activate"):
        return "cpu"
    try:
        return "neuron" if backend.is_available() else "cpu"
    except Exception:  # noqa: BLE001 - no compiler etc.: fall back to the redirect
        return "cpu"


PORT_DEVICE = port_device()
needs_emulator = pytest.mark.skipif(PORT_DEVICE != "neuron", reason="needs the emulated neuron device")


def copy_with_patches(src: Path, dst: Path, patches: tuple[tuple[str, str, str], ...]) -> Path:
    """Copy a tree and apply (file, old, new) replacements; each `old` must occur exactly once."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    for rel, old, new in patches:
        path = dst / rel
        text = path.read_text()
        assert text.count(old) == 1, f"patch target not unique in {rel}: {old!r}"
        path.write_text(text.replace(old, new))
    return dst
