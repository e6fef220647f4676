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
import bisect
import collections
import contextlib
import functools
import gc
import itertools
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path

from cuda2neuron.core import WORD_BYTES, Config, ProjectFacts
from cuda2neuron.kinds import NamePool, may_trigger

from ._discover import SourceFile
from ._line_search import findall_at_lines
from ._project_extras import cuda_extras
from ._library_sinks import library_pattern, library_starts, spelled, unconditional_uses
from ._value_args import option_readers
from ._value_readers import Source, device_readers, may_read_devices, selections
from ._value_properties import left_cuda_properties, may_name_cuda
from ._value_results import may_return_values, returned_options
from ._value_labels import label_readers
from ._value_returns import cuda_left, device_returns, may_return_devices
from ._walk import walk_cache, walked

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
    with _collector_paused(), walk_cache():
        return _project_facts(files, extra_roots)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """CPython's cyclic garbage collector off while the sweep runs. The trap: every ``ast.parse``
    allocates thousands of tracked nodes, so the collector runs its young generation about once
    per file and its oldest over every tree the sweep still holds (torchtitan: 1,249 young and
    11 full collections, 0.7 of 3.3 CPU-s). What the sweep builds and drops is freed by its
    reference counts (trees hold no cycles); the collector, if it was on, runs again after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _project_facts(files: Iterable[SourceFile], extra_roots: Iterable[Path]) -> ProjectFacts:
    extensions: set[str] = set()
    kernels: set[str] = set()
    loaders: set[str] = set()
    backend_params: list[tuple[str, int | None, str]] = []
    registered: set[tuple[str, str]] = set()
    registries: set[str] = set()  # the registries those components are registered with, as spelled
    handed: list[tuple[str, str, str]] = []  # (field, callee, where) for `f(x_backend=cfg.field)`
    trees: dict[str, ast.Module] = {}  # kernel module -> its tree, for the names that reach a kernel
    jit: dict[str, dict[str, str]] = {}  # module -> its handles of extensions built at run time from CUDA
    seen: set[Path] = set()
    parsed = _Trees()
    files = tuple(files)
    extra_roots = tuple(extra_roots)
    candidates = [(f.path, f.root) for f in files if f.kind == "python"]
    # Top-level names of the project's own modules, from paths alone (nothing is read).
    own = {m.split(".")[0] for m in (_module_of(p, r) for p, r in candidates) if m}
    pool = NamePool(_module_parts(candidates))  # the residual pass's names of the whole project
    for f in files:
        if f.kind == "shell":
            try:
                pool.read_shell(f.path.read_bytes())
            except OSError:
                pass  # the per-file run reports unreadable files
    candidates += [(root / "setup.py", root) for root in extra_roots]
    # The patterns come from the rules' tables: built at the first file some rule may fire on,
    # so that a run over files no rule wakes imports neither the catalog nor libcst.
    libraries: tuple[re.Pattern[bytes], ...] | None = None
    unread: list[tuple[Path, Path, bytes]] = []  # files seen before the patterns were built
    library_files: list[tuple[Path, Path, bytes]] = []  # files that may use CUDA-only library code
    reader_files: list[tuple[Path, Path, bytes]] = []  # files that may hold a device reader
    return_files: list[tuple[Path, Path, bytes]] = []  # files that may return a device fact
    value_files: list[tuple[Path, Path, bytes]] = []  # files that may return a device value
    name_files: list[tuple[Path, Path, bytes]] = []  # files that may name a base "cuda"
    read: list[tuple[Path, Path, bytes]] = []  # every file read, for the callers of those (no second read)
    for path, root in candidates:
        resolved = _resolved(path)
        if resolved in seen:
            continue
        seen.add(resolved)
        try:
            data = path.read_bytes()
        except OSError:
            continue  # the per-file run reports unreadable files
        pool.read(data)
        read.append((path, root, data))
        if may_read_devices(data):
            reader_files.append((path, root, data))
        if may_return_devices(data):
            return_files.append((path, root, data))
        if may_return_values(data):
            value_files.append((path, root, data))
        if may_name_cuda(data):
            name_files.append((path, root, data))
        if libraries is None and may_trigger(data, "python"):
            libraries = library_pattern(own)
            library_files += [f for f in unread if any(p.search(f[2]) for p in libraries)]
        if libraries is None:
            unread.append((path, root, data))
        elif any(p.search(data) for p in libraries):
            library_files.append((path, root, data))
        builds = any(w in data for w in _WORDS)
        backends = any(w in data for w in _BACKEND_WORDS)
        if not builds and not backends:
            continue
        tree = parsed.get(path, data)
        if tree is None:
            continue  # the per-file run reports the syntax error
        if backends:
            backend_params += _backend_parameters(tree)
            for name, where, registry in _registered_names(tree, _shown(path, root)):
                registered.add((name, where))
                registries.update([registry] if registry else [])
            handed += _backend_fields_handed(tree, _shown(path, root))
        if not builds:
            continue
        extensions.update(_extension_names(tree))
        module = _module_of(path, root)
        handles = {**_jit_handles(tree, _shown(path, root)), **_builder_classes(tree, _shown(path, root))}
        if module and handles:
            jit[module] = handles
        if module and _imports_kernel_language(tree, own):
            trees[module] = tree
        if module:
            loaders.update(f"{module}.{name}" for name in _loader_functions(tree))
    trees.update(_extension_importers(candidates, extensions, trees, parsed))
    kernels.update(trees)
    spaces = op_namespaces(extensions)
    names = {f"{m}.{n}" for m, tree in trees.items() for n in _reaching_names(m, tree, extensions, kernels, spaces)}
    if kernels:
        _add_reexports(candidates, kernels, names, parsed)
    facts = ProjectFacts(
        extension_modules=frozenset(extensions),
        kernel_modules=frozenset(kernels),
        extension_loaders=frozenset(loaders),
        kernel_names=frozenset(names),
        own_packages=frozenset(own),
        backend_params=_unambiguous(backend_params),
        registered_names=frozenset(registered),
        own_names=frozenset(pool.defined - pool.foreign),
        foreign_names=frozenset(pool.foreign),
        # The setup.py of a root, as read above (the project's own extras: llm-foundry's `gpu`).
        cuda_extras=cuda_extras(
            ((p, d) for p, r, d in read if p.name == "setup.py" and p.parent == r),
            sorted({*(f.root for f in files), *extra_roots}),
        ),
    )
    if handed:
        facts = replace(facts, library_backends=_library_backends(handed, facts))
    if registries:
        facts = replace(facts, registry_fields=_registry_fields(candidates, frozenset(registries), parsed))
    if reader_files:
        facts = replace(facts, device_readers=_device_readers(candidates, reader_files, parsed))
        options = option_readers(
            ((p, "", _shown(p, r), d) for p, r, d in reader_files),
            lambda names: _sources(candidates, lambda module, data: any(n.encode() in data for n in names)),
            parsed.get,
        )
        if options:
            facts = replace(facts, option_readers=options)
        labels = _label_readers(read, reader_files, parsed)
        if labels:
            facts = replace(facts, label_readers=labels)
    if value_files:
        facts = _with_returned_options(facts, read, value_files, parsed)
    if name_files:
        rows = left_cuda_properties(
            ((p, "", _shown(p, r), d) for p, r, d in name_files),
            lambda: ((p, "", _shown(p, r), d) for p, r, d in read if p.name != "setup.py"),
            parsed.get,
        )
        facts = replace(facts, left_cuda_properties=rows) if rows else facts
    starts, start_paths = _library_starts(library_files, facts)
    if not kernels and not extensions and not starts and not jit:
        # Most projects: nothing CUDA-only to reach, nothing more to read (a device fact's
        # return may still front CUDA code torch leaves).
        return _with_returns(facts, read, return_files, {}, parsed)
    sinks = _sink_names(candidates, facts, jit, parsed) if kernels or extensions or jit else {}
    if starts:
        # Chains from third-party packages: followed only through unconditional uses, as they
        # started (a model class that picks the xformers processor behind its own flag is not
        # CUDA-only); the project's own kernels name a name first.
        library = _library_chains(candidates, starts, start_paths, parsed)
        sinks = {**library, **sinks}
    facts = replace(facts, sink_names=frozenset(sinks.items()), selections=_selections(candidates, sinks, parsed))
    return _with_returns(facts, read, return_files, sinks, parsed)


def _sources(candidates: Iterable[tuple[Path, Path]], keep: Callable[[str, bytes], bool]) -> Iterable[Source]:
    """The project's modules (not setup.py) whose dotted name and bytes ``keep`` takes, read."""
    for path, root in candidates:
        module = _module_of(path, root)
        if not module or path.name == "setup.py":
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue  # the per-file run reports it
        if keep(module, data):
            yield path, module, _shown(path, root), data


