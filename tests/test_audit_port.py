"""bench/audit_port.py's own classification: which CUDA words are silent misses and which are
not constructs. The audit is what 'no silent misses' is measured with, so its excuses are
tested like a rule: each reason once, and each near miss that must stay a miss."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("audit_port", Path(__file__).parents[1] / "bench" / "audit_port.py")
audit_port = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(audit_port)


def _classify(tmp_path: Path, source: str, pointed: set[int] = frozenset(), kernel: set[int] = frozenset(), stacks: set[str] = frozenset()):
    (tmp_path / "m.py").write_text(source)
    return audit_port.classify(tmp_path, {"m.py": set(pointed)}, {"m.py": set(stacks)}, {"m.py": set(kernel)})


@pytest.mark.parametrize(
    "source, pointed, kernel, stacks, reason",
    [
        pytest.param("def _require_cuda():\n    pass\n", (), (), (), "a name the project defines", id="own-function-name"),
        pytest.param("def f(cuda_dir):\n    return cuda_dir\n", (), (), (), "a name the project defines", id="own-parameter"),
        pytest.param("state = {}\nstate['cuda_rng_state'] = 1\n", (), (), (), "a key of the program's own data", id="subscript-key"),
        pytest.param("d = {'cuda_rng_state': 1}\n", (), (), (), "a key of the program's own data", id="dict-key"),
        pytest.param(
            "import pytest\npytest.importorskip('tilelang')\n", (), (), (), "a test skipped where the package is absent",
            id="importorskip",
        ),
        pytest.param(
            "import cuda.bindings.driver as cuda\ndef f(stream: cuda.CUstream):\n    pass\n", {1}, (), (),
            "bound by a reported import", id="use-of-reported-import",
        ),
        pytest.param(
            "import triton\ngrid = (triton.cdiv(n, 128),)\n", {1}, (), {"triton"},
            "kernel language of a reported file", id="kernel-language",
        ),
    ],
)
def test_excused_with_reason(tmp_path, source, pointed, kernel, stacks, reason):
    misses, excused = _classify(tmp_path, source, pointed, kernel, stacks)
    assert misses == []
    assert excused and all(reason in line for line in excused), excused


@pytest.mark.parametrize(
    "source, pointed",
    [
        # The bare word is the API even where the project defines a method of that name.
        pytest.param("class M:\n    def cuda(self):\n        pass\nx = y.cuda()\n", (), id="bare-word-method"),
        pytest.param("import os\nos.environ['PYTORCH_CUDA_ALLOC_CONF'] = 'x'\n", (), id="environ-key-is-a-setting"),
        pytest.param("backend = 'nccl'\n", (), id="device-string"),
        # `torch.cuda` is not the `cuda` a reported `import cuda` binds.
        pytest.param("import cuda\nimport torch\nx = torch.cuda.current_stream()\n", {1}, id="attribute-not-the-import"),
        pytest.param("import selective_scan_cuda\n", (), id="extension-import-unreported"),
        # One use of the imported name is not reported: the import is not covered.
        pytest.param("from torch.cuda.amp import custom_fwd\n@custom_fwd\ndef f():\n    pass\ng = custom_fwd\n", {2}, id="import-with-unreported-use"),
        # A mock target names the API the code under test calls: it must move with that code.
        pytest.param("from unittest.mock import patch\np = patch('torch.cuda.get_device_capability')\n", (), id="mock-target"),
    ],
)
def test_still_a_miss(tmp_path, source, pointed):
    misses, _ = _classify(tmp_path, source, pointed)
    assert misses, "a CUDA construct no finding points at must be listed"


@pytest.mark.parametrize(
    "source, pointed, kernel",
    [
        pytest.param("k = load_kernel(\n    'k',\n    cuda_include_dirs=['/usr/local/cuda/include'],\n)\n", {1}, (), id="whole-statement"),
        pytest.param(
            "try:\n    import selective_scan_cuda\nexcept ImportError:\n    selective_scan_cuda = None\n", {2}, (),
            id="import-fallback",
        ),
        pytest.param("@triton.jit\ndef k(x):\n    y = x.to(tl.float8e4nv)\n    z = cuda_thing(y)\n", {1}, {1}, id="kernel-body"),
        # dinov2: the import's only use is a reported flag.
        pytest.param("import torch.backends.cudnn as cudnn\ncudnn.benchmark = True\n", {2}, (), id="import-used-only-where-reported"),
    ],
)
def test_finding_covers(tmp_path, source, pointed, kernel):
    misses, excused = _classify(tmp_path, source, pointed, kernel)
    assert misses == [] and excused == []


def test_a_finding_on_one_line_does_not_cover_the_next_statement(tmp_path):
    misses, _ = _classify(tmp_path, "x = torch.cuda.foo()\ny = torch.cuda.bar()\n", {1})
    assert misses == ["m.py:2: cuda"]


@pytest.mark.parametrize(
    "importer, excused",
    [
        pytest.param("from pkg.utils import move_to_cuda\nmove_to_cuda(x)\n", True, id="absolute-import-of-own-helper"),
        pytest.param("from .utils import move_to_cuda\nmove_to_cuda(x)\n", True, id="relative-import-of-own-helper"),
        # Defined in the project and also imported from outside it: the outside one may be meant.
        pytest.param("from other_lib import move_to_cuda\nmove_to_cuda(x)\n", False, id="foreign-import-of-same-name"),
    ],
)
def test_own_helper_imported_across_modules(tmp_path, importer, excused):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "utils.py").write_text("def move_to_cuda(sample):\n    return sample\n")
    (tmp_path / "pkg" / "train.py").write_text(importer)
    pointed = {"pkg/utils.py": set(), "pkg/train.py": set()}
    misses, found_excused = audit_port.classify(tmp_path, pointed, {}, {})
    train = [m for m in misses if m.startswith("pkg/train.py")]
    if excused:
        assert train == [] and any("move_to_cuda: a name the project defines" in e for e in found_excused), (misses, found_excused)
    else:
        assert train, "a name imported from outside the project is not the project's own"
