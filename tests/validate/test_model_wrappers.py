"""validate on models the training script wraps.

`torch.compile`: validate's recording hooks are never traced into the user's graph, the graphs
the compiler makes are not recorded as the user's modules, and a seeded defect still FAILs at its
module. `nn.DataParallel`: the original runs as on one GPU under the shim, a port that dropped
the wrapper (what CN411 asks for) is compared module by module, and a port that kept it crashes
on the device with CN411's finding named."""

from __future__ import annotations

import textwrap

import pytest

from cuda2neuron.cli import main as cli_main
from cuda2neuron.validate import ValidateRequest, Verdict, run_validation
from validate_helpers import PORT_DEVICE, copy_with_patches, needs_emulator

pytestmark = [pytest.mark.slow, needs_emulator]

# Written in CUDA terms, as users write it; `aot_eager` traces with dynamo and AOTAutograd (the
# recording hooks crashed there, in AOTAutograd's output-alias replay) without inductor's
# minutes of code generation (a backend named by the user stays as written in the port).
TRAIN = textwrap.dedent("""
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).cuda()
    compiled = torch.compile(model, backend="aot_eager")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 8).cuda(), torch.randn(32, 4).cuda()
    for step in range(3):
        opt.zero_grad()
        loss = ((compiled(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
""")


def _migrated(root, train: str):
    """``root``/orig/train.py as written, ``root``/port migrate's output for it; the port's text."""
    (root / "orig").mkdir()
    (root / "orig" / "train.py").write_text(train)
    assert cli_main(["migrate", str(root / "orig"), "--out", str(root / "port"), "-q"]) == 0
    return (root / "port" / "train.py").read_text()


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("compiled")
    port = _migrated(root, TRAIN)
    assert ".cuda()" not in port and 'backend="aot_eager"' in port
    return root


def _validate(original, port):
    return run_validation(ValidateRequest(original=original, port=port, port_device=PORT_DEVICE, mode="script",
                                          script="train.py"))


def test_a_compiled_model_passes_with_only_the_users_modules_recorded(pair):
    r = _validate(pair / "orig", pair / "port")
    assert r.verdict is Verdict.PASS, (r.failures, [c for c in r.comparisons if c.verdict is not Verdict.PASS][:3])
    modules = {c.module_path for c in r.comparisons if c.kind == "forward"}
    assert modules and not any("GraphModule" in (m or "") or (m or "").startswith("-1:") for m in modules), modules
    # the user's layers inside the compiled model are each recorded, every step
    assert {m.rsplit(".", 1)[-1] for m in modules if m} >= {"0", "1", "2"}, modules
    assert {c.step for c in r.comparisons if c.kind == "forward"} == {0, 1, 2}


def test_a_defect_in_a_compiled_model_fails_at_its_module(pair, tmp_path):
    port = copy_with_patches(pair / "port", tmp_path / "port", (("train.py", "nn.GELU()", "nn.ReLU()"),))
    r = _validate(pair / "orig", port)
    assert r.verdict is Verdict.FAIL, r.counts()
    assert r.divergence is not None and r.divergence.module_path.endswith(".1"), r.divergence


DATA_PARALLEL = textwrap.dedent("""
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    model = nn.DataParallel(nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 8), torch.randn(32, 4).cuda()
    for step in range(3):
        opt.zero_grad()
        out = model(x)  # a host batch: DataParallel moves it to the device
        x.mul_(0.5)  # the host batch changes in place; the device copy must not
        loss = ((out - y) ** 2).mean()
        loss.backward()
        opt.step()
""")
WRAPPED = "model = nn.DataParallel(nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))).to(\"neuron\")"
UNWRAPPED = "model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(\"neuron\")"


@pytest.fixture(scope="module")
def data_parallel(tmp_path_factory):
    root = tmp_path_factory.mktemp("data_parallel")
    assert WRAPPED in _migrated(root, DATA_PARALLEL)
    return root


def test_a_port_that_dropped_data_parallel_passes_module_by_module(data_parallel, tmp_path):
    # CN411's advice: drop the wrapper, and move the inputs it moved
    port = copy_with_patches(data_parallel / "port", tmp_path / "port", (
        ("train.py", WRAPPED, UNWRAPPED), ("train.py", "out = model(x)", 'out = model(x.to("neuron"))')))
    r = _validate(data_parallel / "orig", port)
    assert r.verdict is Verdict.PASS, (r.failures, [c for c in r.comparisons if c.verdict is not Verdict.PASS][:3])
    modules = {c.module_path for c in r.comparisons if c.kind == "forward"}
    assert {"0:0", "0:1", "0:2"} <= modules, modules  # the wrapped model is the root: no "module." level
    assert {c.step for c in r.comparisons if c.kind == "grad"} == {0, 1, 2}


def test_a_port_that_kept_data_parallel_crashes_with_cn411_named(data_parallel):
    r = _validate(data_parallel / "orig", data_parallel / "port")
    assert r.verdict is Verdict.FAIL and r.exit_code == 1, r.counts()
    # At DataParallel's scatter kernel. The message is the build's: a CPU build has no
    # torch._C._scatter (AttributeError), a CUDA build's refuses the device's stream (RuntimeError).
    assert any(f.kind == "defect" and "torch._C._scatter(" in f.traceback for f in r.failures), r.failures
    assert r.divergence is not None and "CN411" in {f.code for f in r.divergence.findings}, r.divergence
