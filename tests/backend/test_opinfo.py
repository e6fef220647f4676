"""PyTorch's OpInfo samples on CPU and on neuron: a fixed subset in every run (the full sweep is
bench/opinfo_sweep.py; docs/backend.md has its table).

The subset is chosen by a fixed rule, not by chance: COMMON (ops every training script uses)
plus EVER_DIFFERED (every op that ever differed from CPU or aborted in a full sweep — add an op
here when the sweep finds it). All groups run in one worker subprocess (tests/backend/opinfo_driver.py),
each case in a forked child of it, so an op that kills its process is reported as an abort instead
of taking pytest down.
"""

from __future__ import annotations

import collections
import contextlib

import pytest
import torch

import opinfo_driver as drv

# Ops every training script uses (the model tests' ops: linear layers, activations, losses,
# reductions, indexing, views, optimizer arithmetic).
COMMON = {
    "pointwise": ["add", "sub", "mul", "div.no_rounding_mode", "pow", "exp", "sigmoid", "tanh", "where",
                  "clamp", "lerp", "addcmul", "masked_fill"],
    "nn": ["nn.functional.linear", "nn.functional.gelu", "nn.functional.relu", "softmax",
           "log_softmax", "nn.functional.cross_entropy", "nn.functional.embedding", "nn.functional.dropout",
           "nn.functional.conv2d", "nn.functional.mse_loss"],
    "tensor": ["sum", "mean", "amax", "matmul", "bmm", "cat", "index_select", "gather", "scatter_add",
               "transpose", "view", "reshape", "cumsum", "argmax", "topk", "_foreach_add", "_foreach_mul",
               "_foreach_lerp"],
}

# Every op that differed from CPU or aborted the process in a full sweep (docs/backend.md).
EVER_DIFFERED = {
    "norms-attention": ["nn.functional.layer_norm", "native_layer_norm", "nn.functional.group_norm",
                        "native_batch_norm", "nn.functional.scaled_dot_product_attention"],
    "complex-zero-grad": ["fft.ifft", "fft.hfft", "fft.hfft2", "fft.ihfft", "fft.ihfftn", "sgn", "polar",
                          "linalg.eig", "linalg.eigvals"],
    # in-place self twice (addr_), sparse results, undefined values, float64, CPU-named samples
    "inplace-sparse-by-design": ["addr", "to_sparse", "empty_like", "new_empty", "double", "to", "arange",
                                 "_refs.logspace", "_refs.native_layer_norm", "_refs.native_group_norm",
                                 "softmax.with_dtype", "float_power"],
    # CPU kernel vs composite (mish_backward), float64 inside (renorm backward, linspace to int64),
    # torch's own device rule (linear_cross_entropy's options), an op unstable on CPU (lstsq)
    "followup-by-design": ["nn.functional.mish", "nn.functional.silu", "renorm", "_refs.linspace.tensor_overload",
                           "nn.functional.linear_cross_entropy.chunked",
                           "nn.functional.linear_cross_entropy.chunked_none", "linalg.lstsq"],
    # float64 inside on torch 2.14 only (its quantile ranks): 5 backward float32 cases each differed
    "torch214-float64": ["quantile", "nanquantile"],
}

GROUPS = {**COMMON, **EVER_DIFFERED}


@pytest.fixture(scope="module")
def database() -> dict[str, object]:
    return drv.all_ops()


# Every group's ops and empty_like (the poisoned rerun's control) in one chunk: each worker
# subprocess spends ~4 s of CPU importing torch and OpInfo's database before its first case, and
# one per group made that ~35 of this file's ~50 CPU-s. Each case still runs in a forked child
# of it, so an abort is still one case's result, attributed to its op.
PLAIN_OPS = list(dict.fromkeys([*(op for ops in GROUPS.values() for op in ops), "empty_like"]))
_PLAIN: list[list[dict]] = []


def _group_results(ops: list[str]) -> list[dict]:
    """A group's results, from the one plain run of this process (the poisoned rerun compares
    with them). A death outside any case is recorded against the chunk's first op: the other
    groups then see ops without a case, and fail too."""
    if not _PLAIN:
        _PLAIN.append(drv.run_chunk(PLAIN_OPS))
    wanted = set(ops)
    return [r for r in _PLAIN[0] if r["op"] in wanted]


