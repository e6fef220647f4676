"""The project-level sweep: names that only the whole project knows, found before the per-file run.

A file that imports ``selective_scan_cuda`` says nothing CUDA-specific by itself: only the
project's setup.py, which builds it with ``CUDAExtension(name="selective_scan_cuda")``, does.
Likewise ``from .ops.layer_norm import rms_norm`` calls a Triton kernel only because that module
imports triton. The sweep reads what it needs with the standard library's ``ast`` (a small
fraction of a libcst parse) and only from files whose bytes hold one of its words; the facts
then travel to every file's rules inside ``Settings``, so the per-file engine and its process
pool stay as they are.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from cuda2neuron.core import Config, ProjectFacts

from ._discover import SourceFile

__all__ = ["project_facts", "with_project_facts"]

# Top-level packages of CUDA-only kernel languages: a project module importing one is a kernel.
KERNEL_LANGUAGES = frozenset({"triton", "tilelang", "cutlass", "helion"})
_WORDS = (b"CUDAExtension", b"cpp_extension", b".cu\"", b".cu'", *(w.encode() for w in KERNEL_LANGUAGES))
# Files holding one of these may define a function that hands a parameter on as the backend.
_BACKEND_WORDS = (b"init_process_group", b"nccl", b"NCCL")


def project_facts(files: Iterable[SourceFile], extra_roots: Iterable[Path] = ()) -> ProjectFacts:
    """What the Python files among ``files`` (and the setup.py of each of ``extra_roots``) tell.

    ``extra_roots`` are folders whose setup.py must be read even when it is not among ``files``
    (``check`` given a few files by pre-commit still knows the project's extensions).
    """
    extensions: set[str] = set()
    kernels: set[str] = set()
    loaders: set[str] = set()
    backend_params: list[tuple[str, int | None, str]] = []
    trees: dict[str, ast.Module] = {}  # kernel module -> its tree, for the names that reach a kernel
    seen: set[Path] = set()
    files = tuple(files)
    candidates = [(f.path, f.root) for f in files if f.kind == "python"]
    # Top-level names of the project's own modules, from paths alone (nothing is read).
    own = {m.split(".")[0] for m in (_module_of(p, r) for p, r in candidates) if m}
    candidates += [(root / "setup.py", root) for root in extra_roots]
    for path, root in candidates:
        resolved = path.resolve()
        if resolved in seen:
            continue
        seen.add(resolved)
        try:
            data = path.read_bytes()
        except OSError:
            continue  # the per-file run reports unreadable files
        builds = any(w in data for w in _WORDS)
        backends = any(w in data for w in _BACKEND_WORDS)
        if not builds and not backends:
            continue
        try:
            tree = ast.parse(data, filename=str(path))
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue  # the per-file run reports the syntax error
        if backends:
            backend_params += _backend_parameters(tree)
        if not builds:
            continue
        extensions.update(_extension_names(tree))
        module = _module_of(path, root)
        if module and _imports_kernel_language(tree):
            trees[module] = tree
        if module:
            loaders.update(f"{module}.{name}" for name in _loader_functions(tree))
    trees.update(_extension_importers(candidates, extensions, trees))
    kernels.update(trees)
    spaces = op_namespaces(extensions)
    names = {f"{m}.{n}" for m, tree in trees.items() for n in _reaching_names(m, tree, extensions, kernels, spaces)}
    if kernels:
        _add_reexports(candidates, kernels, names)
    return ProjectFacts(
        extension_modules=frozenset(extensions),
        kernel_modules=frozenset(kernels),
        extension_loaders=frozenset(loaders),
        kernel_names=frozenset(names),
        own_packages=frozenset(own),
        backend_params=_unambiguous(backend_params),
    )


def _unambiguous(found: list[tuple[str, int | None, str]]) -> frozenset[tuple[str, int | None, str]]:
    """The entries of the function names found once: a caller of a name defined twice (two
    classes' ``setup`` methods) cannot be told apart by its last name."""
    counts: dict[str, int] = {}
    for name, _, _ in found:
        counts[name] = counts.get(name, 0) + 1
    return frozenset(entry for entry in found if counts[entry[0]] == 1)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _backend_parameters(tree: ast.Module) -> list[tuple[str, int | None, str]]:
    """(function, call position, parameter) for each parameter a function (or method) passes on
    as a backend (``_passed_backend``), a bare name never rebound in its body: modded-nanogpt's
    and detectron2's launchers take the backend from their caller, in another file, as a plain
    ``"nccl"`` argument."""
    methods = {
        id(f) for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
        for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    found = []
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        positional = [*func.args.posonlyargs, *func.args.args]
        static = any(_call_name(d) == "staticmethod" for d in func.decorator_list)
        skip = 1 if id(func) in methods and not static and positional else 0  # self / cls
        params: dict[str, int | None] = {a.arg: i - skip for i, a in enumerate(positional) if i >= skip}
        params.update({a.arg: None for a in func.args.kwonlyargs})
        own = list(_own_nodes(func))
        rebound = {n.id for n in own if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        passed = next((n for n in map(_passed_backend, own) if n in params and n not in rebound), None)
        if passed is not None:
            found.append((func.name, params[passed], passed))
    return found


def _passed_backend(node: ast.AST) -> str | None:
    """The bare name ``node`` hands on as a backend: ``init_process_group(name)`` (position 0 or
    ``backend=``), or ``backend == "nccl"`` for a name saying "backend", a test CN401 rewrites
    to ``"neuron"`` (modded-nanogpt's ``DDPStrategy.wrap_model``), so its callers' ``"nccl"``
    must move with it."""
    if isinstance(node, ast.Call) and _call_name(node.func) == "init_process_group":
        backend = _keyword(node, "backend")
        if backend is None and node.args and not isinstance(node.args[0], ast.Starred):
            backend = node.args[0]
        return backend.id if isinstance(backend, ast.Name) else None
    if isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
        if any(isinstance(o, ast.Constant) and isinstance(o.value, str) and o.value.lower() == "nccl" for o in operands):
            return next((o.id for o in operands if isinstance(o, ast.Name) and "backend" in o.id.lower()), None)
    return None


def _own_nodes(func: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterable[ast.AST]:
    """The nodes of ``func``'s body outside nested functions and classes (their parameters
    shadow the outer ones)."""
    stack: list[ast.AST] = [s for s in func.body if not isinstance(s, _SCOPES)]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, _SCOPES))


def _bound_by(node: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    """(local name, dotted name it binds) for an absolute import."""
    if isinstance(node, ast.Import):
        return [(a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0]) for a in node.names]
    if node.level or not node.module:
        return []
    return [(a.asname or a.name, f"{node.module}.{a.name}") for a in node.names if a.name != "*"]


_OPS = "torch.ops"  # stands for a call of an extension's registered op in the reaching-name search


def _reaching_names(module: str, tree: ast.Module, extensions: set[str], kernels: set[str],
                    spaces: set[str] = frozenset()) -> set[str]:
    """Top-level names of a kernel module that reach a kernel: bound by an import of a kernel
    language, a project extension or another kernel module (relative imports resolved against
    ``module``), or defined by a ``def`` / ``class`` / assignment whose code uses such a name, to
    a fixed point. ``rms_norm_ref`` written in plain torch is not one."""

    def kernel_import(dotted: str) -> bool:
        return dotted.split(".")[0] in KERNEL_LANGUAGES or any(
            dotted == m or dotted.startswith(m + ".") for m in (*extensions, *kernels)
        )

    seeds: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            prefix = _relative_base(module, node)
            seeds.update(
                a.asname or a.name for a in node.names if a.name != "*" and kernel_import(f"{prefix}.{a.name}".lstrip("."))
            )
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            seeds.update(local for local, dotted in _bound_by(node) if kernel_import(dotted))
    defs: dict[str, set[str]] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            targets = [stmt.name]
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = [t.id for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]) if isinstance(t, ast.Name)]
        else:
            continue
        used = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        if spaces and any(_calls_op_namespace(n, spaces) for n in ast.walk(stmt)):
            used.add(_OPS)
            seeds.add(_OPS)
        for t in targets:
            defs.setdefault(t, set()).update(used)
    reaching = set(seeds)
    changed = True
    while changed:
        changed = False
        for name, used in defs.items():
            if name not in reaching and used & reaching:
                reaching.add(name)
                changed = True
    # Names the module defines or imports, never the language's own (`triton`, `tl`).
    return {n for n in reaching if n in defs or n in seeds} - {_OPS} - {
        local for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
        for local, dotted in _bound_by(node) if dotted.split(".")[0] in KERNEL_LANGUAGES
    }


def _add_reexports(candidates: list[tuple[Path, Path]], kernels: set[str], names: set[str]) -> None:
    """Package ``__init__`` files that re-export a kernel name become kernel modules holding just
    the names they re-export (to a fixed point: a package above re-exporting it again).

    detectron2's tests import ``DeformConv`` from ``detectron2.layers``, whose ``__init__`` takes
    it from ``deform_conv`` (which imports the compiled ``_C``): without this the tests' "skip
    without CUDA" gates were retargeted and ran the CUDA ops on neuron tensors. Only package
    ``__init__`` files are read (re-export hubs, small), and only in projects with kernels.
    """
    inits: dict[str, ast.Module] = {}
    for path, root in candidates:
        if path.name != "__init__.py":
            continue
        module = _module_of(path, root)
        try:
            inits[module] = ast.parse(path.read_bytes(), filename=str(path))
        except (OSError, SyntaxError, ValueError, MemoryError, RecursionError):
            continue  # the per-file run reports it
    recorded = {n.rpartition(".")[0] for n in names}

    def reaches(dotted: str) -> bool:
        if dotted in names or dotted in kernels:
            return True
        owner = dotted.rpartition(".")[0]
        return owner in kernels and owner not in recorded

    changed = True
    while changed:
        changed = False
        for module, tree in inits.items():
            for node in ast.walk(tree):
                if not isinstance(node, ast.ImportFrom) or not (node.module or node.level):
                    continue
                base = _relative_base(module, node, package_init=True) if node.level else node.module
                for alias in node.names:
                    found = [n for n in names if n.rpartition(".")[0] == base] if alias.name == "*" else (
                        [f"{base}.{alias.name}"] if reaches(f"{base}.{alias.name}") else [])
                    for dotted in found:
                        local = f"{module}.{dotted.rpartition('.')[2] if alias.name == '*' else alias.asname or alias.name}"
                        if local not in names:
                            names.add(local)
                            kernels.add(module)
                            recorded.add(module)
                            changed = True


def _relative_base(module: str, node: ast.ImportFrom, package_init: bool = False) -> str:
    """The dotted module a relative ``from ..x import y`` in ``module`` (a file's dotted name;
    ``package_init``: the file is that package's ``__init__.py``) imports from:
    ``fairseq.models.nat.utils`` + ``from ... import libnat_cuda`` gives ``fairseq``."""
    package = module.split(".") if package_init else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)] if node.level - 1 <= len(package) else []
    return ".".join([*base, *([node.module] if node.module else [])])


