"""Command-line options whose value another module tests: what the project sweep records for
``add_argument(..., default="cuda")``.

A script's ``parser.add_argument("--device", default="cuda")`` is read as ``args.device``, often
not where it is declared: ``init_device(args)`` in another module runs ``if args.device ==
"cuda": torch.cuda.set_device(...) elif args.device == "cpu": ... else: raise ValueError``. That
test guards torch code, so a safe run leaves it (CN103 unsafe) and the default moved to "neuron"
alone reaches the raise at start-up; a ``choices=["cuda", "cpu"]`` moved alone rejects the
default it still has. In one module the program pass links the default, its choices and their
readers (``python/_flows.py``); across modules nothing tells the option's file of the reader but
this fact (``ProjectFacts.option_readers``): the attributes of a parsed namespace (a parameter
named as one is handed around: ``args``, ``opt``, ``cfg``...) that such a chain tests, each with
the place of its test and whether ``--unsafe-fixes`` moves that test (its branches call torch
only). CN102 then keeps the option's default and choices with the test
(``rules/_shared/option_readers.py``) in the modules that call the reader by name: an
option of the same name in a module that never does belongs to another program (a sampling
script beside the trainer).

Read with CPython's ``ast`` from the files the sweep already picked as possible readers
(``may_read_devices``: a raising ``else`` and an ``if`` testing "cuda"), through the sweep's one
parse per file; the chain's reading is ``_value_readers``' own, asked about an attribute.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from ._value_readers import Source, _device_test, _parse, _raising_readers

__all__ = ["NAMESPACES", "option_readers"]

# What a parsed namespace is called when it is handed to a function (`def setup(args)`): an
# attribute of any other parameter (`model.device`, `config.device`) is no command-line option.
NAMESPACES = frozenset({"args", "opt", "opts", "options", "cfg", "hparams", "flags", "FLAGS", "cli_args"})


def option_readers(
    sources: Iterable[Source],
    more: Callable[[list[str]], Iterable[Source]],
    parse: Callable[[Path, bytes], ast.Module | None] | None = None,
) -> frozenset[tuple[str, str, str, bool]]:
    """(module, attribute, where its test stands, whether ``--unsafe-fixes`` moves that test):
    for each function or method of ``sources`` whose raising chain of tests reads
    ``<namespace>.<attribute>`` against "cuda" (``_value_readers._raising_readers``),
    ``<namespace>`` one of its parameters, the modules that call it by name (``more(names)``: the
    sources that spell one of ``names`` called), where an option of that name is the one read.
    A module that never calls the reader declares another program's option of the same name."""
    parse = parse or _parse
    readers: dict[str, set[tuple[str, str, bool]]] = {}
    for path, _module, shown, data in sources:
        tree = parse(path, data)
        for called, func in _functions(tree) if tree is not None else ():
            params = {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)}
            if not params & NAMESPACES:
                continue
            for name, line, unsafe in _raising_readers(func, _option_test):
                head, _, attribute = name.partition(".")
                if head in NAMESPACES and attribute:
                    readers.setdefault(called, set()).add((attribute, f"{shown}:{line}", unsafe))
    if not readers:
        return frozenset()
    found: set[tuple[str, str, str, bool]] = set()
    for _path, module, _shown, data in more(sorted(readers)):
        for called, rows in readers.items():
            if re.search(rb"\b" + re.escape(called.encode()) + rb"[ \t]*\(", data):
                found.update((module, *row) for row in rows)
    return frozenset(found)


def _functions(tree: ast.Module) -> Iterable[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """The module's functions and its classes' methods (a trainer's ``setup(self, args)``), each
    with the name a caller spells: a constructor is called by its class's name."""
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield stmt.name, stmt
        elif isinstance(stmt, ast.ClassDef):
            for f in stmt.body:
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield (stmt.name if f.name == "__init__" else f.name), f


def _option_test(test: ast.expr) -> tuple[str, tuple[str, ...]] | None:
    """``_device_test`` of ``args.device`` (one attribute of a name), spelled ``args.device``;
    None for any other test, so a chain that also tests a plain name is not read here."""
    target = test.func.value if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) else (
        test.left if isinstance(test, ast.Compare) else None
    )
    if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)):
        return None
    # Read the test with the attribute standing in for a plain name, then spell it back.
    stand_in = ast.Name(id="_option_", ctx=ast.Load())
    if isinstance(test, ast.Call):
        swapped: ast.expr = ast.Call(func=ast.Attribute(value=stand_in, attr=test.func.attr, ctx=ast.Load()), args=test.args, keywords=test.keywords)
    else:
        swapped = ast.Compare(left=stand_in, ops=test.ops, comparators=test.comparators)
    read = _device_test(swapped)
    return None if read is None else (f"{target.value.id}.{target.attr}", read[1])
