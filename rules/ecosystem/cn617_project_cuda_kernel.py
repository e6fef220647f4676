"""CN617: imports of the project's own compiled CUDA extensions and GPU kernel modules."""

from __future__ import annotations

import ast
from collections.abc import Callable

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, ProjectFacts, Rule, Settings, Valid
from cuda2neuron.python import dotted_name

from .._shared.kernels import dynamic_import, local_kernel_package, package_of, project_module, relative_module
from .._shared.names import call_qualname
from .._shared.sys_path import source_sys_path_folders, sys_path_folders

__all__ = ["ProjectCudaKernel"]

_EXT_GUIDANCE = (
    "The project's setup builds the extension from CUDA sources (CUDAExtension, or another "
    "extension class given .cu files); it cannot be built or imported on Trainium: call the plain "
    "PyTorch reference of each op it exports (or an NKI kernel registered with "
    "torch_neuronx.nki_op), and drop it from the build."
)
_KERNEL_GUIDANCE = (
    "That module runs GPU kernels (it imports Triton, TileLang, CUTLASS or one of the project's "
    "compiled CUDA extensions, reported there): use the module's pure-PyTorch reference path for "
    "neuron tensors, or port its kernels to NKI. Where the module itself falls back to plain "
    "PyTorch when its kernel is missing (an `except ImportError` path, a flag it checks), this "
    "use needs no change of its own once that module is ported."
)
_FACTS = ProjectFacts(
    extension_modules=frozenset({"selective_scan_cuda", "pkg._C"}),
    kernel_modules=frozenset({"pkg.ops.layer_norm"}),
    kernel_names=frozenset({"pkg.ops.layer_norm.rms_norm", "pkg.ops.layer_norm.RMSNorm"}),
    own_packages=frozenset({"pkg"}),
)
_OPTIONS = (("project", _FACTS),)
# unsloth's layout: a Triton grouped GEMM of the project's own in proj/moe/grouped_gemm/.
_GROUPED_GEMM = (("project", ProjectFacts(kernel_modules=frozenset({"proj.moe.grouped_gemm.kernels.forward"}), own_packages=frozenset({"proj"}))),)


