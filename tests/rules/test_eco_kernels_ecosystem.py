"""The full catalog over tests/fixtures/projects/kernels_ecosystem: nothing CUDA-specific is left
behind silently (EXPECTED.md of that project is the specification).

Each row names a construct of EXPECTED.md by a piece of its source line. After ``migrate`` (safe
fixes), the construct must be *handled*: either gone from the output (rewritten) or still there
with a finding left for the user on that line. Rows may also name text that must NOT appear:
the CUDA-only fast paths must keep taking their pure-PyTorch fallback, so their guards must never
turn into neuron checks.

Rows owned by another rule family are skipped until that family is in the catalog (its rules
land on main in parallel); a family counts as present once it has more than CN101, the
engine's seed rule.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from cuda2neuron.core import Config
from cuda2neuron.kinds import catalog
from cuda2neuron.workspace import fix_source

PROJECT = Path(__file__).parents[1] / "fixtures" / "projects" / "kernels_ecosystem"

# (file, needle in the original line, owning family or code, text that must not appear after)
ROWS = [
    # fastmlp/triton_ops.py
    ("fastmlp/triton_ops.py", "import triton\n", "CN6", None),
    ("fastmlp/triton_ops.py", "import triton.language as tl", "CN6", None),
    ("fastmlp/triton_ops.py", "@triton.jit", "CN6", None),
    ("fastmlp/triton_ops.py", "if HAS_TRITON and x.is_cuda:", "CN6", "is_neuron"),
    # fastmlp/plugin.py
    ("fastmlp/plugin.py", "ext = load(", "CN6", None),
    ("fastmlp/plugin.py", 'if x.device.type == "cuda":', "CN6", 'device.type == "neuron"'),
    # fastmlp/layers.py
    ("fastmlp/layers.py", "from apex.normalization import FusedLayerNorm", "CN6", None),
    ("fastmlp/layers.py", "from flash_attn import flash_attn_func", "CN6", None),
    ("fastmlp/layers.py", "y = flash_attn_func(q, k, v", "CN6", None),
    ("fastmlp/layers.py", "import xformers.ops as xops", "CN6", None),
    ("fastmlp/layers.py", "xops.memory_efficient_attention(", "CN6", None),
    ("fastmlp/layers.py", "q.is_cuda and q.dtype", "CN6", "is_neuron"),
    ("fastmlp/layers.py", "if xops is not None and q.is_cuda:", "CN6", "is_neuron"),
    # fastmlp/gpu_utils.py
    ("fastmlp/gpu_utils.py", "import pynvml", "CN6", None),
    ("fastmlp/gpu_utils.py", "pynvml.nvmlInit()", "CN6", None),
    ("fastmlp/gpu_utils.py", "pynvml.nvmlDeviceGetHandleByIndex", "CN6", None),
    ("fastmlp/gpu_utils.py", 'shutil.which("nvidia-smi")', "CN6", None),
    ("fastmlp/gpu_utils.py", "out = subprocess.run(", "CN6", None),
    ("fastmlp/gpu_utils.py", "torch.cuda.Event(enable_timing=True)", "CN2", None),
    ("fastmlp/gpu_utils.py", "return self.start.elapsed_time(self.end)", "CN6", None),
    ("fastmlp/gpu_utils.py", "torch.cuda.nvtx.range_push(name)", "CN2", None),
    ("fastmlp/gpu_utils.py", "torch.cuda.nvtx.range_pop()", "CN2", None),
    # train.py
    ("train.py", "from apex.optimizers import FusedAdam", "CN6", None),
    ("train.py", "return FusedAdam(params", "CN6", None),
    ("train.py", "import bitsandbytes as bnb", "CN6", None),
    ("train.py", "bnb.optim.AdamW8bit(", "CN6", None),
    ("train.py", 'fused=device.type == "cuda"', "CN6", "fused=device.type =="),
    ("train.py", 'torch.compile(model, mode="reduce-overhead")', "CN5", "reduce-overhead\")"),
    ("train.py", "side = torch.cuda.Stream()", "CN2", None),
    ("train.py", "side.wait_stream(torch.cuda.current_stream())", "CN2", None),
    ("train.py", "with torch.cuda.stream(side):", "CN2", None),
    ("train.py", "graph = torch.cuda.CUDAGraph()", "CN2", None),
    ("train.py", "with torch.cuda.graph(graph):", "CN2", None),
    ("train.py", 'with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):', "CN3", None),
    ("train.py", "torch.cuda.set_device(local_rank)", "CN4", None),
    ("train.py", 'dist.init_process_group("nccl")', "CN4", None),
    ("train.py", 'device = torch.device("cuda", local_rank)', "CN1", None),
    ("train.py", 'device = torch.device("cuda")', "CN1", None),
    ("train.py", "torch.cuda.get_device_name(device)", "CN2", None),
    ("train.py", "x.cuda(device, non_blocking=True)", "CN101", None),
    ("train.py", "torch.cuda.synchronize()", "CN2", None),
    # validate_entry.py
    ("validate_entry.py", "model = FastMLPNet(cfg).cuda()", "CN101", None),
    ("validate_entry.py", "logits = model(x.cuda())", "CN101", None),
    ("validate_entry.py", 'with torch.autocast("cuda", dtype=torch.bfloat16):', "CN3", None),
    ("validate_entry.py", 'x = torch.randn(4, 16, 32, device="cuda")', "CN1", None),
    # setup.py
    ("setup.py", "CUDAExtension(", "CN6", None),
]

# Files with no CUDA construct to rewrite: the port must leave them byte-identical. model.py
# picks the Triton kernel by name for half its blocks: reported (CN623), not rewritten.
UNTOUCHED = ["fastmlp/model.py", "fastmlp/__init__.py"]
REPORTED_ONLY = {"fastmlp/model.py": {"CN623"}}


def _present(owner: str) -> bool:
    codes = catalog()
    if len(owner) == 5:
        return owner in codes
    return len([c for c in codes if c.startswith(owner) and c != "CN101"]) > 0


@cache
def _migrated(rel: str):
    source = (PROJECT / rel).read_text(encoding="utf-8")
    output, findings = fix_source(source, rel, Config())
    return source, output, findings


def _row_id(row) -> str:
    file, needle, owner, _ = row
    return f"{file}:{needle.strip()[:40]}"


@pytest.mark.parametrize("row", ROWS, ids=[_row_id(r) for r in ROWS])
def test_construct_is_rewritten_or_reported(row):
    file, needle, owner, forbidden = row
    if not _present(owner):
        pytest.skip(f"rule family {owner} is not in the catalog on this branch")
    source, output, findings = _migrated(file)
    assert needle in source, "the fixture changed: update this table"
    if forbidden is not None:
        assert forbidden not in output, f"{file}: {forbidden!r} must not appear after the port"
    # Findings are located in the file as read (the output may have gained or lost lines above):
    # each line of the source holding the construct is rewritten or reported, and a construct
    # still in the output is reported.
    lines = [i for i, line in enumerate(source.splitlines(keepends=True), start=1) if needle in line]
    manual = []
    for line in lines:
        here = [f for f in findings if f.span.start_line <= line <= f.span.end_line]
        assert here, f"{file}:{line}: {needle.strip()!r} is neither rewritten nor reported"
        manual += [f for f in here if not f.applied]
    if needle in output:
        assert manual, f"{file}: {needle.strip()!r} is left behind without a finding"


@pytest.mark.parametrize("rel", UNTOUCHED)
def test_files_without_cuda_stay_byte_identical(rel):
    source, output, findings = _migrated(rel)
    assert output == source
    assert {f.code for f in findings} == REPORTED_ONLY.get(rel, set())
    assert all(f.fix is None for f in findings)


@pytest.mark.parametrize("rel", sorted({r[0] for r in ROWS}))
def test_port_compiles_and_is_idempotent(rel):
    _, output, _ = _migrated(rel)
    compile(output, rel, "exec")
    again, _ = fix_source(output, rel, Config())
    assert again == output


def test_fast_paths_keep_their_fallbacks():
    """Guarded CUDA kernels: after the port the fallbacks are what runs on Trainium (the guards
    keep their CUDA checks, marked so that the device rules leave them), and nothing is deleted."""
    _, triton_ops, _ = _migrated("fastmlp/triton_ops.py")
    _, plugin, _ = _migrated("fastmlp/plugin.py")
    _, layers, _ = _migrated("fastmlp/layers.py")
    pin = "  # cuda2neuron: ignore[CN1,CN2] CUDA-only fast path"
    assert "return F.gelu(x + bias)" in triton_ops
    assert "    if HAS_TRITON and x.is_cuda:" + pin in triton_ops
    assert "return reference_bias_act(x, bias, act)" in plugin
    assert '    if x.device.type == "cuda":' + pin in plugin
    assert "# The compiled kernel only exists for CUDA tensors" in plugin
    backend = layers.split("def attention_backend", 1)[1].split("class Attention", 1)[0]
    assert 'return "sdpa"' in backend
    assert "is_neuron" not in backend and '"neuron"' not in backend
