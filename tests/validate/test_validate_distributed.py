"""validate on distributed trainers: N ranks per run, each run its own rendezvous, per-rank records.

The `ddp_trainer` pair (a torchrun-launched DDP trainer with an optional hand-written gradient
sync, and an FSDP2 one) runs with 2 ranks: the original on gloo under the CUDA-on-CPU shim, the
port on the emulated neuron process group. Correct ports pass; each seeded defect fails with the
rank and the module (or the device) named. One validation per case: each is three groups of two
ranks, ~20 s of CPU on a quiet machine, so the table stays short.
"""

from __future__ import annotations

import pytest
import torch

from cuda2neuron.validate import ValidateRequest, Verdict, run_validation
from cuda2neuron.validate._request import build_request
from cuda2neuron.validate._rng import CpuRandomMode
from cuda2neuron.validate._trees import Trees

from validate_helpers import PROJECTS, assert_correct_port, copy_with_patches, needs_emulator

PAIR = PROJECTS / "ddp_trainer"
STEPS = ("--steps", "3")

def _validate(port, script: str, args: tuple[str, ...] = STEPS):
    # Launched the way the README shows, `--script torchrun -- --nproc_per_node=2 train.py ...`.
    request = build_request(Trees(PAIR / "original", port, "original", "port"), {}, script="torchrun",
                            args=("--standalone", "--nproc_per_node=2", script, *args))
    assert request.nproc == 2 and request.script == script
    return run_validation(request)


CORRECT = [
    pytest.param("train.py", STEPS, id="DDP-device_ids-local_rank"),
    pytest.param("train.py", (*STEPS, "--sync", "manual"), id="manual-all_reduce-gradient-sync"),
    pytest.param("train_fsdp.py", STEPS, id="FSDP2-fully_shard"),
]


@pytest.mark.slow
@needs_emulator
@pytest.mark.parametrize(("script", "args"), CORRECT)
def test_correct_distributed_port_passes_on_every_rank(script, args):
    result = _validate(PAIR / "port", script, args)
    assert_correct_port(result)
    roles = sorted(run.role for run in result.runs)
    assert roles == ["golden rank 0", "golden rank 1", "port rank 0", "port rank 1", "reference rank 0",
                     "reference rank 1"]
    assert all(run.device.startswith("neuron") for run in result.runs if run.role.startswith("port"))
    for rank in (0, 1):
        grads = [c for c in result.comparisons if c.key.startswith(f"rank{rank}/") and c.kind == "grad"]
        assert {c.step for c in grads} == {0, 1, 2}, f"rank {rank} compared no gradients of 3 steps"


# (id, script, args, patches to train.py of the correct port, the key the first divergence must
# start with, the module it names or None)
DEFECTS = [
    ("dropped-all_reduce-in-gradient-sync", "train.py", (*STEPS, "--sync", "manual"),
     (("train.py", "            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)\n", ""),), "rank0/s0/grad/0:inp.weight",
     "0:inp.weight"),
    ("every-rank-on-device-0", "train.py", STEPS,
     (("train.py", "torch.neuron.set_device(local_rank)", "torch.neuron.set_device(0)"),
      ("train.py", 'torch.device("neuron", local_rank)', 'torch.device("neuron", 0)'),
      ("train.py", "device_ids=[local_rank], output_device=local_rank", "device_ids=[0], output_device=0")),
     "rank1/device", None),
    # an epoch is 2 steps: without set_epoch, step 2 repeats epoch 0's order
    ("missing-sampler-set_epoch", "train.py", STEPS, (("train.py", "        sampler.set_epoch(epoch)\n", ""),),
     "rank0/s2/fwd/0:inp", "0:inp"),
]


@pytest.mark.slow
@needs_emulator
@pytest.mark.parametrize(("script", "args", "patches", "key", "module"), [d[1:] for d in DEFECTS],
                         ids=[d[0] for d in DEFECTS])
def test_seeded_distributed_defect_fails_naming_the_rank(tmp_path, script, args, patches, key, module):
    port = copy_with_patches(PAIR / "port", tmp_path / "port", patches)
    result = _validate(port, script, args)
    assert not result.failures, result.failures
    assert result.verdict is Verdict.FAIL and result.exit_code == 1
    assert result.divergence is not None
    assert result.divergence.key.startswith(key), result.divergence.key
    assert result.divergence.module_path == module


