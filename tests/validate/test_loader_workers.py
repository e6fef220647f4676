"""DataLoader workers under validate (issue 40 item 6): a float32 tensor rebuilt over its storage in
the float64 golden (a batch a worker collated in shared memory, a checkpoint torch.load reads) keeps
its dtype, and the loader's pin-memory thread pins under the shim. Fixture:
tests/fixtures/projects/loader_workers (a numpy dataset, 2 workers, `pin_memory=True`)."""

from __future__ import annotations

import textwrap

import pytest

from cuda2neuron.validate import ValidateRequest, Verdict, run_validation
from validate_helpers import PORT_DEVICE, PROJECTS, assert_correct_port, eval_in_fresh_interpreter, needs_emulator

# Each case runs under the golden (the shim in golden mode and the float64 policy), in one subprocess.
GOLDEN_CASES = {
    "torch-load-float32-checkpoint": ("_loaded()", ["torch.float32", 15.0]),
    "tensor-from-another-process": ("_from_shared_memory()", ["torch.float32", 6.0]),
    "rebuilt-tensor-upcast-in-ops": ("str((_from_shared_memory_tensor() * 2).dtype)", "torch.float64"),
}

HELPERS = textwrap.dedent(
    """
    def _loaded():
        w = torch.load(io.BytesIO(CHECKPOINT))["w"]
        return [str(w.dtype), float(w.sum())]
    def _from_shared_memory_tensor():
        # a batch arriving from a DataLoader worker
        return pickle.loads(SHARED.pop())  # a payload passes its descriptor once
    def _from_shared_memory():
        t = _from_shared_memory_tensor()
        return [str(t.dtype), float(t.sum())]
    """
)


@pytest.fixture(scope="module")
def golden_results() -> dict:
    return eval_in_fresh_interpreter([
        "import io, json, pickle, torch",
        "from multiprocessing.reduction import ForkingPickler",
        "import torch.multiprocessing  # registers the tensor reductions",
        "from cuda2neuron.validate import _cuda_shim, _golden",
        "buf = io.BytesIO()",
        "torch.save({'w': torch.arange(6, dtype=torch.float32)}, buf)  # a float32 checkpoint",
        "CHECKPOINT = buf.getvalue()",
        "# sent by a worker the golden's policy does not reach (a spawn or forkserver context)",
        "SHARED = [bytes(ForkingPickler.dumps(torch.ones(6, dtype=torch.float32).share_memory_())) for _ in range(2)]",
        "_cuda_shim.install(golden=True)",
        "_golden.install()",
        HELPERS,
    ], GOLDEN_CASES)


@pytest.mark.parametrize("name", list(GOLDEN_CASES), ids=list(GOLDEN_CASES))
def test_a_tensor_rebuilt_over_its_storage_keeps_its_dtype_in_the_golden(golden_results, name):
    got = golden_results[name]
    assert "error" not in got, got.get("error")
    assert got["value"] == GOLDEN_CASES[name][1]


@needs_emulator
def test_a_loader_with_workers_and_pinned_memory_validates_against_the_golden():
    """The reference crashed in the pin-memory thread ("Cannot access accelerator device") and the
    golden with it; the port's workers run on the emulator as the original's under the shim."""
    pair = PROJECTS / "loader_workers"
    r = run_validation(ValidateRequest(original=pair / "original", port=pair / "port", port_device=PORT_DEVICE,
                                       mode="script", script="train.py", args=("--steps", "3", "--pin"), steps=3))
    assert not any("golden run failed" in n for n in r.notes), r.notes
    assert_correct_port(r)
    assert r.verdict is Verdict.PASS and r.golden_used, (r.verdict, r.golden_used)
    assert sum(c.kind == "grad" for c in r.comparisons) == 3 * 4, [c.key for c in r.comparisons]
