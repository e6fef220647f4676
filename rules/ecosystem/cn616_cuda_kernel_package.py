"""CN616: third-party CUDA kernel packages and kernel languages other than Triton."""

from __future__ import annotations

import ast
import re
from functools import lru_cache

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, ProjectFacts, Rule, Settings, Valid
from cuda2neuron.python import dotted_name

from ..device._strings_ast import simple_string
from .._shared.ast_names import ast_dotted
from .._shared.detector import AstDetector
from .._shared.kernels import DYNAMIC_IMPORTS, KERNEL_LANGUAGES, KernelPackage, dynamic_import, kernel_packages, local_kernel_package, package_of
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
        row, self._folders = _row(qualified, self._facts(), self.context.path, self.context.source, self._folders)
        return row

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """The visits below on CPython's ``ast`` (``_Detector``): the same reports, none with a
        fix (diffusers' TensorRT scripts, FlashAttention-3 and SageAttention imports, torchao's
        float8 training decide). Unsure only at a kernel language's decorator written other than
        right after its ``@`` (libcst's ``Decorator`` spans the ``@``)."""
        return _Detector(cls, file, settings).made_findings()

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
        self.report(node, _import_message(module, row), guidance=f"Port: {row.instead}.", effort=Effort.HIGH)

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
            qualified = _through_dynamic(self._dynamic, dotted_name(node.func))
        row = self._row(qualified)
        if _called_kernel(qualified, row):
            self.report(node, f"`{qualified}` runs {row.what}", guidance=f"Call instead: {row.instead}.", effort=Effort.MEDIUM)  # type: ignore[union-attr]


def _through_dynamic(dynamic: dict[str, tuple[str, KernelPackage]], dotted: str | None) -> str | None:
    """The qualified name a call written ``dotted`` reaches through a name bound to a module
    imported at run time (``ops = importlib.import_module("flash_attn")``), or None."""
    head = next((h for h in dynamic if dotted and (dotted == h or dotted.startswith(h + "."))), None)
    if head is None:
        return None
    return dynamic[head][0] + dotted[len(head):]  # type: ignore[index]


def _row(
    qualified: str | None, facts: ProjectFacts, path: str, source: str, folders: tuple[tuple[str, ...], ...] | None
) -> tuple[KernelPackage | None, tuple[tuple[str, ...], ...] | None]:
    """The table row ``qualified`` lives in for the file at ``path``, and the folders the file
    puts on sys.path (read once, passed back to be kept: ``folders`` None is not read yet)."""
    row = package_of(qualified, facts, path)
    if row is None or qualified is None or not facts.kernel_modules:
        return row, folders
    # The folders the file puts on sys.path (unsloth's glm4_moe.py), read once, and only
    # for a name that has a row: the project's package there is what Python finds.
    if folders is None:
        folders = source_sys_path_folders(source, path)
    if folders and local_kernel_package(qualified, facts, path, folders):
        return None, folders
    return row, folders


def _import_message(module: str, row: KernelPackage) -> str:
    if row.kind == "engine":
        # Its config objects run nothing: the import is the blocker, and the use goes whole.
        return f"`{module}`: {row.what}; it has no Trainium backend"
    noun = "code written with it runs" if row.kind == "language" else "its kernels run"
    return f"`{module}`: {row.what}; {noun} only on NVIDIA GPUs"


def _called_kernel(qualified: str | None, row: KernelPackage | None) -> bool:
    """Is a call of ``qualified`` (in ``row``) a prebuilt kernel's? Calls inside a kernel
    language are the kernel's own body (reported at the import and the decorator); calls of
    prebuilt kernels are each a place the port must change."""
    return (
        row is not None
        and row.kind not in ("language", "engine")
        and not any(qualified.startswith(k) for k in KERNEL_LANGUAGES)  # type: ignore[union-attr]
        and not in_package(qualified, _PURE_TORCH)  # type: ignore[arg-type]
    )


def _dynamic_import_ast(file, call: ast.Call, qualified: str | None) -> str | None:  # noqa: ANN001 - python.AstFile
    """``kernels.dynamic_import`` on ``ast``: a literal first argument that libcst reads as one
    ``SimpleString`` (an implicit concatenation is none), the module it names."""
    if qualified not in DYNAMIC_IMPORTS and not (isinstance(call.func, ast.Name) and call.func.id == "__import__"):
        return None
    # libcst's first argument is the first written: a positional one can follow a keyword only
    # when starred (`f(k=v, *a)`), which is refused either way.
    first = call.args[0] if call.args else None
    if first is None or isinstance(first, ast.Starred):
        return None
    if not isinstance(first, ast.Constant) or not isinstance(first.value, str) or not simple_string(file, first):
        return None
    value = first.value
    if not value or value.startswith(".") or not all(p.isidentifier() for p in value.split(".")):
        return None
    return value