@pytest.mark.parametrize("ops", [pytest.param(ops, id=name) for name, ops in GROUPS.items()])
def test_opinfo_group_matches_cpu(ops: list[str], database: dict[str, object]) -> None:
    missing = [op for op in ops if op not in database]
    assert not missing, f"not in this torch's OpInfo database: {missing}"
    results = _group_results(ops)
    per_op = collections.Counter(r["op"] for r in results if r["index"] >= 0)
    assert set(per_op) == set(ops), f"ops without a single case: {set(ops) - set(per_op)}"
    bad = [r for r in results if r["outcome"] not in drv.AGREE and r["outcome"] != "no_samples"]
    listing = "\n".join(f"{r['op']} {r['mode']} {r['dtype']} #{r['index']}: {r['outcome']} {r['detail']}"
                        for r in bad[:30])
    assert not bad, f"{len(bad)} of {len(results)} cases differ from CPU:\n{listing}"


def _digests(results: list[dict]) -> dict[tuple[str, str, str], list[str]]:
    """Each (op, mode, dtype)'s device digests, sorted: some OpInfo sample lists come in another
    order in each process (they iterate over sets)."""
    out: dict[tuple[str, str, str], list[str]] = collections.defaultdict(list)
    for r in results:
        out[(r["op"], r["mode"], r["dtype"])].append(r["digest"])
    return {k: sorted(v) for k, v in out.items()}


def test_no_device_result_reads_memory_nobody_wrote() -> None:
    # Poisoned (every new allocation NaN bytes), a result that reads memory nobody wrote changes;
    # validate compares runs, so such a result would be a flaky verdict. empty_like's values are
    # that memory: they must change, or the poison never reached the device.
    ops = COMMON["nn"]
    plain = _digests(_group_results(ops) + _group_results(["empty_like"]))
    poisoned = _digests(drv.run_chunk([*ops, "empty_like"], env={"CUDA2NEURON_POISON": "1"}))
    assert set(plain) == set(poisoned)
    changed = sorted(k for k in plain if plain[k] != poisoned[k])
    assert [k for k in changed if k[0] == "empty_like"], "the poison did not reach the device"
    assert [k for k in changed if k[0] != "empty_like"] == []


# ---- the comparison itself can fail --------------------------------------------------------------


def _pair(kind: str) -> tuple[object, object]:
    c = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    d = c.to("neuron")
    if kind == "identical":
        return c, d
    if kind == "nan-equal":
        c = torch.tensor([float("nan"), 1.0])
        return c, c.to("neuron")
    if kind == "value":
        return c, d + 1
    if kind == "dtype":
        return c, d.to(torch.bfloat16)
    if kind == "shape":
        return c, d.reshape(3, 2)
    if kind == "strides":
        return c, d.t().contiguous().t()
    if kind == "device":
        return c, c.clone()
    if kind == "structure":
        return (c, c), (d,)
    if kind == "scalar":
        return 1.0, 2.0
    raise AssertionError(kind)


@pytest.mark.parametrize(
    ("kind", "outcome"),
    [
        pytest.param("identical", "identical", id="identical"),
        pytest.param("nan-equal", "identical", id="nan-equals-nan"),
        pytest.param("value", "mismatch", id="values"),
        pytest.param("scalar", "mismatch", id="python-scalars"),
        pytest.param("dtype", "meta", id="dtype"),
        pytest.param("shape", "meta", id="shape"),
        pytest.param("strides", "meta", id="strides"),
        pytest.param("device", "meta", id="device"),
        pytest.param("structure", "meta", id="output-structure"),
    ],
)
def test_compare_tells_every_difference(kind: str, outcome: str) -> None:
    cpu, dev = _pair(kind)
    assert drv.compare(cpu, dev, "neuron")[0] == outcome


