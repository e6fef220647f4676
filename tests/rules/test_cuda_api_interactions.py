"""torch.cuda API rules (CN2xx) together: name resolution (aliases, shadowing, look-alike names), rule interplay, targets."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cuda2neuron.core import Config, Settings
from cuda2neuron.workspace import fix_source, lint_source


def _config(target: str = "neuron", unsafe: bool = False, min_torch=(2, 9)) -> Config:
    settings = replace(Settings(target=target), min_torch=min_torch)
    return Config(select=("CN2",), unsafe_fixes=unsafe, settings=settings)


REWRITES = [
    (
        "local-import-in-function",
        "def f():\n    import torch as t\n    t.cuda.synchronize()\n",
        "def f():\n    import torch as t\n    t.neuron.synchronize()\n",
    ),
    (
        "aliased-from-import-dropped",
        # The engine finds the `as` name, so an aliased import left unused is removed too.
        "from torch.cuda import synchronize as sync\nsync()\n",
        "import torch\n\ntorch.neuron.synchronize()\n",
    ),
    (
        "class-attribute-does-not-shadow-method-body",
        "import torch\nclass A:\n    torch = None\n    def m(self):\n        torch.cuda.empty_cache()\n",
        "import torch\nclass A:\n    torch = None\n    def m(self):\n        torch.neuron.empty_cache()\n",
    ),
    (
        "reference-as-default-argument",
        "import torch\ndef f(sync=torch.cuda.synchronize):\n    sync()\n",
        "import torch\ndef f(sync=torch.neuron.synchronize):\n    sync()\n",
    ),
    (
        "properties-call-moves-field-reported",
        "import torch\nmajor = torch.cuda.get_device_properties(0).major\n",
        "import torch\nmajor = torch.neuron.get_device_properties(0).major\n",
    ),
    (
        "nvtx-via-from-import",
        "from torch.cuda.nvtx import range as nvtx_range\nwith nvtx_range('step'):\n    pass\n",
        "import torch\n\nwith torch.profiler.record_function('step'):\n    pass\n",
    ),
    (
        "stream-context",
        "import torch\ns = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    torch.cuda.current_stream().wait_stream(s)\n",
        "import torch\ns = torch.neuron.Stream()\nwith torch.neuron.stream(s):\n    torch.neuron.current_stream().wait_stream(s)\n",
    ),
]


@pytest.mark.parametrize(("source", "expected"), [r[1:] for r in REWRITES], ids=[r[0] for r in REWRITES])
def test_rewrite(source: str, expected: str):
    fixed, _ = fix_source(source, "t.py", _config())
    assert fixed == expected
    compile(fixed, "t.py", "exec")
    assert fix_source(fixed, "t.py", _config())[0] == fixed


UNTOUCHED = [
    ("assignment-shadows", "import torch\ndef f():\n    torch = load()\n    torch.cuda.synchronize()\n"),
    ("lambda-param-shadows", "import torch\nf = lambda torch: torch.cuda.device_count()\n"),
    ("unimported-torch", "torch.cuda.synchronize()\n"),
    ("chain-through-call", "import torch\nget_torch().cuda.synchronize()\n"),
    ("method-on-other-object", "from torch.cuda import synchronize\nbarrier.synchronize()\n"),
    ("keyword-named-like-api", "from torch.cuda import empty_cache\nrun(empty_cache=False)\n"),
    ("project-cuda-module", "from myproject import cuda\ncuda.is_available()\n"),
    ("profiler-activity", "from torch.profiler import ProfilerActivity\nacts = [ProfilerActivity.CUDA]\n"),
    ("use-cuda-flag", "USE_CUDA = True\nparser.add_argument('--cuda', action='store_true')\n"),
    ("string-and-comment", "# torch.cuda.synchronize()\nmsg = 'torch.cuda.synchronize() is slow'\n"),
    ("deterministic-algorithms", "import torch\ntorch.use_deterministic_algorithms(True)\n"),
    ("accelerator-code", "import torch\nif torch.accelerator.is_available():\n    torch.accelerator.synchronize()\n"),
    ("properties-name-total-memory", "import torch\np = torch.neuron.get_device_properties(0)\nprint(p.name, p.total_memory)\n"),
]


@pytest.mark.parametrize("source", [u[1] for u in UNTOUCHED], ids=[u[0] for u in UNTOUCHED])
@pytest.mark.parametrize("target", ["neuron", "accelerator"])
def test_untouched(source: str, target: str):
    assert lint_source(source, "t.py", _config(target, unsafe=True)) == ()
    assert fix_source(source, "t.py", _config(target, unsafe=True))[0] == source


def test_backend_flags_are_reported_but_kept_for_the_accelerator_target():
    # The accelerator port still runs on CUDA, where the switches act: kept even with unsafe
    # fixes, but reported, since the speed-up or determinism they promise is gone on Neuron.
    source = "import torch\ntorch.backends.cudnn.benchmark = True\ntorch.set_float32_matmul_precision('high')\n"
    assert [f.code for f in lint_source(source, "t.py", _config("neuron"))] == ["CN205", "CN205"]
    found = lint_source(source, "t.py", _config("accelerator", unsafe=True))
    assert [(f.code, f.fix) for f in found] == [("CN205", None), ("CN205", None)]
    assert fix_source(source, "t.py", _config("accelerator", unsafe=True))[0] == source


def test_backend_flags_removal_needs_unsafe_opt_in():
    source = "import torch\ntorch.backends.cudnn.benchmark = True\nx = 1\n"
    assert fix_source(source, "t.py", _config())[0] == source
    assert fix_source(source, "t.py", _config(unsafe=True))[0] == "import torch\nx = 1\n"


def test_properties_fields_remain_manual_after_the_move():
    source = "import torch\np = torch.cuda.get_device_properties(0)\nif p.major >= 8:\n    pass\n"
    fixed, findings = fix_source(source, "t.py", _config())
    assert "torch.neuron.get_device_properties(0)" in fixed
    remaining = [(f.code, f.line) for f in findings if not f.applied]
    assert remaining == [("CN203", 3)]
    assert [(f.code, f.line) for f in lint_source(fixed, "t.py", _config())] == [("CN203", 3)]


REPORTS = [
    # (id, source, code, guidance fragment) — every report names what to write instead.
    ("capability", "import torch\ncc = torch.cuda.get_device_capability()\n", "CN202", "bfloat16"),
    ("mem-get-info", "import torch\nfree, total = torch.cuda.mem_get_info()\n", "CN202", "total_memory"),
    ("cuda-graph", "import torch\ng = torch.cuda.CUDAGraph()\n", "CN202", "torch.compile"),
    ("graphed-callables", "import torch\nm = torch.cuda.make_graphed_callables(m, (x,))\n", "CN202", "torch.compile"),
    ("version", "import torch\nv = torch.version.cuda\n", "CN202", "torch.neuron.is_available()"),
    ("nvtx-push", "import torch\ntorch.cuda.nvtx.range_push('x')\n", "CN204", "record_function"),
    ("nvtx-mark", "from torch.cuda import nvtx\nnvtx.mark('x')\n", "CN204", "record_function"),
    ("minor", "import torch\nv = torch.cuda.get_device_properties(0).minor\n", "CN203", "version check"),
]


@pytest.mark.parametrize(("source", "code", "fragment"), [r[1:] for r in REPORTS], ids=[r[0] for r in REPORTS])
def test_reports_carry_concrete_guidance(source: str, code: str, fragment: str):
    findings = [f for f in lint_source(source, "t.py", _config()) if f.code == code]
    assert len(findings) == 1
    assert findings[0].fix is None
    assert fragment in findings[0].guidance
