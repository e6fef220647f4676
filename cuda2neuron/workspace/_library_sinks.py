"""Where the project's chains across modules start outside it: third-party CUDA-only packages
and torch's CUDA-only calls, read with their fallbacks.

bitsandbytes, flash_attn, xformers, apex, deep_gemm, Transformer Engine, CUDA IPC and calls
such as ``torch.cuda.get_allocator_backend()`` run only on an NVIDIA GPU, but projects reach
them behind fallbacks: ``try: import bitsandbytes as bnb / except ImportError: bnb = None``, then
``if bnb is not None: ...``; ``if is_flash_attn_available(): ...``; ``if x.is_cuda: ...``. On
Trainium the package is missing and the test says no, so the fallback runs and the function is
plain code. A top-level ``def`` / ``class`` / assignment is a start only where it uses such code
on a path Trainium takes: in its decorators, bases and default values, or in a statement of its
body (methods and nested functions included) that no fallback stands in front of. Each branch
on the way is asked of the device model (``python.truth``); a test of the package's binding, an
availability probe, a ``try`` body and the later operands of ``and`` / ``or`` are the fallback's
other side; a data test (``isinstance(child, nn.Linear)``) runs both sides.
``if not torch.cuda.is_available(): raise`` followed by the call is no fallback: nothing
portable runs, so the function is CUDA-only.

Each start is a name with its sink and the line that uses it (``invokeai.app.util.
torch_cuda_allocator.configure_torch_cuda_allocator`` -> ``torch.cuda.get_allocator_backend`` at
``invokeai/app/util/torch_cuda_allocator.py:43``); ``_project._library_chains`` then follows
the import graph from these modules through uses outside any branch.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Callable, Iterable

from cuda2neuron.core import ProjectFacts

from ._line_search import findall_at_lines
from ._walk import walked

# The rules' tables and the device model load libcst and the catalog: imported where a file
# holds something to read, never for a project no rule wakes (tests/engine/test_coarse_triggers.py).

__all__ = ["library_pattern", "library_starts", "spelled", "unconditional_uses"]

# torch's CUDA-only calls whose names are common words (`graph`): a statement is read for them
# only through its other words (`torch.cuda.graph(...)` comes with `CUDAGraph` or a capture).
_COMMON_WORDS = frozenset({"graph"})


def library_pattern(own: Iterable[str]) -> tuple[re.Pattern[bytes], ...]:
    """A file holds a library sink only if it imports one of the packages (not one of the
    project's own top-level names ``own``: mamba_ssm inside mamba) or spells one of the calls
    (``torch.cuda.get_allocator_backend``, ``from torch.cuda import mem_get_info``). Several
    patterns, each starting with a literal: one alternation of them all scans 45 MB of diffusers
    in 1.1 s, these in 0.07 s."""
    from cuda2neuron.rules._shared.kernels import library_sink_words

    packages, calls, modules = library_sink_words()
    own = set(own)
    imported = b"|".join(re.escape(p.encode()) for p in packages if p not in own)
    called = b"|".join(re.escape(c.encode()) for c in calls)
    return (
        re.compile(rb"import[ \t]+(?:" + imported + rb")\b"),
        re.compile(rb"from[ \t]+(?:" + imported + rb")\b"),
        re.compile(rb"cuda\.(?:graphs\.|memory\.)?(?:" + called + rb")\b"),
        re.compile(rb"import[ \t][^\n]*\b(?:" + called + rb")\b"),
        re.compile(rb"int4pack"),
        # `torch.ops.symm_mem.fused_all_gather_matmul(...)`, `import torch.distributed._symmetric_memory`:
        # a literal each (an alternation without a literal to start from scanned diffusers in 0.47 s).
        *(re.compile(re.escape(m.encode())) for m in modules),
    )


def library_starts(data: bytes, shown: str, facts: ProjectFacts) -> dict[str, str]:
    """The module's top-level names that use CUDA-only library code unconditionally, each with
    that code and the line (``data``: the module's bytes; ``shown``: the file as findings name
    it), and the module's names that use one of those unconditionally (``quantize_model(m)``
    calling the module's ``_convert_to_int8(m)``, which builds bitsandbytes layers), to a fixed
    point. Only the top-level statements whose text names a bound package, a call or a name
    found are parsed (``_chunks``): parsing all of diffusers' 120 files that import xformers or
    bitsandbytes cost 1.5-4 s, more than the rest of the sweep."""
    bound = _import_bindings(data)
    for name in _with_fallback(data, bound, facts):
        del bound[name]
    words = _words(bound, facts)
    if words is None or not words.search(data):
        return {}
    starts: dict[str, str] = {}
    parsed: set[int] = set()
    libraries = _libraries(bound, facts)
    lines = [0, *itertools.accumulate(len(line) + 1 for line in data.split(b"\n"))]  # where each line starts
    every = words
    while words is not None:
        added: list[str] = []
        for stmt, offset in _chunks(data, words, parsed):
            names = [n for n in _defined(stmt) if n not in starts]

            def holds(node: ast.stmt, offset: int = offset) -> bool:
                # A statement whose text names nothing the search looks for runs none of it:
                # the walk skips the methods of a 2,000-line pipeline class that do not.
                first, last = node.lineno + offset - 1, (node.end_lineno or node.lineno) + offset
                return bool(every.search(data, lines[first], lines[min(last, len(lines) - 1)]))

            found = _first_use(stmt, bound, libraries, facts, starts, offset, holds) if names else None
            if found is not None:
                for name in names:
                    starts[name] = found
                added += names
        words = _spelled_words(added)
        every = _spelled_words(list(starts), every)
    return {name: sink.replace("\0", shown) for name, sink in starts.items()}


def _spelled_words(names: list[str], also: re.Pattern[bytes] | None = None) -> re.Pattern[bytes] | None:
    """The names as code runs them (called, or a base), with ``also``'s words."""
    if not names:
        return also
    called = rb"\b(?:" + b"|".join(re.escape(n.encode()) for n in sorted(names)) + rb")[ \t]*[(),]"
    return re.compile(called + (b"|" + also.pattern if also is not None else b""))


# The start of a line of code at column 0: a top-level statement (or a line of a string).
_TOP_LINE = re.compile(rb"^(?=[^\s#)\]}])", re.MULTILINE)
_TRIES = 8  # top-level lines a statement may span before the file is parsed whole


def _chunks(data: bytes, words: re.Pattern[bytes], parsed: set[int]) -> list[tuple[ast.stmt, int]]:
    """The top-level statements of the module whose text matches ``words``, parsed alone, each
    with the number of lines before it in the file. A chunk runs from one column-0 line to the
    next; one that does not parse (a decorator before its ``def``, a string with lines at column
    0) grows by the next chunk, and past ``_TRIES`` the module is parsed whole. ``parsed``: the
    chunks parsed by an earlier call, by where they start (each is returned once)."""
    starts = [m.start() for m in _TOP_LINE.finditer(data)] + [len(data)]
    found: list[tuple[ast.stmt, int]] = []
    i = 0
    while i < len(starts) - 1:
        if starts[i] in parsed or not words.search(data, starts[i], starts[i + 1]):
            i += 1
            continue
        line = data.count(b"\n", 0, starts[i])
        for j in range(i + 1, min(i + 1 + _TRIES, len(starts))):
            try:
                tree = ast.parse(data[starts[i] : starts[j]])
            except (SyntaxError, ValueError):
                continue
            found += [(stmt, line) for stmt in tree.body]
            parsed.update(starts[i:j])
            i = j
            break
        else:
            whole = _whole(data, words)
            parsed.update(starts)
            return whole
    return found


def _whole(data: bytes, words: re.Pattern[bytes]) -> list[tuple[ast.stmt, int]]:
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return []  # the per-file run reports the syntax error
    lines = data.splitlines()
    return [(s, 0) for s in tree.body if words.search(b"\n".join(lines[s.lineno - 1 : s.end_lineno]))]


# An import statement as text (a parenthesized name list may span lines): `from M import a as b,
# c` or `import a.b as c, d`.
_IMPORT = re.compile(
    rb"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import[ \t]*(\([^)]*\)|[^\n#;]*)|import[ \t]+([^\n#;]*))", re.MULTILINE
)
_ALIAS = re.compile(rb"([\w.]+)(?:[ \t]+as[ \t]+(\w+))?")


def _imports(data: bytes) -> list[tuple[str, str]]:
    """(local name, dotted name) of every import of the module at any depth, in order, read from
    the text as the sweep reads import lines; a relative import's dotted name keeps its dots."""
    found: list[tuple[str, str]] = []
    for source, names, plain in findall_at_lines(_IMPORT, data, b"import"):
        for item in (plain or names.strip(b"()")).split(b","):
            alias = _ALIAS.search(item.strip().strip("\\".encode()))
            if alias is None:
                continue
            name, local = alias.group(1).decode("ascii", "replace"), (alias.group(2) or b"").decode("ascii", "replace")
            if plain:
                found.append((local or name.split(".")[0], name if local else name.split(".")[0]))
            else:
                found.append((local or name, f"{source.decode('ascii', 'replace')}.{name}"))
    return found


def _import_bindings(data: bytes) -> dict[str, str]:
    """Local name -> dotted name of its first absolute import, at any depth (InvokeAI imports
    torch inside the function that must run before torch is imported)."""
    bound: dict[str, str] = {}
    for local, dotted in _imports(data):
        if not dotted.startswith("."):
            bound.setdefault(local, dotted)
    return bound


def _with_fallback(data: bytes, bound: dict[str, str], facts: ProjectFacts) -> list[str]:
    """The names bound to CUDA-only code that the module also binds to the project's own code:
    another import of the name from one of the project's modules, or ``name = other`` where
    ``other`` is imported from one. Megatron binds ``multi_tensor_applier`` from Transformer
    Engine, else apex, else ``multi_tensor_applier = local_multi_tensor_applier`` (from
    ``megatron.core.utils``) in the last ``except ImportError:``: on Trainium the local one runs,
    so a function calling it is plain code. A placeholder is no fallback (``bnb = None``,
    ``te = MagicMock()``, a keyword argument on a line of its own): the call then fails, or does
    nothing, where the CUDA-only package would have run."""
    from cuda2neuron.rules._shared.kernels import library_sink

    cuda_only = [n for n, dotted in bound.items() if library_sink(dotted, facts) is not None]
    if not cuda_only:
        return []
    own = {local for local, dotted in _imports(data) if dotted.startswith(".") or facts.own_module(dotted)}
    found = []
    for name in cuda_only:
        spelled = name.encode()
        assigned = re.compile(rb"^[ \t]*" + re.escape(spelled) + rb"[ \t]*(?::[^=\n]*)?=[ \t]*(\w+)[ \t]*(?:#.*)?$", re.MULTILINE)
        values = findall_at_lines(assigned, data, spelled)
        if name in own or any(value.decode("ascii", "replace") in own for value in values):
            found.append(name)
    return found


def _words(bound: dict[str, str], facts: ProjectFacts) -> re.Pattern[bytes] | None:
    """The local names bound to CUDA-only packages, and torch's CUDA-only calls where torch is
    bound: a statement that holds none of them uses none."""
    from cuda2neuron.rules._shared.kernels import library_sink, library_sink_words

    _, calls, modules = library_sink_words()
    local = [n for n, dotted in bound.items() if library_sink(dotted, facts) is not None or _package_prefix(dotted, facts)]
    if any(dotted.split(".")[0] == "torch" for dotted in bound.values()):
        local += [c for c in calls if c not in _COMMON_WORDS]
        local += modules  # `torch.ops.symm_mem.fused_all_gather_matmul(` spells `ops.symm_mem` called
    if not local:
        return None
    # Spelled as code runs it: called, or named as a base (`bnb.nn.Linear8bitLt)`), not a word of
    # a docstring nor a value stored for later (`optimizer_class = bnb.optim.AdamW8bit`).
    names = b"|".join(re.escape(w.encode()) for w in sorted(set(local)))
    return re.compile(rb"\b(?:" + names + rb")(?:\.\w+)*[ \t]*[(),]")


def _package_prefix(dotted: str, facts: ProjectFacts) -> bool:
    """``import vllm`` / ``import deepspeed``: a package some of whose modules are CUDA-only
    (``vllm._custom_ops``); ``import torch.distributed._symmetric_memory as symm_mem``: a torch
    module some of whose members are; the use decides."""
    from cuda2neuron.rules._shared.kernels import library_sink_words, torch_cuda_only_module

    packages, _, _ = library_sink_words()
    if torch_cuda_only_module(dotted) is not None:
        return True
    return dotted.split(".")[0] in packages and not facts.own_module(dotted)


def _defined(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return [t.id for t in targets if isinstance(t, ast.Name)]
    return []


def _first_use(
    stmt: ast.stmt, bound: dict[str, str], libraries: frozenset[str], facts: ProjectFacts, own: dict[str, str],
    offset: int, holds: Callable[[ast.stmt], bool] | None = None,
) -> str | None:
    """The first CUDA-only library code ``stmt`` runs on Trainium whatever its tests say, with
    ``at \\0:line`` (the file's name comes later), or the sink of one of the module's ``own``
    names it runs."""
    from cuda2neuron.rules._shared.kernels import library_sink

    found: list[tuple[int, str]] = []
    for node in _unconditional(stmt, libraries, holds=holds):
        used = _used(node)
        if used is None:
            continue
        if used in own:
            found.append((node.lineno, own[used]))
            continue
        head, _, rest = used.partition(".")
        dotted = bound.get(head)
        if dotted is None:
            continue
        what = library_sink(f"{dotted}.{rest}" if rest else dotted, facts)
        if what is not None:
            found.append((node.lineno, f"{what} at \0:{node.lineno + offset}"))
    return min(found)[1] if found else None


def _libraries(bound: dict[str, str], facts: ProjectFacts) -> frozenset[str]:
    """The local names bound to CUDA-only packages (not torch: its calls are the sinks)."""
    from cuda2neuron.rules._shared.kernels import library_sink

    return frozenset(
        n for n, d in bound.items() if not d.startswith("torch") and (library_sink(d, facts) or _package_prefix(d, facts))
    )


def unconditional_uses(stmt: ast.stmt) -> Iterable[ast.expr]:
    """The names and attribute chains ``stmt`` runs whatever its tests say: each call's callee,
    each base and decorator outside any branch (the sweep follows chains from library sinks into
    other modules through these only: `if backend == "flash":` picks diffusers' dispatch there)."""
    for node in _unconditional(stmt, strict=True):
        target = node.func if isinstance(node, ast.Call) else node
        if isinstance(target, (ast.Name, ast.Attribute)):
            yield target
        # `AllGatherLinear.apply(x, w)` runs the autograd Function the name holds, as
        # `AllGatherLinear(...)` would: the chain's head is used too (a module's name is no sink).
        while isinstance(target, ast.Attribute):
            target = target.value
        if isinstance(target, ast.Name) and target is not node:
            yield target


def _used(node: ast.AST) -> str | None:
    """The dotted name ``node`` runs: a call's callee, a class base, a decorator."""
    target = node.func if isinstance(node, ast.Call) else node
    return spelled(target) if isinstance(target, (ast.Name, ast.Attribute)) else None


def spelled(node: ast.AST) -> str | None:
    """How code names something: ``f`` for a name, ``pkg.ops.norm.f`` for an attribute chain;
    None through a call or a subscript. The project sweep reads names the same way."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = spelled(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def _unconditional(stmt: ast.stmt, libraries: frozenset[str] = frozenset(), strict: bool = False,
                   holds: Callable[[ast.stmt], bool] | None = None) -> Iterable[ast.AST]:
    """The calls, bases and decorators of ``stmt`` that run on Trainium whenever it (or, for a
    function or a class, its body) runs there. A branch is followed by what its test is: a device
    or fallback test (``_branch_runs``) keeps only the side Trainium takes; a data test
    (``isinstance(child, nn.Linear)``) both. A ``try`` body is the fallback's other side (its
    handler runs when the package is missing), as are the operands after the first of ``and`` /
    ``or``. ``libraries``: the local names bound to CUDA-only packages (``bnb is not None``
    tests for one). ``strict``: no branch is followed. ``holds``: whether a statement's text may
    name what is looked for (one that does not is not walked)."""
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        if holds is not None and isinstance(node, ast.stmt) and node is not stmt and not holds(node):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield from node.decorator_list
            if isinstance(node, ast.ClassDef):
                yield from node.bases
            else:
                stack.extend(d for d in (*node.args.defaults, *node.args.kw_defaults) if d is not None)
            stack.extend(node.body)
            continue
        if isinstance(node, ast.Call):
            yield node
        if isinstance(node, (ast.If, ast.IfExp)):
            stack.append(node.test)
            body, orelse = (False, False) if strict else _branch_runs(node.test, libraries)
            branches = (node.body, node.orelse)
            for runs, branch in zip((body, orelse), branches):
                if runs:
                    stack.extend(branch if isinstance(branch, list) else [branch])
        elif isinstance(node, ast.While):
            stack.append(node.test)
        elif isinstance(node, ast.BoolOp):
            stack.append(node.values[0])
        elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            stack.extend(node.finalbody)
        elif not isinstance(node, (ast.Match, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


# `is_flash_attn_available()`, `torch.cuda.is_available()`: a call that asks whether something is
# installed or present (Hugging Face's import utilities spell them so; so does torch).
_PROBE = re.compile(r"(^|\.|_)is_\w*available$|^is_available$")


# What a test must spell for the device model to answer it or to see a CUDA fact in it (its
# atoms: `cuda`/`neuron` queries and strings, `.is_cuda`, `.device.type`, package flags): the
# rest are data tests, told without parsing them for the model.
_DEVICE_ATOMS = re.compile(
    r"cuda|neuron|device|(?:has|have|is|use|with)_?(?:triton|apex|flash|xformers|bitsandbytes|bnb|cupy|deep)", re.IGNORECASE
)


def _branch_runs(test: ast.expr, libraries: frozenset[str]) -> tuple[bool, bool]:
    """Whether the body and the other side of a branch on ``test`` may run on Trainium, as the
    device model answers (``python.truth``: the port keeps a test in front of CUDA-only code, so
    its answer there is Trainium's). A test that reads a package's binding (``bnb is not None``)
    or asks a probe is a fallback test: the package is missing there. A test the model cannot
    answer that still asks about CUDA is neither side (unknown is not unconditional); a plain
    data test is both."""
    import libcst as cst

    from cuda2neuron.python import asks_cuda, truth

    names = [n for n in walked(test) if isinstance(n, (ast.Name, ast.Attribute))]
    if any(isinstance(n, ast.Name) and n.id in libraries for n in names):
        return _fallback_sides(test, libraries)
    if any(_PROBE.search(spelled(n.func) or "") for n in walked(test) if isinstance(n, ast.Call)):
        return False, False
    text = ast.unparse(test)
    if not _DEVICE_ATOMS.search(text):
        return True, True  # none of the model's atoms: a data test, unknown and no CUDA fact
    try:
        expression = cst.parse_expression(text)
    except (cst.ParserSyntaxError, ValueError, RecursionError):
        return False, False
    answer = truth(expression).trainium
    if answer is None:
        # Unknown, but about CUDA (`IS_CUDA_SYSTEM or IS_ROCM_SYSTEM`, `torch.version.cuda`):
        # neither side runs for certain.
        cuda = asks_cuda(expression) or "cuda" in text.lower()
        return (False, False) if cuda else (True, True)
    return answer, not answer


def _fallback_sides(test: ast.expr, libraries: frozenset[str]) -> tuple[bool, bool]:
    """``if bnb is not None:`` / ``if bnb:`` runs its body only where the package imported (not
    on Trainium); ``if bnb is None:`` its body only there."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    inner = test.operand if negated else test
    against_none = isinstance(inner, ast.Compare) and len(inner.ops) == 1 and isinstance(inner.comparators[0], ast.Constant)
    if against_none and inner.comparators[0].value is None:
        missing = isinstance(inner.ops[0], (ast.Is, ast.Eq))
        present = not missing
    elif isinstance(inner, ast.Name):
        present = True
    else:
        return False, False  # some other test of the package: unknown
    present = present != negated
    return (not present, present)
