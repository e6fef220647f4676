"""CN207: CUDA runtime and library variables set or read through ``os.environ``."""

from __future__ import annotations

import ast

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Settings

from .._shared.env import CUDA_ENV_RE, env_site
from .._shared.names import is_reference

__all__ = ["CudaEnvVar"]

_GUIDANCE = (
    "Nothing on Trainium reads it (the CUDA runtime, cuDNN/cuBLAS and PyTorch's CUDA caching "
    "allocator are not there), and TorchNeuron has no documented equivalent setting. Delete it "
    "for Trainium runs, or keep it on a CUDA-only code path."
)


# Build switches that build scripts (detectron2's, torchvision's, mmcv's) read to compile their
# CUDA kernels without a GPU in sight; no CUDA library reads them, the project's setup does.
_BUILD_SWITCHES = frozenset({"FORCE_CUDA"})
_BUILD_GUIDANCE = (
    "It forces the project's CUDA extension build, which cannot be built or run on Trainium: "
    "build without it (the extension's Python fallback, or an NKI port of its kernels)."
)
# Where torch.utils.cpp_extension found the CUDA toolkit (None without one): toolkit probes.
_TOOLKIT = {
    "torch.utils.cpp_extension.CUDA_HOME": "the CUDA toolkit",
    "torch.utils.cpp_extension.CUDNN_HOME": "cuDNN",
    # parrots, the PyTorch-compatible framework mmengine supports, exports the same probe.
    "parrots.utils.build_extension.CUDA_HOME": "the CUDA toolkit",
}
_TOOLKIT_NAMES = frozenset(q.rpartition(".")[2] for q in _TOOLKIT)
_TOOLKIT_GUIDANCE = (
    "It is None on a Trainium host (no CUDA toolkit), so code built on it (nvcc / cuobjdump "
    "paths, a CUDA build chosen when it is set) probes for CUDA: drop it from the Trainium path, "
    "or keep it on a CUDA-only one."
)


def _is_cuda_key(value: object) -> bool:
    return isinstance(value, str) and (CUDA_ENV_RE.fullmatch(value) is not None or value in _BUILD_SWITCHES)


