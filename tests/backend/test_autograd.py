"""Autograd on the device matches CPU."""

from __future__ import annotations

import pytest
import torch

FUNCS = {
    "mlp": lambda x, w: torch.tanh(x @ w).pow(2).sum(),
    "softmax_ce": lambda x, w: torch.nn.functional.cross_entropy(x @ w, torch.tensor([0, 1, 2, 1]).to(x.device)),
    "layer_norm": lambda x, w: torch.nn.functional.layer_norm(x @ w, (3,)).exp().mean(),
    "indexing": lambda x, w: (x[:, 1:] @ w[1:]).relu().sum(),
    "gelu_dropout0": lambda x, w: torch.nn.functional.dropout(torch.nn.functional.gelu(x @ w), 0.0).sum(),
}


@pytest.mark.parametrize("name", list(FUNCS))
def test_gradients_match_cpu(name):
    x = torch.randn(4, 5)
    w = torch.randn(5, 3)
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    xd, wd = x.to("neuron").requires_grad_(), w.to("neuron").requires_grad_()
    FUNCS[name](xc, wc).backward()
    out = FUNCS[name](xd, wd)
    out.backward()
    assert wd.grad.device.type == "neuron"
    torch.testing.assert_close(wd.grad.cpu(), wc.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, atol=1e-5, rtol=1e-5)


def test_autograd_grad_and_retain_graph():
    x = torch.randn(3, device="neuron", requires_grad=True)
    y = (x * x).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    (gg,) = torch.autograd.grad(g.sum(), x)
    torch.testing.assert_close(gg.cpu(), torch.full((3,), 2.0))
