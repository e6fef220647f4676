"""Properties that may return a "cuda" the port leaves: their readers' tests cannot move alone.

A backend class names itself to its base: ``class GpuBackend(Backend): def __init__(self):
super().__init__(name="cuda", ...)``, and the base's ``name`` property hands it out. The port
leaves that literal (a name, not a device: the parameter is no device word, and other code tests
``backend.name in ["cuda", "npu"]`` as a name), so on Trainium the backend still calls itself
"cuda". A property of another class then returns it in one branch and a tensor's device type in
another: ``@property def device_type(self): if self.buffer is not None: return
self.buffer.device.type ... return current_backend().name``. Its readers test ``block.device_type
== "cuda"``: on the GPU both branches answered "cuda"; after the port the first answers "neuron"
and the second still "cuda", so neither the moved test nor the kept one takes the original's
path on every branch. CN103 leaves such a test to a person, naming the property's return and the
literal (``ProjectFacts.left_cuda_properties``, ``rules/_shared/left_properties.py``).

* **The literal.** A keyword argument ``<name>="cuda"`` of a ``super().__init__(...)`` call whose
  keyword is no device word (CN102 reads a device word's "cuda" as a device and moves it); found
  from the text first (``may_name_cuda``).
* **The property.** A method decorated ``@property`` with a ``return <expr>.<name>`` of such a
  keyword's name (the attribute the base hands out under the name it was given), in any module:
  only files that spell ``@property`` and such a return are parsed.

Read with CPython's ``ast``, through the sweep's one parse per file. The attribute is matched by
its name, not its type: a flow-insensitive hold (a finding where a safe fix might have done,
never the reverse).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ._library_sinks import spelled
from ._value_readers import Source
from ._value_returns import _own_nodes
from ._walk import walked

__all__ = ["left_cuda_properties", "may_name_cuda"]


# `super().__init__(` and a keyword given "cuda" before any other parenthesis (a `name="cuda"`
# among plain arguments, over lines).
_NAMED = re.compile(rb"""super\(\)\.__init__\([^()]*?\b\w+[ \t]*=[ \t]*["']cuda["']""")


def may_name_cuda(data: bytes) -> bool:
    """Whether a file's bytes may hand its base a "cuda" name (the sweep's cheap test, no parse)."""
    return b"super().__init__(" in data and (b'cuda"' in data or b"cuda'" in data) and _NAMED.search(data) is not None


def left_cuda_properties(
    sources: Iterable[Source],
    read: Callable[[], Iterable[Source]],
    parse: Callable[[Path, bytes], ast.Module | None],
) -> frozenset[tuple[str, str, str]]:
    """(property, where its return of the name stands, where the "cuda" literal stands) for each
    property that returns an attribute a subclass names "cuda" to its base (see the module's
    text). ``sources``: the files ``may_name_cuda`` took; ``read()``: every file of the project."""
    from cuda2neuron.rules._shared.names import is_device_word

    names: dict[str, str] = {}
    for path, _module, shown, data in sources:
        tree = parse(path, data)
        for call in _super_inits(tree) if tree is not None else ():
            for keyword in call.keywords:
                value = keyword.value
                if (
                    keyword.arg is not None and not is_device_word(keyword.arg)
                    and isinstance(value, ast.Constant) and value.value == "cuda"
                ):
                    names.setdefault(keyword.arg, f"{shown}:{value.lineno}")
    if not names:
        return frozenset()
    alternatives = b"|".join(re.escape(n.encode()) for n in sorted(names))
    returned = re.compile(rb"^[ \t]*return[ \t][^\n#]*\.(?:" + alternatives + rb")\b[ \t]*(?:#[^\n]*)?$", re.MULTILINE)
    found: set[tuple[str, str, str]] = set()
    for path, _module, shown, data in read():
        if b"@property" not in data or returned.search(data) is None:
            continue
        tree = parse(path, data)
        for func in _properties(tree) if tree is not None else ():
            for node in _own_nodes(func):
                value = node.value if isinstance(node, ast.Return) else None
                if isinstance(value, ast.Attribute) and value.attr in names:
                    found.add((func.name, f"{shown}:{node.lineno}", names[value.attr]))
    return frozenset(found)


def _super_inits(tree: ast.Module) -> Iterator[ast.Call]:
    for node in walked(tree):
        if (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__init__"
            and isinstance(node.func.value, ast.Call) and spelled(node.func.value.func) == "super"
        ):
            yield node


def _properties(tree: ast.Module) -> Iterator[ast.FunctionDef]:
    for node in walked(tree):
        if isinstance(node, ast.ClassDef):
            for func in node.body:
                if isinstance(func, ast.FunctionDef) and any(spelled(d) == "property" for d in func.decorator_list):
                    yield func
