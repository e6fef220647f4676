"""CN602: CUDA C++ extensions built ahead of time or just in time."""

from __future__ import annotations

import re

import libcst as cst

from pathlib import PurePath

from cuda2neuron.core import Effort, Finding, Invalid, ProjectFacts, Rule, Settings, Valid
from cuda2neuron.python import dotted_name

from .._shared.args import arg_by_name
from .._shared.blocks import statements
from .._shared.kernels import relative_module
from .._shared.names import call_qualname, is_reference, terminal_name

__all__ = ["CudaExtension"]

_GUIDANCE = (
    "Port the kernel to NKI (@nki.jit, registered with "
    "torch_neuronx.nki_op) or replace the call with plain PyTorch (keep/use the Python fallback); "
    "drop the .cu sources from the build."
)
_LOADER_GUIDANCE = (
    "Find what the callers pass as sources (they are reported where they pass .cu files): CUDA "
    "sources cannot be built on Trainium, so those kernels must be ported to NKI or replaced with "
    "plain PyTorch; a loader given only .cpp sources builds for the host and may stay."
)
_BUILD_GUIDANCE = (
    "On Trainium the extension is not built: port its kernels to NKI or use the package's Python "
    "fallback, and build or install the package without this CUDA build (its skip-build switch, or "
    "a build script of its own for Neuron). The CUDA_HOME / nvcc version probing, "
    "TORCH_CUDA_ARCH_LIST and CUDA-tagged wheel names in this script belong to the CUDA build."
)
_SETUP = frozenset({"setuptools.setup", "distutils.core.setup"})
_EXT = "torch.utils.cpp_extension"
_LOADERS = ProjectFacts(extension_loaders=frozenset({"pkg.jit.load_ext"}))
# A CUDA source named in a literal: "kernel.cu", 'x.cuh', f".../{name}.cu" ...
_CU_SOURCE = re.compile(r"""\.cuh?['"]""")
_NAMES = frozenset({"CUDAExtension", "load_inline", "load"})
# Extension classes that build whatever their sources are: CUDA when one of them is a .cu file.
_SOURCE_BUILDERS = frozenset({
    f"{_EXT}.CppExtension", "setuptools.Extension", "setuptools.extension.Extension",
    "distutils.core.Extension", "distutils.extension.Extension",
})  # fmt: skip
# What every report of the visitor needs spelled somewhere in the file's text (a node's code is a
# slice of it), so a file without any of these gets no finding (the detector decides it without
# libcst; the project's loaders wake the rule on 281 of Megatron-LM's files that spell none):
#   * a CUDA source in a literal (`_CU_SOURCE`): `_names_cu`, the lists it remembers, a loader
#     given .cu files, a script that writes one (`_check_generated_source`'s pattern ends so too);
#   * `CUDAExtension`: its call, the builder chosen or handed on, so also `_chosen` and the build
#     script's whole-file finding (it needs a CUDA extension named: by one of these, or a .cu list);
#   * `load_inline` (its terminal name is read before its qualified one) and `cpp_extension`
#     (`load` resolves to torch.utils.cpp_extension.load only through an import that spells it).
_MAY_REPORT = re.compile(r"""cpp_extension|CUDAExtension|load_inline|\.cuh?['"]""")
# `open("kernel_forward.cu", "w")`: a script that writes CUDA source (a kernel generator).
_WRITE_MODE = re.compile(r"[wax]")
_GEN_GUIDANCE = (
    "The script generates CUDA C++ kernel source for the CUDA build: on Trainium nothing builds "
    "it. Port the generated kernels to NKI (or the plain PyTorch the extension replaces), and "
    "leave the generator out of the Neuron build."
)


