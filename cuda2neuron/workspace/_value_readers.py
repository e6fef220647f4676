"""Values that cross a call and decide there: what the project sweep records for the callers.

Two wrong safe edits of issue 38 were right on their own line and wrong for the program, because
the value the edit touched is read in another module:

* **A literal that selects CUDA-only code in the callee.** torchtitan's ``make_ffn_config(...,
  tp_gemm_backend="dist_gemm")`` builds ``AllGatherFusedFeedForward if tp_gemm_backend ==
  "dist_gemm" else FeedForward``: the function is no sink (its default path is plain code), but a
  call handing it ``"dist_gemm"`` is, and a ``skipUnless(torch.cuda.is_available())`` on the test
  that makes that call must keep skipping on Trainium. ``selections`` records, per function of a
  module that holds a sink name, the parameter, the literals that pick the sink and where; the
  kernel index asks it per call (``ProjectFacts.selected``).
* **A device value whose reader stays.** lerobot's ``config_cls(device="cuda")`` reaches
  ``PreTrainedConfig.__post_init__``'s ``is_torch_device_available(self.device)``, whose ``if
  try_device.startswith("cuda"): return torch.cuda.is_available()`` is a guard around torch code
  (CN103: unsafe, left by a safe run) in a chain of tests whose ``else`` raises "Unknown device":
  the port's "neuron" raises where the original's "cuda" did not. ``device_readers`` records such
  functions' parameters, then the classes and functions that hand them a parameter or a
  dataclass field (``self.device``), and the subclasses of those classes; CN102 leaves a literal
  handed to one as it was, naming the reader (``ProjectFacts.device_reader``).

Both read with CPython's ``ast``, and only files whose bytes can hold what is looked for: a module
that holds a sink name and compares a name with a string; a file that compares with "cuda" and
raises. A reader's test is predicted to stay when a branch of its chain calls anything outside a
``raise`` (CN103's rule: a guard around code is never a safe fix); a chain of plain answers
(``if device in ["cuda", "cpu"]: return True``) is moved safely by CN103 and reads "neuron" then.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from ._library_sinks import spelled
from ._walk import walked

__all__ = ["device_readers", "may_read_devices", "raising_chains", "selections"]

# (path, dotted module, the file as findings name it, its bytes)
Source = tuple[Path, str, str, bytes]

# A name compared with a string literal, as an `if` or a conditional expression spells it; not
# `if __name__ == "__main__":` (a script's `main` reaches a sink in many projects).
# It starts with the literal `if` (no `\b`): the engine then skips to each `if` (5x faster on
# diffusers' 2,088 files); `_compared` checks the byte before.
_COMPARED = re.compile(rb"""if[ \t(]+(?!__)([A-Za-z_]\w*)[ \t]*(?:==|!=|\bin\b|\bnot[ \t]+in\b)[ \t(\[]*[rbuRBU]?["']""")
# A class statement: its name and its bases' text.
_CLASS = re.compile(rb"^[ \t]*class[ \t]+(\w+)[ \t]*\(([^)]*)\)", re.MULTILINE)
# An `if` / `elif` line that compares with "cuda" (`== "cuda"`, `.startswith("cuda")`, `in
# ("cuda", ...)`): where a reader's chain starts.
_CUDA_TEST = re.compile(rb"""^[ \t]*(?:el)?if[ \t][^\n]*(?:==|startswith\(|\bin[ \t]*[(\[])[ \t]*["']cuda""", re.MULTILINE)


# How many calls away from a reader a parameter is followed (`main(device)` -> `build(device)` ->
# `check(device)` is two): a bound keeps the sweep linear in the project.
_HOPS = 4

# The chain's last `else` raises.
_ELSE_RAISES = re.compile(rb"else:[ \t]*(?:#[^\n]*)?\n[ \t]*raise\b")


def may_read_devices(data: bytes) -> bool:
    """Whether a file's bytes may hold a device reader (the sweep's cheap test, no parse): the
    line-anchored pattern is tried only on the lines that quote "cuda"."""
    if b"elif" not in data or _ELSE_RAISES.search(data) is None:
        return False
    for quote in (b'"cuda', b"'cuda"):
        at = data.find(quote)
        while at >= 0:
            if _CUDA_TEST.match(_lines_from(data, at, 1)):
                return True
            at = data.find(quote, at + 1)
    return False


# --- literals that select a sink -----------------------------------------------------------------


def selections(
    sources: Iterable[Source],
    sinks: Mapping[str, str],
    bindings: Callable[[ast.Module, str, Path], dict[str, str]],
    parse: Callable[[Path, bytes], ast.Module | None] | None = None,
) -> frozenset[tuple[str, str, int | None, tuple[str, ...], str]]:
    """(function, parameter, position, literals, where) for each top-level function whose ``if``
    / conditional expression on a parameter's literal picks a sink name (its module's own, or
    one it imports): the literals are those that take the side naming it. ``bindings(tree,
    module, path)``: the local names a module's imports bind, as dotted names; ``parse(path,
    data)``: the module's tree, None where it does not parse (the sweep's, which parses each file
    once)."""
    parse = parse or _parse
    found: set[tuple[str, str, int | None, tuple[str, ...], str]] = set()
    suffixes: dict[str, str] = {}
    for dotted in sorted(sinks):
        parts = dotted.split(".")
        for i in range(len(parts) - 1):
            suffixes.setdefault(".".join(parts[i:]), dotted)
    lasts = re.compile(rb"\b(?:" + b"|".join(sorted({re.escape(d.rsplit(".", 1)[-1].encode()) for d in sinks})) + rb")\b")
    for path, module, shown, data in sources:
        # A sink's name on the comparison's line (`A if p == "x" else B`) or the four after it
        # (`if p == "x":` and the branch), before anything is parsed.
        # The compared name itself is no pick (`if backend == "nccl":`, where some module's
        # `backend` reaches a sink: half of Megatron's windows).
        if not any(
            hit.group(0) != name for at, name in _compared(data) for hit in lasts.finditer(_lines_from(data, at, 5))
        ):
            continue
        tree = parse(path, data)
        if tree is None:
            continue  # the per-file run reports it
        bound = bindings(tree, module, path)

        def sink_of(name: str) -> str | None:
            return suffixes.get(bound.get(name, f"{module}.{name}"))

        for func in tree.body:
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            positional, keywords = _parameters(func.args)
            for node in walked(func):
                if not isinstance(node, (ast.If, ast.IfExp)):
                    continue
                tested = _literal_test(node.test)
                if tested is None or (tested[0] not in positional and tested[0] not in keywords):
                    continue
                name, literals, equal = tested
                side = node.body if equal else node.orelse
                picked = _sink_named(side if isinstance(side, list) else [side], sink_of)
                if picked is None:
                    continue
                used, line, dotted = picked
                position = positional.index(name) if name in positional else None
                where = f"`{used}` at {shown}:{line}, which reaches {sinks[dotted]}"
                found.add((f"{module}.{func.name}", name, position, literals, where))
    return frozenset(found)


def _compared(data: bytes) -> Iterable[tuple[int, bytes]]:
    """Where ``data`` compares a name with a string in an ``if`` / ``elif`` / conditional, and
    the name."""
    for m in _COMPARED.finditer(data):
        at = m.start()
        before = data[at - 1 : at]
        if not before or not (before.isalnum() or before == b"_") or data[at - 2 : at] == b"el":
            yield at, m.group(1)


def _lines_from(data: bytes, at: int, count: int) -> bytes:
    """The ``count`` lines of ``data`` from the one holding offset ``at``."""
    start = end = data.rfind(b"\n", 0, at) + 1
    for _ in range(count):
        end = data.find(b"\n", end) + 1
        if end == 0:
            return data[start:]
    return data[start:end]


def _parameters(args: ast.arguments) -> tuple[list[str], list[str]]:
    """(positional parameters, keyword-only ones)."""
    return [a.arg for a in (*args.posonlyargs, *args.args)], [a.arg for a in args.kwonlyargs]


def _literal_test(test: ast.expr) -> tuple[str, tuple[str, ...], bool] | None:
    """``p == "x"`` / ``p in ("x", "y")``: (p, the literals, True); ``!=`` / ``not in``: False
    (the other side is taken for them). None for any other test."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)):
        return None
    op, right = test.ops[0], test.comparators[0]
    values = right.elts if isinstance(right, (ast.Tuple, ast.List, ast.Set)) and isinstance(op, (ast.In, ast.NotIn)) else [right]
    if not values or not all(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in values):
        return None
    if isinstance(op, (ast.Eq, ast.In)):
        equal = True
    elif isinstance(op, (ast.NotEq, ast.NotIn)):
        equal = False
    else:
        return None
    return test.left.id, tuple(sorted(v.value for v in values)), equal


def _sink_named(side: list[ast.AST], sink_of: Callable[[str], str | None]) -> tuple[str, int, str] | None:
    """The first name ``side`` spells that is a sink: (name, line, the sink's dotted name)."""
    for part in side:
        for node in walked(part):
            if isinstance(node, ast.Name) and (dotted := sink_of(node.id)) is not None:
                return node.id, node.lineno, dotted
    return None


# --- device readers that stay --------------------------------------------------------------------


def device_readers(
    sources: list[Source],
    more: Callable[[list[str]], Iterable[Source]],
    bindings: Callable[[ast.Module, str, Path], dict[str, str]],
    parse: Callable[[Path, bytes], ast.Module | None] | None = None,
) -> frozenset[tuple[str, str, int | None, str, bool]]:
    """(function or class, parameter, position, where, whether --unsafe-fixes moves its test)
    for each reader (see the module's text), then the project's functions and classes that hand
    one a parameter or a field, and the subclasses of such classes. ``sources``: the files that may hold a reader
    (``may_read_devices``); ``more(words)``: the files that spell one of ``words``;
    ``bindings(tree, module, path)``: the local names a module's imports bind, as dotted names;
    ``parse``: as ``selections``'."""
    parse = parse or _parse
    known: dict[str, list[tuple[str, int | None, str, bool]]] = {}
    for path, module, shown, data in sources:
        lines = [data.count(b"\n", 0, m.start()) + 1 for m in _CUDA_TEST.finditer(data)]
        tree = parse(path, data)
        for func in tree.body if tree is not None else ():
            # Only a function holding one of the test lines is walked.
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                func.lineno <= n <= (func.end_lineno or func.lineno) for n in lines
            ):
                for name, line, unsafe in _raising_readers(func):
                    positional, _ = _parameters(func.args)
                    position = positional.index(name) if name in positional else None
                    known.setdefault(f"{module}.{func.name}", []).append((name, position, f"{shown}:{line}", unsafe))
    if not known:
        return frozenset()
    # Hops read from the trees: the functions and classes that hand a reader a parameter or a
    # field (`PolicyConfig.__post_init__`'s `is_device_available(self.device)`), then those that
    # hand one of them theirs (`main(device)` -> `build(device)` -> `check(device)`), up to
    # `_HOPS` calls away. Each round reads only the files that spell a name the last round found,
    # so a chain costs a text search per hop, and a round finds its own file's callers in any
    # order of definition.
    fresh_names = sorted({n.rsplit(".", 1)[-1] for n in known})
    for _ in range(_HOPS):
        found_now: dict[str, list[tuple[str, int | None, str, bool]]] = {}
        for path, module, shown, data in more(fresh_names):
            tree = parse(path, data)
            if tree is None:
                continue
            bound = bindings(tree, module, path)
            bound.update({s.name: f"{module}.{s.name}" for s in tree.body if isinstance(s, (ast.FunctionDef, ast.ClassDef))})
            for stmt in tree.body:
                dotted = f"{module}.{stmt.name}" if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)) else None
                if dotted is not None and dotted not in known and dotted not in found_now:
                    rows = _hands_on(stmt, bound, known)
                    if rows:
                        found_now[dotted] = rows
        if not found_now:
            break
        known.update(found_now)
        fresh_names = sorted({n.rsplit(".", 1)[-1] for n in found_now})
    # Then, from the text alone (a parse per subclass was most of the cost: lerobot has ~40 policy
    # configs), the subclasses of those classes and a package's re-exports of them, two rounds
    # (`from .policies import PolicyConfig` in `configs/__init__.py`, then `class
    # PI0Config(PolicyConfig)` importing it from there).
    classes = {n.rsplit(".", 1)[-1]: rows for n, rows in known.items() if n.rsplit(".", 1)[-1][:1].isupper()}
    fresh = dict(classes)
    for _ in range(2):
        if not fresh:
            break
        words = re.compile(rb"\b(" + b"|".join(re.escape(w.encode()) for w in sorted(fresh)) + rb")\b")
        found: dict[str, list[tuple[str, int | None, str, bool]]] = {}
        for path, module, shown, data in more(sorted(fresh)):
            if path.name == "__init__.py":
                for name in {m.group(1).decode() for m in words.finditer(data)}:
                    found.setdefault(f"{module}.{name}", fresh[name])
                continue
            for match in _CLASS.finditer(data):
                base = words.search(match.group(2))
                if base is not None:
                    found.setdefault(f"{module}.{match.group(1).decode()}", fresh[base.group(1).decode()])
        found = {k: v for k, v in found.items() if k not in known}
        known.update(found)
        fresh = {n.rsplit(".", 1)[-1]: rows for n, rows in found.items() if n.rsplit(".", 1)[-1] not in classes}
        classes.update(fresh)
    return frozenset((dotted, *row) for dotted, rows in known.items() for row in rows)


def _parse(path: Path, data: bytes) -> ast.Module | None:
    try:
        return ast.parse(data, filename=str(path))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None  # the per-file run reports it


def raising_chains(func: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[list[ast.If]]:
    """Each ``if`` / ``elif`` chain of ``func`` whose last ``else`` raises, as its links in order
    (an ``elif`` is walked as an ``if`` too, so the chain from it comes as well)."""
    for node in walked(func):
        if not isinstance(node, ast.If):
            continue
        chain = [node]
        while len(chain[-1].orelse) == 1 and isinstance(chain[-1].orelse[0], ast.If):
            chain.append(chain[-1].orelse[0])
        last = chain[-1].orelse
        if last and isinstance(last[0], ast.Raise):
            yield chain


def _raising_readers(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    read_test: Callable[[ast.expr], tuple[str, tuple[str, ...]] | None] | None = None,
) -> list[tuple[str, int, bool]]:
    """(parameter, line of its "cuda" test, whether only torch is called) where an ``if`` / ``elif`` chain of ``func`` tests
    the parameter against "cuda", no test of the chain is true of "neuron", the last ``else``
    raises, and a branch calls code (so the "cuda" test stays in a safe run). ``read_test``: what
    a test compares (``_device_test``'s plain names by default; ``_value_args`` reads a
    parameter's attribute, ``args.device``, and its rows name ``args.device``)."""
    read_test = read_test or _device_test
    positional, keywords = _parameters(func.args)
    parameters = set(positional) | set(keywords)
    out: list[tuple[str, int, bool]] = []
    for chain in raising_chains(func):
        tests = [read_test(link.test) for link in chain]
        if any(t is None for t in tests):
            continue  # a test the chain's reading cannot answer for "neuron"
        cuda = [(name, link) for link, (name, values) in zip(chain, tests) if any(v.startswith("cuda") for v in values)]
        if not cuda or any(any(v == "neuron" or "neuron".startswith(v) for v in values) for _, values in tests):
            continue
        name = cuda[0][0]
        if name.partition(".")[0] not in parameters or not any(t[0] == name for t in tests if t):
            continue
        calls = [c for link in chain for c in _calls(link.body)]
        if not calls:
            continue  # plain answers: CN103 moves the test safely, and "neuron" passes it then
        # Torch calls only, on a name CN103 reads as a device: its fix is unsafe, so
        # --unsafe-fixes moves the test (and the caller's literal must move with it); anything
        # else keeps it on "cuda" in every run (`name.startswith("cuda")` is no device to CN103).
        from cuda2neuron.rules._shared.names import is_device_word

        torch_only = all((spelled(c.func) or "").startswith("torch.") for c in calls)
        out.append((name, cuda[0][1].test.lineno, torch_only and is_device_word(name.rpartition(".")[2])))
        break  # one chain per function: its first
    return out


def _device_test(test: ast.expr) -> tuple[str, tuple[str, ...]] | None:
    """(name, the literals it is matched with) for ``name == "x"``, ``name in ("x", "y")``,
    ``name.startswith("x")`` (a prefix: "neuron" passes it only if "x" is one of its prefixes)."""
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr == "startswith":
        head = test.func.value
        if isinstance(head, ast.Name) and len(test.args) == 1 and isinstance(test.args[0], ast.Constant) and isinstance(test.args[0].value, str):
            return head.id, (test.args[0].value,)
        return None
    found = _literal_test(test)
    if found is None or not found[2]:
        return None
    return found[0], found[1]


def _calls(body: list[ast.stmt]) -> list[ast.Call]:
    """The calls of a branch outside its ``raise`` statements (a guard around code is never a
    safe fix of CN103's; a branch that only rejects the input is a check)."""
    return [n for stmt in body if not isinstance(stmt, ast.Raise) for n in walked(stmt) if isinstance(n, ast.Call)]


def _hands_on(
    stmt: ast.FunctionDef | ast.ClassDef, bound: Mapping[str, str], known: Mapping[str, list[tuple[str, int | None, str, bool]]]
) -> list[tuple[str, int | None, str, bool]]:
    """The parameters (a class's: its fields and its constructor's) ``stmt`` hands to a known
    reader, each with the reader's place."""
    def reader(node: ast.expr) -> list[tuple[str, int | None, str, bool]] | None:
        name = spelled(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        return _known(f"{bound[head]}.{rest}".rstrip(".") if head in bound else None, known)

    rows: list[tuple[str, int | None, str, bool]] = []
    if isinstance(stmt, ast.ClassDef):
        functions = [f for f in stmt.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        fields = {s.target.id for s in stmt.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
        fields |= _stored_on_self(functions)
    else:
        functions, fields = [stmt], set()
    for func in functions:
        positional, keywords = _parameters(func.args)
        names = set(positional) | set(keywords)
        for call in (n for n in walked(func) if isinstance(n, ast.Call)):
            targets = reader(call.func)
            if not targets:
                continue
            for name, position, where, unsafe in targets:
                value = _argument(call, name, position)
                handed = _handed_name(value, names, fields if isinstance(stmt, ast.ClassDef) else set())
                if handed is not None:
                    position_here = positional.index(handed) if handed in positional and isinstance(stmt, ast.FunctionDef) else None
                    rows.append((handed, position_here, where, unsafe))
    return rows


def _known(
    dotted: str | None, known: Mapping[str, list[tuple[str, int | None, str, bool]]]
) -> list[tuple[str, int | None, str, bool]] | None:
    """The rows of ``dotted``; a src layout's `src.pkg.utils.f` is imported as `pkg.utils.f`."""
    if dotted is None:
        return None
    if dotted in known:
        return known[dotted]
    return next((rows for k, rows in known.items() if k.endswith("." + dotted)), None)


def _argument(call: ast.Call, name: str, position: int | None) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    if position is not None and position < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
        return call.args[position]
    return None


def _handed_name(value: ast.expr | None, parameters: set[str], fields: set[str]) -> str | None:
    """The parameter (``device``) or field (``self.device``) ``value`` is, through ``str(...)``."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "str" and len(value.args) == 1:
        value = value.args[0]
    if isinstance(value, ast.Name) and value.id in parameters and value.id != "self":
        return value.id
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "self" and value.attr in fields:
        return value.attr
    return None



def _stored_on_self(functions: list[ast.FunctionDef | ast.AsyncFunctionDef]) -> set[str]:
    """The attributes a class's methods store on ``self`` (``self.device = device`` in
    ``__init__``, or a later ``self.device = "cuda"``): its fields as much as a dataclass's
    annotated ones, for a caller that stores on an instance after construction."""
    return {
        t.attr
        for func in functions
        for node in walked(func)
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    }
