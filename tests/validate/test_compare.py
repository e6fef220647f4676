"""Per-tensor verdicts: a table of (reference, port, golden) triples and the verdict each must get."""

from __future__ import annotations

import math

import pytest
import torch

from cuda2neuron.validate._compare import compare_records, noise_elements
from cuda2neuron.validate._model import Tolerances, Verdict
from cuda2neuron.validate._recorder import tensor_record

BASE = torch.linspace(-2.0, 3.0, 64).reshape(8, 8)


def rec(t: torch.Tensor, amp: str | None = None, device: str | None = None) -> dict:
    r = tensor_record(t)
    r.update(kind="forward", step=0, module_path="0:layer", module_class="Layer", amp=amp)
    if device:
        r["device"] = device
    return r


def fp32_noise(t: torch.Tensor) -> torch.Tensor:
    return (t.double() + 1e-7 * torch.cos(torch.arange(t.numel(), dtype=torch.float64)).reshape(t.shape)).float()


CASES = [
    # id, ref, port, golden, expected verdict, reason fragment
    ("identical-fp32", BASE, BASE.clone(), BASE.double(), Verdict.PASS, "<="),
    ("fp32-rounding-noise", BASE, fp32_noise(BASE), BASE.double(), Verdict.PASS, "<="),
    ("op-changed", BASE, torch.relu(BASE), BASE.double(), Verdict.FAIL, ">"),
    ("small-drift-warns", BASE, BASE * (1 + 1e-4), BASE.double(), Verdict.WARN, ">"),
    ("shape-mismatch", BASE, BASE.reshape(4, 16), BASE.double(), Verdict.FAIL, "shape"),
    ("fp32-to-fp64", BASE, BASE.double(), BASE.double(), Verdict.FAIL, "dtype float32 -> float64"),
    ("fp32-to-bf16", BASE, BASE.bfloat16(), BASE.double(), Verdict.FAIL, "dtype float32 -> bfloat16"),
    ("fp16-autocast-to-bf16-ok", BASE.half(), BASE.bfloat16(), BASE.double(), Verdict.PASS, "<="),
    ("nan-only-in-port", BASE, torch.where(BASE > 2.5, torch.nan, BASE), BASE.double(), Verdict.FAIL, "NaN/Inf"),
    ("int-exact", torch.arange(10), torch.arange(10), None, Verdict.PASS, "exact"),
    ("int-differs", torch.arange(10), torch.arange(10).flip(0), None, Verdict.FAIL, "values differ"),
    ("no-golden-fp32-same", BASE, BASE.clone(), None, Verdict.PASS, "reference"),
    ("no-golden-fp32-off", BASE, BASE + 0.5, None, Verdict.FAIL, "reference"),
]


