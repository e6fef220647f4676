"""Every name a rule can write into code exists: in the emulated backend or in torch itself.

For every rule of the catalog this checks the names it declares in ``emits`` and every dotted
``torch.*`` name in the expected output of its INVALID examples. ``torch.neuron.*`` names must
be on the emulated device module (``cuda2neuron.backend.NEURON_MODULE_API``, read without
importing torch); other ``torch.*`` names must import or resolve by ``getattr`` in the installed
torch. That contract is what makes validating a port on the emulated device meaningful.
"""

from __future__ import annotations

import ast
import importlib

import pytest

from cuda2neuron.backend import NEURON_MODULE_API
from cuda2neuron.kinds import catalog


def torch_names(source: str) -> set[str]:
    """The maximal ``torch.a.b`` attribute chains of ``source``.

    A chain through a call or subscript stops there: ``torch.zeros(3).cuda`` yields
    ``torch.zeros``, not the bogus ``torch.zeros.cuda``.
    """
    names: set[str] = set()
    tree = ast.parse(source)
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or id(node) in inner:
            continue
        parts = []
        head: ast.expr = node
        while isinstance(head, ast.Attribute):
            parts.append(head.attr)
            head = head.value
        if isinstance(head, ast.Name) and head.id == "torch":
            names.add(".".join(["torch", *reversed(parts)]))
    return names


def missing(qualified: str) -> str | None:
    """Why ``qualified`` does not exist, or None when it does."""
    parts = qualified.split(".")
    if parts[:2] == ["torch", "neuron"]:
        if len(parts) < 3 or parts[2] not in NEURON_MODULE_API:
            return f"{qualified} is not in the emulated backend's NEURON_MODULE_API"
        return None
    if parts[0] != "torch":
        try:
            _resolve(parts)
        except (ImportError, AttributeError):
            return f"{qualified} does not resolve"
        return None
    pytest.importorskip("torch")
    try:
        _resolve(parts)
    except (ImportError, AttributeError):
        return f"{qualified} does not exist in the installed torch"
    return None


def _resolve(parts: list[str]) -> object:
    # The longest importable prefix, then attributes: torch.utils.cpp_extension is a module
    # torch does not import by itself; torch.float16 is an attribute.
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(".".join(parts))


def _emitted():
    for code, rule in catalog().items():
        names = set(rule.emits)
        if "python" in rule.file_kinds:
            for example in rule.INVALID:
                if example.expected is not None:
                    names |= torch_names(example.expected)
        for name in sorted(names):
            yield pytest.param(name, id=f"{code}-{rule.name}-{name}")


EMITTED = list(_emitted())


@pytest.mark.parametrize("qualified", EMITTED)
def test_emitted_name_exists(qualified: str):
    assert missing(qualified) is None, missing(qualified)


def test_every_family_is_covered():
    """The table reaches every family, the device (CN1xx) and file (CN7xx) rules included."""
    families = {p.id[:3] for p in EMITTED}
    assert families >= {"CN1", "CN2", "CN3", "CN4", "CN5", "CN6", "CN8"}
    assert {p.values[0] for p in EMITTED} >= {
        "torch.neuron.synchronize",
        "torch.distributed.get_default_backend_for_device",
        "torch.accelerator.current_accelerator",
    }


@pytest.mark.parametrize(
    ("qualified", "exists"),
    [
        pytest.param("torch.neuron.synchronize", True, id="real-neuron-name"),
        pytest.param("torch.neuron.no_such_api", False, id="fake-neuron-name"),
        pytest.param("torch.neuron", False, id="bare-device-module"),
        pytest.param("torch.float16", True, id="real-torch-attribute"),
        pytest.param("torch.no_such_function", False, id="fake-torch-name"),
        pytest.param("torch.accelerator.no_such_call", False, id="fake-accelerator-name"),
    ],
)
def test_the_check_can_fail(qualified: str, exists: bool):
    assert (missing(qualified) is None) is exists


@pytest.mark.parametrize(
    ("source", "names"),
    [
        pytest.param("torch.neuron.synchronize()\n", {"torch.neuron.synchronize"}, id="call"),
        pytest.param("x = torch.zeros(3).cuda\n", {"torch.zeros"}, id="chain-stops-at-call"),
        pytest.param("y = torch.nn.functional.relu(x).sum\n", {"torch.nn.functional.relu"}, id="maximal-chain"),
        pytest.param("y = th.neuron.synchronize\n", set(), id="not-rooted-at-torch"),
        pytest.param("y = x.torch.neuron\n", set(), id="torch-as-a-member"),
    ],
)
def test_torch_names_are_the_maximal_chains(source: str, names: set[str]):
    assert torch_names(source) == names
