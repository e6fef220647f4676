"""torch.save of neuron tensors; torch.load with map_location and weights_only=True."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


def _model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))


@pytest.mark.parametrize("map_location,expected", [("neuron", "neuron:0"), ("cpu", "cpu"), (None, "neuron:0"),
                                                   ("neuron:1", "neuron:1")])
def test_state_dict_round_trip(tmp_path: Path, map_location, expected):
    model = _model().to("neuron")
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "step": 3}, path)
    loaded = torch.load(path, map_location=map_location, weights_only=True)
    assert loaded["step"] == 3
    for key, value in model.state_dict().items():
        got = loaded["model"][key]
        assert str(got.device) == expected
        torch.testing.assert_close(got.cpu(), value.cpu())


def test_device_index_is_kept(tmp_path: Path):
    t = torch.arange(5.0, device="neuron:1")
    torch.save(t, tmp_path / "t.pt")
    back = torch.load(tmp_path / "t.pt", weights_only=True)
    assert back.device == torch.device("neuron", 1)
    torch.testing.assert_close(back.cpu(), torch.arange(5.0))


def test_cpu_checkpoint_loads_onto_device_and_trains_on(tmp_path: Path):
    torch.manual_seed(0)
    cpu_model = _model()
    torch.save(cpu_model.state_dict(), tmp_path / "cpu.pt")
    dev_model = _model().to("neuron")
    dev_model.load_state_dict(torch.load(tmp_path / "cpu.pt", map_location="neuron", weights_only=True))
    opt = torch.optim.SGD(dev_model.parameters(), lr=0.1)
    loss = dev_model(torch.randn(8, 4, device="neuron")).sum()
    loss.backward()
    opt.step()
    state = {"model": dev_model.state_dict(), "opt": opt.state_dict()}
    torch.save(state, tmp_path / "dev.pt")
    again = torch.load(tmp_path / "dev.pt", map_location="cpu", weights_only=True)
    torch.testing.assert_close(again["model"]["0.weight"], dev_model[0].weight.detach().cpu())


def test_shared_views_stay_shared(tmp_path: Path):
    base = torch.arange(6.0, device="neuron")
    torch.save({"a": base, "b": base[2:]}, tmp_path / "v.pt")
    back = torch.load(tmp_path / "v.pt", map_location="neuron", weights_only=True)
    back["a"][3] = 100
    assert back["b"][1].item() == 100
