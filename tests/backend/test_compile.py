"""torch.compile(backend="neuron") runs (aot_eager); inductor on neuron tensors fails clearly."""

from __future__ import annotations

import pytest
import torch


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2))


def test_compiled_forward_backward_matches_eager():
    torch._dynamo.reset()
    model = _model().to("neuron")
    compiled = torch.compile(model, backend="neuron")
    x = torch.randn(4, 8, device="neuron")
    out = compiled(x)
    ref = model(x)
    torch.testing.assert_close(out.cpu(), ref.cpu())
    out.sum().backward()
    assert model[0].weight.grad.device.type == "neuron"


def test_fullgraph_function():
    torch._dynamo.reset()

    @torch.compile(backend="neuron", fullgraph=True)
    def f(a, b):
        return torch.softmax(a @ b, dim=-1)

    a, b = torch.randn(3, 4, device="neuron"), torch.randn(4, 5, device="neuron")
    torch.testing.assert_close(f(a, b).cpu(), torch.softmax(a.cpu() @ b.cpu(), dim=-1))


def test_compiled_attention_matches_eager():
    """Tracing asks the device which fused attention kernel to use with fake tensors (gpt-fast's
    decode step): the answer must not build real tensors under the fake mode."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    q, k = torch.randn(1, 4, 1, 16, device="neuron"), torch.randn(1, 4, 32, 16, device="neuron")
    mask = torch.ones(1, 1, 1, 32, dtype=torch.bool, device="neuron")

    def f(q, k, v, mask):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0)

    compiled = torch.compile(f, backend="neuron", fullgraph=True)(q, k, k, mask)
    torch.testing.assert_close(compiled.cpu(), f(q, k, k, mask).cpu())
    torch._dynamo.reset()


def test_inductor_on_neuron_fails_with_a_clear_message():
    torch._dynamo.reset()
    f = torch.compile(lambda a: a * 2 + 1)
    with pytest.raises(Exception, match='backend="neuron"'):
        f(torch.randn(3, device="neuron"))
    torch._dynamo.reset()
