"""The initial weights' hand-over when the port drops a DistributedDataParallel wrapper, and
validate's own failures named as validate's (issue 40): the reference's `module.*` weights
failed to load into the unwrapped port model and the report said "port raised at <the user's
forward line>"."""

from __future__ import annotations

import pytest
import torch.nn as nn

from cuda2neuron.validate import Verdict, run_validation
from cuda2neuron.validate._recorder import Recorder, tensor_record
from cuda2neuron.validate._request import build_request
from cuda2neuron.validate._trees import Trees
from cuda2neuron.validate._worker import _crash_site
from validate_helpers import PROJECTS, assert_correct_port, copy_with_patches, needs_emulator

PAIR = PROJECTS / "ddp_trainer"
# The port keeps one process per rank but averages the gradients by hand instead of wrapping.
DROP_DDP = ("train.py", "        model = DDP(model, device_ids=[local_rank], output_device=local_rank)\n",
            '        args.sync = "manual"  # DDP dropped: the gradients are averaged by hand below\n')


@pytest.mark.slow
@needs_emulator
def test_a_port_that_dropped_ddp_is_compared_module_by_module(tmp_path):
    port = copy_with_patches(PAIR / "port", tmp_path / "port", (DROP_DDP,))
    request = build_request(Trees(PAIR / "original", port, "original", "port"), {}, script="torchrun",
                            args=("--standalone", "--nproc_per_node=2", "train.py", "--steps", "2"))
    result = run_validation(request)
    assert_correct_port(result)
    assert any(c.key == "rank1/s0/grad/0:inp.weight" for c in result.comparisons), [c.key for c in result.comparisons][:5]


def test_a_weight_hand_over_that_fails_is_validates_own_error(tmp_path):
    """A state that does not fit the port's model: the message says it is validate's step, and
    the crash site marks it as validate's (an ERROR, never a FAIL "port raised at ...")."""
    wrapped = {f"module.{k}": tensor_record(v) for k, v in nn.Linear(3, 2).state_dict().items()}
    frames = [{"type": "init_state", "root": 0, "state": {**wrapped, "extra": wrapped["module.bias"]}}]
    recorder = Recorder(lambda frame: None, lambda: frames.pop(0) if frames else None, "port", 1, str(tmp_path),
                        stop_after_steps=False)
    with pytest.raises(RuntimeError) as info:
        recorder.adopt_root(nn.Linear(3, 2))
    assert str(info.value).startswith("validate: handing the original's initial weights to the port's Linear "
                                      "(module #0) failed — validate's own step"), info.value
    assert _crash_site(info.value, str(tmp_path))["harness"] is True
