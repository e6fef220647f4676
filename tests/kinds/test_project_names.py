"""The CUDA-worded names a module defines or imports from outside, read from its bytes without a
parse (``kinds/_project_names.py``: the project sweep pools them for the residual pass)."""

from __future__ import annotations

import pytest

from cuda2neuron.kinds import NamePool, file_words

# (source, defined, foreign): the project's own top-level package is `pkg`; only lines with a CUDA
# word are read (a statement that imports one such name from outside names all it binds).
_ROWS = {
    "def-and-async-def": ("def _cuda_range():\n    pass\nasync def fetch_cudart():\n    pass\n", {"_cuda_range", "fetch_cudart"}, set()),
    "top-level-assignment": ("HAS_CUDA: bool = True\nnccl_ok = False\nx == cuda_y\n", {"HAS_CUDA", "nccl_ok"}, set()),
    # an enum's member is the class's (`Dev.CUDA`); the bare word alone is never a name of ours
    "class-member": ("class Dev(Enum):\n    # the GPU\n    CUDA = 1\n    use_cudnn = 2\n", {"Dev.CUDA", "Dev.use_cudnn", "use_cudnn"}, set()),
    # a keyword on its own line of a call is no assignment (xtuner's `nccl_port=self.nccl_port,`)
    # a dataclass's field declared by its annotation alone (unsloth's HostInfo, whose fields its
    # installer tests pass as `dict(driver_cuda_version=None, ...)` line after line)
    "annotated-field": (
        "@dataclass\nclass HostInfo:\n    system: str\n    driver_cuda_version: tuple[int, int] | None\n    has_physical_nvidia: bool  # probed\n",
        {"HostInfo.driver_cuda_version", "driver_cuda_version", "HostInfo.has_physical_nvidia", "has_physical_nvidia"},
        set(),
    ),
    # a parameter on its own line of a def (a method's too) is no field
    "parameter-line-is-no-field": ("class A:\n    def f(\n        self,\n        use_cuda: bool,\n    ):\n        pass\ndef g(\n    nccl_port: int = 1,\n):\n    pass\n", set(), set()),
    "keyword-of-a-call": ("args = dict(\n    host=h,\n    nccl_port=p,\n)\nf(\n  use_cuda=1)\n", set(), set()),
    "function-local-is-no-name": ("class A:\n    def f(self):\n        is_cuda = 1\ndef g():\n    cuda13 = 2\n", set(), set()),
    "import-from-outside": ("from torch.cuda import is_cuda_ok as cuda_ok, nccl_x\n", set(), {"cuda_ok", "nccl_x"}),
    "parenthesised-import": ("from gpu_lib import (\n    a,\n    has_cuda,\n)\n", set(), {"a", "has_cuda"}),
    "plain-import": ("import nvidia_smi\nimport gpu.cuda_utils as cu_cuda\n", set(), {"nvidia_smi", "cu_cuda"}),
    "own-imports-are-not-foreign": ("from .arch import _cuda_range\nfrom pkg.arch import nccl_y\n", set(), set()),
    "no-word-no-name": ("def f():\n    return 1\n", set(), set()),
}


@pytest.mark.parametrize(("source", "defined", "foreign"), _ROWS.values(), ids=_ROWS.keys())
def test_names_pooled_from_bytes(source, defined, foreign):
    pool = NamePool(frozenset({"pkg"}))
    pool.read(source.encode())
    assert (pool.defined, pool.foreign) == (defined, foreign)


def test_file_words_are_the_worded_identifiers():
    assert file_words(b"x = mod._cuda_range('Dev.CUDA')  # nvcc\n") == {"_cuda_range", "CUDA", "nvcc"}
