"""The differences the OpInfo sweep found, one test each: CPU's kernel (and so CPU's values and
dtypes) where a composite used to run, readable zero gradients and conjugate views (they
segfaulted), and a clear error for sparse tensors (the device has none)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F


def _both(fn, *cpu_args):
    dev_args = [a.to("neuron") if isinstance(a, torch.Tensor) else a for a in cpu_args]
    return fn(*cpu_args), fn(*dev_args)


def _same(cpu, dev) -> None:
    cpu = cpu if isinstance(cpu, (tuple, list)) else (cpu,)
    dev = dev if isinstance(dev, (tuple, list)) else (dev,)
    for c, d in zip(cpu, dev, strict=True):
        assert d.device.type == "neuron"
        assert (d.dtype, d.shape, d.stride()) == (c.dtype, c.shape, c.stride())
        assert torch.equal(d.cpu(), c)


x_bf16 = torch.randn(4, 6, 8, generator=torch.Generator().manual_seed(0)).bfloat16()
q = torch.randn(2, 3, 5, 8, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize(
    ("fn", "args"),
    [
        pytest.param(lambda t: torch.native_layer_norm(t, (8,), None, None, 1e-5), (x_bf16,),
                     id="native_layer_norm-bf16-mean-rstd-dtype"),
        pytest.param(lambda t: F.layer_norm(t, (8,)), (x_bf16,), id="layer_norm-bf16"),
        pytest.param(lambda t: F.group_norm(t, 2), (x_bf16,), id="group_norm-bf16"),
        pytest.param(lambda t: F.scaled_dot_product_attention(t, t, t), (q,), id="sdpa-float32"),
        pytest.param(lambda t: F.scaled_dot_product_attention(t, t, t, is_causal=True), (q,), id="sdpa-causal"),
        pytest.param(lambda t: t.add(1.5), (x_bf16,), id="structured-add"),
    ],
)
def test_runs_the_cpu_kernel(fn, args) -> None:
    cpu, dev = _both(fn, *args)
    _same(cpu, dev)


def test_native_layer_norm_statistics_keep_the_input_dtype() -> None:
    _, mean, rstd = torch.native_layer_norm(x_bf16.to("neuron"), (8,), None, None, 1e-5)
    assert mean.dtype == rstd.dtype == torch.bfloat16  # the composite returned float32


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(torch.sgn, id="sgn"),
        pytest.param(lambda t: torch.polar(t, t).abs(), id="polar"),
        pytest.param(torch.sign, id="sign"),
    ],
)
def test_zero_gradients_are_readable(fn) -> None:
    # These backward formulas return an efficient zero tensor (no memory): reading it segfaulted.
    t = torch.rand(5, device="neuron", requires_grad=True)
    (g,) = torch.autograd.grad(fn(t).sum(), t)
    assert g.device.type == "neuron"
    tc = t.detach().cpu().requires_grad_()
    (gc,) = torch.autograd.grad(fn(tc).sum(), tc)
    assert torch.equal(g.cpu(), gc)


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(torch.fft.ifft, id="fft.ifft"),
        pytest.param(torch.fft.hfft, id="fft.hfft"),
        pytest.param(torch.fft.ihfft, id="fft.ihfft"),
        pytest.param(torch.conj, id="conj"),
        pytest.param(lambda t: torch.view_as_complex(torch.stack([t, t], -1)).conj().resolve_conj(),
                     id="resolve_conj"),
    ],
)
def test_conjugate_views_copy_without_recursion(fn) -> None:
    t = torch.randn(6, generator=torch.Generator().manual_seed(2))
    cpu, dev = _both(fn, t)
    c, d = torch.view_as_real(cpu.resolve_conj()) if cpu.is_complex() else cpu, dev.cpu()
    d = torch.view_as_real(d.resolve_conj()) if d.is_complex() else d
    assert torch.equal(c, d)


_i = torch.tensor([[0, 1], [1, 0]])
_v = torch.tensor([1.0, 2.0])


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: torch.sparse_coo_tensor(_i, _v, (2, 2), device="neuron"), id="sparse_coo_tensor"),
        pytest.param(lambda: torch.sparse_coo_tensor(_i, _v, (2, 2)).to("neuron"), id="to-neuron"),
        pytest.param(lambda: torch.empty(2, 2, layout=torch.sparse_coo, device="neuron"), id="empty-sparse"),
        pytest.param(lambda: torch.eye(2, device="neuron").to_sparse(), id="to_sparse-of-a-device-tensor"),
        pytest.param(lambda: torch.eye(2, device="neuron").to_sparse_csr(), id="to_sparse_csr-of-a-device-tensor"),
        # A CSR tensor can be moved (its constructor builds it without a sparse op); its first op refuses it.
        pytest.param(lambda: torch.eye(2).to_sparse_csr().to("neuron").to_dense(), id="csr-moved-then-used"),
    ],
)
def test_sparse_tensors_are_refused_clearly(make) -> None:
    # PyTorch's own "Cannot access storage of SparseTensorImpl" (to_sparse) says nothing useful.
    with pytest.raises(NotImplementedError, match=r"^neuron: .*(sparse|Sparse).* not supported on the device"):
        make()


@pytest.mark.parametrize(
    ("shape", "error"),
    [
        pytest.param((), "2D tensor expected, got 0D tensor for input", id="0d-self"),
        pytest.param((2,), "2D tensor expected, got 1D tensor for input", id="1d-self"),
        pytest.param((1, 2), r"size mismatch, input: \[1, 2\], v1: \[3\], v2: \[2\]",
                     id="2d-self-to-broadcast"),
    ],
)
def test_addr_inplace_refuses_what_cpu_refuses(shape, error) -> None:
    # addr_ hands its self to the kernel twice (as input and out); the boxed fallback used to see
    # two tensors, broadcast self and resize it in place where CPU raises.
    vec1, vec2 = torch.arange(3.0), torch.arange(2.0)
    for device in ("cpu", "neuron"):
        with pytest.raises(RuntimeError, match=error):
            torch.ones(shape, device=device).addr_(vec1.to(device), vec2.to(device))


def test_addr_inplace_still_computes() -> None:
    vec1, vec2 = torch.arange(3.0), torch.arange(2.0)
    cpu = torch.ones(3, 2).addr_(vec1, vec2, beta=2, alpha=0.5)
    dev = torch.ones(3, 2, device="neuron").addr_(vec1.to("neuron"), vec2.to("neuron"), beta=2, alpha=0.5)
    _same(cpu, dev)