def _extension_importers(candidates: list[tuple[Path, Path]], extensions: set[str], known: dict[str, ast.Module]) -> dict[str, ast.Module]:
    """Modules that import one of the project's compiled CUDA extensions (``try: import scan_ext``)
    run CUDA kernels as much as a Triton module does; only known once every setup.py was read,
    so this is a second look, at the files that spell an extension's name."""
    words = {e.rsplit(".", 1)[-1].encode() for e in extensions}
    spaces = op_namespaces(extensions)
    words |= {f"ops.{ns}".encode() for ns in spaces}
    found: dict[str, ast.Module] = {}
    if not words:
        return found
    for path, root in candidates:
        module = _module_of(path, root)
        if not module or module in known or path.name == "setup.py":
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if not any(w in data for w in words):
            continue
        try:
            tree = ast.parse(data, filename=str(path))
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or node.level):
                # `from fairseq import libnat_cuda`, and inside the package `from .. import libnat_cuda`
                base = _relative_base(module, node, path.name == "__init__.py") if node.level else node.module
                names = [base, *(f"{base}.{a.name}".lstrip(".") for a in node.names)]
            if any(n in extensions for n in names) or _calls_op_namespace(node, spaces):
                found[module] = tree
                break
    return found


def op_namespaces(extensions: Iterable[str]) -> set[str]:
    """Operator namespaces the project's extensions register: detectron2 builds ``detectron2._C``,
    whose C++ registers ``torch.ops.detectron2.nms_rotated``; its Python calls those ops without
    importing ``_C``. The package of a package-qualified extension is taken as its namespace."""
    return {e.split(".")[0] for e in extensions if "." in e}