class CudaExtension(Rule):
    """
    ## What it does
    Reports CUDA C++ extensions: ``CUDAExtension(...)`` in a build script (or a
    ``CppExtension`` / setuptools ``Extension`` given ``.cu`` sources),
    ``load_inline(..., cuda_sources=...)`` and ``torch.utils.cpp_extension.load(...)`` of ``.cu``
    sources (or with CUDA flags). A ``load`` whose sources are computed (a parameter, a glob: a
    plugin loader) is reported as a JIT build whose sources must be checked, and every call that
    passes ``.cu`` files to such a loader is reported too, also from other files of the project
    (the project sweep names the loaders). A script that writes ``.cu`` files
    (``open("conv_cuda_forward.cu", "w")``, ``Path(...).write_text``) is reported as
    generating CUDA source.

    ## Why is this bad?
    nvcc-compiled kernels only run on NVIDIA GPUs. On Trainium a custom kernel is written in NKI,
    or the operation is expressed in PyTorch and left to the neuron compiler.

    ## Example
    ```python
    from torch.utils.cpp_extension import load
    ext = load(name="fused", sources=["fused.cu"], extra_cuda_cflags=["-O3"])
    ```

    ## Fix safety
    No fix (effort high): the kernel must be ported or dropped. C++-only extensions (``.cpp``
    sources, ``CppExtension``) are not reported: they build for the host CPU. A build script
    (a file that calls ``setuptools.setup``) with a ``CUDAExtension`` is also reported as a whole,
    once, with a finding that spans the file: its CUDA_HOME and nvcc probing, arch lists and
    CUDA-versioned wheel names are the CUDA build, not code to port line by line.
    """

    code = "CN602"
    name = "cuda-extension"
    # `.cu"`: a .cu file named in code (setuptools' Extension given CUDA sources, a script
    # that writes a kernel source).
    triggers = ("cpp_extension", '.cu"', ".cu'", '.cuh"', ".cuh'")
    # The project's loaders (`def load_ext(name, sources): return load(name, sources)` in
    # another file) are named by the sweep: a file that only calls one holds no word of its own.
    project_triggers = True
    VALID = (
        "from torch.utils.cpp_extension import load\next = load(name='e', sources=['e.cpp'])\n",
        "from torch.utils.cpp_extension import CppExtension\nx = CppExtension('e', ['e.cpp'])\n",
        "import json\ndata = json.load(f)\n",  # another load
        Valid("from pkg.jit import load_ext\nops = load_ext('ops', ['ops.cpp'])\n", options=(("project", _LOADERS),)),
        "from torch.utils.cpp_extension import load\next = load(name='e', sources=('a.cpp', 'b.cpp'))\n",
        'with open("kernel.cu") as f:\n    text = f.read()\n',  # reading a source generates nothing
        'text = Path("kernel.cu").read_text()\nPath("notes.txt").write_text(text)\n',
        'from setuptools import Extension\next = Extension("fast", sources=["fast.c"])\n',
        # a subclass of the script's own building Cython sources
        "from setuptools import Extension\nclass NumpyExtension(Extension):\n    pass\next = NumpyExtension('utils_fast', sources=['utils_fast.pyx'])\n",
    )
    INVALID = (
        Invalid(
            "from torch.utils.cpp_extension import CUDAExtension\n"
            "ext = CUDAExtension('e', ['e.cpp', 'e_kernel.cu'])\n"
        ),
        # A build script: the CUDAExtension, and the script as a whole (CUDA_HOME probing and all).
        Invalid(
            "from setuptools import setup\nfrom torch.utils.cpp_extension import CUDA_HOME, CUDAExtension\n\n"
            "def nvcc_version(cuda_dir):\n    return cuda_dir\n\n"
            "setup(name='pkg', ext_modules=[CUDAExtension('pkg_cuda', ['k.cu'])] if CUDA_HOME else [])\n",
            path="setup.py",
        ),
        Invalid(
            "from torch.utils.cpp_extension import load\n"
            "ext = load(name='e', sources=[str(CSRC / 'e.cu')])\n"
        ),
        Invalid(
            "import torch.utils.cpp_extension as ce\n"
            "ext = ce.load('e', srcs, extra_cuda_cflags=['-O3'])\n"
        ),
        Invalid(
            "from torch.utils.cpp_extension import load\n"
            "def load_ext(name, sources):\n    return load(name=name, sources=sources)\n"
        ),
        Invalid(
            "from torch.utils.cpp_extension import CppExtension, CUDAExtension\n"
            "extension = CppExtension\nif with_cuda:\n    extension = CUDAExtension\n"
        ),
        Invalid("from pkg.jit import load_ext\nops = load_ext('ops', ['ops.cpp', 'ops_kernel.cu'])\n", options=(("project", _LOADERS),)),
        Invalid("from .jit import load_ext\nops = load_ext('ops', ['ops_kernel.cu'])\n", path="pkg/layers.py", options=(("project", _LOADERS),)),
        # The sources in a variable (gpt-neox's fused kernels): the list is reported where it is written.
        Invalid(
            "from pkg.jit import load_ext\ndef build(src):\n    sources = [src / 'softmax.cpp', src / 'softmax_cuda.cu']\n"
            "    return load_ext('softmax_cuda', sources)\n",
            options=(("project", _LOADERS),),
        ),
        Invalid(
            "from torch.utils.cpp_extension import load_inline\n"
            "m = load_inline(name='m', cpp_sources=cpp, cuda_sources=cu, functions=['f'])\n"
        ),
        # fairseq: CppExtension (not CUDAExtension) given .cu sources builds CUDA all the same.
        Invalid(
            "from torch.utils import cpp_extension\n"
            "ext = cpp_extension.CppExtension('pkg.edit_cuda', sources=['edit.cu', 'bind.cpp'])\n"
        ),
        Invalid('from setuptools import Extension\next = Extension("fast_cuda", ["fast.cu"])\n'),
        # A build script that picks the builder at run time: reported as a whole all the same.
        Invalid(
            "from setuptools import setup\nfrom torch.utils.cpp_extension import CppExtension, CUDAExtension\n"
            "extension = CppExtension\nmacros = []\nif with_cuda:\n    extension = CUDAExtension\n"
            "    macros += [('WITH_CUDA', None)]\n"
            "setup(name='pkg', ext_modules=[extension('pkg._C', ['vision.cpp'], define_macros=macros)])\n",
            path="setup.py",
        ),
        # The sources named once, and a builder of the script's own (a subclass).
        Invalid('from setuptools import Extension\nsrcs = ["k.cpp", "k.cu"]\next = Extension("ops", sources=srcs)\n'),
        Invalid(
            "from setuptools.extension import Extension\nclass NumpyExtension(Extension):\n    pass\n"
            "ext = NumpyExtension('ops', sources=['ops_kernel.cu'])\n"
        ),
        # The builder handed on by a helper (mmengine), picked in one branch.
        Invalid(
            "def get_extension():\n"
            "    from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension\n"
            "    return BuildExtension, CppExtension, CUDAExtension\n"
        ),
        # A kernel generator: a script that writes .cu source.
        Invalid('with open("conv_cuda_forward.cu", "w") as out:\n    out.write(head)\n'),
        Invalid('from pathlib import Path\nPath(f"{d}/k{n}.cu").write_text(src)\n'),
        Invalid('(out_dir / "fused_kernel.cuh").write_text(header)\n'),
    )

    def __init__(self, context) -> None:  # noqa: ANN001 - RuleContext
        super().__init__(context)
        self._cuda_extensions: list[str] = []  # the names the file's CUDAExtension calls build
        self._setup = False  # the file calls setuptools.setup: a build script
        # `class NumpyExtension(Extension)`: the file's own builders, and names of lists of
        # .cu sources (`srcs = ["k.cpp", "k.cu"]`, then `Extension("ops", sources=srcs)`).
        self._builders: set[str] = set()
        self._cu_lists: set[str] = set()
        # Where each such list is written (its value and the chain above it): a loader call that is
        # given the name is reported there too, since the .cu files are on those lines.
        self._cu_values: dict[str, tuple[cst.BaseExpression, tuple[cst.CSTNode, ...]]] = {}
        self._cu_reported: set[int] = set()
        # `extension = CUDAExtension`: the variables a build script binds the builder to; a call
        # through one (`extension("pkg._C", sources)`) names the CUDA extension it builds.
        self._chosen: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        name = terminal_name(node.func)
        if name == "setup" and call_qualname(self, node) in _SETUP:
            self._setup = True
        if name in ("open", "write_text", "write_bytes"):
            self._check_generated_source(node, name)
            return
        if isinstance(node.func, cst.Name) and node.func.value in self._chosen:
            named = arg_by_name(node, "name") or (node.args[0] if node.args and node.args[0].keyword is None else None)
            if named is not None:
                self._cuda_extensions.append(self.context.code(named.value))
        if name is not None and name.endswith("Extension") and self._source_builder(node):
            sources = arg_by_name(node, "sources") or (node.args[1] if len(node.args) > 1 and node.args[1].keyword is None else None)
            if sources is not None and self._names_cu(sources.value):
                named = arg_by_name(node, "name") or (node.args[0] if node.args and node.args[0].keyword is None else None)
                self._cuda_extensions.append(self.context.code(named.value) if named is not None else f"{name}(...)")
                self._report(node, f"`{name}` is given .cu sources: it builds CUDA C++ kernels")
            return
        if name not in _NAMES:
            self._check_loader_call(node)
            return
        qualified = call_qualname(self, node)
        if qualified == f"{_EXT}.CUDAExtension":
            named = arg_by_name(node, "name") or (node.args[0] if node.args and node.args[0].keyword is None else None)
            self._cuda_extensions.append(self.context.code(named.value) if named is not None else "CUDAExtension(...)")
            self._report(node, "`CUDAExtension` builds CUDA C++ kernels")
        elif qualified == f"{_EXT}.load_inline":
            if arg_by_name(node, "cuda_sources") is not None or arg_by_name(node, "with_cuda") is not None:
                self._report(node, "`load_inline(cuda_sources=...)` compiles CUDA kernels at run time")
        elif qualified == f"{_EXT}.load":
            cuda_flags = arg_by_name(node, "extra_cuda_cflags") is not None
            sources = arg_by_name(node, "sources") or (node.args[1] if len(node.args) > 1 and node.args[1].keyword is None else None)
            cu = sources is not None and _CU_SOURCE.search(self.context.code(sources.value)) is not None
            if cuda_flags or cu:
                self._report(node, "`cpp_extension.load` compiles CUDA sources at run time")
            elif sources is not None and not _literal_sources(sources.value):
                # A plugin loader: what it builds is decided by its caller (or a glob).
                self.report(
                    node,
                    "`cpp_extension.load` JIT-builds an extension from sources computed at run time",
                    guidance=_LOADER_GUIDANCE,
                    effort=Effort.MEDIUM,
                )
        else:
            self._check_loader_call(node)

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """No finding where the file spells none of ``_MAY_REPORT``; unsure elsewhere (libcst runs)."""
        return None if _MAY_REPORT.search(file.text) else []

    def leave_Module(self, original_node: cst.Module) -> None:
        if not (self._setup and (self._cuda_extensions or self._chosen)):
            return
        names = ", ".join(dict.fromkeys(self._cuda_extensions)) or "CUDAExtension, chosen at run time"
        self.report(
            original_node,
            f"this build script builds CUDA extensions ({names}): the CUDA build as a whole",
            guidance=_BUILD_GUIDANCE,
            effort=Effort.HIGH,
            ancestors=(),
        )

    def _source_builder(self, call: cst.Call) -> bool:
        if call_qualname(self, call) in _SOURCE_BUILDERS:
            return True
        return isinstance(call.func, cst.Name) and call.func.value in self._builders

    def _names_cu(self, sources: cst.BaseExpression) -> bool:
        if _CU_SOURCE.search(self.context.code(sources)):
            return True
        return isinstance(sources, cst.Name) and sources.value in self._cu_lists

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if any(self.qualname(b.value) in _SOURCE_BUILDERS for b in node.bases):
            self._builders.add(node.name.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        if (
            len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
            and isinstance(node.value, (cst.List, cst.Tuple, cst.Call, cst.BinaryOperation))
            and _CU_SOURCE.search(self.context.code(node.value))
        ):
            self._cu_lists.add(node.targets[0].target.value)
            self._cu_values[node.targets[0].target.value] = (node.value, (*self.context.ancestors, node))
        # `extension = CUDAExtension` (then `extension("pkg._C", sources)`): the builder is chosen
        # at run time, so the CUDA build is only visible where CUDAExtension is assigned.
        if isinstance(node.value, (cst.Name, cst.Attribute)) and self.qualname(node.value) == f"{_EXT}.CUDAExtension":
            self._report(node.value, "`CUDAExtension` is chosen as the extension builder: the build compiles CUDA C++ kernels")
            # detectron2's setup.py: the WITH_CUDA macros and nvcc flags of the branch that chose
            # it are the CUDA build too, which only the whole-script finding covers.
            if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                self._chosen.add(node.targets[0].target.value)

    def visit_Name(self, node: cst.Name) -> None:
        # `return BuildExtension, CppExtension, CUDAExtension` (mmengine's extension helper): the
        # builder handed on, which its receivers call with CUDA sources elsewhere.
        if node.value != "CUDAExtension" or not is_reference(self, node):
            return
        parent = self.context.parent
        if isinstance(parent, cst.Call) and parent.func is node:
            return  # a call: visit_Call's
        if isinstance(parent, (cst.Assign, cst.Attribute)):
            return  # `extension = CUDAExtension` is visit_Assign's; a dotted head is no value
        if self.context.scope.lookup(node.value) == f"{_EXT}.CUDAExtension":
            self._report(node, "`CUDAExtension` is handed on as the extension builder: its user compiles CUDA C++ kernels")

    def _check_loader_call(self, node: cst.Call) -> None:
        """A call of one of the project's loaders (``ProjectFacts.extension_loaders``) that hands
        it ``.cu`` files: the loader builds CUDA code here, whatever its own file says."""
        if not any(self._names_cu(a.value) for a in node.args):
            return
        facts = self.context.settings.project
        local = _local_loaders(self)
        if not (facts.extension_loaders or local):
            return
        name = dotted_name(node.func)
        if name in local and self.context.scope.lookup(name) is None:
            loader: str | None = name
        else:
            loader = _loader_of(self, node.func, facts)
        if loader is None:
            return
        self._report(node, f"`{loader}` is given CUDA sources: it JIT-builds them with `cpp_extension.load`")
        # gpt-neox: `sources = [..., srcpath / "softmax_cuda.cu"]`, then `helper(name, sources)`.
        for arg in node.args:
            if isinstance(arg.value, cst.Name) and arg.value.value in self._cu_values:
                value, chain = self._cu_values[arg.value.value]
                if id(value) not in self._cu_reported:
                    self._cu_reported.add(id(value))
                    self.report(
                        value,
                        f"`{arg.value.value}` lists CUDA sources that `{loader}` JIT-builds",
                        guidance=_GUIDANCE,
                        effort=Effort.HIGH,
                        ancestors=chain,
                    )

    def _check_generated_source(self, node: cst.Call, name: str) -> None:
        """``open("x_cuda_forward.cu", "w")`` (the builtin, or ``io.open``) and
        ``Path("x.cu").write_text(...)`` / ``(folder / "x.cu").write_text(...)``: the file writes
        a CUDA source."""
        if name == "open":
            if self.context.scope.lookup("open") is not None and call_qualname(self, node) != "io.open":
                return  # an `open` imported from elsewhere
            target = node.args[0] if node.args and node.args[0].keyword is None else arg_by_name(node, "file")
            mode = arg_by_name(node, "mode") or (node.args[1] if len(node.args) > 1 and node.args[1].keyword is None else None)
            if target is None or mode is None or not isinstance(mode.value, cst.SimpleString):
                return
            if not _WRITE_MODE.search(str(mode.value.evaluated_value)):
                return
            code = self.context.code(target.value)
        elif isinstance(node.func, cst.Attribute):
            code = self.context.code(node.func.value)  # the path the text is written to
        else:
            return
        match = re.search(r"""[\w./{}-]*\.cuh?(?=['"])""", code)
        if match is None:
            return
        self.report(
            node,
            f"writes CUDA kernel source (`{match.group()}`): this script generates code for the CUDA build",
            guidance=_GEN_GUIDANCE,
            effort=Effort.HIGH,
        )

    def _report(self, node: cst.CSTNode, message: str) -> None:
        self.report(node, message, guidance=_GUIDANCE, effort=Effort.HIGH)


def _local_loaders(rule: Rule) -> frozenset[str]:
    """This file's functions that pass a parameter to ``load`` as its sources (the sweep finds
    the same in other files), computed once per pass."""
    memo = rule.context.__dict__.setdefault("_cn602_loaders", {})
    key = id(rule.context.module)
    if key not in memo:
        found = set()
        # Nested defs too: gpt-neox defines its loader inside the function that builds the kernels.
        for stmt in (s for s in statements(rule.context.module) if isinstance(s, cst.FunctionDef)):
            params = {p.name.value for p in (*stmt.params.posonly_params, *stmt.params.params, *stmt.params.kwonly_params)}
            finder = _LoadSources(params)
            stmt.body.visit(finder)
            if finder.found:
                found.add(stmt.name.value)
        memo[key] = frozenset(found)
    return memo[key]


class _LoadSources(cst.CSTVisitor):
    def __init__(self, params: set[str]) -> None:
        self.params = params
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        if terminal_name(node.func) != "load":
            return
        sources = arg_by_name(node, "sources") or (node.args[1] if len(node.args) > 1 and node.args[1].keyword is None else None)
        if sources is not None and isinstance(sources.value, cst.Name) and sources.value.value in self.params:
            self.found = True


def _literal_sources(node: cst.BaseExpression) -> bool:
    """``["a.cpp", "b.cpp"]``: every source named by a plain string (no name, call or glob)."""
    if isinstance(node, (cst.List, cst.Tuple)):
        return all(isinstance(e.value, (cst.SimpleString, cst.ConcatenatedString)) for e in node.elements)
    return isinstance(node, cst.SimpleString)


def _loader_of(rule: Rule, func: cst.BaseExpression, facts: ProjectFacts) -> str | None:
    """The project loader ``func`` names: imported absolutely (``pkg.jit.load_ext``), relatively
    (``from .jit import load_ext``) or defined in this very file."""
    qualified = rule.qualname(func)
    if qualified is not None:
        return qualified if facts.extension_loader(qualified) else None
    name = dotted_name(func)
    if name is None or "." in name:
        return None
    origin = _relative_origin(rule, name)
    if origin is not None:
        return next((c for c in origin if facts.extension_loader(c)), None)
    # Defined here: the file's own module, as a dotted path, ends like the loader's name.
    parts = PurePath(rule.context.path).with_suffix("").parts
    for i in range(len(parts)):
        candidate = ".".join((*parts[i:], name))
        if candidate in facts.extension_loaders:
            return candidate
    return None


def _relative_origin(rule: Rule, name: str) -> tuple[str, ...] | None:
    """Dotted names ``name`` may mean when a relative import of this module binds it."""
    for stmt in rule.context.module.body:
        for small in getattr(stmt, "body", ()) if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.ImportFrom) and small.relative and not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else dotted_name(alias.name)
                    if local == name:
                        module = dotted_name(small.module) if small.module is not None else None
                        bases = relative_module(rule.context.path, len(small.relative), module)
                        return tuple(f"{b}.{dotted_name(alias.name)}" for b in bases)
    return None
