"""Optimizers on their default (foreach) path give CPU's parameters after several steps."""

from __future__ import annotations

import pytest
import torch

OPTIMIZERS = {
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
    "rmsprop": lambda p: torch.optim.RMSprop(p, lr=0.01),
    "adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1),
}


def _train(device: str, make_opt) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).to(device)
    opt = make_opt(model.parameters())
    data = torch.randn(16, 6)
    target = torch.randn(16, 2)
    for _ in range(4):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(data.to(device)), target.to(device))
        loss.backward()
        opt.step()
    return [p.detach().cpu() for p in model.parameters()]


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_matches_cpu(name):
    for dev, ref in zip(_train("neuron", OPTIMIZERS[name]), _train("cpu", OPTIMIZERS[name])):
        torch.testing.assert_close(dev, ref, atol=1e-5, rtol=1e-5)


def test_default_path_is_foreach():
    from torch.optim.optimizer import _default_to_fused_or_foreach

    p = [torch.zeros(2, device="neuron", requires_grad=True)]
    fused, foreach = _default_to_fused_or_foreach(p, differentiable=False, use_fused=False)
    # torch lists the PrivateUse1 backend among the foreach devices: the tests above ran foreach.
    assert fused is False and foreach is True