def _selections(candidates: list[tuple[Path, Path]], sinks: Mapping[str, str], parsed: _Trees) -> frozenset:
    """``_value_readers.selections`` over the project's modules (only those that compare a name
    with a string near a sink's name are parsed, once for the whole sweep)."""
    return selections(_sources(candidates, lambda module, data: True), sinks, _module_bindings, parsed.get)


def _device_readers(candidates: list[tuple[Path, Path]], files: list[tuple[Path, Path, bytes]], parsed: _Trees) -> frozenset:
    """``_value_readers.device_readers``: the readers among ``files``, then the modules that
    spell a reader's name (read again only when there is a reader: most projects have none)."""
    first = [(p, _module_of(p, r), _shown(p, r), d) for p, r, d in files if _module_of(p, r) and p.name != "setup.py"]
    texts: list[Source] = []

    def spelling(words: list[str]) -> Iterable[Source]:
        # Called or subclassed (a type hint hands nothing on), or re-exported by a package.
        alternatives = b"|".join(re.escape(w.encode()) for w in words)
        used = re.compile(rb"\b(?:" + alternatives + rb")[ \t]*\(|^[ \t]*class[ \t][^\n]*\b(?:" + alternatives + rb")\b", re.MULTILINE)
        named = re.compile(rb"\b(?:" + alternatives + rb")\b")
        if not texts:
            texts.extend(_sources(candidates, lambda module, data: True))
        spelled_words = [w.encode() for w in words]
        return [
            s for s in texts
            if any(w in s[3] for w in spelled_words) and (named if s[0].name == "__init__.py" else used).search(s[3])
        ]

    return device_readers(first, spelling, _module_bindings, parsed.get)


def _with_returned_options(facts: ProjectFacts, read: list[tuple[Path, Path, bytes]], files: list[tuple[Path, Path, bytes]],
                           parsed: _Trees) -> ProjectFacts:
    """``_value_results.returned_options`` over the files that may return a device value, with
    the callers among the files the sweep read (their bytes kept from the first read)."""
    first = [(p, _module_of(p, r), _shown(p, r), d) for p, r, d in files if _module_of(p, r) and p.name != "setup.py"]
    rows = returned_options(first, lambda words: _calling(read, words), _module_bindings, parsed.get)
    return replace(facts, returned_options=rows) if rows else facts


def _calling(read: list[tuple[Path, Path, bytes]], words: list[str]) -> Iterable[Source]:
    """The files of ``read`` (not setup.py) that spell one of ``words`` before a ``(``."""
    used = re.compile(rb"\b(?:" + b"|".join(re.escape(w.encode()) for w in words) + rb")[ \t]*\(")
    spelled_words = [w.encode() for w in words]
    for path, root, data in read:
        if path.name != "setup.py" and any(w in data for w in spelled_words) and used.search(data):
            module = _module_of(path, root)
            if module:
                yield path, module, _shown(path, root), data


def _with_returns(facts: ProjectFacts, read: list[tuple[Path, Path, bytes]], files: list[tuple[Path, Path, bytes]],
                  sinks: Mapping[str, str], parsed: _Trees) -> ProjectFacts:
    """``_value_returns.device_returns`` over the files that may return a device fact, with the
    callers among the files the sweep read that spell a recorded function's name before a ``(``
    (their bytes kept from the first read: reading diffusers' 2,088 files again was 0.35 CPU-s)."""
    if not files:
        return facts
    first = [(p, _module_of(p, r), _shown(p, r), d) for p, r, d in files if _module_of(p, r) and p.name != "setup.py"]

    def sink(dotted: str) -> str | None:
        found = sinks.get(dotted) or (facts.sink(dotted) if facts.sink_names else None)
        if found is None and facts.kernel_modules and facts.reaches_kernel(dotted):
            found = f"`{dotted}` (project code that runs GPU kernels)"
        if found is None and facts.extension_modules and any(facts.builds_extension(m) for m in (dotted, dotted.rpartition(".")[0]) if m):
            found = f"`{dotted}` (a compiled CUDA extension the project builds)"
        return found

    rows = device_returns(first, lambda words: _calling(read, words), _module_bindings, sink, cuda_left, parsed.get)
    return replace(facts, device_returns=rows) if rows else facts


