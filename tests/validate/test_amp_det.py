"""validate on a small detection trainer under fp16 AMP (tests/fixtures/projects/amp_det): the
logic pair (original and port with autocast off) beside the precision check, one verdict for
both; host batches reused under an in-place Mixup (the shim copies on .cuda()); distillation;
a loss module that holds the model. Seeded logic defects FAIL in the logic check with the edited
port line named; a scaler read where a bf16 port disabled it crashes, and the box names the
scaler edit in another module.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda2neuron.validate import ValidateRequest, Verdict, run_validation
from validate_helpers import PORT_DEVICE, PROJECTS, assert_correct_port, assert_no_emulator_gap, copy_with_patches, needs_emulator

pytestmark = [pytest.mark.slow, needs_emulator]

ORIGINAL = PROJECTS / "amp_det" / "original"
PORT = PROJECTS / "amp_det" / "port"
# 16x16 images: a 2x2 grid, the neck's BatchNorm normalises 8 values per channel.
ARGS = ("--steps", "3", "--size", "16", "--mixup", "--distill")


def _run(port: Path, *extra: str, steps: int = 3):
    return run_validation(ValidateRequest(original=ORIGINAL, port=port, port_device=PORT_DEVICE, mode="script",
                                          script="train.py", args=(*ARGS, *extra), steps=steps))


def test_correct_bf16_port_passes_logic_and_precision():
    r = _run(PORT, "--log-scale")
    assert_no_emulator_gap(r)
    assert_correct_port(r)
    assert r.checks() == {"logic": Verdict.PASS, "precision": Verdict.PASS}, r.notes
    logic = [c for c in r.comparisons if c.check == "logic"]
    precision = [c for c in r.comparisons if c.check == "precision"]
    # The first two steps' records compared twice: with autocast off (float32) and as written
    # (fp16 -> bf16); of the third, the logic pair runs the forward (the second update's effect;
    # the run stops at its backward), the precision check judges all; the final parameters both
    # (the logic pair's after its last step).
    stepped = lambda cs: {c.key.removeprefix("logic/") for c in cs if c.kind != "param"}  # noqa: E731
    assert stepped(c for c in logic if c.step < 2) == stepped(c for c in precision if c.step < 2)
    assert stepped(c for c in logic if c.step == 2) == stepped(c for c in precision if c.step == 2 and c.kind == "forward")
    assert {c.kind for c in precision if c.step == 2} > {"forward"} and max(c.step for c in logic if c.kind != "param") == 2
    assert {c.key for c in logic if c.kind == "param"} == {"logic/" + c.key for c in precision if c.kind == "param"}
    assert {c.dtype_ref for c in logic} <= {"float32", "int64", "bool"}, {c.dtype_ref for c in logic}
    # The steps' tensors: the final parameters (compared in script mode too) carry AdamW's updates of
    # BatchNorm biases whose gradients are rounding noise, as far from the golden in the float32
    # original (up to 33%, not judged) as in the port.
    assert max(c.allowed for c in logic if c.allowed is not None and c.kind != "param") < 1e-2 < max(
        c.allowed for c in precision if c.allowed is not None)
    assert any("logic check compared" in n and "the first 2 steps taken of 3" in n for n in r.notes), r.notes


DEFECTS = [
    # (id, patch, first module (prefix), edited port file, kind of edit)
    pytest.param(("model.py", "permute(0, 1, 3, 4, 2)", "permute(0, 1, 4, 3, 2)"), "0:", "model.py", "changed",
                 id="head-axes-swapped-in-permute"),
    pytest.param(("loss.py", "loss = box_gain * box_loss +", "loss = box_gain * box_loss.detach() +"), "0:", "loss.py",
                 "changed", id="box-loss-detached"),
    pytest.param(("loss.py", "F.log_softmax(student[..., 5:] / t, dim=-1)", "F.log_softmax(student[..., 5:] / t, dim=1)"),
                 "0:", "loss.py", "changed", id="distillation-log-softmax-over-anchors"),
    pytest.param(("scaler.py", "            torch.nn.utils.clip_grad_norm_(parameters, clip)\n", ""), "0:", "scaler.py",
                 "removed", id="clipping-dropped"),
    pytest.param(("train.py", '{"params": no_decay, "lr": 2 * lr,', '{"params": no_decay, "lr": lr,'), "0:", "train.py",
                 "changed", id="wrong-lr-for-the-no-decay-group"),
]


@pytest.mark.parametrize(("patch", "module", "edited", "kind"), DEFECTS)
def test_seeded_logic_defect_fails_in_the_logic_check(tmp_path, patch, module, edited, kind):
    r = _run(copy_with_patches(PORT, tmp_path / "port", (patch,)))
    assert_no_emulator_gap(r)
    assert r.verdict is Verdict.FAIL and r.exit_code == 1, (r.verdict, r.failures, r.counts())
    assert r.checks()["logic"] is Verdict.FAIL, r.checks()
    d = r.divergence
    assert d is not None and d.key.startswith("logic/"), d
    assert (d.module_path or "0:").startswith(module), d
    assert any(h.path == edited and h.kind == kind for h in d.hand_edits), d.hand_edits


def test_scaler_state_read_crash_names_the_scaler_edit_in_another_module(tmp_path):
    """The bf16 port turns the scaler off (its state_dict() is then {}), the loop reads
    state_dict()["scale"] every step: KeyError in the port only. The scaler is built in
    scaler.py, the read is in train.py: the box lists the scaler edit on the crashing path."""
    port = copy_with_patches(PORT, tmp_path / "port", (("train.py", "state_dict().get('scale', 1.0)", "state_dict()['scale']"),))
    r = _run(port, "--log-scale", steps=1)
    assert r.verdict is Verdict.FAIL and r.exit_code == 1, (r.verdict, r.failures)
    assert any(f.kind == "defect" and "KeyError" in f.message for f in r.failures), r.failures
    d = r.divergence
    assert d is not None and d.kind == "crash", d
    assert "crashing path" in d.findings_scope and "scaler.py" in d.findings_scope, d.findings_scope
    scaler_line = next(i for i, line in enumerate((ORIGINAL / "scaler.py").read_text().splitlines(), 1)
                       if "GradScaler(" in line)
    assert any(e.path == "scaler.py" and e.line == scaler_line for e in d.findings), d.findings
