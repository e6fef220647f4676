"""Sign alignment before an optimizer step (`_recorder.py`): which gradient elements of the golden
and the port follow the original's value (rounding noise: sign or size disagree at a size the
comparison accepts as rounding), and which never do."""

from __future__ import annotations

import pytest
import torch

from cuda2neuron.validate._recorder import SIGN_NOISE, _follow_reference_signs, _rounding_noise, tensor_record

T = torch.tensor


@pytest.mark.parametrize(
    ("own", "ref", "aligned"),
    [
        pytest.param(T([1.0, -2.0, 0.5]), T([1.0, -2.0, 0.5]), [False, False, False], id="identical"),
        pytest.param(T([1.0, 1e-3, -0.5]), T([1.0, -2e-3, -0.5]), [False, True, False],
                     id="noise-level-element-of-opposite-sign"),
        pytest.param(T([1.0, 0.0, 3.0]), T([1.0, 1e-4, 3.0]), [False, True, False], id="zero-against-noise"),
        pytest.param(T([1.0, 0.5, 1.0]), T([1.0, -0.5, 1.0]), [False, False, False],
                     id="large-element-of-opposite-sign-is-a-real-difference"),
        pytest.param(T([-1.0, -0.2]), T([1.0, 0.2]), [False, False], id="negated-gradient-untouched"),
        pytest.param(T([1e-3, 2e-3]), T([1e-3, 2e-3]) * 2, [False, False], id="scaled-gradient-same-signs"),
        pytest.param(T([float("nan"), 1e-4, 1.0]), T([1e-4, -1e-4, 1.0]), [False, True, False],
                     id="non-finite-never-aligned"),
        pytest.param(T([1e-3, -1e-3]), T([0.0, 0.0]), [False, False], id="all-zero-reference"),
        # AdamW divides by |g| + eps: a noise-level element far off in size moves its weight apart
        pytest.param(T([1.0, 8.1e-10, 1.0]), T([1.0, 5.3e-8, 1.0]), [False, True, False],
                     id="noise-level-element-of-the-same-sign-far-off-in-size"),
        pytest.param(T([1.0, 5.0e-3, 1.0]), T([1.0, 5.3e-3, 1.0]), [False, False, False],
                     id="noise-level-element-close-in-size-untouched"),
        pytest.param(T([1.0, 0.5, 1.0]), T([1.0, 0.05, 1.0]), [False, False, False],
                     id="the-port-above-the-noise-level-is-a-real-difference"),
    ],
)
def test_rounding_noise_elements(own, ref, aligned):
    assert _rounding_noise(own.double(), ref.double()).tolist() == aligned


def test_the_bound_is_relative_to_the_largest_gradient():
    ref = T([1.0, -SIGN_NOISE * 0.9, -SIGN_NOISE * 1.1]).double()
    own = -ref
    own[0] = 1.0
    assert _rounding_noise(own, ref).tolist() == [False, True, False]


def test_follow_reference_signs_changes_only_noise_elements_in_place():
    p = torch.nn.Parameter(torch.zeros(4))
    p.grad = T([1.0, 1e-4, -0.3, -1e-5])
    grad = p.grad
    ref = tensor_record(T([1.0, -3e-4, 0.3, 2e-5]))
    ref.update(module_path="0:w")
    assert _follow_reference_signs([("0:w", p)], {"0:w": ref}) == 2
    assert p.grad is grad  # in place: an optimizer holding the tensor sees the change
    assert torch.allclose(p.grad, T([1.0, -3e-4, -0.3, 2e-5]))


@pytest.mark.parametrize(
    "ref_grads",
    [
        pytest.param({}, id="parameter-the-original-did-not-step"),
        pytest.param({"0:w": {**tensor_record(torch.ones(3)), "module_path": "0:w"}}, id="other-shape"),
    ],
)
def test_follow_reference_signs_leaves_unmatched_gradients_alone(ref_grads):
    p = torch.nn.Parameter(torch.zeros(4))
    p.grad = T([1.0, 1e-4, -0.3, -1e-5])
    assert _follow_reference_signs([("0:w", p)], ref_grads) == 0
    assert p.grad.tolist() == pytest.approx([1.0, 1e-4, -0.3, -1e-5])