def _f64(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


@pytest.mark.parametrize(
    ("cpu", "dev", "values", "outcome"),
    [
        # The device has no float64: a float64 result comes back as float32 (neuron-target-api.md).
        pytest.param(_f64([1.0, 1 / 3]), _f64([1.0, 1 / 3]).float(), True, "by_design", id="float64-as-float32"),
        pytest.param(_f64([1.0, 1 / 3]), torch.tensor([1.0, 0.3333]), True, "mismatch",
                     id="float64-beyond-float32-rounding"),
        pytest.param(_f64([1.0]), torch.tensor([1.0], dtype=torch.bfloat16), True, "meta", id="float64-as-bfloat16"),
        pytest.param(torch.zeros(3), torch.ones(3), False, "undefined_values", id="undefined-values-differ"),
        pytest.param(torch.zeros(3), torch.ones(2), False, "meta", id="undefined-values-shape-still-compared"),
    ],
)
def test_compare_by_design_rules(cpu, dev, values, outcome) -> None:
    dev = dev.to("neuron") if dev.dtype != torch.float64 else dev.float().to("neuron")
    assert drv.compare(cpu, dev, "neuron", values=values)[0] == outcome


# Each by-design row of the sweep, with the device behaviour behind it asserted directly, so that a
# change of the device (or of the database) fails here and not silently in the table.

def _outcomes(database, name: str, mode: str, dtype: str) -> collections.Counter:
    op = database[name]
    return collections.Counter(drv.run_case(op, mode, dtype, i, s).outcome
                               for i, s in enumerate(drv.cases(op, mode, dtype)))


def test_float64_factories_give_float32(database) -> None:
    assert torch.ones(2, dtype=torch.float64, device="neuron").dtype == torch.float32
    assert torch.arange(3, device="neuron").double().dtype == torch.float32
    got = _outcomes(database, "double", "forward", "float32")
    assert got["by_design"] > 0 and set(got) <= {"by_design", "identical"}, got


def test_logspace_reference_computes_float32_exponents(database) -> None:
    # _refs.logspace asks for float64 exponents; the device computes them as float32.
    dev = torch._refs.logspace(0, 1.2, 4, dtype=torch.float32, device="neuron").cpu()
    assert torch.equal(dev, drv.logspace_float32_steps(0, 1.2, 4, dtype=torch.float32))
    assert not torch.equal(dev, torch._refs.logspace(0, 1.2, 4, dtype=torch.float32))
    got = _outcomes(database, "_refs.logspace", "forward", "float32")
    assert got["by_design"] > 0 and got["mismatch"] == 0, got


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in ["empty", "empty_like", "new_empty",
                                                                    "empty_strided", "empty_permuted"]])
def test_uninitialised_values_are_not_compared(database, name) -> None:
    # OpInfo itself skips comparing these ops' values across devices (test_compare_cpu).
    op = database[name]
    assert not drv.values_defined(op, "float32")
    got = _outcomes(database, name, "forward", "float32")
    assert set(got) <= {"identical", "undefined_values", "by_design", "on_cpu"}, got


def test_values_are_compared_for_ordinary_ops(database) -> None:
    assert drv.values_defined(database["add"], "float32")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("to", True, id="to-cpu-string"),
        pytest.param("arange", True, id="factory-without-device"),
        pytest.param("add", False, id="tensor-op"),
    ],
)
def test_samples_naming_cpu(database, name, expected) -> None:
    samples = list(drv.cases(database[name], "forward", "float32"))
    assert any(drv.names_cpu(s) for s in samples) == expected


def test_sparse_results_are_refused_by_design(database) -> None:
    got = _outcomes(database, "to_sparse", "forward", "float32")
    assert got["by_design"] > 0 and got["neuron_raises"] == 0, got


def test_layer_norm_reference_keeps_float32_statistics_off_cpu(database) -> None:
    # The reference's own rule (mean/rstd rounded to the input dtype only on CPU), as on CUDA.
    x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0)).bfloat16()
    _, mean_c, _ = torch._refs.native_layer_norm(x, (4,), None, None, 1e-5)
    _, mean_d, _ = torch._refs.native_layer_norm(x.to("neuron"), (4,), None, None, 1e-5)
    assert (mean_c.dtype, mean_d.dtype) == (torch.bfloat16, torch.float32)
    got = _outcomes(database, "_refs.native_layer_norm", "forward", "bfloat16")
    assert got["by_design"] > 0 and got["meta"] == got["mismatch"] == 0, got


def test_group_norm_reference_computes_as_off_cpu(database) -> None:
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(1, 6, 3, generator=g), torch.randn(6, generator=g), torch.randn(6, generator=g)
    args = (1, 6, 3, 2, 0.5)
    dev = torch._refs.native_group_norm(x.to("neuron"), w.to("neuron"), b.to("neuron"), *args)[0].cpu()
    assert torch.equal(dev, drv.group_norm_off_cpu(x, w, b, *args))
    got = _outcomes(database, "_refs.native_group_norm", "forward", "float32")
    assert got["by_design"] > 0 and got["mismatch"] == 0, got


