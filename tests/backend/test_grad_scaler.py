"""torch.amp.GradScaler("neuron"): unscale, inf/nan detection, skipped steps, scale updates."""

from __future__ import annotations

import pytest
import torch


def _setup():
    model = torch.nn.Linear(3, 1).to("neuron")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("neuron", init_scale=1024.0, growth_interval=1)
    return model, opt, scaler


def test_normal_step_updates_and_grows_scale():
    model, opt, scaler = _setup()
    before = model.weight.detach().cpu().clone()
    loss = model(torch.randn(4, 3, device="neuron")).sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert not torch.equal(model.weight.detach().cpu(), before)
    assert scaler.get_scale() == 2048.0


@pytest.mark.parametrize("bad", [float("inf"), float("nan")], ids=["inf", "nan"])
def test_step_is_skipped_on_non_finite_grads(bad):
    model, opt, scaler = _setup()
    before = model.weight.detach().cpu().clone()
    loss = model(torch.randn(4, 3, device="neuron")).sum()
    scaler.scale(loss).backward()
    model.weight.grad[0, 0] = bad
    scaler.step(opt)
    scaler.update()
    torch.testing.assert_close(model.weight.detach().cpu(), before)
    assert scaler.get_scale() == 512.0


def test_unscale_gives_true_gradients():
    model, opt, scaler = _setup()
    x = torch.randn(4, 3)
    model(x.to("neuron")).sum().mul(1.0).backward()
    ref = model.weight.grad.cpu().clone()
    opt.zero_grad()
    scaler.scale(model(x.to("neuron")).sum()).backward()
    scaler.unscale_(opt)
    torch.testing.assert_close(model.weight.grad.cpu(), ref)