def _label_readers(read: list[tuple[Path, Path, bytes]], files: list[tuple[Path, Path, bytes]], parsed: _Trees) -> frozenset:
    """``_value_labels.label_readers`` over the files that may hold a device reader, with the
    callers among the files the sweep read that spell a found name before a ``(``."""
    first = [(p, _module_of(p, r), _shown(p, r), d) for p, r, d in files if _module_of(p, r) and p.name != "setup.py"]
    return label_readers(first, lambda words: _calling(read, words), parsed.get)


def _module_bindings(tree: ast.Module, module: str, path: Path) -> dict[str, str]:
    """Local name -> the dotted name each import of ``tree`` binds (relative ones resolved)."""
    bound: dict[str, str] = {}
    for node in _statements(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = _relative_base(module, node, path.name == "__init__.py")
            bound.update((a.asname or a.name, f"{base}.{a.name}".lstrip(".")) for a in node.names if a.name != "*")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update(_bound_by(node))
    return bound


def _library_starts(
    files: list[tuple[Path, Path, bytes]], facts: ProjectFacts
) -> tuple[dict[str, dict[str, str]], set[Path]]:
    """Module -> its top-level names that use third-party CUDA-only packages or torch's CUDA-only
    calls on a path Trainium takes (``_library_sinks``), each with that code and the line; and
    the files of those modules."""
    starts: dict[str, dict[str, str]] = {}
    paths: set[Path] = set()
    for path, root, data in files:
        module = _module_of(path, root)
        if not module or path.name == "setup.py":
            continue
        names = library_starts(data, _shown(path, root), facts)
        if names:
            starts[module] = names
            paths.add(path)
    return starts, paths


# An import statement as text (a parenthesized name list may span lines): which modules a file
# imports, told without parsing it.
_IMPORT = re.compile(
    rb"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import[ \t]*(\([^)]*\)|[^\n]*)|import[ \t]+([^\n]*))", re.MULTILINE
)
_IDENTIFIER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def _imported_modules(data: bytes, module: str, package_init: bool) -> frozenset[str]:
    """Every dotted name the import statements of a file may reach, and each of its prefixes
    (relative ones resolved against ``module``): ``from .ops import norm`` in ``pkg/model.py``
    gives ``pkg``, ``pkg.ops``, ``pkg.ops.norm``."""
    package = module.split(".") if package_init else module.split(".")[:-1]
    found: set[str] = set()
    for source, names, plain in findall_at_lines(_IMPORT, data, b"import"):
        if plain:
            dotted = [item.split()[0].decode("ascii", "replace") for item in plain.split(b",") if item.split()]
        else:
            spec = source.decode("ascii", "replace")
            level = len(spec) - len(spec.lstrip("."))
            if level:
                base = package[: len(package) - (level - 1)] if level - 1 <= len(package) else []
                spec = ".".join([*base, *([spec.lstrip(".")] if spec.lstrip(".") else [])])
            dotted = [spec, *(f"{spec}.{w.decode()}" for w in _IDENTIFIER.findall(names))]
        for name in dotted:
            parts = name.strip(".").split(".")
            found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return frozenset(found)


def _spellings(modules: Iterable[str]) -> set[str]:
    """The dotted names an import may use for ``modules``: each whole, and each tail of two or
    more parts (a src layout: the sweep's ``src.pkg.ops`` is imported as ``pkg.ops``)."""
    out: set[str] = set()
    for module in modules:
        parts = module.split(".")
        out.add(module)
        out.update(".".join(parts[i:]) for i in range(1, len(parts) - 1))
    return out


def _jit_handles(tree: ast.Module, shown: str) -> dict[str, str]:
    """``_ext = load_inline(name=..., cuda_sources=...)`` (or ``load`` with ``.cu`` sources): the
    names bound to an extension built at run time from CUDA code, each described as a sink."""
    found: dict[str, str] = {}
    for node in walked(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            called = _call_name(node.value.func)
            if called in ("load", "load_inline") and _builds_cuda(node.value):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        found.setdefault(target.id, f"the CUDA extension `{target.id}` (built at run time by {called}) at {shown}:{node.lineno}")
    return found


def _builder_classes(tree: ast.Module, shown: str) -> dict[str, str]:
    """The module's top-level classes whose methods build a CUDA extension: ``CUDAExtension(...)``
    or a JIT ``load`` / ``load_inline`` given CUDA sources or nvcc flags (``extra_cuda_cflags=``).
    ColossalAI's ``_CudaExtension`` builds each kernel of its subclasses that way (the sources
    come from a method the subclass writes, so no name is spelled); its loaders pick one of a
    registry of such classes, ``FusedOptimizerLoader.REGISTRY = [FusedOptimizerCudaExtension]``,
    and ``HybridAdam`` loads it behind ``if torch.cuda.is_available():``. The class is a sink:
    its subclasses, and the code that names them, reach it through ``_sink_names``."""
    found: dict[str, str] = {}
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        for node in walked(cls):
            if not isinstance(node, ast.Call):
                continue
            called = _call_name(node.func)
            cuda = called == "CUDAExtension" or (
                called in ("load", "load_inline")
                and (_builds_cuda(node) or _keyword(node, "extra_cuda_cflags") is not None)
            )
            if cuda:
                found[cls.name] = f"the CUDA extension that `{cls.name}` builds (by {called}) at {shown}:{node.lineno}"
                break
    return found


def _linked_packages(roots: Iterable[Path]) -> Callable[[str], str]:
    """A dotted name with a symlinked package folder of the project in it, spelled as its target:
    ColossalAI's ``colossalai/kernel/extensions`` links to the top-level ``extensions`` folder,
    and ``kernel_loader.py`` imports ``from .extensions import FusedOptimizerCudaExtension``.
    The discovery never follows a link (a file is read once, under its own path), so the
    sweep names that module ``extensions``; without this the chain stops at the link. Asked of
    each prefix once (an ``lstat`` per folder a project's import names)."""
    bases = [r.resolve() for r in roots]

    @functools.cache
    def linked(prefix: str) -> str | None:
        for base in bases:
            folder = base.joinpath(*prefix.split("."))
            if folder.is_symlink() and folder.is_dir():
                try:
                    return ".".join(folder.resolve().relative_to(base).parts)
                except ValueError:
                    return None  # a link out of the project: not its code
        return None

    def canonical(dotted: str) -> str:
        parts = dotted.split(".")
        for i in range(1, len(parts) + 1):
            target = linked(".".join(parts[:i]))
            if target:
                return ".".join([target, *parts[i:]])
        return dotted

    return canonical


def _sink_names(candidates: list[tuple[Path, Path]], facts: ProjectFacts,
                jit: dict[str, dict[str, str]] | None = None, parsed: _Trees | None = None) -> dict[str, str]:
    """The project's top-level names that reach CUDA-only code through other modules, each with
    the sink and the line where the project's code calls into it.

    ``tests/test_block.py`` imports ``Block`` from ``pkg/model.py``, whose ``forward`` calls
    ``fused_norm`` from ``pkg/ops/norm.py``, which launches a Triton kernel: the test module's
    ``@skipif(not torch.cuda.is_available())`` gates that kernel as much as one in front of a
    launch in its own file. Found to a fixed point over the import graph: each round looks again
    only at the files whose import statements name a module the previous round added names to
    (read from the text, relative imports resolved; a package that re-exports such a name is
    such a module then), so a file is parsed only when it imports one, once at most, and only
    in projects with kernels (``project_facts``). Kernel modules named ``utils`` or ``ops``
    would make a last-name filter parse most of a large project.
    """
    jit = jit or {}
    parsed = parsed or _Trees()
    sinks: dict[str, str] = {}
    uses: dict[Path, _Uses | None] = {}
    imported: dict[Path, frozenset[str]] = {}
    modules = {path: (_module_of(path, root), _shown(path, root)) for path, root in candidates if path.name != "setup.py"}
    known: dict[str, tuple[str, bool] | None] = {}
    canonical = _linked_packages({root for _, root in candidates})
    own = {m.split(".")[0] for m, _ in modules.values() if m}

    def reaches(dotted: str) -> tuple[str, bool] | None:
        """The sink ``dotted`` reaches, and whether the text names its line already."""
        if dotted in sinks:
            return sinks[dotted], True
        if dotted not in known:  # the facts' answers never change: asked once per name
            if facts.builds_extension(dotted) or _inside_any(dotted, facts.extension_modules):
                known[dotted] = f"`{dotted}` (a compiled CUDA extension the project builds)", False
            elif facts.kernel_module(dotted) and facts.reaches_kernel(dotted):
                known[dotted] = f"`{dotted}` (project code that runs GPU kernels)", False
            else:
                known[dotted] = None
        return known[dotted]

    fresh = {*facts.kernel_modules, *facts.extension_modules, *jit}
    while fresh:
        wanted = _spellings(fresh)
        fresh = set()
        for path, (module, shown) in modules.items():
            if not module:
                continue
            data = None
            if path not in imported:
                try:
                    data = path.read_bytes()
                except OSError:
                    data = b""  # the per-file run reports it
                found_modules = _imported_modules(data, module, path.name == "__init__.py")
                imported[path] = found_modules | {canonical(m) for m in found_modules if m.split(".")[0] in own}
            if imported[path].isdisjoint(wanted) and module not in wanted:
                continue
            if path not in uses:
                uses[path] = _Uses.read(module, shown, parsed.get(path, data), path.name == "__init__.py")
                if uses[path] is not None:
                    uses[path].bindings = [
                        (local, canonical(dotted) if dotted.split(".")[0] in own else dotted, line, top)
                        for local, dotted, line, top in uses[path].bindings
                    ]
            found = uses[path]
            if found is None:
                continue
            for name, sink in found.reaching(reaches, jit.get(module, {})).items():
                dotted = f"{module}.{name}"
                if dotted not in sinks and reaches(dotted) is None:
                    sinks[dotted] = sink
                    fresh.add(module)
    return sinks


def _library_chains(
    candidates: list[tuple[Path, Path]], starts: dict[str, dict[str, str]], start_paths: set[Path],
    parsed: _Trees | None = None,
) -> dict[str, str]:
    """The chains from third-party CUDA-only code (``starts``: module -> its names that use it
    unconditionally, with the sink and line), to a fixed point as ``_sink_names`` follows the
    project's kernels, but through uses that run whatever the code's tests say only, and only
    into files that name one of the names found so far (diffusers' attention_processor is
    imported everywhere for its plain names: following its modules parsed 281 files)."""
    parsed = parsed or _Trees()
    sinks = {f"{m}.{n}": sink for m, names in starts.items() for n, sink in names.items()}
    files = [(path, root) for path, root in candidates if path.name != "setup.py"]
    texts = []
    for path, _ in files:
        try:
            texts.append(path.read_bytes())
        except OSError:
            texts.append(b"")  # the per-file run reports it
    # One text of the whole project, searched once per name found: the files that spell a name
    # are found without testing every file for every name.
    joined = b"\0".join(texts)
    ends = list(itertools.accumulate(len(t) + 1 for t in texts))
    uses: dict[int, _Uses | None] = {}
    imported: dict[int, frozenset[str]] = {}
    named = set(sinks)
    first = {i for i, (path, _) in enumerate(files) if path in start_paths}

    def reaches(dotted: str) -> tuple[str, bool] | None:
        return (sinks[dotted], True) if dotted in sinks else None

    while named:
        wanted = _spellings(named)
        # A file that imports a name spells its module's last name (`from .attention_processor
        # import ...`): searched once per module in the whole text, then the import lines decide.
        modules = {n.split(".")[-2].encode() for n in named if "." in n}
        spelling = {i for last in modules for i in _files_holding(joined, ends, last)}
        # Called or subclassed, as the uses followed are: most importers of diffusers' xformers
        # processors only test `isinstance(p, XFormersAttnProcessor)`.
        run = _CalledOrSubclassed({n.rsplit(".", 1)[-1] for n in named})
        named, spelling, first = set(), spelling | first, set()
        for i in sorted(spelling):
            path, root = files[i]
            module = _module_of(path, root)
            if not module:
                continue
            if i not in imported:
                imported[i] = _imported_modules(texts[i], module, path.name == "__init__.py")
            # A start module is read too: its other names that use a start (`quantize_model(m)`
            # calling the module's `_convert_to_int8(m)`) reach the same code.
            # A package's ``__init__.py`` hands a name on without calling it (``from .tdan_net
            # import TDANNet``; mmagic's tests import their models from ``mmagic.models.editors``).
            init = path.name == "__init__.py"
            if (imported[i].isdisjoint(wanted) and module not in starts) or not (init or run(texts[i])):
                continue
            if i not in uses:
                uses[i] = _Uses.read(module, _shown(path, root), parsed.get(path, texts[i]), path.name == "__init__.py",
                                      unconditional=True)
            found = uses[i]
            if found is None:
                continue
            for name, sink in found.reaching(reaches, starts.get(module, {})).items():
                dotted = f"{module}.{name}"
                if dotted not in sinks:
                    sinks[dotted] = sink
                    named.add(dotted)
    return sinks


_CLASS_WORD = re.compile(rb"class[ \t]")


class _CalledOrSubclassed:
    """Whether a file's text calls one of ``names`` (``name(``, ``name.attr.f (``) or names one
    as a whole word on a ``class`` line: the test ``_library_chains`` puts to a file before it
    parses it, as the one pattern ``\\b(?:names)(?:\\.\\w+)*[ \\t]*\\(|^[ \\t]*class[ \\t][^\\n]*\\b(?:names)\\b``
    would answer. The trap: a pattern that starts with ``\\b`` or ``^`` has no literal to skip
    to, so the regex engine tries every alternative at every byte of every file (2.4 CPU-s over
    the 1,778 files of diffusers that spell ``utils``). Here each search starts from the names
    themselves or from the word ``class``, and the boundary before them is read back by hand."""

    def __init__(self, names: Iterable[str]) -> None:
        alternatives = b"|".join(sorted(re.escape(n.encode()) for n in names))
        self._called = re.compile(rb"(?:" + alternatives + rb")(?:\.\w+)*[ \t]*\(")
        self._word = re.compile(rb"\b(?:" + alternatives + rb")\b")

    def __call__(self, data: bytes) -> bool:
        at = 0
        while (m := self._called.search(data, at)) is not None:
            if _boundary(data, m.start()):
                return True
            at = m.start() + 1  # a later name may start inside this one's chain (`zf.g(`)
        at = 0
        while (m := _CLASS_WORD.search(data, at)) is not None:
            line = data.rfind(b"\n", 0, m.start()) + 1
            end = data.find(b"\n", m.end())
            end = len(data) if end == -1 else end
            if not data[line : m.start()].strip(b" \t") and self._word.search(data, m.end(), end):
                return True
            at = m.end()
        return False


def _boundary(data: bytes, at: int) -> bool:
    """``\\b`` at ``at`` in a bytes pattern: a word byte on exactly one side."""
    before = at > 0 and data[at - 1] in WORD_BYTES
    return before != (at < len(data) and data[at] in WORD_BYTES)


def _files_holding(joined: bytes, ends: list[int], word: bytes) -> set[int]:
    """The indices of the files (``ends``: where each ends in ``joined``) that hold ``word``."""
    found: set[int] = set()
    at = joined.find(word)
    while at >= 0:
        i = bisect.bisect_right(ends, at)
        found.add(i)
        at = joined.find(word, ends[i]) if i < len(ends) else -1
    return found


class _Trees:
    """Each file the sweep reads parsed once. The trap: its parts each parsed what they read
    (the backend and extension scan, the kernel chains, the library chains, the re-exports), so
    on Megatron-LM 512 of 1,507 whole-file parses were of a file parsed before (16.8 of 34.6 MB).
    The trees are only read, never changed, so one serves every part; they live as long as the
    sweep does."""

    def __init__(self) -> None:
        self._trees: dict[Path, ast.Module | None] = {}

    def get(self, path: Path, data: bytes | None = None) -> ast.Module | None:
        """The module ``path`` holds (``data``: its bytes, when already read); None when it cannot
        be read or parsed (the per-file run reports that)."""
        if path not in self._trees:
            try:
                self._trees[path] = ast.parse(path.read_bytes() if data is None else data, filename=str(path))
            except (OSError, SyntaxError, ValueError, MemoryError, RecursionError):
                self._trees[path] = None
        return self._trees[path]


class _Uses:
    """What one module imports and what each of its top-level definitions uses, read once."""

    def __init__(self, shown: str, bindings: list[tuple[str, str, int, bool]], defs: dict[str, list[tuple[str, int]]]) -> None:
        self.shown = shown
        self.bindings = bindings  # (local name, dotted name, line, at the module's top level)
        self.defs = defs  # top-level name -> (name or dotted chain it uses, line), by line

    @classmethod
    def read(cls, module: str, shown: str, tree: ast.Module | None, package_init: bool,
             unconditional: bool = False) -> _Uses | None:
        """What ``tree`` (the module's, None where it does not parse; ``package_init``: its file is
        a package's ``__init__.py``) imports and uses;
        ``unconditional``: only the uses that run whatever the code's tests say (the calls,
        bases and decorators ``_library_sinks.unconditional_uses`` yields)."""
        if tree is None:
            return None  # the per-file run reports it
        top = {id(n) for n in _top_level(tree)}
        bindings: list[tuple[str, str, int, bool]] = []
        for node in _statements(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = _relative_base(module, node, package_init)
                bound = [(a.asname or a.name, f"{base}.{a.name}".lstrip(".")) for a in node.names if a.name != "*"]
            elif isinstance(node, ast.Import):
                # `import pkg.ops.norm` binds `pkg`; the use `pkg.ops.norm.f(x)` is matched by
                # its dotted module (attribute chains are read whole).
                bound = [(a.asname or a.name, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                bound = _bound_by(node)
            else:
                continue
            bindings += [(local, dotted, node.lineno, id(node) in top) for local, dotted in bound]
        defs: dict[str, list[tuple[str, int]]] = {}
        bodies: list[tuple[list[str], ast.stmt]] = []
        for stmt in tree.body:
            targets = _defined_names(stmt)
            if targets is None:
                continue
            for t in targets:
                defs.setdefault(t, [])
            bodies.append((targets, stmt))
        # Only what can lead somewhere is kept: an imported name or another top-level name.
        heads = {local.split(".")[0] for local, _, _, _ in bindings} | set(defs)
        for targets, stmt in bodies:
            nodes = unconditional_uses(stmt) if unconditional else (
                n for n in _reachable_on_trainium(stmt) if isinstance(n, (ast.Name, ast.Attribute)))
            used = sorted(
                ((d, n.lineno) for n in nodes if (d := spelled(n)) and d.split(".")[0] in heads),
                key=lambda u: u[1],
            )
            for t in targets:
                defs[t].extend(used)
        return cls(shown, bindings, defs)

    def reaching(self, reaches: Callable[[str], tuple[str, bool] | None], own: Mapping[str, str]) -> dict[str, str]:
        """The top-level names that reach a sink ``reaches`` knows, each with that sink: a name
        imported from one (re-exported), a ``def`` / ``class`` / assignment whose code uses one
        (to a fixed point). Where the chain first leaves the project's plain code is the line
        named: ``at pkg/model.py:12``. ``own``: the module's handles of extensions it builds at
        run time from CUDA, with their sinks (``_ext = load_inline(...)``)."""
        imported: dict[str, tuple[str, bool]] = {name: (sink, True) for name, sink in own.items()}
        reaching: dict[str, str] = {}
        for local, dotted, line, top in self.bindings:
            found = reaches(dotted)
            if found is None or local in imported:
                continue
            imported[local] = found
            if top:
                sink, located = found
                reaching[local] = sink if located else f"{sink}, imported at {self.shown}:{line}"
        if not imported:
            return {}
        reaching.update(own)
        changed = True
        while changed:
            changed = False
            for name, used in self.defs.items():
                if name in reaching:
                    continue
                for spelled, line in used:
                    if spelled in imported and (spelled not in self.defs or spelled in own):
                        sink, located = imported[spelled]
                        reaching[name] = sink if located else f"{sink} at {self.shown}:{line}"
                    elif spelled in reaching and spelled != name:
                        reaching[name] = reaching[spelled]
                    else:
                        continue
                    changed = True
                    break
        return reaching



# The fields of a node that hold statements (and except handlers, match cases), in `_fields` order.
_BLOCKS = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})


def _statements(tree: ast.Module) -> Iterable[ast.AST]:
    """The statements of ``tree`` at any depth (with their except handlers and match cases), in
    ``ast.walk``'s order (breadth first, children in field order). An import is a statement, so
    its search need not enter expressions: on diffusers' attention modules walking every node
    was a third of reading them. Every ancestor of a statement is one of these nodes, so the
    order among them is ``ast.walk``'s (the first binding of a name wins in ``reaching``)."""
    todo = collections.deque([tree])
    while todo:
        node = todo.popleft()
        yield node
        for field in node._fields:
            if field in _BLOCKS:
                todo.extend(getattr(node, field))


def _reachable_on_trainium(stmt: ast.stmt) -> Iterable[ast.AST]:
    """The nodes of ``stmt`` (as ``ast.walk`` gives them) but for the branches that run only on
    a CUDA device: ``if x.is_cuda: return dtw_cuda(x)`` in whisper's ``timing.dtw`` stays a CUDA
    test in the port (the gate rules keep a test in front of a kernel), so on Trainium ``dtw``
    takes its CPU path and does not reach the kernel; a caller in another module may hand it
    neuron tensors. ``if HAVE_TRITON:`` is no device test: its branch is followed."""
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.If, ast.IfExp)) and _needs_cuda(node.test):
            stack.append(node.test)
            stack.extend(node.orelse if isinstance(node.orelse, list) else [node.orelse])
            continue
        stack.extend(ast.iter_child_nodes(node))


def _needs_cuda(test: ast.expr) -> bool:
    """Is ``test`` false wherever CUDA is missing: ``x.is_cuda``, ``x.device.type == "cuda"``,
    ``torch.cuda.is_available()``, or an ``and`` with one of them?"""
    if isinstance(test, ast.BoolOp):
        return isinstance(test.op, ast.And) and any(_needs_cuda(v) for v in test.values)
    if isinstance(test, ast.Attribute):
        return test.attr == "is_cuda"
    if isinstance(test, ast.Call):
        return (spelled(test.func) or "").endswith("cuda.is_available")
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        sides = (test.left, test.comparators[0])
        named = any(isinstance(n, ast.Constant) and n.value == "cuda" for n in sides)
        typed = any(isinstance(n, ast.Attribute) and n.attr == "type" for n in sides)
        return named and typed
    return False


def _defined_names(stmt: ast.stmt) -> list[str] | None:
    """The names a module-level statement defines (a ``def``, a ``class``, an assignment of a
    value to plain names), or None for a statement that defines none."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
        return [t.id for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]) if isinstance(t, ast.Name)]
    return None

def _top_level(tree: ast.Module) -> Iterable[ast.stmt]:
    """The module's statements outside functions and classes (inside ``try`` / ``if``)."""
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        stmt = stack.pop()
        yield stmt
        if not isinstance(stmt, _SCOPES):
            for field in ("body", "orelse", "finalbody"):
                stack.extend(getattr(stmt, field, ()))
            stack.extend(b for h in getattr(stmt, "handlers", ()) for b in h.body)


def _inside_any(dotted: str, modules: frozenset[str]) -> bool:
    return any(dotted == m or dotted.startswith(m + ".") for m in modules)


def _shown(path: Path, root: Path) -> str:
    """The file as a finding names it: relative to its root, with forward slashes."""
    try:
        return _resolved(path).relative_to(_resolved(root)).as_posix()
    except ValueError:
        return path.name


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
        id(f) for c in walked(tree) if isinstance(c, ast.ClassDef)
        for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    found = []
    for func in walked(tree):
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


def _registered_names(tree: ast.Module, shown: str) -> list[tuple[str, str, str]]:
    """``@Registry.register("nccl")`` on a class or function: the project names one of its own
    components after the backend (verl's NCCL checkpoint engine, looked up by that name), each
    with the decorator and its line, and the registry as code spells it (``Registry``; empty
    for a bare ``@register("nccl")``). Only the backend words CN401 rewrites are kept."""
    found = []
    for node in walked(tree):
        if not isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in node.decorator_list:
            if not isinstance(deco, ast.Call) or not _call_name(deco.func).startswith("register"):
                continue
            for arg in deco.args[:1]:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.lower() == "nccl":
                    registry = spelled(deco.func.value) if isinstance(deco.func, ast.Attribute) else None
                    found.append((arg.value.lower(), f"`{ast.unparse(deco)}` at {shown}:{deco.lineno}", registry or ""))
    return found


def _parsed_if_spelled(path: Path, words: Iterable[bytes], parsed: _Trees | None = None) -> ast.Module | None:
    """The file parsed, if its bytes hold one of ``words``; None if not, or if it cannot be read
    or parsed (the per-file run reports that)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if not any(w in data for w in words):
        return None
    return (parsed or _Trees()).get(path, data)


def _registry_fields(candidates: list[tuple[Path, Path]], registries: frozenset[str],
                    parsed: _Trees | None = None) -> frozenset[tuple[str, str]]:
    """("owner.field", where) for each field whose value a lookup of one of ``registries`` reads
    as its key (its first argument): ``CheckpointEngineRegistry.new(cfg.checkpoint_engine.backend)``,
    or a local name assigned from the field in the same function first (``backend =
    rollout_config.checkpoint_engine.backend``). Only the files that spell a registry are read,
    and only in projects that register a "nccl" component (verl); the owner keeps a bare
    ``backend`` of another config from matching."""
    found: set[tuple[str, str]] = set()
    words = tuple(r.encode() for r in registries)
    for path, root in candidates:
        tree = _parsed_if_spelled(path, words, parsed)
        if tree is None:
            continue
        scopes: list[list[ast.stmt]] = [tree.body]
        scopes += [n.body for n in walked(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for body in scopes:
            nodes = list(_scope_nodes(body))
            fields = {
                t.id: n.value for n in nodes if isinstance(n, ast.Assign) and isinstance(n.value, ast.Attribute)
                for t in n.targets if isinstance(t, ast.Name)
            }
            for call in nodes:
                if not isinstance(call, ast.Call) or not call.args:
                    continue
                owner, _, method = (spelled(call.func) or "").rpartition(".")
                if owner not in registries or method.startswith("register"):
                    continue
                key = call.args[0]
                key = fields.get(key.id, key) if isinstance(key, ast.Name) else key
                if isinstance(key, ast.Attribute) and isinstance(key.value, (ast.Name, ast.Attribute)):
                    holder = key.value.id if isinstance(key.value, ast.Name) else key.value.attr
                    found.add((f"{holder}.{key.attr}", f"`{owner}.{method}(...)` at {_shown(path, root)}:{call.lineno}"))
    return frozenset(found)


def _scope_nodes(body: list[ast.stmt]) -> Iterable[ast.AST]:
    """The nodes of ``body`` outside nested functions and classes."""
    stack: list[ast.AST] = [s for s in body if not isinstance(s, _SCOPES)]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, _SCOPES))


def _backend_fields_handed(tree: ast.Module, shown: str) -> list[tuple[str, str, str]]:
    """(field, callee, where) for each call that hands a field to a backend keyword
    (``te.initialize_ub(bootstrap_backend=args.tp_comm_bootstrap_backend)``), the callee as the
    file's imports (at any depth: Megatron imports Transformer Engine inside the function) spell
    it; ``_library_backends`` keeps those that are CUDA-only libraries."""
    bound: dict[str, str] = {}
    for node in walked(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update(_bound_by(node))
    found = []
    for node in walked(tree):
        if not isinstance(node, ast.Call):
            continue
        head, _, rest = (spelled(node.func) or "").partition(".")
        if head not in bound:
            continue
        callee = f"{bound[head]}.{rest}" if rest else bound[head]
        for kw in node.keywords:
            if kw.arg and "backend" in kw.arg.lower() and isinstance(kw.value, ast.Attribute):
                found.append((kw.value.attr, callee, f"{shown}:{node.lineno}"))
    return found


def _library_backends(handed: list[tuple[str, str, str]], facts: ProjectFacts) -> frozenset[tuple[str, str]]:
    # The rules' table of CUDA-only packages: loaded only for a project that hands a field to an
    # imported function's backend keyword.
    from cuda2neuron.rules._shared.kernels import library_sink

    return frozenset(
        (field, f"`{callee}` at {where}") for field, callee, where in handed if library_sink(callee, facts)
    )


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
    for node in walked(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            prefix = _relative_base(module, node)
            seeds.update(
                a.asname or a.name for a in node.names if a.name != "*" and kernel_import(f"{prefix}.{a.name}".lstrip("."))
            )
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            seeds.update(local for local, dotted in _bound_by(node) if kernel_import(dotted))
    defs: dict[str, set[str]] = {}
    for stmt in tree.body:
        targets = _defined_names(stmt)
        if targets is None:
            continue
        used = {n.id for n in walked(stmt) if isinstance(n, ast.Name)}
        if spaces and any(_calls_op_namespace(n, spaces) for n in walked(stmt)):
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
        local for node in walked(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
        for local, dotted in _bound_by(node) if dotted.split(".")[0] in KERNEL_LANGUAGES
    }


def _add_reexports(candidates: list[tuple[Path, Path]], kernels: set[str], names: set[str],
                   parsed: _Trees | None = None) -> None:
    """Package ``__init__`` files that re-export a kernel name become kernel modules holding just
    the names they re-export (to a fixed point: a package above re-exporting it again).

    detectron2's tests import ``DeformConv`` from ``detectron2.layers``, whose ``__init__`` takes
    it from ``deform_conv`` (which imports the compiled ``_C``): without this the tests' "skip
    without CUDA" gates were retargeted and ran the CUDA ops on neuron tensors. Only package
    ``__init__`` files are read (re-export hubs, small), and only in projects with kernels.
    """
    parsed = parsed or _Trees()
    inits: dict[str, ast.Module] = {}
    for path, root in candidates:
        if path.name != "__init__.py":
            continue
        module = _module_of(path, root)
        tree = parsed.get(path)
        if tree is not None:  # None: the per-file run reports it
            inits[module] = tree
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
            for node in walked(tree):
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


def _extension_importers(candidates: list[tuple[Path, Path]], extensions: set[str], known: dict[str, ast.Module],
                         parsed: _Trees | None = None) -> dict[str, ast.Module]:
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
        tree = _parsed_if_spelled(path, words, parsed)
        if tree is None:
            continue
        for node in walked(tree):
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
        for node in walked(tree)
        if isinstance(node, ast.Assign) and _call_name(node.value) == "CUDAExtension"
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    # `sources = ["a.cpp", "k.cu"]` (or a glob) named once and passed as `sources=sources`.
    assigned: dict[str, list[ast.expr]] = {}
    for node in walked(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    assigned.setdefault(t.id, []).append(node.value)
    for node in walked(tree):
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
        for node in walked(func):
            if isinstance(node, ast.Call) and (_call_name(node.func) in cuda_builders or _call_name(node.func) == "CUDAExtension"):
                name = _keyword(node, "name") or (node.args[0] if node.args else None)
                if name is not None and not isinstance(name, ast.Constant):
                    helpers[func.name] = (func, name)
                    break
    found: set[str] = set()
    if not helpers:
        return found
    for node in walked(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in helpers:
            func, name = helpers[node.func.id]
            value = _string_spelled(name, _bound_strings(func, node))
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


def _string_spelled(node: ast.expr, bound: dict[str, str]) -> str | None:
    """The string ``node`` (a constant, a parameter, an f-string or a sum of them) spells."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.FormattedValue) and node.conversion == -1 and node.format_spec is None:
        return _string_spelled(node.value, bound)
    if isinstance(node, ast.JoinedStr):
        parts = [_string_spelled(v, bound) for v in node.values]
        return None if None in parts else "".join(parts)  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string_spelled(node.left, bound), _string_spelled(node.right, bound)
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
        for node in walked(func):
            if isinstance(node, ast.Call) and _call_name(node.func) == "load":
                sources = _keyword(node, "sources") or (node.args[1] if len(node.args) > 1 else None)
                if sources is not None and any(isinstance(n, ast.Name) and n.id in params for n in walked(sources)):
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
    for n in walked(sources):
        if isinstance(n, ast.Name) and assigned:
            exprs += assigned.get(n.id, [])
    return any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith((".cu", ".cuh"))
        for e in exprs
        for n in walked(e)
    )


