"""CN616: third-party CUDA kernel packages and kernel languages other than Triton."""

from __future__ import annotations

import ast
import re
from functools import lru_cache

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, ProjectFacts, Rule, Settings, Valid
from cuda2neuron.python import dotted_name

from .._shared.kernels import KERNEL_LANGUAGES, KernelPackage, dynamic_import, kernel_packages, local_kernel_package, package_of
from .._shared.names import call_qualname
from .._shared.packages import imports_any, in_package
from .._shared.sys_path import source_sys_path_folders

__all__ = ["CudaKernelPackage"]


# A project with a Triton grouped GEMM of its own in proj/moe/grouped_gemm/ (unsloth's layout).
_OWN_GROUPED_GEMM = (("project", ProjectFacts(kernel_modules=frozenset({"proj.moe.grouped_gemm.kernels.forward"}), own_packages=frozenset({"proj"}))),)


def _triggers() -> tuple[str, ...]:
    # A row's first name is in every import of it (`from numba import cuda` holds "numba").
    return tuple(sorted({m.split(".")[0] for m in kernel_packages()}))


@lru_cache(maxsize=4)
def _dynamic_pattern(tops: tuple[str, ...]) -> re.Pattern[bytes]:
    """``import_module("fused_adam_cuda")`` / ``__import__('x.y')`` of one of ``tops``."""
    names = b"|".join(re.escape(t.encode()) for t in tops)
    return re.compile(rb"""(?:import_module|__import__)\(\s*[rbu]?['"](?:""" + names + rb""")\b""")


# Modules of a kernel package that are plain PyTorch: MegaBlocks' expert-parallel all_to_all
# (megablocks/layers/all_to_all.py: an autograd Function around torch.distributed's
# all_to_all_single). Only importing them pulls in the CUDA package, and that import is reported;
# each call is not "MegaBlocks' kernels" (nanotron's examples/moe/moe.py), as CN604 treats
# flash_attn's padding helpers.
_PURE_TORCH = ("megablocks.layers.all_to_all",)


