"""tests/fixtures/projects/ssm_kernels and seq_extensions through `check` (the CLI runs the
project sweep first): every row of their EXPECTED.md that needs the sweep is reported on its
line by the expected rule, and no kernel guard becomes an `is_neuron` after `migrate`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda2neuron.cli import main

PROJECTS = Path(__file__).parents[1] / "fixtures" / "projects"
PROJECT = PROJECTS / "ssm_kernels"
SEQ = PROJECTS / "seq_extensions"

# (file, needle in the line, code that must report that line)
ROWS = [
    ("ssmlib/ops/norm_kernels.py", "assert x.is_cuda and weight.is_cuda", "CN104"),
    ("ssmlib/ops/scan.py", "import scan_ext", "CN617"),
    ("ssmlib/ops/scan.py", "if not u.is_cuda:", "CN104"),
    ("ssmlib/ops/scan.py", "return scan_ext.fwd(", "CN617"),
    ("ssmlib/jit.py", "return load(name=name", "CN602"),
    ("ssmlib/plugins.py", "load_plugin(\"fused_ops\"", "CN602"),
    ("ssmlib/model.py", "from ssmlib.ops.scan import", "CN617"),
    ("ssmlib/model.py", "from .ops.norm_kernels import", "CN617"),
    ("ssmlib/model.py", "fast = x.is_cuda and self.weight.is_cuda", "CN104"),
    ("ssmlib/model.py", "h = rms_norm(x, self.weight)", "CN617"),
    ("ssmlib/model.py", "selective_scan(h, delta) if x.is_cuda", "CN104"),
]


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> set[tuple[str, int, str]]:
    out = tmp_path_factory.mktemp("check") / "report.json"
    code = main(["check", str(PROJECT), "--no-cache", "--output-format", "json", "--output-file", str(out), "-q"])
    assert code == 1
    data = json.loads(out.read_text())
    return {
        (Path(f["path"]).resolve().relative_to(PROJECT.resolve()).as_posix(), f["line"], f["code"])
        for f in data["manual_actions"] + data["edits"]
    }


def _line(file: str, needle: str) -> int:
    lines = (PROJECT / file).read_text(encoding="utf-8").splitlines()
    [number] = [i + 1 for i, text in enumerate(lines) if needle in text]
    return number


# Plain torch beside the kernels (the sweep records which names of a kernel module reach one).
NOT_REPORTED = [
    ("ssmlib/model.py", "h = rms_norm_ref(x, self.weight)", "CN617"),
]


@pytest.mark.parametrize(("file", "needle", "code"), NOT_REPORTED, ids=[f"{f}:{n}" for f, n, _ in NOT_REPORTED])
def test_reference_paths_are_not_reported(findings, file, needle, code):
    assert (file, _line(file, needle), code) not in findings


@pytest.mark.parametrize(("file", "needle", "code"), ROWS, ids=[f"{f}:{n}" for f, n, _ in ROWS])
def test_reported_where_reached(findings, file, needle, code):
    assert (file, _line(file, needle), code) in findings


def test_no_kernel_guard_turns_into_is_neuron(tmp_path):
    port = tmp_path / "port"
    assert main(["migrate", str(PROJECT), "--out", str(port), "--no-cache", "-q"]) in (0, 1)
    for path in (port / "ssmlib").rglob("*.py"):
        assert "is_neuron" not in path.read_text(encoding="utf-8"), path
    assert 'torch.device("neuron" if torch.neuron.is_available() else "cpu")' in (port / "ssmlib" / "model.py").read_text()


# seq_extensions: extensions built by CppExtension from .cu sources (package-prefixed names, in an
# `if` and a list), a kernel module imported by importlib, a script that writes .cu sources.
SEQ_ROWS = [
    ("setup.py", 'CppExtension("seqlib.edit_cuda"', "CN602"),
    ("setup.py", 'CppExtension("align_cuda_binding"', "CN602"),
    ("setup.py", '"""Builds seqlib', "CN602"),  # the CUDA build as a whole
    ("seqlib/edit.py", "from seqlib import edit_cuda", "CN617"),
    ("seqlib/align.py", "if p_choose.is_cuda:", "CN104"),
    ("seqlib/align.py", "from align_cuda_binding import", "CN617"),
    ("seqlib/align.py", "align(p_choose, alpha, eps)", "CN617"),
    ("seqlib/optim.py", 'importlib.import_module("fused_adam_cuda")', "CN616"),
    ("seqlib/optim.py", "fused_ops.adam(", "CN616"),
    ("seqlib/kernels/gen.py", "conv_forward_kernels.cu", "CN602"),
    ("csrc/edit_kernel.cu", "__global__", "CN741"),
]
SEQ_NOT_REPORTED = [
    ("setup.py", 'CppExtension("seqlib.edit_host"', "CN602"),
    ("seqlib/edit.py", "from seqlib import edit_host", "CN617"),
    ("seqlib/kernels/gen.py", "with open(path) as f:", "CN602"),
]