@pytest.mark.parametrize(("name", "mode"), [pytest.param("softmax.with_dtype", "backward", id="softmax-dtype-float64"),
                                            pytest.param("float_power", "backward", id="float_power")])
def test_float64_inside_an_op_is_float32_rounding(database, name, mode) -> None:
    x = torch.randn(5, generator=torch.Generator().manual_seed(0))
    cpu, dev = torch.softmax(x, 0, dtype=torch.float64), torch.softmax(x.to("neuron"), 0, dtype=torch.float64)
    assert dev.dtype == torch.float32 and torch.allclose(cpu.float(), dev.cpu(), rtol=1e-5, atol=1e-6)
    got = _outcomes(database, name, mode, "float32")
    assert got["by_design"] > 0 and got["mismatch"] == 0, got


def test_a_case_leaves_its_sample_unchanged(database) -> None:
    # embedding_bag(max_norm=...) renormalises its weight in place: the CPU run used to change the
    # sample the device run copied next (4 "differences" that were the driver's).
    op = database["nn.functional.embedding_bag"]
    samples = [s for s in drv.cases(op, "forward", "float32") if s.kwargs.get("max_norm")]
    assert samples
    before = samples[0].input.clone()
    assert drv.run_case(op, "forward", "float32", 0, samples[0]).outcome == "identical"
    assert torch.equal(samples[0].input, before)


@pytest.mark.parametrize("op", [pytest.param(op, id=op) for op in ["mish_backward", "silu_backward"]])
def test_backward_with_a_cpu_kernel_runs_it_not_the_composite(op) -> None:
    # mish_backward has a CPU kernel and a CompositeImplicitAutograd one (math_mish_backward): the
    # device got the composite and rounded otherwise (OpInfo's nn.functional.mish float32 backward).
    assert torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{op}", "PrivateUse1")
    g = torch.Generator().manual_seed(0)
    grad, x = torch.randn(2000, generator=g), torch.randn(2000, generator=g) * 4
    fn = getattr(torch.ops.aten, op)
    assert torch.equal(fn(grad.to("neuron"), x.to("neuron")).cpu(), fn(grad, x))


def _renorm_grad(device: str, mode=None) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 5, 5, generator=g).to(device).requires_grad_()
    grad_out = torch.randn(5, 5, 5, generator=g).to(device)
    with mode if mode is not None else contextlib.nullcontext():
        return torch.autograd.grad(torch.renorm(x, 2, 1, 0.5), x, grad_out)[0].cpu()


def test_renorm_backward_accumulates_through_float64(database) -> None:
    # renorm_backward accumulates in toAccumulateType(float32, device) = float64 on CPU and on
    # PrivateUse1 alike; the device rounds each float64 result to float32.
    dev = _renorm_grad("neuron")
    assert not torch.equal(dev, _renorm_grad("cpu"))
    assert torch.equal(dev, _renorm_grad("cpu", drv.Float64ResultsAsFloat32()))
    got = _outcomes(database, "renorm", "backward", "float32")
    assert got["by_design"] > 0 and got["mismatch"] == 0, got


def _quantile_grad(fn, device: str, mode=None) -> torch.Tensor:
    x = torch.arange(15.0).to(device).requires_grad_()
    with mode if mode is not None else contextlib.nullcontext():
        return torch.autograd.grad(fn(x, 0.3), x)[0].cpu()


@pytest.mark.parametrize("fn", [torch.quantile, torch.nanquantile], ids=["quantile", "nanquantile"])
def test_quantile_ranks_through_float64_on_torch_214(fn) -> None:
    # torch 2.14's quantile computes the rank q.double() * (n - 1) and the weight rank - floor(rank)
    # in float64 (2.13: in float32). The device stores the float64 rank 4.2 as float32 before the
    # floor is taken off, so the weight keeps fewer bits: x's gradient is 0.7999997 / 0.2000003 on
    # the device, 0.7999998 / 0.2000002 on CPU 2.14 -- and the device's bits are CPU 2.13's own.
    # (The OpInfo group "torch214-float64" checks every sample: by design or identical.)
    dev = _quantile_grad(fn, "neuron")
    assert torch.equal(dev, _quantile_grad(fn, "cpu", drv.Float64ResultsAsFloat32()))
    if not torch.equal(dev, _quantile_grad(fn, "cpu")):
        assert tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 14), torch.__version__