def _calls_op_namespace(node: ast.AST, spaces: set[str]) -> bool:
    """``torch.ops.<namespace>.<op>`` for one of ``spaces``."""
    if not spaces or not isinstance(node, ast.Attribute):
        return False
    inner = node.value
    return (isinstance(inner, ast.Attribute) and inner.attr == "ops" and isinstance(inner.value, ast.Name)
            and inner.value.id == "torch" and node.attr in spaces)


def _call_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _extension_names(tree: ast.AST) -> set[str]:
    """``CUDAExtension(name=...)``, any other ``*Extension(name, sources=[... .cu ...])`` and
    ``load(name=..., sources=[... .cu ...])`` names."""
    names = set()
    # `extension = CppExtension` / `if cuda: extension = CUDAExtension` / `extension(name, ...)`:
    # a builder chosen at run time builds CUDA where it can, so its calls count.
    cuda_builders = {"CUDAExtension"} | {
        t.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _call_name(node.value) == "CUDAExtension"
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    # `sources = ["a.cpp", "k.cu"]` (or a glob) named once and passed as `sources=sources`.
    assigned: dict[str, list[ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    assigned.setdefault(t.id, []).append(node.value)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = _call_name(node.func)
        if called in cuda_builders:
            called = "CUDAExtension"
        # fairseq builds `cpp_extension.CppExtension("fairseq.libnat_cuda", sources=[...".cu"])`:
        # any extension class (CppExtension, setuptools' Extension, a subclass) given .cu sources
        # builds CUDA code; without them it is a CPU extension.
        if called not in ("CUDAExtension", "load", "load_inline") and not called.endswith("Extension"):
            continue
        name = _keyword(node, "name") or (node.args[0] if node.args else None)
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value):
            continue
        if called != "CUDAExtension" and not _builds_cuda(node, assigned):
            continue
        names.add(name.value)
    names.update(_helper_built_names(tree, cuda_builders))
    return names


def _helper_built_names(tree: ast.AST, cuda_builders: set[str]) -> set[str]:
    """The names a build helper gives its extensions. BasicSR and the mm* projects build each
    one through ``def make_cuda_ext(name, module, sources, ...): ... return
    extension(name=f"{module}.{name}", ...)`` with ``extension = CUDAExtension`` where CUDA is
    there; the builder's own ``name=`` is no constant, so only the helper's calls
    (``make_cuda_ext(name="deform_conv_ext", module="basicsr.ops.dcn", ...)``) name them."""
    helpers: dict[str, tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.expr]] = {}
    body = tree.body if isinstance(tree, ast.Module) else []
    for func in body:
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.Call) and (_call_name(node.func) in cuda_builders or _call_name(node.func) == "CUDAExtension"):
                name = _keyword(node, "name") or (node.args[0] if node.args else None)
                if name is not None and not isinstance(name, ast.Constant):
                    helpers[func.name] = (func, name)
                    break
    found: set[str] = set()
    if not helpers:
        return found
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in helpers:
            func, name = helpers[node.func.id]
            value = _spelled(name, _bound_strings(func, node))
            if value:
                found.add(value)
    return found


