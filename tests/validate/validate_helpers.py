from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROJECTS = Path(__file__).parents[1] / "fixtures" / "projects"
REPO = Path(__file__).resolve().parents[2]


def port_device() -> str:
    """"neuron" once the emulated device is in this build; "cpu" (test-only redirect) before.

    Override with CUDA2NEURON_VALIDATE_TEST_PORT_DEVICE.
    """
    forced = os.environ.get("CUDA2NEURON_VALIDATE_TEST_PORT_DEVICE")
    if forced:
        return forced
    try:
        from cuda2neuron import backend
    except ImportError:
        return "cpu"
    if not hasattr(backend, "activate"):
        return "cpu"
    try:
        if not backend.is_available():
            return "cpu"
    except Exception:  # noqa: BLE001 - no compiler etc.: fall back to the redirect
        return "cpu"
    # The emulator must really train a layer (it is built on first use, in a subprocess so this
    # test process stays free of the PrivateUse1 registration).
    # Trap: with torch 2.13 a process that ran backward on a device with its own autograd thread
    # may abort at exit ("terminate called without an active exception", pytorch/pytorch#180701:
    # the device thread can drop the last reference to the context `_engine_run_backward` stashes
    # in TLS while the interpreter finalises). Judging the probe by its exit status made
    # PORT_DEVICE flip between "neuron" and "cpu" run to run; it leaves through os._exit instead.
    probe = ("import os, torch, cuda2neuron.backend as b; b.activate(); m = torch.nn.Linear(4, 2).to('neuron');"
             "m(torch.randn(3, 4, device='neuron')).sum().backward(); print('ok', flush=True); os._exit(0)")
    try:
        proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return "cpu"
    return "neuron" if proc.returncode == 0 and proc.stdout.strip().endswith("ok") else "cpu"


PORT_DEVICE = port_device()
needs_emulator = pytest.mark.skipif(PORT_DEVICE != "neuron", reason="needs the emulated neuron device")


def copy_with_patches(src: Path, dst: Path, patches: tuple[tuple[str, str, str], ...]) -> Path:
    """Copy a tree and apply (file, old, new) replacements; each `old` must occur exactly once."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    for rel, old, new in patches:
        path = dst / rel
        text = path.read_text()
        assert text.count(old) == 1, f"patch target not unique in {rel}: {old!r}"
        path.write_text(text.replace(old, new))
    return dst


def assert_correct_port(result) -> None:
    """Every tensor PASSes and nothing failed; a WARN may only come from the residency audit
    (e.g. float64 ops inside torch's own GradScaler on the device)."""
    from cuda2neuron.validate import Verdict

    problems = [(c.key, c.reason) for c in result.comparisons if c.verdict is not Verdict.PASS]
    assert not result.failures, result.failures
    assert not problems, problems[:5]
    assert result.verdict in (Verdict.PASS, Verdict.WARN)
    if result.verdict is Verdict.WARN:
        assert result.audit is not None and result.audit.verdict is Verdict.WARN, result.audit
        assert all("float64" in r or "complex" in r for r in result.audit.reasons), result.audit.reasons
    assert result.exit_code == 0


def assert_no_emulator_gap(result) -> None:
    """No run failed on a gap of the emulated device (an aten op it does not implement, weights
    untied by moving a module to neuron): such a gap is a backend bug to fix, and in a seeded-defect
    test it would pass for the wrong reason. A gap known to be missing gets an explicit
    ``pytest.mark.xfail(strict=True, reason=<the op>)`` on its test instead."""
    gaps = [f.message.split(" with arguments")[0] for f in result.failures
            if f.role == "port" and "NotImplementedError: Could not run 'aten::" in f.message]
    gaps += [n[:120] for n in result.notes
             if n.startswith("weights shared in the original are separate parameters in the port")]
    assert not gaps, f"emulator gap: {gaps}"


def eval_in_fresh_interpreter(setup: list[str], cases: dict[str, tuple[str, object]]) -> dict[str, dict]:
    """Run ``setup`` (lines of Python) in a new interpreter, then evaluate each case's expression
    there: ``{name: {"value": ...}}``, or ``{"error": "Type: message"}`` where it raised. A fresh
    process because the shims patch torch for good; one process for every case."""
    program = "\n".join([
        *setup,
        "import json as _json",
        "out = {}",
        f"for name, (expr, _) in {cases!r}.items():",
        "    try:",
        "        out[name] = {'value': eval(expr)}",
        "    except Exception as exc:",
        "        out[name] = {'error': f'{type(exc).__name__}: {exc}'}",
        "print(_json.dumps(out))",
    ])
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])