class ProjectCudaKernel(Rule):
    """
    ## What it does
    Reports imports of the compiled CUDA extensions the project's own setup builds
    (``CUDAExtension(name="selective_scan_cuda")`` → ``import selective_scan_cuda``; also a
    ``CppExtension("pkg.edit_cuda", sources=["edit.cu"])`` → ``from pkg import edit_cuda``,
    and ``importlib.import_module("pkg._C")``) and of the project's own modules that import a
    GPU kernel language or such an extension (``from pkg.ops.layer_norm import rms_norm`` where
    that module imports triton), and every call made through what they bind. Which modules
    those are comes from the project sweep run before the per-file rules.

    ## Why is this bad?
    Nothing in the importing file says CUDA: only the project's setup.py, or the imported
    module, does. On Trainium the extension cannot be built and the kernels cannot run, so
    the import fails or the call raises, while the file itself looks portable.

    ## Example
    ```python
    import selective_scan_cuda
    out, x, *rest = selective_scan_cuda.fwd(u, delta, A, B, C, D, None, None, False)
    ```

    ## Fix safety
    No fix: each call needs the op's PyTorch reference or an NKI kernel (effort high at the
    import, medium per call).
    """

    code = "CN617"
    name = "project-cuda-kernel"
    # The sweep's module names are this rule's real words (`project_triggers`); "cuda" and
    # "triton" cover most spellings of them on their own.
    triggers = ("cuda", "triton")
    project_triggers = True
    VALID = (
        Valid("import pkg.model\nfrom pkg.ops import other\n", options=_OPTIONS),
        Valid("import selective_scan_cuda\n"),  # no project facts: nothing known
        Valid("from .config import _C\nv = _C.VERSION\n", path="pkg/config/x.py", options=_OPTIONS),
        # plain torch beside the kernels: the sweep saw it reach none
        Valid("from pkg.ops.layer_norm import rms_norm_ref\ny = rms_norm_ref(x, w)\n", options=_OPTIONS),
        # a src layout's module importing its own installed package (axolotl): the exact names
        # decide, not the folder the file itself lies in
        # a folder above the tests that bears no kernel package's name (unsloth's studio tests
        # and `core.inference.worker`): read as before, by its exact names
        Valid(
            "from core.ops import fused\ny = fused(x)\n",
            path="proj/backend/tests/test_ops.py",
            options=(("project", ProjectFacts(kernel_modules=frozenset({"proj.backend.core.ops"}), own_packages=frozenset({"proj"}))),),
        ),
        Valid(
            "from pkg.ops.layer_norm import rms_norm\n",
            path="src/pkg/models/block.py",
            options=(("project", ProjectFacts(kernel_modules=frozenset({"src.pkg.ops.layer_norm"}), own_packages=frozenset({"src"}))),),
        ),
    )
    INVALID = (
        Invalid("import selective_scan_cuda\nout = selective_scan_cuda.fwd(u, delta)\n", options=_OPTIONS),
        Invalid("from pkg import _C\nkeep = _C.nms(boxes, scores, 0.5)\n", options=_OPTIONS),
        Invalid("from pkg.ops.layer_norm import rms_norm\ny = rms_norm(x, w)\n", options=_OPTIONS),
        Invalid("from ..ops.layer_norm import RMSNorm\nnorm = RMSNorm(64)\n", path="pkg/models/block.py", options=_OPTIONS),
        Invalid("from ..ops import layer_norm\ny = layer_norm.rms_norm(x, w)\n", path="pkg/models/block.py", options=_OPTIONS),
        # An import spelled as a call, and a call through what it returns.
        Invalid('import importlib\next = importlib.import_module("pkg._C")\next.nms(b, s, 0.5)\n', options=_OPTIONS),
        # unsloth's MoE tests import its Triton grouped GEMM (proj/moe/grouped_gemm/) from a
        # folder below by the package's own name, as Python finds it beside the tests' folder
        Invalid(
            "from grouped_gemm.kernels.forward import grouped_gemm_forward\ny = grouped_gemm_forward(x, w)\n",
            path="proj/moe/tests/test_moe.py",
            options=_GROUPED_GEMM,
        ),
        # unsloth's models/glm4_moe.py puts <package>/kernels/moe on sys.path and imports it so
        Invalid(
            "import os\nimport sys\n\n_moe = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'moe')\n"
            "sys.path.insert(0, _moe)\nfrom grouped_gemm.kernels.forward import grouped_gemm_forward\n",
            path="proj/models/glm.py",
            options=_GROUPED_GEMM,
        ),
    )

    @classmethod
    def applies(cls, settings: Settings) -> bool:
        # Everything it reports is a module the sweep found; a project without any is silent.
        return bool(settings.project.extension_modules or settings.project.kernel_modules)

    def __init__(self, context) -> None:  # noqa: ANN001 - RuleContext
        super().__init__(context)
        self._bound: dict[str, tuple[str, bool]] = {}  # local name -> (module, is an extension)
        self._folders: tuple[tuple[str, ...], ...] | None = None

    def _facts(self) -> ProjectFacts:
        return self.context.settings.project

    def _inserted(self) -> tuple[tuple[str, ...], ...]:
        # Folders the file puts on sys.path (unsloth's glm4_moe.py), read once, when an import asks.
        if self._folders is None:
            self._folders = source_sys_path_folders(self.context.source, self.context.path)
        return self._folders

    def _classify(self, candidates: tuple[str, ...]) -> tuple[str, bool] | None:
        return _classify(self._facts(), candidates)

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """No finding where no import of the file (``import``, ``from ... import``, or a call
        given a module name as its first argument, a superset of ``dynamic_import``'s) names a
        module the sweep found; unsure elsewhere (libcst runs). Every report of the visitor is
        such an import, or a call through a name one of them bound."""
        facts = settings.project
        def inserted() -> tuple[tuple[str, ...], ...]:
            return sys_path_folders(file.tree, file.path, file.text)

        for node in ast.walk(file.tree):
            if isinstance(node, ast.Import):
                names: list[tuple[str, ...]] = [_absolute(alias.name, facts, file.path, inserted) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if any(alias.name == "*" for alias in node.names):
                    continue
                if node.level:
                    bases = relative_module(file.path, node.level, node.module)
                else:
                    bases = _absolute(node.module, facts, file.path, inserted) if node.module else ()
                names = [tuple(f"{b}.{alias.name}" for b in bases) for alias in node.names]
                if any(facts.builds_extension(b) for b in bases):
                    names.append(tuple(bases))
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                names = [(node.args[0].value,)]
            else:
                continue
            if any(_classify(facts, candidates) is not None for candidates in names):
                return None
        return []

    def visit_Import(self, node: cst.Import) -> None:
        reported = False
        for alias in node.names:
            full = dotted_name(alias.name) or ""
            hit = self._classify(_absolute(full, self._facts(), self.context.path, self._inserted))
            if hit is None:
                continue
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else full.split(".")[0]
            self._bound[local if alias.asname is not None else full] = hit
            if not reported:
                self._report_import(node, *hit)
                reported = True

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        module = dotted_name(node.module) if node.module is not None else None
        if node.relative:
            bases = relative_module(self.context.path, len(node.relative), module)
        else:
            bases = _absolute(module, self._facts(), self.context.path, self._inserted) if module else ()
        reported = False
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            # `from pkg import _C` binds the module pkg._C; `from pkg.ops.x import f`, a name in it.
            hit = self._classify(tuple(f"{b}.{name}" for b in bases))
            if hit is None and any(self._facts().builds_extension(b) for b in bases):
                hit = self._classify(tuple(bases))  # `from scan_ext import fwd`
            if hit is None:
                continue
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name
            self._bound[local] = hit
            if not reported:
                self._report_import(node, *hit)
                reported = True

    def _report_import(self, node: cst.CSTNode, module: str, extension: bool) -> None:
        if extension:
            message = f"`{module}` is a compiled CUDA extension the project builds (from CUDA sources, in its setup)"
        elif self._facts().kernel_module(module) and not any(module == k or (k.endswith("." + module) and "." in module) for k in self._facts().kernel_modules):
            message = f"`{module}` comes from a project module that runs GPU kernels"
        else:
            message = f"`{module}` is a project module that runs GPU kernels"
        self.report(node, message, guidance=_EXT_GUIDANCE if extension else _KERNEL_GUIDANCE, effort=Effort.HIGH)

    def visit_Assign(self, node: cst.Assign) -> None:
        # `ext = importlib.import_module("pkg._C")`: an import spelled as a call binds `ext`.
        hit = self._dynamic(node.value) if isinstance(node.value, cst.Call) else None
        if hit is not None:
            for target in node.targets:
                name = dotted_name(target.target)
                if name is not None:
                    self._bound[name] = hit

    def _dynamic(self, call: cst.Call) -> tuple[str, bool] | None:
        module = dynamic_import(call, call_qualname(self, call))
        return self._classify((module,)) if module else None

    def visit_Call(self, node: cst.Call) -> None:
        hit = self._dynamic(node)
        if hit is not None:
            self._report_import(node, *hit)
            return
        if not self._bound:
            return
        func: cst.BaseExpression = node.func
        dotted = dotted_name(func)
        if dotted is None:
            return
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            hit = self._bound.get(".".join(parts[:i]))
            if hit is None:
                continue
            module, extension = hit
            rest = parts[i:]
            if not extension and rest and not self._facts().reaches_kernel(".".join([module, *rest])):
                return  # `norm.rms_norm_ref(x)`: plain torch beside the kernels
            what = "the compiled CUDA extension" if extension else "the kernel module"
            self.report(
                node,
                f"`{dotted}(...)` calls {what} `{module}`",
                guidance=_EXT_GUIDANCE if extension else _KERNEL_GUIDANCE,
                effort=Effort.MEDIUM,
            )
            return


def _classify(facts: ProjectFacts, candidates: tuple[str, ...]) -> tuple[str, bool] | None:
    """The project module ``candidates`` name (the first that is one), and whether it is a
    compiled extension; None if none is."""
    for name in candidates:
        if facts.builds_extension(name):
            return name, True
    found = project_module(facts, candidates)
    if found is None:
        return None
    extension = any(found == e or found.startswith(e + ".") for e in facts.extension_modules)
    return found, extension


def _absolute(module: str, facts: ProjectFacts, path, inserted: Callable[[], tuple[tuple[str, ...], ...]] = tuple) -> tuple[str, ...]:  # noqa: ANN001 - the file's path
    """An absolute import's module, then, where it bears a CUDA kernel package's name, the
    project's own package Python finds beside or above the file under that name (unsloth's
    tests import its ``grouped_gemm`` folder: CN616 leaves it here). Only there: unsloth's
    studio tests import ``core.inference.worker`` from the folder above too, and reading
    every such import as the project's kernel module made 458 findings of tests calling
    functions of a module that imports triton in another function. The visitor and the
    gate both read imports through it, so the gate decides no file the visitor reports.
    ``inserted`` gives the folders the file puts on ``sys.path`` (asked only here, for a name of
    a CUDA kernel package: unsloth's glm4_moe.py finds its own ``grouped_gemm`` so)."""
    if package_of(module, ProjectFacts()) is None:
        return (module,)
    local = local_kernel_package(module, facts, path, inserted())
    return (module,) if local is None else (module, local)