@pytest.fixture(scope="module")
def seq_findings(tmp_path_factory) -> set[tuple[str, int, str]]:
    out = tmp_path_factory.mktemp("check") / "report.json"
    assert main(["check", str(SEQ), "--no-cache", "--output-format", "json", "--output-file", str(out), "-q"]) == 1
    data = json.loads(out.read_text())
    return {
        (Path(f["path"]).resolve().relative_to(SEQ.resolve()).as_posix(), f["line"], f["code"])
        for f in data["manual_actions"] + data["edits"]
    }


def _seq_line(file: str, needle: str) -> int:
    [number] = [i + 1 for i, text in enumerate((SEQ / file).read_text(encoding="utf-8").splitlines()) if needle in text]
    return number


@pytest.mark.parametrize(("file", "needle", "code"), SEQ_ROWS, ids=[f"{f}:{n}" for f, n, _ in SEQ_ROWS])
def test_seq_extensions_reported_where_reached(seq_findings, file, needle, code):
    assert (file, _seq_line(file, needle), code) in seq_findings


@pytest.mark.parametrize(("file", "needle", "code"), SEQ_NOT_REPORTED, ids=[f"{f}:{n}" for f, n, _ in SEQ_NOT_REPORTED])
def test_seq_extensions_host_paths_not_reported(seq_findings, file, needle, code):
    assert (file, _seq_line(file, needle), code) not in seq_findings


def test_seq_extensions_device_branch_keeps_is_cuda(tmp_path):
    port = tmp_path / "port"
    assert main(["migrate", str(SEQ), "--out", str(port), "--no-cache", "-q"]) in (0, 1)
    text = (port / "seqlib" / "align.py").read_text(encoding="utf-8")
    assert "if p_choose.is_cuda:" in text and "is_neuron" not in text


# A test module imports a kernel through the package's re-export (detectron2's tests of `_C` ops):
# its "skip without CUDA" gate is reported and kept, also where the test reaches the kernel through
# another test method (`self.test_x_cpu(device="cuda")`); a test of plain code from the same
# package is retargeted as usual.
REEXPORT_PROJECT = {
    "setup.py": "import torch\nfrom torch.utils.cpp_extension import CppExtension, CUDAExtension\n"
                "extension = CppExtension\nif torch.cuda.is_available():\n    extension = CUDAExtension\n"
                "ext_modules = [extension(\"pkg._C\", [\"csrc/a.cpp\", \"csrc/a.cu\"])]\n",
    "pkg/__init__.py": "",
    "pkg/layers/__init__.py": "from .deform import DeformConv\nfrom .plain import Linear\n",
    "pkg/layers/deform.py": "from pkg import _C\n\nclass DeformConv:\n    def __call__(self, x):\n        return _C.deform(x)\n",
    "pkg/layers/plain.py": "class Linear:\n    def __call__(self, x):\n        return x\n",
    "tests/test_layers.py": (
        "import unittest\nimport torch\nfrom pkg.layers import DeformConv, Linear\n\n"
        "class T(unittest.TestCase):\n"
        "    @unittest.skipIf(not torch.cuda.is_available(), 'needs CUDA')\n"
        "    def test_deform(self):\n        DeformConv()(torch.ones(2).cuda())\n\n"
        "    @unittest.skipIf(not torch.cuda.is_available(), 'needs CUDA')\n"
        "    def test_linear(self):\n        Linear()(torch.ones(2).cuda())\n\n"
        "    def test_deform_cpu(self, device='cpu'):\n        DeformConv()(torch.ones(2, device=device))\n\n"
        "    @unittest.skipIf(not torch.cuda.is_available(), 'needs CUDA')\n"
        "    def test_deform_cuda(self):\n        self.test_deform_cpu(device='cuda')\n"
    ),
}


