"""The project-level sweep: extension modules a setup.py builds, the project's own kernel modules."""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config, ProjectFacts
from cuda2neuron.workspace import discover, project_facts, with_project_facts
from workspace_helpers import write_tree

SETUP_CUDA = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension
setup(
    name="ssm",
    ext_modules=[CUDAExtension(name="selective_scan_cuda", sources=["csrc/scan.cpp", "csrc/scan.cu"])],
    cmdclass={"build_ext": BuildExtension},
)
"""


# Extensions built with CppExtension (not CUDAExtension) from .cu sources, inside an `if` and a
# list, one named with its package prefix: each builds CUDA code.
FAIRSEQ_STYLE_SETUP = """\
import sys
from setuptools import setup
extensions = []
if "build_ext" in sys.argv:
    from torch.utils import cpp_extension
    extensions.extend([cpp_extension.CppExtension("pkg.edit_host", sources=["csrc/edit.cpp"])])
    if "CUDA_HOME" in __import__("os").environ:
        extensions.extend([
            cpp_extension.CppExtension("pkg.edit_cuda", sources=["csrc/edit.cu", "csrc/bind.cpp"]),
            cpp_extension.CppExtension("align_cuda_binding", sources=["ops/align_kernel.cu", "ops/align.cpp"]),
        ])
setup(name="pkg", ext_modules=extensions)
"""


@pytest.mark.parametrize(
    ("files", "extensions", "kernels"),
    [
        pytest.param({"setup.py": SETUP_CUDA}, {"selective_scan_cuda"}, set(), id="setup-cuda-extension"),
        pytest.param(
            {"setup.py": 'from torch.utils.cpp_extension import CUDAExtension\nCUDAExtension("pkg._C", ["a.cu"])\n'},
            {"pkg._C"}, set(), id="positional-dotted-name",
        ),
        pytest.param(
            {"setup.py": 'from torch.utils.cpp_extension import CppExtension\nCppExtension(name="cpu_only", sources=["a.cpp"])\n'},
            set(), set(), id="cpp-extension-is-not-cuda",
        ),
        pytest.param({"setup.py": FAIRSEQ_STYLE_SETUP}, {"pkg.edit_cuda", "align_cuda_binding"}, set(), id="cpp-extension-with-cu-sources"),
        pytest.param(
            {"setup.py": 'from setuptools import Extension\nsrcs = ["k.cpp", "k.cu"]\next = Extension("fast_ops", sources=srcs)\n'},
            {"fast_ops"}, set(), id="setuptools-extension-sources-by-name",
        ),
        pytest.param(
            {"jit.py": 'from torch.utils import cpp_extension\nops = cpp_extension.load(name="fused", sources=["k.cpp", "k.cu"])\n'},
            {"fused"}, set(), id="jit-load-with-cu-source",
        ),
        pytest.param(
            {"jit.py": 'from torch.utils import cpp_extension\nops = cpp_extension.load(name="hostops", sources=["k.cpp"])\n'},
            set(), set(), id="jit-load-cpp-only",
        ),
        pytest.param(
            {"pkg/__init__.py": "", "pkg/ops/norm.py": "import triton\nimport triton.language as tl\n", "pkg/model.py": "import torch\n"},
            set(), {"pkg.ops.norm"}, id="triton-module",
        ),
        pytest.param({"kern.py": "import tilelang\n", "cute.py": "import cutlass.cute as cute\n"}, set(), {"kern", "cute"}, id="tilelang-and-cute"),
        pytest.param({"ops/__init__.py": "from triton import jit\n"}, set(), {"ops"}, id="package-init"),
        pytest.param({"notes.py": "# we once tried triton here\nx = 'CUDAExtension'\n"}, set(), set(), id="words-in-comments-and-strings"),
        pytest.param({"broken.py": "import triton\ndef (:\n"}, set(), set(), id="syntax-error-is-the-per-file-runs-business"),
    ],
)
def test_sweep(tmp_path, files, extensions, kernels):
    root = write_tree(tmp_path / "proj", files)
    facts = project_facts(discover([root]).files)
    assert (facts.extension_modules, facts.kernel_modules) == (frozenset(extensions), frozenset(kernels))


DETECTRON_STYLE_SETUP = """\
import torch
from torch.utils.cpp_extension import CppExtension, CUDAExtension
extension = CppExtension
if torch.cuda.is_available():
    extension = CUDAExtension
ext_modules = [extension("pkg._C", ["csrc/a.cpp", "csrc/a.cu"])]
"""
LOADER = """\
from torch.utils.cpp_extension import load

def load_ext(name, sources):
    return load(name=name, sources=sources, verbose=True)

