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
        pytest.param(
            "def has_cuda_capability():\n    return True\nmonkeypatch.setattr(mod, 'has_cuda_capability', lambda: False)\n",
            (), (), (), "a name the project defines", id="own-name-as-string",
        ),
        pytest.param(
            "class CUDAGraphWrapper:\n    pass\ndef register(w: 'CUDAGraphWrapper'):\n    pass\n",
            (), (), (), "a name the project defines", id="own-class-in-string-annotation",
        ),
        pytest.param("state = {}\nstate['cuda_rng_state'] = 1\n", (), (), (), "a key of the program's own data", id="subscript-key"),
        pytest.param("d = {'cuda_rng_state': 1}\n", (), (), (), "a key of the program's own data", id="dict-key"),
        pytest.param("seed(cfg.get('cudnn_deterministic_mode', None))\n", (), (), (), "a key of the program's own data", id="get-key"),
        pytest.param(
            "backends = {'cuda': 'nccl', 'neuron': 'neuron', 'cpu': 'gloo'}\n", (), (), (),
            "the CUDA row of a device table that has the port's row", id="device-table-with-target-row",
        ),
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
        pytest.param(
            "import helion\nconfig = helion.Config(num_warps=4)\n", {1}, (), {"helion"},
            "kernel language of a reported file", id="helion-kernel-language",
        ),
        pytest.param(
            "import pytest\ncases = [pytest.param(True, id='alibi-emb-cuda-bf16')]\n", (), (), (),
            "a label", id="test-id",
        ),
        pytest.param("parser.add_argument('--use_triton', action='store_true')\n", (), (), (), "a label", id="option-name"),
        pytest.param("import tritonclient.grpc\n", (), (), (), "Triton Inference Server", id="inference-server-client"),
        pytest.param(
            "def report(cuda_profile_dir):\n    return f'{cuda_profile_dir}/kernels_*.csv'\n", (), (), (),
            # `misses == []` fails without the f-string reason; line 1 is the parameter itself.
            "a name the project defines", id="own-name-in-fstring",
        ),
        pytest.param(
            "import bitsandbytes as bnb\ncls = getattr(bnb.nn.triton_based_modules, name)\n", {1}, (), (),
            "reached through a reported import", id="attribute-of-reported-import",
        ),
        # unsloth's tests look for code in source text: the needle is data, not a CUDA use
        pytest.param(
            "guard = [l for l in lines if 'torch.version.cuda' in l]\nstart = src.find('_cuda_driver_max_version()')\n",
            (), (), (), "a piece of source text searched for", id="source-text-searched-for",
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
        pytest.param("import os\nx = os.environ.get('PYTORCH_CUDA_ALLOC_CONF')\n", (), id="environ-get-is-a-setting"),
        pytest.param("backend = 'nccl'\n", (), id="device-string"),
        pytest.param("monkeypatch.setattr(torch.cuda, 'is_available', f)\nx = getattr(m, 'has_cuda_capability')\n", (), id="foreign-name-as-string"),
        pytest.param("backends = {'cuda': 'nccl', 'cpu': 'gloo'}\n", (), id="device-table-without-target-row"),
        # `torch.cuda` is not the `cuda` a reported `import cuda` binds.
        pytest.param("import cuda\nimport torch\nx = torch.cuda.current_stream()\n", {1}, id="attribute-not-the-import"),
        pytest.param("import selective_scan_cuda\n", (), id="extension-import-unreported"),
        pytest.param("import helion\n", (), id="helion-import-unreported"),
        # The value beside a label is code: the device a test runs on, an option's default.
        pytest.param("import pytest\ncases = [pytest.param('cuda', id='gpu')]\n", (), id="value-beside-a-test-id"),
        pytest.param("parser.add_argument('--device', default='cuda')\n", (), id="option-default"),
        pytest.param("def f(cuda_dir):\n    return f'{cuda_dir}/cuda'\n", (), id="fstring-text-outside-placeholders"),
        pytest.param("import torch\nx = f'{torch.cuda}'\n", (), id="fstring-placeholder-is-the-api"),
        pytest.param("import torch\nx = torch.cuda.triton_mode\n", {1}, id="attribute-of-reported-torch-import"),
        # One use of the imported name is not reported: the import is not covered.
        pytest.param("from torch.cuda.amp import custom_fwd\n@custom_fwd\ndef f():\n    pass\ng = custom_fwd\n", {2}, id="import-with-unreported-use"),
        # A mock target names the API the code under test calls: it must move with that code.
        pytest.param("from unittest.mock import patch\np = patch('torch.cuda.get_device_capability')\n", (), id="mock-target"),
        # a bare value searched for in a device's name is a device test, not source text
        pytest.param("on_gpu = 'cuda' in str(device)\nk = name.find('cuda:')\n", (), id="bare-value-searched-for"),
        # what an installer printed: the CUDA setting it chose, not source text
        pytest.param("assert 'GPU_BACKEND=cuda' in output\nassert 'NVCC_VER=12.8' in output\n", (), id="setting-searched-in-output"),
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
        pytest.param(
            "@pytest.mark.parametrize('b', [\n    ('x', 'cuda'),\n    ('y', 'cuda'),\n])\ndef test(b):\n    pass\n", {2}, (),
            id="whole-decorator",
        ),
        pytest.param("class M:\n    @wraps(torch.nn.Module.cuda)\n    def cuda(self):\n        pass\n", {3}, (), id="def-line-covers-its-decorators"),
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


# The bare word `cuda` is the API by default; each row is one way a project makes it its own name
# (fairseq's Trainer and backtranslation, detectron2's `__all__`, Lightning's `accelerators/cuda.py`).
_OWN_BARE = {
    "parameter": ("def f(x, cuda=False):\n    if cuda:\n        return x\n", "a parameter of the project's function"),
    "lambda-parameter": ("g = lambda cuda: cuda\n", "a parameter of the project's function"),
    "keyword-of-own-function": ("def f(cuda=False):\n    pass\nf(cuda=True)\n", "a keyword of the project's f()"),
    "keyword-of-own-class": (
        "class D:\n    def __init__(self, cuda=False):\n        pass\nd = D(cuda=True)\n", "a keyword of the project's D()"
    ),
    "self-field": (
        "class T:\n    def __init__(self):\n        self.cuda = False\n    def g(self):\n        if self.cuda:\n            pass\n",
        "an attribute the project assigns",
    ),
    "local-variable": (
        "import torch\ndef setup():\n    cuda = torch.device('neuron')\n    return torch.zeros(1, device=cuda)\n",
        "a variable of the project's function",
    ),
    "registered-marker": (
        "import pytest\ndef pytest_configure(config):\n    config.addinivalue_line('markers', 'requires_cuda')\n"
        "@pytest.mark.requires_cuda\ndef test_x():\n    pass\n",
        "a pytest marker the project registers",
    ),
    "exported-def": ("__all__ = ['retry_if_cuda_oom']\ndef retry_if_cuda_oom(f):\n    return f\n", "a name the module exports"),
    "enum-member-read": (
        "import enum\nclass RNGType(enum.Enum):\n    TORCH = 'torch'\n    CUDA = 'c'\nx = RNGType.CUDA\n",
        "a member of the project's class RNGType",
    ),
    # cleanrl's tyro arguments: `args = tyro.cli(Args)`, then `args.cuda` everywhere.
    "dataclass-field-read": (
        "import dataclasses\n@dataclasses.dataclass\nclass Args:\n    cuda: bool = True\nargs = Args()\nif args.cuda:\n    pass\n",
        "a field of the project's class",
    ),
}


@pytest.mark.parametrize("source, reason", _OWN_BARE.values(), ids=_OWN_BARE.keys())
def test_own_bare_word_excused(tmp_path, source, reason):
    misses, excused = _classify(tmp_path, source)
    assert misses == [], misses
    assert any(reason in line for line in excused), excused


# Near misses: the same shapes where `cuda` is the API, which must stay misses.
_API_BARE = {
    # The parameter `cuda` does not make `torch.cuda` in the same function the project's.
    "api-beside-parameter": "import torch\ndef f(cuda=False):\n    return torch.cuda.device_count()\n",
    "keyword-to-library": "import lib\nlib.g(cuda=True)\n",
    # The project has an `f(cuda=...)`, but this `f` hangs off a foreign module.
    "keyword-to-library-namesake": "import lib\ndef f(cuda=False):\n    pass\nlib.f(cuda=True)\n",
    "keyword-not-a-parameter": "def f(device=None):\n    pass\nf(cuda=True)\n",
    "method-call-on-self": "class T:\n    def __init__(self):\n        self.cuda = False\n    def g(self):\n        self.cuda()\n",
    "field-on-other-object": "class T:\n    def __init__(self):\n        self.cuda = False\nfn = model.cuda\n",
    "field-name-called": "class Args:\n    cuda: bool = True\nx = model.cuda()\n",
    "field-name-on-foreign-module": "import torch\nclass Args:\n    cuda: bool = True\nx = torch.cuda\n",
    # A monkeypatched module attribute is not a field of the project's.
    "store-on-module": "import torch\ntorch.cuda = None\nx = self.cuda\n",
    "export-not-defined": "__all__ = ['retry_if_cuda_oom']\n",
    "from-torch-cuda": "from torch.cuda import amp\n",
    # A module-level `cuda` may be the import it shadows; a global is not the function's own.
    "module-level-assignment": "from numba import cuda\ncuda = cuda\n",
    "global-in-function": "import torch\ndef f():\n    global cuda\n    cuda = torch.cuda\n",
    # A marker nobody registers (pytest's own or a plugin's) is no name of the project's.
    "unregistered-marker": "import pytest\n@pytest.mark.requires_cuda\ndef test_x():\n    pass\n",
    # A member read off a foreign class, or one the project's class does not define.
    "member-of-foreign-class": "from lib import Backend\nx = Backend.NCCL\n",
    "member-not-defined": "class Kind:\n    CPU = 1\nx = Kind.CUDA\n",
}


@pytest.mark.parametrize("source", _API_BARE.values(), ids=_API_BARE.keys())
def test_api_bare_word_still_a_miss(tmp_path, source):
    misses, _ = _classify(tmp_path, source)
    assert misses, "the bare word is the CUDA API here"


@pytest.mark.parametrize(
    "importer, excused",
    [
        pytest.param("from pkg.accelerators.cuda import num_devices\n", True, id="own-module-path"),
        pytest.param("from .accelerators.cuda import num_devices\n", True, id="relative-own-module-path"),
        # No `pkg/cuda.py`: the `cuda` in the path is not a module of the tree.
        pytest.param("from pkg.cuda import num_devices\n", False, id="not-a-module-of-the-tree"),
        # AutoGPTQ's `from .triton_utils.mixin import TritonModuleMixin`: a worded module of the tree.
        pytest.param("from .triton_utils.mixin import Mixin\n", True, id="worded-own-module-path"),
        pytest.param("from triton_helpers.mixin import Mixin\n", False, id="worded-module-not-of-the-tree"),
    ],
)
def test_own_module_path(tmp_path, importer, excused):
    (tmp_path / "pkg" / "accelerators").mkdir(parents=True)
    (tmp_path / "pkg" / "triton_utils").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "accelerators" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "accelerators" / "cuda.py").write_text("def num_devices():\n    return 0\n")
    (tmp_path / "pkg" / "triton_utils" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "triton_utils" / "mixin.py").write_text("class Mixin:\n    pass\n")
    (tmp_path / "pkg" / "train.py").write_text(importer)
    misses, _ = audit_port.classify(tmp_path, {}, {}, {})
    train = [m for m in misses if m.startswith("pkg/train.py")]
    assert (train == []) == excused, misses


def test_a_hub_model_of_nvidias_organisation_is_no_cuda_construct(tmp_path):
    # also NVIDIA's model another organisation publishes under its name; a program's path is none
    misses, excused = _classify(
        tmp_path,
        "m = load('nvidia/Cosmos-Predict2.5-2B')\nimg = pull('nvidia/cuda:12.1.0-base')\n"
        "q = load('unsloth/NVIDIA-Nemotron-3-Nano-4B')\nsmi = run('bin/nvidia-smi')\n",
    )
    assert misses == ["m.py:2: 'nvidia/cuda:12.1.0-base'", "m.py:4: 'bin/nvidia-smi'"]
    assert any("Hugging Face Hub" in e for e in excused), excused