def _bound_strings(func: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call) -> dict[str, str]:
    """The helper's parameters that ``call`` binds to a string constant."""
    params = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
    bound = {params[i]: a.value for i, a in enumerate(call.args[: len(params)])
             if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    bound.update({k.arg: k.value.value for k in call.keywords
                  if k.arg and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)})
    return bound


def _spelled(node: ast.expr, bound: dict[str, str]) -> str | None:
    """The string ``node`` (a constant, a parameter, an f-string or a sum of them) spells."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.FormattedValue) and node.conversion == -1 and node.format_spec is None:
        return _spelled(node.value, bound)
    if isinstance(node, ast.JoinedStr):
        parts = [_spelled(v, bound) for v in node.values]
        return None if None in parts else "".join(parts)  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _spelled(node.left, bound), _spelled(node.right, bound)
        return None if left is None or right is None else left + right
    return None


def _loader_functions(tree: ast.Module) -> set[str]:
    """Module-level functions that hand one of their parameters to ``cpp_extension.load`` as the
    sources: a plugin loader whose callers decide whether CUDA is built."""
    found = set()
    for func in tree.body:
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)}
        params |= {a.arg for a in (func.args.vararg, func.args.kwarg) if a is not None}
        for node in ast.walk(func):
            if isinstance(node, ast.Call) and _call_name(node.func) == "load":
                sources = _keyword(node, "sources") or (node.args[1] if len(node.args) > 1 else None)
                if sources is not None and any(isinstance(n, ast.Name) and n.id in params for n in ast.walk(sources)):
                    found.add(func.name)
                    break
    return found


def _builds_cuda(call: ast.Call, assigned: dict[str, list[ast.expr]] | None = None) -> bool:
    """A JIT ``load`` or an extension class builds CUDA when a source it names ends in .cu (or
    it passes cuda_sources); a name given as the sources is looked up where the file assigns it."""
    if _keyword(call, "cuda_sources") is not None:
        return True
    sources = _keyword(call, "sources") or (call.args[1] if len(call.args) > 1 else None)
    if sources is None:
        return False
    exprs = [sources]
    for n in ast.walk(sources):
        if isinstance(n, ast.Name) and assigned:
            exprs += assigned.get(n.id, [])
    return any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith((".cu", ".cuh"))
        for e in exprs
        for n in ast.walk(e)
    )


def _imports_kernel_language(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            if any(a.name.split(".")[0] in KERNEL_LANGUAGES for a in node.names):
                return True
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] in KERNEL_LANGUAGES:
                return True
    return False


def _module_of(path: Path, root: Path) -> str:
    try:
        parts = path.resolve().relative_to(root.resolve()).with_suffix("").parts
    except ValueError:
        parts = (path.stem,)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def with_project_facts(config: Config, files: Iterable[SourceFile]) -> Config:
    """``config`` with the sweep's facts in its settings; the setup.py beside the project's
    pyproject.toml counts even when only a few files were named."""
    files = tuple(files)
    roots = {f.root for f in files}
    if config.source:
        roots.add(Path(config.source).parent)
    return config.with_overrides(project=project_facts(files, extra_roots=sorted(roots)))
