"""Port lines migrate did not write: the original is migrated again and diffed with the port."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda2neuron.validate._hand_edits import hand_edits

ORIGINAL = """import torch

def build():
    model = Net().cuda()
    model.eval()
    x = torch.randn(4, 8, device="cuda")
    torch.backends.cudnn.benchmark = True
    return model, x
"""
MIGRATED = ORIGINAL.replace(".cuda()", '.to("neuron")').replace('device="cuda"', 'device="neuron"')
UNSAFE = MIGRATED.replace("    torch.backends.cudnn.benchmark = True\n", "")

# (id, port text of entry.py, expected (line, kind, text) edits)
CASES = [
    ("untouched-migrate-output", MIGRATED, []),
    ("written-with-unsafe-fixes", UNSAFE, []),
    ("line-changed", MIGRATED.replace("randn(4, 8", "randn(4, 9"), [(6, "changed", 'x = torch.randn(4, 9, device="neuron")')]),
    ("line-removed", MIGRATED.replace("    model.eval()\n", ""), [(5, "removed", "model.eval()")]),
    ("line-added", MIGRATED.replace("    model.eval()\n", "    model.eval()\n    model.half()\n"), [(6, "added", "model.half()")]),
    ("migrate-edit-reverted-by-hand", MIGRATED.replace('.to("neuron")', ".cuda()"), [(4, "changed", "model = Net().cuda()")]),
]


def _trees(tmp_path: Path, port_text: str, marker: dict | None = None) -> tuple[Path, Path]:
    original, port = tmp_path / "original", tmp_path / "port"
    for tree, text in ((original, ORIGINAL), (port, port_text)):
        (tree / "pkg").mkdir(parents=True)
        (tree / "entry.py").write_text(text)
        (tree / "pkg" / "util.py").write_text("def f():\n    return 'cuda'\n")
    if marker is not None:
        (port / ".cuda2neuron-port.json").write_text(json.dumps(marker))
    return original, port


@pytest.mark.parametrize(("port_text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_lines_migrate_did_not_write_are_named(tmp_path, port_text, expected):
    original, port = _trees(tmp_path, port_text)
    found = hand_edits(original, port)
    assert [(h.path, h.line, h.kind, h.text) for h in found] == [("entry.py", *e) for e in expected]


def test_the_target_migrate_wrote_is_read_from_the_port_marker(tmp_path):
    from cuda2neuron.core import Config
    from cuda2neuron.workspace import fix_source

    accelerator, _ = fix_source(ORIGINAL, "entry.py", Config().with_overrides(target="accelerator"))
    original, port = _trees(tmp_path, accelerator, marker={"source": [], "target": "accelerator"})
    assert hand_edits(original, port) == ()
    (port / ".cuda2neuron-port.json").unlink()
    assert hand_edits(original, port)  # judged against the default target, the port differs


def test_files_named_first_are_searched_first_and_the_list_is_capped(tmp_path):
    original, port = _trees(tmp_path, MIGRATED.replace("model.eval()", "model.train()"))
    (port / "pkg" / "util.py").write_text("def f():\n    return 'cuda:1'\n")
    assert [h.path for h in hand_edits(original, port)] == ["entry.py", "pkg/util.py"]
    assert [h.path for h in hand_edits(original, port, first=["pkg/util.py"])] == ["pkg/util.py", "entry.py"]
    assert [h.path for h in hand_edits(original, port, first=["pkg/util.py"], limit=1)] == ["pkg/util.py"]


def test_files_only_in_one_tree_and_unparsable_files_are_skipped(tmp_path):
    original, port = _trees(tmp_path, MIGRATED)
    (port / "extra.py").write_text("x = 1\n")
    (original / "broken.py").write_text("def (:\n")
    (port / "broken.py").write_text("def (:\n")
    assert hand_edits(original, port) == ()
