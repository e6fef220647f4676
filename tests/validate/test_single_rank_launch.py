"""`validate --nproc 1`: one rank, started as torchrun starts it (issue 43: RANK and WORLD_SIZE were
left unset, and the crash did not point at --nproc).

The runs use the CPU redirect (no emulator build) and no golden run, to stay quick.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda2neuron.validate import ValidateRequest, Verdict, run_validation
from cuda2neuron.validate._request import build_request
from cuda2neuron.validate._trees import Trees

from validate_helpers import copy_with_patches

# build() reads the launcher's variables as a torchrun-launched trainer does.
READS_LAUNCH = '''def build():
    import os
    assert (int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])) == (0, 0, 1)
    assert os.environ["MASTER_ADDR"] == "127.0.0.1" and int(os.environ["MASTER_PORT"]) > 0
'''


def _request(mlp: Path, tmp_path: Path, nproc: int | None) -> ValidateRequest:
    patch = (("entry.py", "def build():\n", READS_LAUNCH + "    return _real_build()\n\n\ndef _real_build():\n"),)
    trees = Trees(copy_with_patches(mlp / "original", tmp_path / "original", patch),
                  copy_with_patches(mlp / "port", tmp_path / "port", patch), "original", "port")
    request = build_request(trees, {}, entry="entry:build", nproc=nproc, golden=False, port_device="cpu", steps=1,
                            timeout=120.0)
    assert request.nproc == 1
    return request


@pytest.mark.parametrize(("nproc", "table", "script", "launched"), [
    pytest.param(None, {}, None, False, id="no-nproc-a-plain-process"),
    pytest.param(1, {}, None, True, id="nproc-1-option"),
    pytest.param(None, {"nproc": 1}, None, True, id="nproc-1-in-the-config"),
    pytest.param(None, {}, "torchrun", True, id="torchrun-nproc_per_node-1"),
])
def test_an_asked_for_rank_count_is_a_launch(tmp_path, nproc, table, script, launched):
    trees = Trees(tmp_path, tmp_path, "original", "port")
    if script:
        request = build_request(trees, table, script=script, args=("--nproc_per_node=1", "train.py"))
    else:
        request = build_request(trees, table, entry="entry:build", nproc=nproc)
    assert (request.nproc, request.launched) == (1, launched)


@pytest.mark.slow  # a validation: two runs
def test_nproc_1_sets_the_torchrun_environment(mlp, tmp_path):
    result = run_validation(_request(mlp, tmp_path, 1))
    assert result.verdict in (Verdict.PASS, Verdict.WARN), result.failures
    assert sorted(run.role for run in result.runs) == ["port rank 0", "reference rank 0"]


@pytest.mark.slow  # a validation: two runs
def test_a_crash_on_a_launch_variable_suggests_nproc(mlp, tmp_path):
    result = run_validation(_request(mlp, tmp_path, None))
    assert result.verdict is Verdict.ERROR and result.exit_code == 2, result.failures
    failure = next(f for f in result.failures if f.role == "reference")
    assert "KeyError: 'RANK'" in failure.traceback or "RANK" in failure.message, failure
    assert "rerun with --nproc N, or --nproc 1 for one rank" in failure.message, failure.message
