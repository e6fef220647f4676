"""A "cuda" that names a slot of the program's own, handed to a method whose test picks the slot
(issue 38: a value moved while its other readers stay). ColossalAI's
``non_model_data_list(self, device_type)`` answered ``if device_type == "cuda": return
self._non_model_data_cuda_list ... else: raise TypeError``; CN103 moved the test while the
callers' positional ``"cuda"`` (through methods of no known type) stayed, and the default path
raised. The fixture project ``value_labels`` carries the case, a hop and a keyword caller.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda2neuron.workspace import discover, project_facts
from workspace_helpers import port_both, write_tree

PROJECT = Path(__file__).resolve().parents[1] / "fixtures" / "projects" / "value_labels"

READER = (
    "class S:\n    def __init__(self):\n        self._g = []\n        self._c = []\n\n"
    "    def pick(self, kind):\n        if kind == 'cuda':\n            return self._g\n"
    "        elif kind == 'cpu':\n            return self._c\n        else:\n            raise TypeError(kind)\n"
)

# (files, readers recorded, readers not recorded)
SWEEP = [
    pytest.param({"pkg/s.py": READER, "pkg/use.py": "def f(s):\n    return s.pick('cuda')\n"},
                 ["pkg.s.S.pick"], (), id="a-positional-cuda-through-an-object-of-no-known-type"),
    pytest.param({"pkg/s.py": READER, "pkg/use.py": "class U:\n    def g(self, s, kind):\n        return s.pick(kind)\n\n"
                  "def h(u, s):\n    return u.g(s, 'cuda')\n"},
                 ["pkg.s.S.pick", "pkg.use.U.g"], (), id="a-parameter-handed-on-one-call-away"),
    pytest.param({"pkg/s.py": READER, "pkg/use.py": "def f(s):\n    return s.pick(kind='cuda')\n"},
                 [], ("pkg.s.S.pick",), id="a-keyword-caller-moves-with-the-test"),
    pytest.param({"pkg/s.py": READER, "pkg/use.py": "class U:\n    def pick(self, kind):\n        pass\n\n    def f(self):\n        return self.pick('cuda')\n"},
                 [], ("pkg.s.S.pick",), id="a-self-call-resolves-in-its-file"),
    pytest.param({"pkg/s.py": READER, "pkg/use.py": "def f(s, kind):\n    return s.pick(kind)\n"},
                 [], ("pkg.s.S.pick", "pkg.use.f"), id="a-parameter-no-caller-fills"),
    pytest.param({"pkg/s.py": READER.replace("return self._g", "return self.run()"), "pkg/use.py": "def f(s):\n    return s.pick('cuda')\n"},
                 [], ("pkg.s.S.pick",), id="a-branch-that-calls-stays-anyway"),
    pytest.param({"pkg/s.py": READER, "pkg/use.py": "def f(s):\n    return s.pick('cpu')\n"},
                 [], ("pkg.s.S.pick",), id="no-caller-hands-cuda"),
]


@pytest.mark.parametrize(("files", "expected", "plain"), SWEEP)
def test_the_sweep_records_a_reader_its_callers_hand_cuda(tmp_path, files, expected, plain):
    facts = project_facts(discover([write_tree(tmp_path / "proj", files)]).files)
    found = {row[0] for row in facts.label_readers}
    assert set(expected) <= found, facts.label_readers
    assert not found & set(plain), facts.label_readers


@pytest.fixture(scope="module")
def ports() -> dict[bool, dict[str, tuple[str, list]]]:
    return port_both(PROJECT)


# (file, line, what the port has there in both runs, text the held finding's message holds)
LINES = [
    pytest.param("memlib/stats.py", 10, 'if device_kind == "cuda":', ("memlib/planner.py:24", "memlib/stats.py:10"), id="the-reader-keeps-its-test"),
    pytest.param("memlib/planner.py", 17, 'stats.peaks(device_kind="cuda")', None, id="a-keyword-caller-keeps-its-word"),
    pytest.param("memlib/planner.py", 14, 'self.next_peak("cuda")', ("memlib/stats.py:10",), id="the-caller-one-call-away-keeps-its-word"),
    pytest.param("memlib/stats.py", 18, 'if device_kind == "neuron":', None, id="a-reader-no-caller-hands-cuda-moves"),
]


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize(("path", "line", "wanted", "where"), LINES)
def test_a_reader_moves_only_with_its_callers_words(ports, unsafe, path, line, wanted, where):
    text, findings = ports[unsafe][path]
    assert wanted in text.splitlines()[line - 1], text.splitlines()[line - 1]
    if where is not None:
        held = [f for f in findings if f.span.start_line == line and not f.applied and f.code in ("CN102", "CN103")]
        assert held and all(w in held[0].message for w in where), [(f.code, f.span.start_line, f.message) for f in findings]