def test_integer_linspace_reference_cuts_float32_steps(database) -> None:
    # _refs.linspace computes integer steps in float64 and truncates: 28 * (7 / 49) is 4.0 in
    # float64 and 3.9999998 in float32, so the device's element 28 is 3 where CPU's is 4.
    def lin(device: str) -> torch.Tensor:
        return torch._refs.linspace(torch.tensor(0, device=device), torch.tensor(7, device=device), 50,
                                    dtype=torch.int64, device=device).cpu()

    dev, cpu = lin("neuron"), lin("cpu")
    assert (dev != cpu).nonzero().flatten().tolist() == [28] and (cpu[28].item(), dev[28].item()) == (4, 3)
    with drv.Float64ResultsAsFloat32():
        assert torch.equal(lin("cpu"), dev)
    got = _outcomes(database, "_refs.linspace.tensor_overload", "forward", "int64")
    assert got["by_design"] > 0 and got["mismatch"] == 0, got


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in ["nn.functional.linear_cross_entropy.chunked",
                                                                    "nn.functional.linear_cross_entropy.chunked_none"]])
def test_linear_cross_entropy_options_pick_float32_only_on_cpu_and_cuda(database, name) -> None:
    from torch.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions as Options

    # torch's own device rule: bfloat16 accumulates in float32 on CPU (and CUDA), else in bfloat16.
    assert Options._resolve_auto_acc_dtype(torch.bfloat16, torch.device("cpu")) == torch.float32
    assert Options._resolve_auto_acc_dtype(torch.bfloat16, torch.device("neuron")) is None
    got = _outcomes(database, name, "forward", "bfloat16")
    assert got["by_design"] > 0 and got["mismatch"] == 0, got


class _Flaky:
    """An op that gives another result on every ``period``-th call (as lstsq's gelsy does)."""

    def __init__(self, period: int) -> None:
        self.calls, self.period = 0, period

    def __call__(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        self.calls += 1
        return torch.add(x, *args, **kwargs) + (1.0 if self.period and self.calls % self.period == 0 else 0.0)


@pytest.mark.parametrize(
    ("other", "same"),
    [
        pytest.param(torch.tensor([0.0, 1.0]), True, id="equal-values"),
        pytest.param(torch.tensor([0.0, 1.0])[None].t().contiguous().t()[0], True, id="strides-are-compare's"),
        pytest.param(torch.tensor([-0.0, 1.0]), False, id="negative-zero"),
        pytest.param(torch.tensor([0.0, 1.0], dtype=torch.bfloat16), False, id="dtype"),
        pytest.param(torch.tensor([[0.0, 1.0]]), False, id="shape"),
        pytest.param(torch.tensor([0.0, 1.0 + 2**-23]), False, id="last-bit"),
    ],
)
def test_digest_tells_every_bit(other: torch.Tensor, same: bool) -> None:
    base = torch.tensor([0.0, 1.0])
    assert (drv.digest((base, 3)) == drv.digest((other.to("neuron"), 3))) is same
    nan = torch.tensor([float("nan")])
    other_nan = nan.view(torch.int32).add(1).view(torch.float32)  # another NaN payload
    assert drv.digest(nan) != drv.digest(other_nan)


def test_a_case_records_its_device_digest(database) -> None:
    sample = next(iter(drv.cases(database["add"], "forward", "float32")))
    r = drv.run_case(database["add"], "forward", "float32", 0, sample)
    assert r.outcome == "identical"
    want = drv.digest(drv._run(database["add"].op, sample, "forward", "neuron", 1234))
    assert r.digest == want


@pytest.mark.parametrize(
    ("period", "unstable"),
    [
        pytest.param(0, False, id="stable-op-is-a-real-mismatch"),
        pytest.param(8, True, id="one-run-in-eight-differs"),
        pytest.param(20, True, id="one-run-in-twenty-differs"),
    ],
)
def test_an_op_that_does_not_reproduce_is_cpu_unstable(database, period, unstable) -> None:
    sample = next(iter(drv.cases(database["add"], "forward", "float32")))
    fn = _Flaky(period)
    cpu = drv._run(fn, sample, "forward", "cpu", 0)
    dev = drv._run(fn, sample, "forward", "neuron", 0)
    assert drv._cpu_unstable(fn, sample, "forward", 0, cpu, dev, database["add"], "float32") is unstable
