"""Where the tree defines a module class (the crash box's edits on the crashing path): one parse per
file must give what `inspect.getsourcelines` gives for each class and its ``__init__``."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import os
import sys
import textwrap

import pytest

from cuda2neuron.validate._class_lines import class_lines

SOURCE = textwrap.dedent('''
    import dataclasses
    import functools

    import torch.nn as nn


    class Plain(nn.Module):
        def __init__(self):
            super().__init__()


    def deco(cls):
        return cls


    @deco
    class Decorated(nn.Module):
        pass


    class Outer(nn.Module):
        class Inner(nn.Module):
            def __init__(self, width=4):
                super().__init__()
                self.width = width

        def __init__(self):
            super().__init__()


    def _shared_init(self):
        nn.Module.__init__(self)


    class BorrowsInit(nn.Module):
        __init__ = _shared_init


    def logged(fn):
        @functools.wraps(fn)
        def inner(*a, **k):
            return fn(*a, **k)
        return inner


    class DecoratedInit(nn.Module):
        @logged
        def __init__(self):
            super().__init__()


    @dataclasses.dataclass(eq=False)
    class Config:
        width: int = 4


    def make():
        class Local(nn.Module):
            def __init__(self):
                super().__init__()
        return Local


    Local = make()
    Dynamic = type("Dynamic", (nn.Module,), {})
''')

CLASSES = ["Plain", "Decorated", "Outer", "Outer.Inner", "BorrowsInit", "DecoratedInit", "Config", "Local", "Dynamic"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree")
    (root / "models.py").write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("class_info_models", root / "models.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield root, module
    sys.modules.pop(spec.name, None)


def _by_inspect(cls: type, root: str) -> dict | None:
    """What the recorder reported before it parsed each file once: the oracle."""
    try:
        path = os.path.realpath(inspect.getsourcefile(cls))
        lines, start = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return None
    init_lines = []
    init = cls.__dict__.get("__init__")
    if init is not None:
        try:
            ilines, istart = inspect.getsourcelines(init)
            init_lines.append((istart, istart + len(ilines) - 1))
        except (OSError, TypeError):
            pass
    return {"file": os.path.relpath(path, os.path.realpath(root)), "start": start, "end": start + len(lines) - 1,
            "init": init_lines}


def _lookup(module, qualname: str) -> type:
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("qualname", CLASSES)
def test_one_parse_per_file_agrees_with_inspect(tree, qualname):
    root, module = tree
    cls = _lookup(module, qualname)
    spans: dict = {}
    assert class_lines(cls, str(root), spans) == _by_inspect(cls, str(root))


def test_the_file_is_parsed_once_for_all_its_classes(tree):
    root, module = tree
    spans: dict = {}
    for qualname in CLASSES:
        class_lines(_lookup(module, qualname), str(root), spans)
    assert list(spans) == [os.path.realpath(root / "models.py")]


def test_a_library_class_is_not_the_trees_and_its_file_is_not_parsed(tree):
    import torch.nn as nn

    root, _ = tree
    spans: dict = {}
    assert class_lines(nn.Linear, str(root), spans) is None
    assert class_lines(dataclasses.dataclass, str(root), spans) is None
    assert spans == {}