class _Decorated:
    """Where libcst's ``Decorator`` is written: from its ``@`` to the end of its expression
    (positions as ``ast`` gives them: lines, and columns in UTF-8 bytes)."""

    def __init__(self, lineno: int, col_offset: int, end: ast.expr) -> None:
        self.lineno = lineno
        self.col_offset = col_offset
        self.end_lineno = end.end_lineno
        self.end_col_offset = end.end_col_offset


def _at_sign(file, node: ast.expr) -> _Decorated:  # noqa: ANN001 - python.AstFile
    """The decorator ``node`` with its ``@``, which is on the expression's line after blanks only;
    ``Unsure`` elsewhere (``@(kernel)``: libcst's node holds the parentheses too)."""
    text = file.text
    start = file.offset(node.lineno, node.col_offset)
    at = start
    while at > 0 and text[at - 1] in " \t\f":
        at -= 1
    if at == 0 or text[at - 1] != "@":
        from cuda2neuron.python import Unsure

        raise Unsure("a decorator not written right after its @")
    line_start = start - file.column(node.lineno, node.col_offset)
    return _Decorated(node.lineno, len(text[line_start : at - 1].encode("utf-8")), node)


class _Detector(AstDetector):
    """``CudaKernelPackage``'s visits on CPython's ``ast`` (``python/_ast_walk.py`` resolves
    names and keeps the order libcst visits in). A report is (node, message, guidance, effort,
    ancestors)."""

    def __init__(self, rule: type, file, settings: Settings) -> None:  # noqa: ANN001 - python.AstFile
        super().__init__(rule, file)
        self._facts = settings.project
        self._dynamic: dict[str, tuple[str, KernelPackage]] = {}
        self._folders: tuple[tuple[str, ...], ...] | None = None

    def _finding(self, node: ast.AST, message: str, guidance: str, effort: Effort, ancestors: tuple[object, ...]) -> Finding:
        return self.finding(node, message, guidance, effort)

    def _row(self, qualified: str | None) -> KernelPackage | None:
        row, self._folders = _row(qualified, self._facts, self.file.path, self.file.text, self._folders)
        return row

    def _import(self, node: ast.AST, module: str, row: KernelPackage) -> None:
        self._reports.append((node, _import_message(module, row), f"Port: {row.instead}.", Effort.HIGH, tuple(self.ctx.ancestors)))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            row = self._row(alias.name)
            if row is not None:
                self._import(node, alias.name, row)
                return

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or node.module is None:
            return
        module = node.module
        row = self._row(module)
        if row is None and not (len(node.names) == 1 and node.names[0].name == "*"):
            for alias in node.names:
                name = f"{module}.{alias.name}"
                row = self._row(name)
                if row is not None:
                    module = name
                    break
        if row is not None:
            self._import(node, module, row)

    def _decorator(self, node: ast.expr) -> None:
        """``visit_Decorator``, asked as libcst asks it: right before the decorator's expression,
        reported from the ``@``."""
        parent = self.ctx.parent
        if not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or not any(d is node for d in parent.decorator_list):
            return
        expr = node.func if isinstance(node, ast.Call) else node
        qualified = self.ctx.qualname(expr)
        row = self._row(qualified)
        if row is not None and row.kind == "language":
            self._reports.append(
                (_at_sign(self.file, node), f"`@{qualified}` defines a GPU kernel ({row.what})", f"Port: {row.instead}.", Effort.HIGH, tuple(self.ctx.ancestors))
            )

    def visit_Name(self, node: ast.Name) -> None:
        self._decorator(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._decorator(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if not isinstance(node.value, ast.Call):
            return
        module = _dynamic_import_ast(self.file, node.value, self.ctx.call_qualname(node.value))
        row = self._row(module) if module else None
        if row is None:
            return
        for target in node.targets:
            name = ast_dotted(target)
            if name is not None:
                self._dynamic[name] = (module, row)  # type: ignore[assignment]

    def visit_Call(self, node: ast.Call) -> None:
        self._decorator(node)
        qualified = self.ctx.call_qualname(node)
        module = _dynamic_import_ast(self.file, node, qualified)
        if module is not None:
            row = self._row(module)
            if row is not None:
                self._import(node, module, row)
            return
        if qualified is None and self._dynamic:
            qualified = _through_dynamic(self._dynamic, ast_dotted(node.func))
        row = self._row(qualified)
        if _called_kernel(qualified, row):
            self._reports.append(
                (node, f"`{qualified}` runs {row.what}", f"Call instead: {row.instead}.", Effort.MEDIUM, tuple(self.ctx.ancestors))  # type: ignore[union-attr]
            )
