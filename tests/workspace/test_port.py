"""`migrate --out DIR`: never a file lost, the copy whole with its marker or not there at all."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path

import pytest

from cuda2neuron.workspace import PORT_MARKER
from cuda2neuron.workspace import _port

PORTED = 'import torch\nmodel = Net().to("neuron")\n'


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "train.py").write_text("import torch\nmodel = Net().cuda()\n")
    (root / "pkg" / "plain.py").write_text("x = 1\n")
    (root / "notes.txt").write_text("cuda notes\n")
    return root


def _tree(root: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_symlink():
            out[rel] = "-> " + os.readlink(p)
        elif p.is_file():
            out[rel] = p.read_bytes()
    return out


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".c2n-tmp"))


def test_a_fresh_copy_is_whole_and_records_every_file(src, tmp_path, run_cli):
    out = tmp_path / "port"
    code, _, _ = run_cli("migrate", str(src), "--out", str(out))
    assert code == 0
    marker = json.loads((out / PORT_MARKER).read_text())
    assert marker["version"] == 2 and marker["state"] == "complete"
    assert set(marker["files"]) == {"pkg/train.py", "pkg/plain.py", "notes.txt"}
    assert all(h.startswith("sha256:") for h in marker["files"].values())
    assert (out / "pkg" / "train.py").read_text() == PORTED
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(lambda s, t: [str(s), "--out", str(s)], "is the --out folder", id="dir-is-the-source"),
        pytest.param(lambda s, t: [str(s / "pkg"), "--out", str(s)], "inside the --out folder", id="source-inside-dir"),
        pytest.param(lambda s, t: [str(s), "--out", str(s / "notes.txt")], "this is a file", id="out-is-a-file"),
    ],
)
def test_an_out_that_would_overwrite_a_source_is_refused_before_any_write(src, tmp_path, run_cli, args, message):
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    before = _tree(src)
    code, _, err = run_cli("migrate", *args(src, tmp_path))
    assert code == 2 and message in err
    assert "Traceback" not in err
    assert _tree(src) == before


def test_an_out_symlink_is_refused_even_to_a_port(src, tmp_path, run_cli):
    run_cli("migrate", str(src), "--out", str(tmp_path / "port"))
    before = _tree(tmp_path / "port")
    (tmp_path / "link").symlink_to(tmp_path / "port")
    code, _, err = run_cli("migrate", str(src), "--out", str(tmp_path / "link"))
    assert code == 2 and "symlink" in err
    assert _tree(tmp_path / "port") == before


def test_a_port_from_an_older_version_is_never_replaced(src, tmp_path, run_cli):
    out = tmp_path / "port"
    out.mkdir()
    (out / PORT_MARKER).write_text(json.dumps({"source": [str(src)], "target": "neuron"}))
    (out / "mine.py").write_text("hand work\n")
    code, _, err = run_cli("migrate", str(src), "--out", str(out))
    assert code == 2 and "remove the folder yourself" in err
    assert (out / "mine.py").read_text() == "hand work\n"


def test_an_edited_marker_cannot_reach_outside_the_port(src, tmp_path, run_cli):
    out = tmp_path / "port"
    run_cli("migrate", str(src), "--out", str(out))
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    marker = json.loads((out / PORT_MARKER).read_text())
    marker["files"]["../victim.txt"] = "sha256:" + "0" * 64
    (out / PORT_MARKER).write_text(json.dumps(marker))
    code, _, err = run_cli("migrate", str(src), "--out", str(out))
    assert code == 2 and "does not record" in err
    assert victim.read_text() == "keep me\n"


@pytest.mark.parametrize("where", ["pending", "files", "dirs"])
def test_a_forged_marker_cannot_reach_outside_through_a_symlink(src, tmp_path, run_cli, where):
    """Issue 44: a marker in state "writing" with a pending "absent" entry under a symlinked
    folder of the port made the update delete a file outside it, exit 0."""
    out = tmp_path / "port"
    run_cli("migrate", str(src), "--out", str(out))
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("keep me\n")
    (out / "link").symlink_to(outside)
    marker = json.loads((out / PORT_MARKER).read_text())
    marker["files"]["link"] = "link:" + str(outside)  # the port's own link, as the tool records one
    marker["state"] = "writing"
    if where == "pending":
        marker["pending"] = {"link/victim.txt": ["absent"]}
    elif where == "files":
        marker["files"]["link/victim.txt"] = "sha256:" + "0" * 64
    else:
        marker["dirs"] = [*marker.get("dirs", []), "link"]
    (out / PORT_MARKER).write_text(json.dumps(marker))
    code, _, err = run_cli("migrate", str(src), "--out", str(out))
    assert code == 2 and str(out / PORT_MARKER) in err and str(out / "link") in err
    assert victim.read_text() == "keep me\n"


@pytest.mark.parametrize("text", [pytest.param("", id="empty"), pytest.param("{not json", id="garbled")])
def test_an_empty_or_garbled_marker_is_an_error_naming_it(src, tmp_path, run_cli, text):
    out = tmp_path / "port"
    run_cli("migrate", str(src), "--out", str(out))
    (out / PORT_MARKER).write_text(text)
    code, _, err = run_cli("migrate", str(src), "--out", str(out))
    assert code == 2 and str(out / PORT_MARKER) in err


def test_an_update_removes_only_what_the_tool_wrote_and_keeps_pycache(src, tmp_path, run_cli):
    out = tmp_path / "port"
    run_cli("migrate", str(src), "--out", str(out))
    (out / "pkg" / "__pycache__").mkdir()
    (out / "pkg" / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0pyc")
    (src / "pkg" / "plain.py").unlink()
    (src / "pkg" / "new.py").write_text("y = z.cuda()\n")
    code, _, _ = run_cli("migrate", str(src), "--out", str(out))
    assert code == 0
    assert not (out / "pkg" / "plain.py").exists()
    assert (out / "pkg" / "new.py").read_text() == 'y = z.to("neuron")\n'
    assert (out / "pkg" / "__pycache__" / "train.cpython-311.pyc").read_bytes() == b"\0pyc"
    assert json.loads((out / PORT_MARKER).read_text())["state"] == "complete"
    assert _leftovers(out) == []


def test_a_fifo_in_the_tree_is_skipped_and_reported(src, tmp_path, run_cli):
    os.mkfifo(src / "pkg" / "pipe")
    code, _, err = run_cli("migrate", str(src), "--out", str(tmp_path / "port"), "--report", str(tmp_path / "r.json"))
    assert code == 0
    assert not (tmp_path / "port" / "pkg" / "pipe").exists()
    skipped = json.loads((tmp_path / "r.json").read_text())["skipped"]
    assert any(s["path"].endswith("pipe") and "FIFO" in s["reason"] for s in skipped)


def _full_after(monkeypatch, n: int) -> None:
    """Every write after the first ``n`` files of a copy fails as on a full disk."""
    real = _port._put
    calls = [0]

    def put(dest, source, data):
        calls[0] += 1
        if calls[0] > n:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dest))
        return real(dest, source, data)

    monkeypatch.setattr(_port, "_put", put)


def test_a_full_disk_leaves_no_fresh_copy_at_all(src, tmp_path, run_cli, monkeypatch):
    _full_after(monkeypatch, 1)
    code, _, err = run_cli("migrate", str(src), "--out", str(tmp_path / "port"))
    assert code == 2 and "No space left on device" in err and "nothing was written" in err
    assert str(tmp_path / "port") in err and ".c2n-tmp" not in err  # the port's path, not the hidden one
    assert "Traceback" not in err
    assert not (tmp_path / "port").exists()
    assert _leftovers(tmp_path) == []


def test_a_full_disk_leaves_an_existing_port_as_it_was(src, tmp_path, run_cli, monkeypatch):
    out = tmp_path / "port"
    run_cli("migrate", str(src), "--out", str(out))
    before = _tree(out)
    (src / "pkg" / "plain.py").write_text("x = 2\n")
    _full_after(monkeypatch, 1)
    code, _, err = run_cli("migrate", str(src), "--out", str(out))
    assert code == 2 and "left as it was" in err
    assert _tree(out) == before
    assert _leftovers(out) == []


def test_an_update_killed_halfway_is_completed_by_the_next_run(src, tmp_path, run_cli, monkeypatch):
    out = tmp_path / "port"
    run_cli("migrate", str(src), "--out", str(out))
    (src / "pkg" / "plain.py").write_text("x = 2\n")
    (src / "notes.txt").write_text("new notes\n")
    real = os.replace
    moved = [0]

    def replace_then_die(a, b):
        if str(a).startswith(str(out / ".c2n-staging.")):
            moved[0] += 1
            if moved[0] == 2:
                raise KeyboardInterrupt  # stands in for kill -9 between two renames
        return real(a, b)

    monkeypatch.setattr(_port.os, "replace", replace_then_die)
    code, _, _ = run_cli("migrate", str(src), "--out", str(out))
    assert code == 130 and moved[0] == 2
    assert json.loads((out / PORT_MARKER).read_text())["state"] == "writing"
    monkeypatch.setattr(_port.os, "replace", real)
    code, _, err = run_cli("migrate", str(src), "--out", str(out))
    assert code == 0, err
    assert (out / "pkg" / "plain.py").read_text() == "x = 2\n"
    assert (out / "notes.txt").read_text() == "new notes\n"
    assert json.loads((out / PORT_MARKER).read_text())["state"] == "complete"


def test_a_stale_build_of_a_killed_run_is_removed_a_live_one_is_not(src, tmp_path, run_cli):
    stale = tmp_path / ".port.abcd1234.c2n-tmp"
    (stale / "pkg").mkdir(parents=True)
    (stale / "pkg" / "half.py").write_text("x")
    fresh = tmp_path / ".port.efgh5678.c2n-tmp"
    fresh.mkdir()
    old = time.time() - 3600
    os.utime(stale, (old, old))
    code, _, _ = run_cli("migrate", str(src), "--out", str(tmp_path / "port"))
    assert code == 0
    assert not stale.exists()
    assert fresh.exists()  # too young: it may be another run's


@pytest.mark.parametrize("text", [pytest.param("", id="empty"), pytest.param("[1,", id="garbled")])
def test_a_garbled_marker_never_hides_its_folder_from_check(tmp_path, run_cli, text):
    (tmp_path / "proj" / "sub").mkdir(parents=True)
    (tmp_path / "proj" / "sub" / "train.py").write_text("import torch\nmodel = Net().cuda()\n")
    (tmp_path / "proj" / "sub" / PORT_MARKER).write_text(text)
    code, _, err = run_cli("check", str(tmp_path / "proj"))
    assert code == 2 and str(tmp_path / "proj" / "sub" / PORT_MARKER) in err and "garbled" in err
