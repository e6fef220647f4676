"""Device family (CN1xx) as a whole: aliases, shadowing, cases that need several rules at once.

The per-rule VALID/INVALID examples live on the rule classes; this table covers what a single
rule's examples cannot: the device rules together on one file, reaching a fixed point.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from cuda2neuron.core import Config, Settings
from cuda2neuron.workspace import fix_source, lint_source


def _config(target: str = "neuron", unsafe: bool = False) -> Config:
    return Config(select=("CN1",), unsafe_fixes=unsafe, settings=replace(Settings(), target=target))


REWRITES = [
    pytest.param(
        # A device type derived from a string: the literal, the default and the test change together.
        'def setup(device="cuda"):\n'
        '    device_type = "cuda" if "cuda" in device else "cpu"\n'
        "    return device_type\n",
        'def setup(device="neuron"):\n'
        '    device_type = "neuron" if "neuron" in device else "cpu"\n'
        "    return device_type\n",
        False,
        id="device-type-follows-literal-into-test-and-default",
    ),
    pytest.param(
        "import torch as th\n"
        "dev = th.device('cuda', 0)\n"
        "x = th.zeros(3).cuda()\n"
        "ok = x.is_cuda and x.device.type == 'cuda'\n",
        "import torch as th\n"
        "dev = th.device('neuron', 0)\n"
        'x = th.zeros(3).to("neuron")\n'
        "ok = x.is_neuron and x.device.type == 'neuron'\n",
        False,
        id="aliased-torch-several-rules-one-file",
    ),
    pytest.param(
        "from torch.cuda import FloatTensor\n"
        "with torch.cuda.device(1):\n"
        "    buf = FloatTensor(4)\n",
        "import torch\n\n"
        "with torch.neuron.device(1):\n"
        '    buf = torch.empty(4, dtype=torch.float32, device="neuron")\n',
        False,
        id="from-imports-removed-when-unused",
    ),
    pytest.param(
        "import torch\n"
        "with torch.cuda.device('cuda:1'):\n"
        "    pass\n",
        "import torch\n"
        "with torch.neuron.device('neuron:1'):\n"
        "    pass\n",
        False,
        id="context-manager-and-its-string-argument",
    ),
    pytest.param(
        "import os\n"
        "local_rank = int(os.environ['LOCAL_RANK'])\n"
        "model = model.to(local_rank)\n"
        "state = torch.load(p, map_location={'cuda:0': f'cuda:{local_rank}'})\n"
        "net.load_state_dict(torch.load(p, map_location=lambda s, loc: s.cuda(local_rank)))\n",
        "import os\n"
        "local_rank = int(os.environ['LOCAL_RANK'])\n"
        'model = model.to(f"neuron:{local_rank}")\n'
        "state = torch.load(p, map_location={'cuda:0': f'neuron:{local_rank}', 'neuron:0': f'neuron:{local_rank}'})\n"
        'net.load_state_dict(torch.load(p, map_location=lambda s, loc: s.to(device=f"neuron:{local_rank}")))\n',
        False,
        id="ddp-ordinals-and-map-location-forms",
    ),
    pytest.param(
        'import torch\nif x.device.type == "cuda":\n    torch.cuda.synchronize()\n',
        'import torch\nif x.device.type == "neuron":\n    torch.cuda.synchronize()\n',
        True,
        id="torch-only-guard-rewritten-with-unsafe-fixes",
    ),
    pytest.param(
        # A CUDA kernel guarded by a device test with a pure-PyTorch fallback: the fallback is the port.
        'if x.device.type == "cuda":\n    y = ext.fused(x)\nelse:\n    y = ref(x)\n',
        'if x.device.type == "cuda":\n    y = ext.fused(x)\nelse:\n    y = ref(x)\n',
        True,
        id="kernel-guard-never-rewritten",
    ),
]


@pytest.mark.parametrize(("source", "expected", "unsafe"), REWRITES)
def test_device_family_rewrites(source, expected, unsafe):
    fixed, _ = fix_source(source, "train.py", _config(unsafe=unsafe))
    assert fixed == expected
    compile(fixed, "train.py", "exec")
    again, _ = fix_source(fixed, "train.py", _config(unsafe=unsafe))
    assert again == fixed


# Device names the tool cannot prove are devices: the safety net (CN109) reports them for a
# person to judge, and nothing is rewritten.
REPORTED_ONLY = [
    pytest.param('def op(x, impl="cuda"):\n    assert impl in ["ref", "cuda"]\n', id="impl-selector"),
    pytest.param('USE_CUDA = os.environ.get("USE_CUDA", "cuda")\n', id="use-cuda-env"),
]


@pytest.mark.parametrize("source", REPORTED_ONLY)
def test_device_family_reports_unproven_devices_without_rewriting(source):
    findings = lint_source(source, "mod.py", _config(unsafe=True))
    assert findings and {f.code for f in findings} == {"CN109"}
    assert all(f.fix is None for f in findings)
    fixed, _ = fix_source(source, "mod.py", _config(unsafe=True))
    assert fixed == source


UNTOUCHED = [
    pytest.param(
        'parser.add_argument("--cuda", action="store_true")\nif args.cuda:\n    pass\n', id="cuda-flag"
    ),
    pytest.param(
        "from torch.profiler import ProfilerActivity\nacts = [ProfilerActivity.CUDA]\n", id="profiler-activity"
    ),
    pytest.param('log.info("falling back from cuda to cpu")\nprint(f"cuda:{rank}")\n', id="log-text"),
    pytest.param('def f():\n    """>>> pipe.to("cuda")"""\n    # model.cuda()\n', id="docstring-and-comment"),
    pytest.param(
        "import torch\n"
        "device = torch.accelerator.current_accelerator()\n"
        "x = torch.zeros(3, device=device)\n"
        "model.to(device)\n",
        id="torch-accelerator-code",
    ),
    pytest.param(
        "from deepspeed.accelerator import get_accelerator\n"
        "device = get_accelerator().device_name()\n"
        "model.to(device)\n",
        id="own-device-helper",
    ),
    pytest.param(
        "def get_device():\n    return pick_best_device()\n\nmodel.to(get_device())\n", id="project-device-function"
    ),
    pytest.param("def f(torch):\n    return torch.cuda.FloatTensor(3)\n", id="shadowed-torch-parameter"),
    pytest.param("model = DDP(model, device_ids=[local_rank], output_device=local_rank)\n", id="ddp-ordinals"),
    pytest.param("x = x.to(dtype)\ny = y.to(other_tensor)\n", id="to-dtype-or-tensor"),
]


@pytest.mark.parametrize("source", UNTOUCHED)
def test_device_family_leaves_non_devices_alone(source):
    assert lint_source(source, "mod.py", _config(unsafe=True)) == ()
    fixed, _ = fix_source(source, "mod.py", _config(unsafe=True))
    assert fixed == source


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            'import torch\ndevice = "cuda" if torch.cuda.is_available() else "cpu"\n',
            "import torch\ndevice = (torch.accelerator.current_accelerator() or torch.get_default_device()).type if torch.cuda.is_available() else \"cpu\"\n",
            id="accelerator-device-default",
        ),
        pytest.param(
            "import torch\nx = x.to(f'cuda:{rank}')\nok = x.is_cuda\n",
            "import torch\nx = x.to(f'{(torch.accelerator.current_accelerator() or torch.get_default_device()).type}:{rank}')\n"
            'ok = (x.device.type == getattr(torch.accelerator.current_accelerator(), "type", "no accelerator"))\n',
            id="accelerator-fstring-and-is-cuda",
        ),
        pytest.param(
            "x = x.to('cuda')\n",
            "import torch\n\nx = x.to((torch.accelerator.current_accelerator() or torch.get_default_device()).type)\n",
            id="accelerator-adds-import-torch",
        ),
    ],
)
def test_accelerator_target(source, expected):
    fixed, _ = fix_source(source, "m.py", _config(target="accelerator"))
    assert fixed == expected
    compile(fixed, "m.py", "exec")


def test_aliased_context_manager_is_resolved():
    # The engine's unused-import removal takes (module, name) without the alias, so the
    # aliased import line stays (unused, harmless); the call itself must be ported.
    source = "from torch.cuda import device as cuda_device\nwith cuda_device(1):\n    pass\n"
    fixed, _ = fix_source(source, "m.py", _config())
    assert "with torch.neuron.device(1):" in fixed
    compile(fixed, "m.py", "exec")


def test_guard_is_reported_as_manual_action_without_unsafe_fixes():
    source = 'if x.device.type == "cuda":\n    y = ext.fused(x)\n'
    fixed, findings = fix_source(source, "m.py", _config())
    assert fixed == source
    [finding] = findings
    assert finding.code == "CN103" and not finding.applied
    assert finding.fix is not None and finding.fix.safety.value == "display-only"
    assert "fallback" in finding.guidance
