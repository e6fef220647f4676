"""validate's worker processes leave through `exit_process`: the status main() chose, user
output and atexit handlers kept, and no interpreter finalisation (where torch 2.13 can abort
with "terminate called without an active exception" after a device backward)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROGRAM = """
import atexit, sys
from cuda2neuron.validate._worker import exit_process

class Finalised:
    def __del__(self):
        sys.__stderr__.write("finalised\\n")

keep = Finalised()  # collected only during interpreter finalisation
atexit.register(lambda: sys.stdout.write("atexit ran\\n"))
sys.stdout.write("buffered output")  # no newline, no flush: still in Python's buffer
exit_process({code})
"""


@pytest.mark.parametrize("code", [0, 1, 2], ids=["pass", "fail", "error"])
def test_exit_keeps_status_output_and_atexit_but_skips_finalisation(code):
    proc = subprocess.run([sys.executable, "-c", PROGRAM.format(code=code)], capture_output=True, text=True,
                          timeout=120, env={"PATH": "", "PYTHONPATH": ":".join(sys.path)})
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == "buffered outputatexit ran\n"
    assert "finalised" not in proc.stderr  # os._exit: the interpreter never finalised
    assert proc.stderr == ""


def test_a_failing_atexit_handler_does_not_change_the_status():
    program = PROGRAM.format(code=0).replace("exit_process(0)", "atexit.register(lambda: 1 / 0)\nexit_process(0)")
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          env={"PATH": "", "PYTHONPATH": ":".join(sys.path)})
    assert proc.returncode == 0
    assert "ZeroDivisionError" in proc.stderr


def _raise(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:  # noqa: BLE001
        return caught


@pytest.mark.parametrize(("exc", "fragments"), [
    pytest.param(RuntimeError("boom"), ("RuntimeError: boom at ", "test_worker_exit.py:"), id="with-text"),
    pytest.param(AssertionError(), ("AssertionError (no message) at ", "test_worker_exit.py:", "(raise exc)"),
                 id="bare-assert-still-says-what-and-where"),
])
def test_crash_message_names_the_line(exc, fragments):
    from cuda2neuron.validate._worker import _crash_message

    message = _crash_message(_raise(exc))
    assert all(f in message for f in fragments), message