def _imports_kernel_language(tree: ast.Module, own: frozenset[str] | set[str] = frozenset()) -> bool:
    """Whether the module imports a kernel language (Triton, CuTe...). A probe is not such an
    import: imported only inside a ``try`` and never read (``try: import triton; HAVE_TRITON =
    True``) it runs no kernel. Megatron-LM's ``moe_layer.py`` and ``inference/symmetric_memory.py``
    probe Triton so; counting them made ``MoELayer`` CUDA-only (the layer asserts ``HAVE_TRITON``
    only under the config value that picks a Triton backend), and with it 35 of the 3,157 names
    the sweep saw reach a sink (``MoESubmodules``, ``BackendSpecProvider``, the FSDP adapter's
    ``isinstance(submodule, MoELayer)``). An import outside a ``try`` counts as before, read or
    not (a package that re-exports ``jit``). A module-level ``try`` is always such a probe. One
    inside a function is one only where the module imports nothing beyond the standard library,
    torch and the project's own modules (``_portable_imports``): then the probe gates a path
    written in PyTorch (unsloth's ``torch_compile_runtime_available()`` tries ``import triton``
    because inductor needs it, and the module goes on to call ``torch.compile``). Where the
    module imports a package no table knows, the probe is an availability check before the
    module runs the library's kernels through it (axolotl's ``fp4_cute_available()`` probes
    ``cutlass``, and the module runs its GEMM through ``quack``: reading that probe as nothing
    lost 7 true CN617 findings). An import read only for its ``__version__`` is such a probe
    wherever it stands in a ``try`` (``_version_reads``)."""
    probed: set[str] = set()
    tries = [t for t in walked(tree) if isinstance(t, ast.Try)]
    at_top = {id(t) for t in tree.body if isinstance(t, ast.Try)}
    portable = None  # decided at the first probe inside a function (most modules have none)
    version_reads: tuple[set[int], set[str]] | None = None
    inside: set[int] = set()
    nested: set[int] = set()
    for t in tries:
        ids = {id(n) for s in t.body for n in walked(s)}
        (inside if id(t) in at_top else nested).update(ids)
    for node in walked(tree):
        if isinstance(node, ast.Import):
            names = {(a.asname or a.name.split(".")[0]) for a in node.names if a.name.split(".")[0] in KERNEL_LANGUAGES}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module and node.module.split(".")[0] in KERNEL_LANGUAGES:
            names = {a.asname or a.name for a in node.names}
        else:
            continue
        if not names:
            continue
        if "*" in names:
            return True
        if id(node) not in inside:
            if id(node) not in nested:
                return True
            if version_reads is None:
                version_reads = _version_reads(tree)
            if portable is None and not (names & version_reads[1]):
                portable = _portable_imports(tree, own)
            if not (names & version_reads[1]) and not portable:
                return True
        probed |= names
    if not probed:
        return False
    versions = version_reads[0] if version_reads is not None else _version_reads(tree)[0]
    return any(isinstance(node, ast.Name) and node.id in probed and id(node) not in versions for node in walked(tree))


