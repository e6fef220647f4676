"""Issue 10: constructs that a port of public repositories left on CUDA with no finding at all.

Each row is one class the port audit (bench/audit_port.py) found, written small: the CUDA lines
of the row must lie inside the span of a finding of the named rule, on both targets, since the
audit counts a CUDA line as silent when no finding's statement covers it. The rewrite stays out:
none of these constructs has a TorchNeuron name, so the source comes back unchanged.
"""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config, Settings
from cuda2neuron.workspace import fix_source

# (id, source, rule code, the lines that rule's findings must cover)
ROWS = [
    # fairseq's NAT models: host-side loops under the tensor's CUDA device.
    ("device-of-context", "import torch\nwith torch.cuda.device_of(t):\n    ids = t.tolist()\n", "CN202", [2]),
    ("device-of-from-import", "from torch.cuda import device_of\nwith device_of(t):\n    pass\n", "CN202", [2]),
    # Lightning's fork check: a private torch.cuda name looked up by string, no `_cuda` in it.
    (
        "private-name-by-getattr",
        'import torch\nbad = getattr(torch.cuda, "_is_in_bad_fork", None)\n',
        "CN614",
        [2],
    ),
    ("private-name-by-hasattr", "import torch\nif hasattr(torch.cuda, '_is_in_bad_fork'):\n    pass\n", "CN614", [2]),
    # detectron2's Caffe2 export: the device test goes with the op it picks.
    (
        "caffe2-copy-ops-behind-device-tests",
        "import torch\n"
        "def to_device(t, dst):\n"
        "    if t.device == dst:\n"
        "        return t\n"
        "    elif t.device.type == 'cuda' and dst.type == 'cpu':\n"
        "        return torch.ops._caffe2.CopyGPUToCPU(t)\n"
        "    elif t.device.type == 'cpu' and dst.type == 'cuda':\n"
        "        return torch.ops._caffe2.CopyCPUToGPU(t)\n",
        "CN620",
        [5, 6, 7, 8],
    ),
    (
        "caffe2-cuda-device-option",
        "from caffe2.proto import caffe2_pb2\nfrom caffe2.python import core\n"
        "opt = core.DeviceOption(caffe2_pb2.CUDA, 0)\n",
        "CN620",
        [3],
    ),
    (
        "caffe2-device-option-behind-name-test",
        "from caffe2.proto import caffe2_pb2\n"
        "if devices[0] == 'cuda':\n"
        "    op.device_option.CopyFrom(core.DeviceOption(caffe2_pb2.CUDA, 0))\n",
        "CN620",
        [2, 3],
    ),
    (
        "caffe2-device-option-behind-is-cuda",
        "from caffe2.proto import caffe2_pb2\n"
        "if x.is_cuda:\n"
        "    opt = caffe2_pb2.DeviceOption(device_type=caffe2_pb2.CUDA)\n",
        "CN620",
        [2, 3],
    ),
    # Device names whose use the tool cannot prove a device: reported by CN109, never rewritten.
    (
        "jit-archive-device-constants",
        'for node in graph.findAllNodes("prim::Constant"):\n'
        '    if str(node_get(node, "value")).startswith("cuda"):\n'
        "        node.copyAttributes(device_node)\n",
        "CN109",
        [2],
    ),
    ("accelerator-name-tuple", 'if accelerator in ("cuda", "gpu"):\n    devices = "1"\n', "CN109", [1]),
    (
        "expectation-table-keyed-by-device",
        'expected = Expectations({\n    ("cuda", 8): [0.1, 0.2],\n    ("xpu", 3): [0.1, 0.3],\n})\n',
        "CN109",
        [2],
    ),
    # torchtitan's trainer test: one item of the `with` patches a device type, another torch.cuda.
    (
        "device-type-patched-beside-a-cuda-patch",
        "from unittest.mock import patch\n"
        "with (\n"
        '    patch("pkg.cudagraph.utils.device_type", "cuda"),\n'
        '    patch("torch.cuda.is_available", return_value=True),\n'
        "):\n"
        "    run()\n",
        "CN208",  # the patch fakes a CUDA device: reported by the mock rule, not only the safety net
        [3],
    ),
    # torchft picks its NCCL group from a config string; fla's tests pick Triton by name.
    ("backend-config-string", 'if config.process_group == "nccl":\n    pg = make_group()\n', "CN409", [1]),
    ("triton-backend-keyword", 'y = short_conv(x, w, backend="triton")\n', "CN623", [1]),
    ("hypothesis-device-list", 'devices = st.sampled_from(["cpu", "cuda"])\n', "CN109", [1]),
    ("own-accelerator-name", 'class GPU:\n    def name(self):\n        return "cuda"\n', "CN109", [3]),
]