@pytest.mark.slow
@needs_emulator
@pytest.mark.parametrize("nproc", [pytest.param(2, id="2-ranks")])
def test_a_crashing_rank_is_named_and_its_peers_do_not_hang(tmp_path, nproc):
    # Rank 1 of the port dies before its first collective; rank 0 would wait for it until gloo's
    # 30-minute timeout unless validate stops it.
    port = copy_with_patches(PAIR / "port", tmp_path / "port", (
        ("train.py", "    rank, world = dist.get_rank(), dist.get_world_size()\n",
         "    rank, world = dist.get_rank(), dist.get_world_size()\n"
         "    if rank == 1:\n        raise RuntimeError('rank 1 lost its device')\n"),))
    result = run_validation(ValidateRequest(original=PAIR / "original", port=port, mode="script",
                                            script="train.py", args=STEPS, nproc=nproc, timeout=240, golden=False))
    # The original ran through and the port's own code raised: a FAIL of the port, naming the line.
    assert result.verdict is Verdict.FAIL and result.exit_code == 1, (result.verdict, result.failures)
    line = next(i for i, t in enumerate((port / "train.py").read_text().splitlines(), 1) if "lost its device" in t)
    assert [(f.role, f.kind, f.location) for f in result.failures] == [("port rank 1", "defect", f"train.py:{line}")]
    assert "rank 1 lost its device" in result.failures[0].message
    assert "rank1/crash" in [c.key for c in result.comparisons if c.verdict is Verdict.FAIL]


@pytest.mark.slow
@needs_emulator
def test_wrong_device_ids_crash_is_a_fail_naming_the_port_line(tmp_path):
    # Each rank's model sits on neuron:<local_rank>, DDP is told device 0: rank 1 crashes in the
    # port's own code (as on a GPU node) while the original ran through — a defect of the port.
    port = copy_with_patches(PAIR / "port", tmp_path / "port", (
        ("train.py", "device_ids=[local_rank], output_device=local_rank", "device_ids=[0], output_device=0"),))
    result = _validate(port, "train.py", STEPS)
    assert result.verdict is Verdict.FAIL and result.exit_code == 1, (result.verdict, result.failures)
    defects = [f for f in result.failures if f.kind == "defect"]
    # It raises where rank 1's input meets the weights on neuron:0 (the model's forward); the
    # edited DDP line is named as a port line migrate did not write.
    assert defects and all(f.role.startswith("port rank") and (port / f.location.split(":")[0]).is_file()
                           and f.location.split(":")[1].isdigit() for f in defects), result.failures
    assert "Expected all tensors to be on the same device" in defects[0].message
    assert not [f for f in result.failures if f.kind != "defect"], result.failures
    line = next(i for i, t in enumerate((port / "train.py").read_text().splitlines(), 1) if "device_ids=[0]" in t)
    assert result.divergence is not None and result.divergence.key.endswith("/crash"), result.divergence
    assert ("train.py", line, "changed") in [(h.path, h.line, h.kind) for h in result.divergence.hand_edits]


@pytest.mark.slow
@needs_emulator
def test_inherited_launcher_variables_get_a_rendezvous_per_run(monkeypatch):
    # validate started from a shell where a torchrun-style launch was set up by hand: with one
    # MASTER_PORT for all, the three concurrent runs collided (EADDRINUSE on the store).
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")  # replaced: without --nproc each run is one rank
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    result = run_validation(ValidateRequest(original=PAIR / "original", port=PAIR / "port", mode="script",
                                            script="train.py", args=STEPS, timeout=240))
    assert_correct_port(result)
    assert sorted(run.role for run in result.runs) == ["golden rank 0", "port rank 0", "reference rank 0"]


@pytest.mark.parametrize("build", [
    pytest.param(lambda: torch.nn.Embedding(8, 4), id="embedding-normal_"),
    pytest.param(lambda: torch.nn.Linear(4, 4), id="linear-kaiming_uniform_"),
])
def test_random_init_on_the_meta_device_draws_nothing(build):
    # FSDP2's large-model idiom: build under `with torch.device("meta")`, shard, then to_empty +
    # reset_parameters. The port's CPU random mode tried to copy the meta tensor to the CPU.
    with CpuRandomMode(), torch.device("meta"):
        module = build()
    assert all(p.device.type == "meta" for p in module.parameters())