def _version_reads(tree: ast.Module) -> tuple[set[int], set[str]]:
    """The name nodes read only for their ``__version__`` (``triton.__version__``,
    ``getattr(triton, "__version__", None)``), and the names so read. Reading a kernel
    language's version runs no kernel: unsloth's ``diffusion_compile_cache`` imports triton
    inside a function to put its version in a cache key, and was a kernel module for it."""
    nodes: set[int] = set()
    names: set[str] = set()
    for node in walked(tree):
        if isinstance(node, ast.Attribute) and node.attr == "__version__" and isinstance(node.value, ast.Name):
            nodes.add(id(node.value))
            names.add(node.value.id)
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
            and len(node.args) >= 2 and isinstance(node.args[0], ast.Name)
            and isinstance(node.args[1], ast.Constant) and node.args[1].value == "__version__"
        ):
            nodes.add(id(node.args[0]))
            names.add(node.args[0].id)
    # A name also read otherwise is used: only names every read of which is a version's.
    other = {n.id for n in walked(tree) if isinstance(n, ast.Name) and n.id in names and id(n) not in nodes and isinstance(n.ctx, ast.Load)}
    return nodes, names - other


# What a module may import and still be a path written in PyTorch: its probe of a kernel language
# inside a function gates that path (inductor needs Triton), not a kernel library's.
_PORTABLE_TOPS = frozenset({*getattr(sys, "stdlib_module_names", ()), "torch", "__future__"})


