"""A device value stored on an instance after construction (issue 38): the sweep counts what a
class's methods store on ``self`` among its fields, and CN102 keeps a literal stored on an
instance (``runner.device = "cuda"``, or ``self.device = "cuda"`` in a subclass's method) whose
class hands the attribute to a device reader that stays. The fixture project ``value_stores``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cuda2neuron.workspace import discover, project_facts
from workspace_helpers import port_both, write_tree

PROJECT = Path(__file__).resolve().parents[1] / "fixtures" / "projects" / "value_stores"

READER = (
    "import torch\n\ndef ready(try_device):\n    if try_device.startswith('cuda'):\n"
    "        return torch.cuda.is_available()\n    elif try_device == 'cpu':\n        return True\n"
    "    else:\n        raise ValueError(try_device)\n"
)

# (the class's text, whether the sweep records its `device`)
CLASSES = [
    pytest.param("class Run:\n    def __init__(self):\n        self.device = 'cpu'\n\n    def start(self):\n        ready(self.device)\n", True, id="set-in-the-constructor"),
    pytest.param("class Run:\n    def use(self, d):\n        self.device = d\n\n    def start(self):\n        ready(self.device)\n", True, id="set-in-another-method"),
    pytest.param("class Run:\n    def start(self):\n        ready(self.device)\n", False, id="never-stored-on-self"),
]


@pytest.mark.parametrize(("text", "recorded"), CLASSES)
def test_the_sweep_counts_what_methods_store_on_self(tmp_path, text, recorded):
    files = {"pkg/devices.py": READER, "pkg/run.py": "from .devices import ready\n\n" + text}
    facts = project_facts(discover([write_tree(tmp_path / "proj", files)]).files)
    assert (("pkg.run.Run", "device") in {(n, p) for n, p, _, _, _ in facts.device_readers}) is recorded, facts.device_readers




@pytest.fixture(scope="module")
def ports() -> dict[bool, dict[str, tuple[str, list]]]:
    return port_both(PROJECT)


# (file, the function, the text on its line holding `original`, safe port, --unsafe-fixes port,
#  text the held finding's message holds)
LINES = [
    pytest.param("checks/store_checks.py", "check_start_on_gpu", 'runner.device = "cuda"', '"cuda"', '"neuron"', "storelib/devices.py:9", id="stored-on-an-instance"),
    pytest.param("checks/store_checks.py", "use_gpu", 'self.device = "cuda"', '"cuda"', '"neuron"', "storelib/devices.py:9", id="stored-by-a-subclass-method"),
    pytest.param("storelib/devices.py", "ensure_device", 'startswith("cuda")', '"cuda"', '"neuron"', None, id="the-reader-moves-only-unsafe"),
    pytest.param("checks/store_checks.py", "check_tensor", 'device="cuda"', '"neuron"', '"neuron"', None, id="a-plain-tensor-moves"),
]


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize(("path", "function", "original", "safe", "unsafe_text", "where"), LINES)
def test_a_stored_value_moves_only_with_its_reader(ports, unsafe, path, function, original, safe, unsafe_text, where):
    source = (PROJECT / path).read_text()
    func = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == function)
    line = next(k for k in range(func.lineno, func.end_lineno + 1) if original in source.splitlines()[k - 1])
    text, findings = ports[unsafe][path]
    wanted = unsafe_text if unsafe else safe
    assert wanted in text.splitlines()[line - 1], text.splitlines()[line - 1]
    if where is not None and not unsafe:
        held = [f for f in findings if f.span.start_line == line and not f.applied]
        assert held and where in held[0].message, [(f.code, f.span.start_line, f.message) for f in findings]
