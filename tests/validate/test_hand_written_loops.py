"""Training loops without a torch.optim optimizer (`param.data.add_(param.grad, alpha=-lr)`):
a step ends where the loop consumed the gradients of its last backward."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cuda2neuron.validate import ValidateRequest, Verdict, run_validation
from cuda2neuron.validate._recorder import _ManualSteps
from cuda2neuron.validate._rng import CpuRandomMode

from validate_helpers import PORT_DEVICE, PROJECTS, assert_correct_port, copy_with_patches

HANDLOOP = PROJECTS / "handloop"


def _zero_grad(p: torch.nn.Parameter) -> None:
    p.grad = None


def _zero_in_place(p: torch.nn.Parameter) -> None:
    p.grad.zero_()


def _clip(p: torch.nn.Parameter) -> None:
    torch.nn.utils.clip_grad_norm_([p], 1e-3)


def _clip_under_dispatch_mode(p: torch.nn.Parameter) -> None:
    # foreach ops under a TorchDispatchMode (validate's CpuRandomMode) keep the version counter
    with CpuRandomMode():
        torch.nn.utils.clip_grad_norm_([p], 1e-3)


def _clip_by_one(p: torch.nn.Parameter) -> None:
    torch.nn.utils.clip_grad_norm_([p], 1e9)  # under the limit: multiplied by 1.0, values unchanged


def _replace(p: torch.nn.Parameter) -> None:
    p.grad = p.grad.clone()


def _untouched(p: torch.nn.Parameter) -> None:
    pass


# What the loop did between two backward passes -> whether the first one ended a step.
BETWEEN_BACKWARDS = [
    ("zero-grad-set-to-none", _zero_grad, True),
    ("grad-zeroed-in-place", _zero_in_place, True),
    ("gradients-clipped", _clip, True),
    ("gradients-clipped-under-a-dispatch-mode", _clip_under_dispatch_mode, True),
    ("gradient-replaced", _replace, True),
    # The version counter moved but no value did; under a dispatch mode it would not even move.
    ("clipped-under-the-limit", _clip_by_one, False),
    ("untouched-gradient-accumulation", _untouched, False),
]


@pytest.mark.parametrize(("between", "ends_step"), [c[1:] for c in BETWEEN_BACKWARDS], ids=[c[0] for c in BETWEEN_BACKWARDS])
def test_a_step_ends_when_the_loop_consumed_the_gradients(between, ends_step):
    p = torch.nn.Parameter(torch.ones(3))
    (p * 2).sum().backward()
    steps = _ManualSteps()
    steps.snapshot([("0:w", p)])
    between(p)
    assert steps.consumed([("0:w", p)]) is ends_step
    grads = steps.take()
    assert grads is not None and [name for name, _ in grads] == ["0:w"]
    assert steps.take() is None and not steps.consumed([("0:w", p)])  # taken: nothing pending


def test_nothing_is_pending_before_the_first_backward():
    p = torch.nn.Parameter(torch.ones(3))
    assert not _ManualSteps().consumed([("0:w", p)])


def validate(port: Path, *args: str):
    return run_validation(ValidateRequest(original=HANDLOOP / "original", port=port, mode="script",
                                          script="train.py", args=("--steps", "3", *args), golden=False,
                                          port_device=PORT_DEVICE))


@pytest.mark.parametrize("args", [(), ("--accum", "2")], ids=["one-backward-per-update", "two-backward-passes-per-update"])
def test_hand_written_loop_passes_with_one_record_set_per_update(args):
    r = validate(HANDLOOP / "port", *args)
    assert_correct_port(r)
    grad_steps = sorted({c.step for c in r.comparisons if c.kind == "grad"})
    assert grad_steps == [0, 1, 2]  # stopped after --steps 3; accumulation stays one step
    per_step = len(list(torch.nn.LSTM(8, 8).parameters())) + 3  # embed, head weight + bias
    assert len([c for c in r.comparisons if c.kind == "grad"]) == 3 * per_step
    # The next step's forward is filed under the next step (the loop zeroes before it).
    assert {c.step for c in r.comparisons if c.key.endswith("/fwd/0:embed#0")} == {0, 1, 2, 3}


# --clip 1e9: clipping multiplies by 1.0, which bumps the version counter in the shim reference
# but not on the device; the eval forward must still land in the same step in both runs.
@pytest.mark.parametrize("clip", ["0.25", "1e9"], ids=["clipping", "clip-under-the-limit"])
def test_hand_written_loop_runs_to_its_end_when_it_has_fewer_steps(clip):
    r = run_validation(ValidateRequest(original=HANDLOOP / "original", port=HANDLOOP / "port", mode="script",
                                       script="train.py", args=("--steps", "2", "--clip", clip), steps=3, golden=False,
                                       port_device=PORT_DEVICE))
    assert_correct_port(r)
    # the last update's gradients are closed at the script's end, and the eval forward is compared
    assert sorted({c.step for c in r.comparisons if c.kind == "grad"}) == [0, 1]
    assert any(c.kind == "forward" and c.key.endswith("/fwd/0:embed#0") and c.step == (2 if clip == "0.25" else 1)
               for c in r.comparisons)


def test_a_wrong_hand_written_update_fails_at_the_next_forward(tmp_path):
    port = copy_with_patches(HANDLOOP / "port", tmp_path / "port",
                             (("train.py", "alpha=-args.lr", "alpha=args.lr"),))
    r = validate(port)
    assert r.verdict is Verdict.FAIL
    assert r.divergence is not None and r.divergence.key.startswith("s1/fwd/0:embed"), r.divergence
    assert all(c.verdict is Verdict.PASS for c in r.comparisons if c.step == 0)