def _portable_imports(tree: ast.Module, own: frozenset[str] | set[str]) -> bool:
    """Whether every import of the module other than a kernel language's is the standard
    library's, torch's or the project's own (a relative import, or a top-level name of the
    project's modules)."""
    for node in walked(tree):
        if isinstance(node, ast.Import):
            tops = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                continue
            tops = [(node.module or "").split(".")[0]]
        else:
            continue
        if any(t not in KERNEL_LANGUAGES and t not in _PORTABLE_TOPS and t not in own for t in tops):
            return False
    return True


@functools.lru_cache(maxsize=16384)
def _resolved(path: Path) -> Path:
    # The sweep resolves each file when it starts (to read it once), again for its module name and
    # for how findings name it, and the root for every file: diffusers ~6,600 resolutions, ~0.25 s.
    return path.resolve()


@functools.lru_cache(maxsize=8192)
def _module_of(path: Path, root: Path) -> str:
    # Asked of every file when the sweep starts and again of each file a chain searches (diffusers:
    # ~3,900 times, two path resolutions each, 0.45 s); a file's module does not change in a run.
    try:
        parts = _resolved(path).relative_to(_resolved(root)).with_suffix("").parts
    except ValueError:
        parts = (path.stem,)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _module_parts(candidates: list[tuple[Path, Path]]) -> frozenset[str]:
    """Every name in the dotted module paths of the project's files: an import from one of them
    (``from fastmlp.gpu_utils import CudaTimer`` in a project run from the folder above) is the
    project's own, as the residual pass reads it (``kinds/_leftover_python``: a file's folders)."""
    return frozenset(part for p, r in candidates for part in _module_of(p, r).split(".") if part)


def with_project_facts(config: Config, files: Iterable[SourceFile]) -> Config:
    """``config`` with the sweep's facts in its settings; the setup.py beside the project's
    pyproject.toml counts even when only a few files were named."""
    files = tuple(files)
    roots = {f.root for f in files}
    if config.source:
        roots.add(Path(config.source).parent)
    return config.with_overrides(project=project_facts(files, extra_roots=sorted(roots)))