@pytest.mark.parametrize(("line", "kind"), [(6, "manual_actions"), (10, "fixable"), (17, "manual_actions")],
                         ids=["gate-of-a-re-exported-kernel-is-reported", "gate-of-plain-code-is-ported",
                              "gate-of-a-method-calling-the-kernel-through-self"])
def test_a_kernel_reexported_by_a_package_keeps_its_tests_gate(tmp_path, line, kind):
    for name, text in REEXPORT_PROJECT.items():
        path = tmp_path / "proj" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    out = tmp_path / "report.json"
    main(["check", str(tmp_path / "proj"), "--no-cache", "--output-format", "json", "--output-file", str(out), "-q"])
    data = json.loads(out.read_text())
    cn201 = {(kind_, f["line"]) for kind_ in ("manual_actions", "fixable") for f in data[kind_]
             if f["code"] == "CN201" and f["path"].endswith("test_layers.py")}
    assert (kind, line) in cn201, cn201


# BasicSR and the mm* projects name each extension through a build helper (`def make_ext(name,
# module, ...): ... return builder(name=f"{module}.{name}", ...)`, with `builder = CUDAExtension`
# where CUDA is there): only the helper's calls name them, and the module that imports one behind
# `try:` keeps its input check on CUDA (opened, it handed neuron tensors to the kernel).
HELPER_PROJECT = {
    "setup.py": (
        "import os\n\nimport torch\nfrom setuptools import setup\n"
        "from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension\n\n\n"
        "def make_ext(name, module, sources, sources_cuda=()):\n"
        "    if torch.cuda.is_available() or os.getenv('FORCE_CUDA') == '1':\n"
        "        builder = CUDAExtension\n        sources = [*sources, *sources_cuda]\n"
        "    else:\n        builder = CppExtension\n"
        "    return builder(name=f'{module}.{name}', sources=[os.path.join(*module.split('.'), s) for s in sources])\n\n\n"
        "setup(name='warp', ext_modules=[\n"
        "    make_ext(name='shift_ext', module='warp.ops', sources=['src/shift.cpp'], sources_cuda=['src/shift_kernel.cu']),\n"
        "    make_ext('blur_ext', 'warp.ops', ['src/blur.cpp'], ['src/blur_kernel.cu']),\n"
        "], cmdclass={'build_ext': BuildExtension})\n"
    ),
    "warp/__init__.py": "",
    "warp/ops/__init__.py": "",
    "warp/ops/shift.py": (
        "import torch\nfrom torch.autograd import Function\n\ntry:\n    from . import shift_ext\nexcept ImportError:\n"
        "    shift_ext = None\n\n\nclass ShiftFunction(Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        if not x.is_cuda:\n            raise NotImplementedError\n        out = x.new_empty(x.shape)\n"
        "        shift_ext.forward(x, out)\n        return out\n"
    ),
    "warp/ops/blur.py": "from warp.ops import blur_ext\n\n\ndef blur(x):\n    assert x.is_cuda\n    return blur_ext.forward(x)\n",
    "warp/ops/plain.py": "def double(x):\n    assert x.is_cuda\n    return x * 2\n",
}


@pytest.mark.parametrize(("file", "line", "kind"), [("shift.py", 13, "manual_actions"), ("blur.py", 5, "manual_actions"),
                                                     ("plain.py", 2, "fixable")],
                         ids=["keyword-call-of-the-helper", "positional-call-of-the-helper", "plain-code-is-ported"])
def test_extensions_named_by_a_build_helper_keep_their_guards(helper_findings, file, line, kind):
    assert (kind, file, line) in helper_findings, helper_findings


@pytest.fixture(scope="module")
def helper_findings(tmp_path_factory) -> set[tuple[str, str, int]]:
    root = tmp_path_factory.mktemp("helper")
    for name, text in HELPER_PROJECT.items():
        path = root / "proj" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    out = root / "report.json"
    main(["check", str(root / "proj"), "--no-cache", "--output-format", "json", "--output-file", str(out), "-q"])
    data = json.loads(out.read_text())
    return {(kind, Path(f["path"]).name, f["line"]) for kind in ("manual_actions", "fixable") for f in data[kind]
            if f["code"] == "CN104"}