class CudaEnvVar(Rule):
    """
    ## What it does
    Reports CUDA runtime, library and build variables that Python code sets or reads through the
    environment: ``os.environ["PYTORCH_CUDA_ALLOC_CONF"] = ...``, ``os.environ.setdefault(...)``,
    ``os.putenv(...)``, ``os.environ.get(...)`` / ``os.getenv(...)``, env dicts handed to
    subprocesses and ``update(CUDA_LAUNCH_BLOCKING=...)``. Covered: ``CUDA_LAUNCH_BLOCKING``,
    ``CUDA_DEVICE_ORDER``, ``CUDA_DEVICE_MAX_CONNECTIONS``, ``PYTORCH_CUDA_*``,
    ``TORCH_CUDA_ARCH_LIST``, ``CUDA_HOME``, ``CUBLAS_*`` / ``CUDNN_*`` and the like — the same
    list CN705 reports in shell scripts. ``CUDA_VISIBLE_DEVICES`` is CN405's (it has a Neuron
    spelling); a project's own ``USE_CUDA`` is not a CUDA setting, but ``FORCE_CUDA``, the switch
    build scripts read to compile their CUDA kernels anyway, is reported. So are the toolkit
    probes of ``torch.utils.cpp_extension``: each use of ``CUDA_HOME`` / ``CUDNN_HOME``
    (``os.path.join(CUDA_HOME, "bin", "nvcc")``, ``if CUDA_HOME is not None:``).

    ## Why is this bad?
    They configure the CUDA runtime, PyTorch's CUDA caching allocator or CUDA extension builds.
    On Trainium nothing reads them, so a setting the program relied on (allocator tuning against
    fragmentation, synchronous launches for debugging, deterministic cuBLAS workspaces) silently
    stops applying while the port looks finished.

    ## Example
    ```python
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    ```
    is reported: delete it for Trainium runs, or keep it on the CUDA path.

    ## Fix safety
    Report only: the Neuron target API has no documented equivalent of these variables, and
    whether the CUDA path still wants them is the user's decision. With ``--target accelerator``
    they are reported too: the code still sets them for its GPU runs, but a Trainium run of the
    same code silently loses the setting (allocator tuning, deterministic cuBLAS), which a
    reader of a port that reports nothing would not know.
    """

    code = "CN207"
    name = "cuda-env-var"
    triggers = ("CUDA_", "CUDNN_", "CUBLAS", "FORCE_CUDA")
    VALID = (
        'import os\nos.environ["NEURON_RT_VISIBLE_CORES"] = "0-1"\n',
        'print("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation")\n',
        'HELP = "CUDA_LAUNCH_BLOCKING"\n',  # a constant, not a key position
        'import os\nuse = os.environ.get("USE_CUDA", "0")\n',  # the project's own switch
        "from torch.utils.cpp_extension import CUDA_HOME\n",  # the import alone
        "def probe(CUDA_HOME):\n    return CUDA_HOME\n",  # a parameter of the same name
        "# os.environ['CUDA_LAUNCH_BLOCKING'] = '1'\n",
    )
    INVALID = (
        Invalid('import os\nos.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"\n'),
        Invalid('import os\nos.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128")\n'),
        # Kept on the accelerator target too, and said: Trainium runs lose the setting.
        Invalid('import os\nos.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"\n', target="accelerator"),
        Invalid('import os\nos.putenv("CUDA_LAUNCH_BLOCKING", "1")\n'),
        Invalid('import os\nos.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"\n'),
        Invalid('import os\nhome = os.environ.get("CUDA_HOME", "/usr/local/cuda")\n'),
        Invalid('import os\nos.environ.update(CUDA_DEVICE_MAX_CONNECTIONS="1")\n'),
        Invalid('import subprocess\nsubprocess.run(cmd, env={"TORCH_CUDA_ARCH_LIST": "8.0"})\n'),
        Invalid('import os\nforce = os.getenv("FORCE_CUDA", "0") == "1"\n'),
        # Toolkit probes: every use of CUDA_HOME, not the import.
        Invalid(
            "import os\nfrom torch.utils.cpp_extension import CUDA_HOME\n"
            "nvcc = os.path.join(CUDA_HOME, 'bin', 'nvcc')\n"
        ),
        Invalid("import torch.utils.cpp_extension as ext\nok = ext.CUDA_HOME is not None\n"),
        Invalid("from parrots.utils.build_extension import CUDA_HOME\nnvcc = CUDA_HOME + '/bin/nvcc'\n"),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """A gate: no finding where no visit can report, unsure elsewhere. A report needs a
        toolkit probe's name written (``CUDA_HOME``), a string literal that holds a trigger word
        as written (each piece of an implicit concatenation, each text of an f-string, lies
        inside one of ``ast``'s constants), or a keyword that is a CUDA variable's name."""
        if any(name in file.text for name in _TOOLKIT_NAMES):
            return None
        for node in ast.walk(file.tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if any(t in node.value for t in cls.triggers):
                    return None
            elif isinstance(node, ast.keyword) and _is_cuda_key(node.arg):
                return None
        return []

    def visit_Name(self, node: cst.Name) -> None:
        if node.value not in _TOOLKIT_NAMES:
            return
        parent = self.context.parent
        if isinstance(parent, (cst.Attribute, cst.ImportAlias)) or not is_reference(self, node):
            return
        qualified = self.context.scope.lookup(node.value)
        if qualified in _TOOLKIT:
            self._toolkit(node, qualified)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in _TOOLKIT_NAMES:
            qualified = self.qualname(node)
            if qualified in _TOOLKIT:
                self._toolkit(node, qualified)

    def _toolkit(self, node: cst.CSTNode, qualified: str) -> None:
        self.report(
            node,
            f"`{qualified.rpartition('.')[2]}` ({qualified.rpartition('.')[0]}) is where {_TOOLKIT[qualified]} "
            "is installed: a CUDA toolkit probe",
            guidance=_TOOLKIT_GUIDANCE,
            effort=Effort.LOW,
        )

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if not any(t in node.value for t in self.triggers) or "b" in node.prefix.lower():
            return
        key = node.evaluated_value
        if _is_cuda_key(key) and env_site(self, node) is not None:
            self._report(node, str(key), tuple(self.context.ancestors))

    def visit_Arg(self, node: cst.Arg) -> None:
        # update(K=v) / dict(K=v): the keyword is the key
        if node.keyword is not None and _is_cuda_key(node.keyword.value):
            self._report(node.keyword, node.keyword.value, (*self.context.ancestors, node))

    def _report(self, node: cst.CSTNode, key: str, chain: tuple[cst.CSTNode, ...]) -> None:
        build = key in _BUILD_SWITCHES
        self.report(
            node,
            f"`{key}` forces a CUDA extension build" if build else f"`{key}` configures CUDA and has no effect on Trainium",
            ancestors=chain,
            guidance=_BUILD_GUIDANCE if build else _GUIDANCE,
            effort=Effort.LOW,
        )