def _source_rows():
    return ROWS + [
        # detectron2's setup.py picks the builder at run time; the branch's macros and nvcc
        # flags are only covered by the whole-script finding.
        (
            "setup-builder-chosen-at-run-time",
            "from setuptools import setup\n"
            "from torch.utils.cpp_extension import CppExtension, CUDAExtension\n"
            "extension, macros, args = CppExtension, [], {'cxx': []}\n"
            "if with_cuda:\n"
            "    extension = CUDAExtension\n"
            "    macros += [('WITH_CUDA', None)]\n"
            "    args['nvcc'] = ['-DCUDA_HAS_FP16=1']\n"
            "setup(name='pkg', ext_modules=[extension('pkg._C', ['vision.cpp'], define_macros=macros)])\n",
            "CN602",
            [5, 6, 7],
        ),
    ]


# Look-alikes that must stay quiet: other objects' members, and an op under an unrelated test.
QUIET = [
    ("public-name-by-getattr", "import torch\nf = getattr(torch.cuda, 'synchronize', None)\n", "CN614"),
    ("own-device-of", "def device_of(t):\n    return t.device\nwith device_of(t):\n    pass\n", "CN202"),
    ("other-proto-cuda", "import mylib.proto as pb\nkind = pb.CUDA\n", "CN620"),
    # Where a rule that knows the use reports or rewrites the device name, the net says nothing.
    ("device-string-ported", 'import torch\nx = torch.device("cuda")\n', "CN109"),
    ("device-test-ported", 'pin = x.device.type == "cuda"\n', "CN109"),
    ("autocast-device", 'import torch\nwith torch.autocast("cuda"):\n    y = f(x)\n', "CN109"),
    ("lightning-trainer", 'from lightning import Trainer\nt = Trainer(accelerator="cuda")\n', "CN109"),
    ("nccl-backend-ported", 'import torch.distributed as dist\ndist.init_process_group("nccl")\n', "CN409"),
    ("triton-in-a-log-line", 'log.info("%s", impl == "triton")\n', "CN623"),
    ("device-as-docstring", 'def backend():\n    "cuda"\n', "CN109"),
    ("device-table-with-neuron-row", 'B = {"cuda": "nccl", "neuron": "neuron"}\n', "CN109"),
    ("caffe2-cpu-option", "from caffe2.proto import caffe2_pb2\nopt = caffe2_pb2.DeviceOption(device_type=caffe2_pb2.CPU)\n", "CN620"),
]


def _config(target: str) -> Config:
    return Config(settings=Settings(target=target))


@pytest.mark.parametrize("target", ["neuron", "accelerator"])
@pytest.mark.parametrize(("source", "code", "lines"), [pytest.param(*row[1:], id=row[0]) for row in _source_rows()])
def test_class_is_reported_over_its_cuda_lines(source, code, lines, target):
    # setup.py: a build script is judged by its name, and nothing else here minds the path.
    fixed, findings = fix_source(source, "setup.py", _config(target))
    spans = [f.span for f in findings if f.code == code]
    assert spans, f"{code} reported nothing"
    uncovered = [n for n in lines if not any(s.start_line <= n <= s.end_line for s in spans)]
    assert not uncovered, f"lines {uncovered} are covered by no {code} finding"
    assert all(not f.applied for f in findings if f.code == code), "a report, never a rewrite"
    assert fixed == source


@pytest.mark.parametrize(("source", "code"), [pytest.param(*row[1:], id=row[0]) for row in QUIET])
def test_look_alike_is_quiet(source, code):
    _, findings = fix_source(source, "t.py", _config("neuron"))
    assert [f for f in findings if f.code == code] == []


def test_one_report_per_if_chain():
    # Both copy ops of one chain anchor on the same `if`: one finding, not two at one place.
    _, findings = fix_source(ROWS[4][1], "t.py", _config("neuron"))
    assert [f.code for f in findings].count("CN620") == 1