@pytest.mark.parametrize(("ref", "port", "golden", "expected", "fragment"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_verdicts(ref, port, golden, expected, fragment):
    out = compare_records("k", rec(ref), rec(port), rec(golden) if golden is not None else None, Tolerances(), False)
    assert out.verdict is expected, out.reason
    assert fragment in out.reason
    if fragment != "precision lost in the port":
        assert "precision lost" not in out.reason


def test_missing_in_port_fails():
    out = compare_records("k", rec(BASE), None, None, Tolerances(), False)
    assert out.verdict is Verdict.FAIL and "not produced by the port" in out.reason


def test_bf16_autocast_budget_uses_the_autocast_dtype():
    """A float32 tensor computed under bf16 autocast gets a bf16-sized budget, and only then."""
    golden = BASE.double()
    ref = (BASE.half().float())  # fp16-ish error in the reference
    port = BASE.bfloat16().float()  # bf16-ish error in the port
    strict = compare_records("k", rec(ref), rec(port), rec(golden), Tolerances(), False)
    amp = compare_records("k", rec(ref, amp="float16"), rec(port, amp="bfloat16"), rec(golden), Tolerances(), False)
    assert strict.verdict is not Verdict.PASS
    assert amp.verdict is Verdict.PASS


AUTOCAST_CASES = [
    # CPU autocast (shim) keeps layer_norm in fp16, CUDA/neuron autocast runs it in fp32
    ("autocast-policies-differ", BASE.half(), "float16", BASE, "bfloat16", Verdict.PASS, "<="),
    ("autocast-dropped-in-port", BASE.half(), "float16", BASE, None, Verdict.FAIL, "none in the port"),
    ("autocast-added-in-port", BASE, None, BASE.bfloat16(), "bfloat16", Verdict.FAIL, "none in the original"),
]


@pytest.mark.parametrize(("ref", "ref_amp", "port", "port_amp", "expected", "fragment"), [c[1:] for c in AUTOCAST_CASES],
                         ids=[c[0] for c in AUTOCAST_CASES])
def test_autocast_rules(ref, ref_amp, port, port_amp, expected, fragment):
    out = compare_records("k", rec(ref, amp=ref_amp), rec(port, amp=port_amp), rec(BASE.double()), Tolerances(), False)
    assert out.verdict is expected, out.reason
    assert fragment in out.reason
    if fragment != "precision lost in the port":
        assert "precision lost" not in out.reason


def test_left_on_cpu_when_reference_ran_on_cuda():
    out = compare_records("k", rec(BASE, device="cuda"), rec(BASE, device="cpu"), None, Tolerances(), True)
    assert out.verdict is Verdict.FAIL and "CPU" in out.reason


def test_metrics_are_measured():
    out = compare_records("k", rec(BASE), rec(BASE + 0.25), rec(BASE.double()), Tolerances(), False)
    assert math.isclose(out.max_abs, 0.25, rel_tol=1e-6)
    assert 0.9 < out.cosine < 1.0
    assert out.port_error is not None and out.ref_error == 0.0


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [({"pass_factor": 1e6}, Verdict.PASS), ({"warn_factor": 4.0, "floor_float32": 1e-9}, Verdict.FAIL)],
    ids=["loose-pass-factor", "tight-floor"],
)
def test_tolerances_are_overridable(overrides, expected):
    tol = Tolerances().with_overrides(**overrides)
    out = compare_records("k", rec(BASE), rec(BASE * (1 + 1e-4)), rec(BASE.double()), tol, False)
    assert out.verdict is expected


def test_unknown_tolerance_is_rejected():
    with pytest.raises(ValueError, match="unknown tolerance"):
        Tolerances().with_overrides(fudge=1.0)


# Attention's key bias: softmax ignores it, so its true gradient is 0 and the computed one is
# rounding noise; Adam turns noise into lr-sized steps in random directions.
GRAD = torch.tensor([2e-3, -1e-3, 5e-4, 1e-11, -3e-11, 2e-11])
GRAD_OTHER = torch.tensor([2e-3, -1e-3, 5e-4, -2e-11, 4e-11, 2e-11])  # the last agrees: kept


def test_noise_elements_are_tiny_and_irreproducible():
    noisy = noise_elements(rec(GRAD), rec(GRAD_OTHER.double()))
    assert noisy is not None and noisy.tolist() == [False, False, False, True, True, False]
    assert noise_elements(rec(GRAD), rec(GRAD.clone())) is None
    # A large gradient that differs is a defect, never noise.
    assert noise_elements(rec(GRAD), rec(GRAD * torch.tensor([1, 3, 1, 1, 1, 1.0]))) is None


# (id, elements left out, expected verdict)
IGNORED = [
    ("noise-elements-left-out", torch.tensor([False, False, False, True, True, False]), Verdict.PASS),
    ("nothing-left-out", None, Verdict.FAIL),
    ("a-real-difference-stays-visible", torch.tensor([False, False, False, True, False, False]), Verdict.FAIL),
]


@pytest.mark.parametrize(("ignore", "expected"), [c[1:] for c in IGNORED], ids=[c[0] for c in IGNORED])
def test_final_params_leave_out_noise_gradient_elements(ignore, expected):
    ref = torch.tensor([0.5, -0.2, 0.1, 0.01, 0.02, 0.03])
    port = ref + torch.tensor([0.0, 0.0, 0.0, 0.01, -0.01, 0.0])  # Adam's lr-sized steps on noise
    out = compare_records("final/param/0:attn.bias", rec(ref), rec(port), rec(ref.double()), Tolerances(), False,
                          ignore=ignore)
    assert out.verdict is expected, out.reason
    assert ("left out" in out.reason) is (ignore is not None)


# The reference's own error against the golden: fp32 rounding of a float64 value.
GOLD = (BASE.double() * (1 + 1e-9 * torch.arange(64, dtype=torch.float64).reshape(8, 8)))
# A reference that is itself 1e-5 off the golden (a long reduction in fp32).
GOLD_FAR = BASE.double() * (1 + 1e-5 * torch.cos(torch.arange(64, dtype=torch.float64)).reshape(8, 8))
PRECISION = [
    # id, port, golden, ref amp, port amp, same kernels, expected, reason fragment
    ("fp16-round-trip-same-kernels", BASE.half().float() * (1 + 3e-4), GOLD, None, None, True, Verdict.FAIL,
     "precision lost in the port"),
    ("drift-other-kernels-warns", BASE * (1 + 1e-4), GOLD, None, None, False, Verdict.WARN, ">"),
    ("drift-under-100x-the-reference-stays-warn", BASE * (1 + 1e-4), GOLD_FAR, None, None, True, Verdict.WARN, ">"),
    ("fp32-noise-same-kernels-passes", fp32_noise(BASE), GOLD, None, None, True, Verdict.PASS, "<="),
    ("autocast-explains-it", BASE.half().float() * (1 + 3e-4), GOLD, "bfloat16", "bfloat16", True, Verdict.PASS, "<="),
    # A wrong value (a causal mask removed) is far beyond the WARN band: a plain FAIL, not "precision".
    ("wrong-value-is-not-precision-loss", BASE * 1.5, GOLD, None, None, True, Verdict.FAIL, "(vs golden)"),
]


@pytest.mark.parametrize(("port", "golden", "ref_amp", "port_amp", "same", "expected", "fragment"),
                         [c[1:] for c in PRECISION], ids=[c[0] for c in PRECISION])
def test_precision_lost_on_the_same_kernels_fails(port, golden, ref_amp, port_amp, same, expected, fragment):
    ref = BASE.float()
    out = compare_records("k", rec(ref, amp=ref_amp), rec(port.float(), amp=port_amp), rec(golden), Tolerances(),
                          False, same_kernels=same)
    assert out.verdict is expected, out.reason
    assert fragment in out.reason
    if fragment != "precision lost in the port":
        assert "precision lost" not in out.reason


# A float32 reference computed on a GPU in TF32 (cuDNN's default for convolutions and RNNs on
# Ampere and later), judged without a golden: the port, exact float32 on the CPU kernels, is ~6e-4
# from it (an LSTM on an H200: WARN by the float32 floor). TF32 keeps float16's mantissa, so its
# floor is float16's.
TF32_OFF = BASE * (1 + 6e-4 * torch.cos(torch.arange(64, dtype=torch.float32)).reshape(8, 8))
TF32 = [
    # id, port, reference in TF32, golden, expected, reason fragment
    ("tf32-reference-no-golden-passes", TF32_OFF, True, None, Verdict.PASS, "(vs reference)"),
    ("fp32-reference-no-golden-warns", TF32_OFF, False, None, Verdict.WARN, "(vs reference)"),
    # TF32 explains rounding, never a wrong value.
    ("tf32-reference-wrong-value-fails", BASE * 1.5, True, None, Verdict.FAIL, "(vs reference)"),
    # With a golden the reference's own error is measured: the flag changes nothing.
    ("tf32-flag-ignored-with-golden", TF32_OFF, True, BASE.double(), Verdict.WARN, "(vs golden)"),
]


@pytest.mark.parametrize(("port", "tf32", "golden", "expected", "fragment"), [c[1:] for c in TF32],
                         ids=[c[0] for c in TF32])
def test_a_tf32_reference_without_golden_is_judged_at_tf32_precision(port, tf32, golden, expected, fragment):
    out = compare_records("k", rec(BASE, device="cuda"), rec(port, device="neuron"), rec(golden) if golden is not None else None,
                          Tolerances(), True, ref_tf32=tf32)
    assert out.verdict is expected, out.reason
    assert fragment in out.reason


# -- direction and power ------------------------------------------------------------------------
_G = torch.sin(torch.arange(256, dtype=torch.float64) * 0.37).reshape(16, 16)  # a zero-mean "gradient"
_NOISE = torch.cos(torch.arange(256, dtype=torch.float64) * 1.91).reshape(16, 16)


def grad_rec(t: torch.Tensor, amp: str | None = None, kind: str = "grad") -> dict:
    r = rec(t)
    r.update(kind=kind, amp=amp)
    return r


# id, reference (fp16 autocast), port (bf16 autocast), kind, verdict, judged, reason fragment
DIRECTION = [
    # The magnitude band of a bf16 port of an fp16 original reaches 51% of the largest value; a
    # port pointing elsewhere (cosine ~0: a loss over the wrong axis) is a defect all the same.
    ("wrong-direction-inside-the-magnitude-band-fails", _G + 0.016 * _NOISE, _G.flip(0) * 0.5, "grad", Verdict.FAIL,
     True, "direction: cosine"),
    ("bf16-noise-8x-the-fp16-noise-passes", _G + 0.016 * _NOISE, _G + 0.1 * _NOISE.flip(1), "grad", Verdict.PASS,
     True, "<="),
    ("sign-flipped-output-fails", _G + 0.016 * _NOISE, -_G, "output", Verdict.FAIL, True, ""),
    # fp16 BatchNorm over a few values per channel: the original is itself 30% off the golden, so
    # neither bound can tell a broken port — said, not passed silently.
    ("no-power-is-not-judged", _G + 0.3 * _NOISE, _G.flip(0) * 0.5, "grad", Verdict.PASS, False, "not judged"),
    # A final parameter is mostly its initial value: judged by magnitude only, whose bf16 band over
    # this fp16 original (51% of the largest value) has no power.
    ("parameters-have-no-direction", _G + 0.016 * _NOISE, _G + 0.1 * _NOISE.flip(1), "param", Verdict.PASS, False,
     "not judged"),
]


@pytest.mark.parametrize(("ref", "port", "kind", "expected", "judged", "fragment"), [c[1:] for c in DIRECTION],
                         ids=[c[0] for c in DIRECTION])
def test_direction_and_power(ref, port, kind, expected, judged, fragment):
    out = compare_records("k", grad_rec(ref.half(), "float16", kind), grad_rec(port.bfloat16(), "bfloat16", kind),
                          grad_rec(_G), Tolerances(), False)
    assert out.verdict is expected, out.reason
    assert out.judged is judged, out.reason
    assert fragment in out.reason
    assert (out.port_cosine is None) is (kind == "param")


def test_a_changed_value_on_the_same_kernels_is_not_called_precision_lost():
    """In the WARN band, 100x the original's error, same kernels: FAIL either way, but only values
    that are the original's rounded to 16 bits are "precision lost" (31: a causal mask switched
    off read as precision lost)."""
    port = BASE.clone()
    port[3, 0] += 9e-4  # one element of 0.06 off by 1.5%: no 16-bit rounding does that
    out = compare_records("k", rec(BASE), rec(port), rec(GOLD), Tolerances(), False, same_kernels=True)
    assert out.verdict is Verdict.FAIL, out.reason
    assert "precision lost" not in out.reason and "computes something else" in out.reason


@pytest.mark.parametrize("shape", [(), (3,)], ids=["scalar", "three-values"])
def test_a_few_values_are_never_called_rounded(shape):
    """A loss 1e-4 off on the same kernels (a dropout left on in evaluation) is within float16's
    unit roundoff by chance: too few values to call it precision lost, or to rule that out."""
    ref = torch.full(shape, 2.5)
    port = ref * (1 + 1e-4)
    gold = ref.double() * (1 + 1e-9)
    out = compare_records("k", rec(ref), rec(port), rec(gold), Tolerances(), False, same_kernels=True)
    assert out.verdict is Verdict.FAIL, out.reason
    assert "precision lost" not in out.reason and "too few values to tell" in out.reason


def test_adam_ratio_noise_is_left_out_of_the_final_parameters():
    """A bf16 gradient element under the port's own error keeps its sign but not its size: Adam's
    second update (m / sqrt(v)) then moves that weight by a different fraction of lr."""
    from cuda2neuron.validate._compare import below_port_error

    golden = torch.tensor([1.0, -0.5, 0.02, -0.01, 0.3], dtype=torch.float64)
    port = torch.tensor([1.03, -0.5, 0.014, -0.01, 0.3], dtype=torch.float32)  # element 2: same sign, 30% off
    below = below_port_error(rec(golden), rec(port))
    assert below is not None and below.tolist() == [False, False, True, False, False]
