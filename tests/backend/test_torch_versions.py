"""Which torch the emulator accepts, and what it says about the torch TorchNeuron ships for."""

from __future__ import annotations

import pytest

from cuda2neuron.backend import torch_support_note
from cuda2neuron.backend._registration import unsupported_torch


@pytest.mark.parametrize(
    ("version", "warned"),
    [
        pytest.param("2.10.0+cpu", True, id="2.10-no-torchneuron"),
        pytest.param("2.12.1", True, id="2.12-no-torchneuron"),
        pytest.param("2.13.0+cpu", False, id="2.13-torch-neuronx-2.13.3"),
        pytest.param("2.14.1", False, id="2.14-torch-neuronx-2.14.3"),
    ],
)
def test_validate_warns_where_no_public_torchneuron_exists(version, warned):
    note = torch_support_note(version)
    assert (note is not None) == warned
    if warned:
        assert f"torch {version} has no public TorchNeuron release" in note and "2.13 or 2.14" in note


@pytest.mark.parametrize(
    ("version", "says"),
    [
        pytest.param("2.15.0", "No TorchNeuron release supports torch 2.15 yet", id="2.15-newer"),
        pytest.param("2.9.1", "torch-neuronx ships for torch 2.13 and 2.14", id="2.9-older"),
    ],
)
def test_unsupported_torch_names_the_ranges(version, says):
    message = unsupported_torch(version)
    assert "supports torch >= 2.10 and < 2.15" in message and f"this environment has torch {version}" in message
    assert says in message and "install torch 2.14 or 2.13" in message


def test_build_refuses_torch_2_15_before_compiling(monkeypatch):
    import importlib.metadata

    import cuda2neuron.backend as backend
    from cuda2neuron.backend import _build

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "2.15.0" if name == "torch" else "0")
    monkeypatch.setattr(_build, "cached_library", lambda: pytest.fail("looked for a build"))
    with pytest.raises(backend.BackendUnavailable, match="No TorchNeuron release supports torch 2.15 yet"):
        backend.build()
