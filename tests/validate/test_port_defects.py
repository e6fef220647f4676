"""Which run failures are a defect of the port (FAIL, exit 1) and which stay an ERROR (exit 2)."""

from __future__ import annotations

import pytest

from cuda2neuron.validate._model import RunFailure, Verdict
from cuda2neuron.validate._runner import _port_defects
from cuda2neuron.validate._worker import _crash_site

DEVICE_MISMATCH = "RuntimeError: Expected all tensors to be on the same device at /x/torch/nn/parallel/distributed.py:9"


@pytest.mark.parametrize(
    ("failure", "ref_ok", "defect"),
    [
        pytest.param(RunFailure("port rank 1", "crash", DEVICE_MISMATCH, "", "train.py:42"), True, True,
                     id="port-raised-in-its-code"),
        pytest.param(RunFailure("port", "crash", DEVICE_MISMATCH, "", "train.py:42"), False, False,
                     id="original-failed-too"),
        pytest.param(RunFailure("port", "crash", DEVICE_MISMATCH, "", ""), True, False,
                     id="never-entered-the-port-code"),
        pytest.param(RunFailure("port", "crash", "NotImplementedError: Could not run 'aten::foo' with arguments",
                                "", "model.py:3"), True, False, id="emulator-gap"),
        pytest.param(RunFailure("port", "timeout", "no result", "", "train.py:1"), True, False, id="timeout"),
        pytest.param(RunFailure("reference", "crash", DEVICE_MISMATCH, "", "train.py:42"), True, False,
                     id="the-original-crashing"),
        pytest.param(RunFailure("golden", "crash", DEVICE_MISMATCH, "", "train.py:42"), True, False, id="golden"),
    ],
)
def test_port_defects(failure, ref_ok, defect):
    kept, crashes = _port_defects([failure], ref_ok)
    assert [f.kind for f in kept] == ["defect" if defect else failure.kind]
    assert [c.verdict for c in crashes] == ([Verdict.FAIL] if defect else [])
    if defect:
        assert crashes[0].key == "rank1/crash" and "at train.py:42" in crashes[0].reason
        assert "/x/torch" not in crashes[0].reason  # the port line, not torch's


def _raise_in(tree, message: str) -> BaseException:
    script = tree / "train.py"
    script.write_text(f"def go():\n    raise RuntimeError({message!r})\n")
    namespace: dict = {}
    exec(compile(script.read_text(), str(script), "exec"), namespace)
    try:
        namespace["go"]()
    except RuntimeError as exc:
        return exc
    raise AssertionError("did not raise")


@pytest.mark.parametrize(
    ("message", "site"),
    [
        pytest.param("boom", {"user_frame": "train.py:2", "harness": False, "crash_path": [("train.py", "go", 2)]},
                     id="user-code"),
        pytest.param("validate: expected the reference's initial weights",
                     {"user_frame": "train.py:2", "harness": True, "crash_path": [("train.py", "go", 2)]},
                     id="validate-own-error"),
    ],
)
def test_crash_site(tmp_path, message, site):
    assert _crash_site(_raise_in(tmp_path, message), str(tmp_path)) == site


def test_crash_site_outside_the_tree(tmp_path):
    exc = _raise_in(tmp_path, "boom")
    assert _crash_site(exc, str(tmp_path / "elsewhere"))["user_frame"] is None


def test_crash_path_names_the_classes_the_raising_line_uses(tmp_path):
    """A scaler wrapper defined in another module, whose state the loop reads: its class is on
    the crash's path although none of its frames is on the traceback (it returned {} fine)."""
    (tmp_path / "scaler.py").write_text("class LossScaler:\n    def state_dict(self):\n        return {}\n")
    (tmp_path / "train.py").write_text("def log(loss_scaler):\n    return loss_scaler.state_dict()['scale']\n")
    import importlib.util
    import sys

    mods = {}
    for name in ("scaler", "train"):
        spec = importlib.util.spec_from_file_location(f"_c2n_test_{name}", tmp_path / f"{name}.py")
        mods[name] = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mods[name]
        spec.loader.exec_module(mods[name])
    try:
        mods["train"].log(mods["scaler"].LossScaler())
    except KeyError as exc:
        site = _crash_site(exc, str(tmp_path))
    else:
        raise AssertionError("did not raise")
    assert site["crash_path"] == [("train.py", "log", 2), ("scaler.py", "LossScaler", 0)]