def not_a_loader(name):
    return load(name=name, sources=["fixed.cpp"])
"""


@pytest.mark.parametrize(
    ("files", "field", "expected"),
    [
        pytest.param({"setup.py": DETECTRON_STYLE_SETUP}, "extension_modules", {"pkg._C"}, id="builder-chosen-at-run-time"),
        pytest.param({"pkg/__init__.py": "", "pkg/jit.py": LOADER}, "extension_loaders", {"pkg.jit.load_ext"}, id="plugin-loader"),
        pytest.param(
            {"setup.py": SETUP_CUDA, "pkg/__init__.py": "", "pkg/scan.py": "try:\n    import selective_scan_cuda\nexcept ImportError:\n    pass\n",
             "pkg/other.py": "selective_scan_cuda = None\n"},
            "kernel_modules", {"pkg.scan"}, id="a-module-importing-the-extension-runs-kernels",
        ),
        pytest.param(
            {"setup.py": DETECTRON_STYLE_SETUP, "pkg/__init__.py": "", "pkg/nms.py": "from pkg import _C\n"},
            "kernel_modules", {"pkg.nms"}, id="from-package-import-extension",
        ),
        pytest.param(
            {"setup.py": FAIRSEQ_STYLE_SETUP, "pkg/__init__.py": "from . import edit_cuda\n", "pkg/nat/__init__.py": "",
             "pkg/nat/utils.py": "def load():\n    from .. import edit_cuda\n    return edit_cuda\n",
             "pkg/nat/host.py": "from .. import edit_host\n"},
            "kernel_modules", {"pkg", "pkg.nat.utils"}, id="relative-import-of-extension",
        ),
        pytest.param(
            {
                "pkg/__init__.py": "",
                "pkg/norm.py": "import triton\n\n@triton.jit\ndef _k(x):\n    pass\n\ndef fast(x):\n    _k[(1,)](x)\n\n"
                "class Norm:\n    def forward(self, x):\n        return fast(x)\n\ndef ref(x):\n    return x * 2\n",
                "pkg/wrap.py": "from .norm import fast, ref\nimport triton\n\ndef wrapped(x):\n    return fast(x)\n\ndef plain(x):\n    return ref(x)\n",
            },
            # wrap.ref is plain torch in norm.py, but a name imported from a kernel module counts
            # (the sweep does not follow names across modules: over-reporting, never a miss)
            "kernel_names", {"pkg.norm._k", "pkg.norm.fast", "pkg.norm.Norm", "pkg.wrap.fast", "pkg.wrap.ref", "pkg.wrap.wrapped", "pkg.wrap.plain"},
            id="names-that-reach-a-kernel",
        ),
        pytest.param(
            {"pkg/__init__.py": "", "pkg/a.py": "", "train.py": "", "src/tool/x.py": ""},
            "own_packages", {"pkg", "train", "src"}, id="own-top-level-names",
        ),
        # detectron2's nms.py calls the ops its `_C` registers (`torch.ops.detectron2.nms_rotated`)
        # without importing `_C`; torch's own namespaces (`torch.ops.aten`) are not the project's.
        pytest.param(
            {"setup.py": DETECTRON_STYLE_SETUP, "pkg/__init__.py": "",
             "pkg/nms.py": "import torch\n\ndef nms_rotated(b):\n    return torch.ops.pkg.nms_rotated(b)\n\ndef plain(b):\n    return b\n",
             "pkg/other.py": "import torch\n\ndef f(x):\n    return torch.ops.aten.add(x, x)\n"},
            "kernel_names", {"pkg.nms.nms_rotated"}, id="ops-the-extension-registers",
        ),
        # detectron2: `from detectron2.layers import DeformConv`, re-exported by the package's
        # __init__ from the module that imports `_C`; a package above re-exports it again.
        pytest.param(
            {"setup.py": DETECTRON_STYLE_SETUP, "pkg/__init__.py": "from .layers import *\n",
             "pkg/layers/__init__.py": "from .deform import DeformConv as DConv\nfrom .plain import Linear\n",
             "pkg/layers/deform.py": "from pkg import _C\n\nclass DeformConv:\n    def forward(self, x):\n        return _C.deform(x)\n",
             "pkg/layers/plain.py": "class Linear:\n    pass\n"},
            "kernel_names", {"pkg.layers.deform._C", "pkg.layers.deform.DeformConv", "pkg.layers.DConv", "pkg.DConv"},
            id="re-exported-by-package-inits",
        ),
        # modded-nanogpt / detectron2: a launcher takes the backend from its caller in another file.
        pytest.param(
            {"pkg/__init__.py": "",
             "pkg/launch.py": "import torch.distributed as dist\n\n"
             "def launch(fn, world, backend, *, pg_kind='x'):\n    dist.init_process_group(backend, world_size=world)\n\n"
             "class Strategy:\n    def connect(self, model, rank, pg):\n        dist.init_process_group(backend=pg)\n\n"
             "    @staticmethod\n    def setup(rank, *, kind):\n        dist.init_process_group(kind)\n",
             "pkg/other.py": "import torch.distributed as dist\n\n"
             # rebound before use, a nested function's own parameter, a name defined twice
             "def rebound(backend):\n    backend = backend.lower()\n    dist.init_process_group(backend)\n\n"
             "def outer(backend):\n    def inner(backend):\n        dist.init_process_group(backend)\n    return inner\n\n"
             "def twice(b):\n    dist.init_process_group(b)\n\n"
             "class Other:\n    def twice(self, b):\n        dist.init_process_group(b)\n",
             "pkg/plain.py": "def launch_plain(backend):\n    return backend\n",
             # modded-nanogpt's DDPStrategy tests the backend it is given (CN401 rewrites the
             # test); the other strategies' `wrap_model`s do not, so the name stays unambiguous.
             "pkg/wrap.py": "class DDP:\n    def wrap_model(self, model, rank, backend):\n        if backend == 'nccl':\n            return model\n\n"
             "class Single:\n    def wrap_model(self, model, rank, backend):\n        return model\n\n"
             "def uses(kind):\n    return kind == 'nccl'\n"},
            "backend_params", {("launch", 2, "backend"), ("connect", 2, "pg"), ("setup", None, "kind"), ("inner", 0, "backend"),
                               ("wrap_model", 2, "backend")},
            id="parameters-passed-on-as-the-backend",
        ),
    ],
)
def test_sweep_names(tmp_path, files, field, expected):
    facts = project_facts(discover([write_tree(tmp_path / "proj", files)]).files)
    assert getattr(facts, field) == frozenset(expected)


@pytest.mark.parametrize(
    ("facts", "words"),
    [
        pytest.param(ProjectFacts(), (), id="nothing-known"),
        pytest.param(
            ProjectFacts(frozenset({"pkg._C"}), frozenset({"pkg.ops.layer_norm"}), frozenset({"pkg.jit.load_ext"})),
            (b"_C", b"layer_norm", b"load_ext"), id="last-names",
        ),
    ],
)
def test_words_wake_the_rules_that_use_the_facts(facts, words):
    assert facts.words() == words


def test_named_file_still_sees_the_project_setup(tmp_path):
    root = write_tree(tmp_path / "proj", {"setup.py": SETUP_CUDA, "pyproject.toml": "[tool.cuda2neuron]\n", "pkg/scan.py": "import selective_scan_cuda\n"})
    config = Config(source=str(root / "pyproject.toml"))
    found = discover([root / "pkg" / "scan.py"])
    assert with_project_facts(config, found.files).settings.project.extension_modules == {"selective_scan_cuda"}


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        pytest.param("pkg.ops.norm", True, id="the-module"),
        pytest.param("pkg.ops.norm.rms", True, id="inside-it"),
        pytest.param("ops.norm", True, id="src-layout-suffix"),
        pytest.param("ops.norm.rms", True, id="inside-a-suffix-nested-project"),
        pytest.param("norm.rms", False, id="a-last-name-and-a-member-is-not-enough"),
        pytest.param("norm", False, id="bare-last-name-is-not-enough"),
        pytest.param("pkg.ops", False, id="its-package"),
    ],
)
def test_kernel_module_matching(module, expected):
    assert ProjectFacts(kernel_modules=frozenset({"pkg.ops.norm"})).kernel_module(module) is expected


@pytest.mark.parametrize(
    ("dotted", "expected"),
    [
        pytest.param("pkg.ops.norm", True, id="the-module-itself"),
        pytest.param("pkg.ops.norm.rms_norm", True, id="a-name-that-launches"),
        pytest.param("pkg.ops.norm.rms_norm_ref", False, id="plain-torch-beside-it"),
        pytest.param("ops.norm.rms_norm", True, id="src-layout-suffix"),
        pytest.param("pkg.ops.scan.anything", True, id="module-without-recorded-names"),
        pytest.param("pkg.model.Block", False, id="not-a-kernel-module"),
    ],
)
def test_reaches_kernel(dotted, expected):
    facts = ProjectFacts(
        kernel_modules=frozenset({"pkg.ops.norm", "pkg.ops.scan"}), kernel_names=frozenset({"pkg.ops.norm.rms_norm"})
    )
    assert facts.reaches_kernel(dotted) is expected