class CudaKernelPackage(Rule):
    """
    ## What it does
    Reports imports of third-party packages whose kernels run only on NVIDIA GPUs (the table
    ``rules/_shared/cuda_kernels.toml``: causal-conv1d, Mamba's ``selective_scan_cuda``,
    DeepSpeed's fused ops, Liger, FlashInfer, vLLM's ``_C``, Transformer Engine, ...) and kernel
    languages other than Triton (TileLang, CUTLASS / CuTe DSL, cuda-python's ``cuda.bindings``,
    ``numba.cuda``), inference engines with no Trainium backend (LMDeploy: the import only, as
    its config objects run nothing), the calls made through them, and functions decorated as kernels of those
    languages (``@tilelang.jit``, ``@cute.kernel``). An import spelled as a call with a literal
    name (``importlib.import_module("fused_adam_cuda")``, ``__import__``) counts as an import,
    and the calls made through the name it is assigned to are reported too.

    ## Why is this bad?
    These packages ship CUDA binaries or compile for NVIDIA GPUs; none of them has a Trainium
    build, so the import fails (or the call raises) on a Trainium host. The port calls plain
    PyTorch (most packages have a reference implementation) or a kernel written in NKI.

    ## Example
    ```python
    from causal_conv1d import causal_conv1d_fn
    y = causal_conv1d_fn(x, weight, bias, activation="silu")
    ```

    ## Fix safety
    No fix (effort high at the import, medium per call): each kernel is replaced by hand. A
    package of the project's own (mamba_ssm inside the mamba repository) is not third-party and
    is left to CN617; so is a package of the project's kernels that Python finds beside or above
    the importing file under a library's name (unsloth's Triton ``grouped_gemm`` folder), or in a
    folder the file puts on ``sys.path`` with a path built on ``__file__``.
    """

    code = "CN616"
    name = "cuda-kernel-package"
    triggers = _triggers()
    VALID = (
        "import torch.nn.functional as F\ny = F.conv1d(x, w, groups=4)\n",
        'kernel = "causal_conv1d"\n',  # a selector string, not an import
        "from . import causal_conv1d\n",  # the project's own module
        "from numba import jit\n",  # numba on the host
        'import importlib\nmod = importlib.import_module("json")\n',
        'import importlib\nmod = importlib.import_module(name)\n',  # a name only known at run time
        # inside the mamba repository its own package is the project's code (CN617's business)
        Valid("import mamba_ssm\n", options=(("project", ProjectFacts(own_packages=frozenset({"mamba_ssm"}))),)),
        # unsloth's MoE tests import its own Triton grouped GEMM, a folder up, by the CUTLASS
        # package's name: Python finds the project's folder first (CN617 reports its kernels)
        Valid("from grouped_gemm.reference.moe_ops import permute\nx = permute(x, idx)\n", path="proj/moe/tests/test_moe.py", options=_OWN_GROUPED_GEMM),
        # ... or from a folder the file puts on sys.path (unsloth's models/glm4_moe.py): not CUTLASS
        Valid(
            "import os\nimport sys\n\n_moe = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'moe')\n"
            "sys.path.insert(0, _moe)\nfrom grouped_gemm.reference.moe_ops import permute\nx = permute(x, idx)\n",
            path="proj/models/glm.py", options=_OWN_GROUPED_GEMM,
        ),
        Valid(
            "import sys\nfrom pathlib import Path\n\nsys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'moe'))\n"
            "import grouped_gemm\n",
            path="proj/models/glm.py", options=_OWN_GROUPED_GEMM,
        ),
    )
    INVALID = (
        Invalid("from causal_conv1d import causal_conv1d_fn\ny = causal_conv1d_fn(x, w)\n"),
        Invalid("import selective_scan_cuda\nout = selective_scan_cuda.fwd(u, delta)\n"),
        Invalid("from liger_kernel.transformers import apply_liger_kernel_to_llama\n"),
        Invalid("import vllm._C\n"),
        # an inference engine with no Trainium backend (InternVL's data pipelines): the import
        Invalid("from lmdeploy import GenerationConfig, pipeline\npipe = pipeline(model_path)\n"),
        # xformers' own fmha modules re-export it (xformers/ops/fmha/cutlass.py).
        Invalid("from mslk.attention.fmha.cutlass import BwOp, FwOp\n"),
        Invalid("from deepspeed.ops.adam import FusedAdam\nopt = FusedAdam(params)\n"),
        Invalid("import tilelang\nimport tilelang.language as T\n\n@tilelang.jit\ndef k(M):\n    pass\n"),
        Invalid("import cutlass.cute as cute\n\n@cute.kernel\ndef k(x):\n    pass\n"),
        Invalid("from cuda.bindings import driver\n"),
        Invalid("from cuda import cuda\nerr, = cuda.cuInit(0)\n"),
        Invalid("from numba import cuda\n\n@cuda.jit\ndef k(a):\n    pass\n"),
        # An import spelled as a call, and the calls made through what it returns.
        Invalid('import importlib\nops = importlib.import_module("fused_adam_cuda")\nops.adam(p, g)\n'),
        Invalid('ext = __import__("selective_scan_cuda")\n'),
        # the project's grouped_gemm folder is not found from here: the import is the library
        Invalid("import grouped_gemm as gg\ny = gg.ops.gmm(a, b, sizes)\n", path="tools/bench.py", options=_OWN_GROUPED_GEMM),
        # a folder from the environment is unknown here, and shadows nothing
        Invalid(
            "import os\nimport sys\n\nsys.path.insert(0, os.environ['GG_HOME'])\nimport grouped_gemm as gg\n",
            path="proj/models/glm.py", options=_OWN_GROUPED_GEMM,
        ),
    )

    def __init__(self, context) -> None:  # noqa: ANN001 - RuleContext
        super().__init__(context)
        # `ops = importlib.import_module("fused_adam_cuda")`: names bound to a row's module.
        self._dynamic: dict[str, tuple[str, KernelPackage]] = {}
        self._folders: tuple[tuple[str, ...], ...] | None = None

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        # Imports, decorators and calls are all reported through an import of a row's package
        # (its first name is a trigger word): "rotary_emb" in `image_rotary_emb` is not one.
        if imports_any(code, cls.triggers):
            return True
        # `importlib.import_module("fused_adam_cuda")`: the regex only where such a call can be.
        return (b"import_module" in code or b"__import__" in code) and _dynamic_pattern(cls.triggers).search(code) is not None

    def _facts(self) -> ProjectFacts:
        return self.context.settings.project

    def _row(self, qualified: str | None) -> KernelPackage | None:
        row = package_of(qualified, self._facts(), self.context.path)
        if row is None or qualified is None or not self._facts().kernel_modules:
            return row
        # The folders the file puts on sys.path (unsloth's glm4_moe.py), read once, and only
        # for a name that has a row: the project's package there is what Python finds.
        if self._folders is None:
            self._folders = source_sys_path_folders(self.context.source, self.context.path)
        if self._folders and local_kernel_package(qualified, self._facts(), self.context.path, self._folders):
            return None
        return row

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """No finding where no absolute import of the file, and no call given a string as its
        first argument (a superset of ``dynamic_import``), names a module whose first name is a
        row's (``_triggers``); unsure elsewhere (libcst runs). Every report of the visitor is
        such an import, or a name resolved through one (a relative import binds no qualified
        name), and ``package_of`` only finds names under a row."""
        tops = frozenset(cls.triggers)
        for node in ast.walk(file.tree):
            if isinstance(node, ast.Import):
                if any(alias.name.split(".")[0] in tops for alias in node.names):
                    return None
            elif isinstance(node, ast.ImportFrom):
                if not node.level and node.module is not None and node.module.split(".")[0] in tops:
                    return None
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                value = node.args[0].value
                if isinstance(value, str) and value.split(".")[0] in tops:
                    return None
        return []

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            row = self._row(dotted_name(alias.name))
            if row is not None:
                self._report_import(node, dotted_name(alias.name) or row.module, row)
                return

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        module = dotted_name(node.module) or ""
        row = self._row(module)
        if row is None and not isinstance(node.names, cst.ImportStar):
            # `from numba import cuda`, `from deepspeed.ops.adam import FusedAdam`
            for alias in node.names:
                name = f"{module}.{dotted_name(alias.name)}"
                row = self._row(name)
                if row is not None:
                    module = name
                    break
        if row is not None:
            self._report_import(node, module, row)

    def _report_import(self, node: cst.CSTNode, module: str, row: KernelPackage) -> None:
        if row.kind == "engine":
            # Its config objects run nothing: the import is the blocker, and the use goes whole.
            message = f"`{module}`: {row.what}; it has no Trainium backend"
        else:
            noun = "code written with it runs" if row.kind == "language" else "its kernels run"
            message = f"`{module}`: {row.what}; {noun} only on NVIDIA GPUs"
        self.report(
            node,
            message,
            guidance=f"Port: {row.instead}.",
            effort=Effort.HIGH,
        )

    def visit_Decorator(self, node: cst.Decorator) -> None:
        expr = node.decorator.func if isinstance(node.decorator, cst.Call) else node.decorator
        qualified = self.qualname(expr)
        row = self._row(qualified)
        if row is not None and row.kind == "language":
            self.report(
                node,
                f"`@{qualified}` defines a GPU kernel ({row.what})",
                guidance=f"Port: {row.instead}.",
                effort=Effort.HIGH,
            )

    def visit_Assign(self, node: cst.Assign) -> None:
        if not isinstance(node.value, cst.Call):
            return
        module = dynamic_import(node.value, call_qualname(self, node.value))
        row = self._row(module) if module else None
        if row is None:
            return
        for target in node.targets:
            name = dotted_name(target.target)
            if name is not None:
                self._dynamic[name] = (module, row)  # type: ignore[assignment]

    def visit_Call(self, node: cst.Call) -> None:
        qualified = call_qualname(self, node)
        module = dynamic_import(node, qualified)
        if module is not None:
            row = self._row(module)
            if row is not None:
                self._report_import(node, module, row)
            return
        if qualified is None and self._dynamic:
            dotted = dotted_name(node.func)
            head = next((h for h in self._dynamic if dotted and (dotted == h or dotted.startswith(h + "."))), None)
            if head is not None:
                module, row = self._dynamic[head]
                qualified = module + dotted[len(head):]  # type: ignore[index]
        row = self._row(qualified)
        # Calls inside a kernel language are the kernel's own body (reported at the import and
        # the decorator); calls of prebuilt kernels are each a place the port must change.
        if row is None or row.kind in ("language", "engine") or any(qualified.startswith(k) for k in KERNEL_LANGUAGES):  # type: ignore[union-attr]
            return
        if in_package(qualified, _PURE_TORCH):  # type: ignore[arg-type]
            return
        self.report(
            node,
            f"`{qualified}` runs {row.what}",
            guidance=f"Call instead: {row.instead}.",
            effort=Effort.MEDIUM,
        )
