"""End to end on the hand-written `mlp` pair: correct ports pass, seeded defects are flagged,
and every way a run can fail is an ERROR with the failing run named."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda2neuron.validate import ValidateRequest, Verdict, run_validation

from validate_helpers import PORT_DEVICE, assert_correct_port, copy_with_patches


def validate(original: Path, port: Path, **kw):
    kw.setdefault("port_device", PORT_DEVICE)
    if "entry" in kw:
        kw.setdefault("mode", "entry")
    else:
        kw.setdefault("mode", "script")
    return run_validation(ValidateRequest(original=original, port=port, **kw))


@pytest.fixture(scope="module")
def entry_pass(mlp):
    return validate(mlp / "original", mlp / "port", entry="entry:build")


@pytest.fixture(scope="module")
def script_pass(mlp):
    return validate(mlp / "original", mlp / "port", script="train.py", args=("--steps", "5", "--amp"))


def test_correct_port_passes_in_entry_mode(entry_pass):
    r = entry_pass
    assert_correct_port(r)
    assert r.golden_used
    kinds = {c.kind for c in r.comparisons}
    assert kinds == {"forward", "output", "loss", "grad", "param"}
    # 3 optimizer steps (the default), each with the gradients of all 12 parameters (inp, 2 x (fc, norm), head)
    assert len([c for c in r.comparisons if c.kind == "grad"]) == 3 * 12


def test_correct_port_passes_in_script_mode_with_amp(script_pass):
    r = script_pass
    assert_correct_port(r)
    steps = {c.step for c in r.comparisons if c.kind == "grad"}
    assert steps == {0, 1, 2}  # stopped after --steps (default 3) although the script wanted 5
    assert any(c.kind == "loss" for c in r.comparisons)
    # The parameters after the last step, as in entry mode: the forward before the stop does not
    # show every optimizer's last update (a GAN's G steps after D's backward).
    finals = {c.key for c in r.comparisons if c.kind == "param" and c.key.startswith("final/param/0:")}
    assert len(finals) == 12, sorted(finals)


# Correct ports written differently from the mechanical rewrite must pass too.
VARIANTS = [
    # bf16 needs no loss scaling: the recommended port disables the scaler the fp16 original used
    ("bf16-port-disables-grad-scaler", ("train.py", 'GradScaler("neuron", enabled=args.amp)',
                                        'GradScaler("neuron", enabled=False)')),
]


@pytest.mark.parametrize("patch", [v[1] for v in VARIANTS], ids=[v[0] for v in VARIANTS])
def test_correct_variant_passes(mlp, tmp_path, patch):
    port = copy_with_patches(mlp / "port", tmp_path / "port", (patch,))
    r = validate(mlp / "original", port, script="train.py", args=("--steps", "3", "--amp"))
    assert_correct_port(r)


# Seeded defects: (id, mode kwargs, patches to the correct port, expected first divergent key
# prefix or None, needs the emulator). Each must come out FAIL or ERROR (a crash the original
# does not have) — never PASS.
ENTRY = {"entry": "entry:build"}
SCRIPT = {"script": "train.py", "args": ("--steps", "3")}
SCRIPT_AMP = {"script": "train.py", "args": ("--steps", "3", "--amp")}
DEFECTS = [
    ("op-changed", ENTRY, (("model.py", "F.gelu(", "F.relu("),), "s0/fwd/0:blocks.0.drop", False),
    ("dropped-model-eval", ENTRY, (("entry.py", "    model.eval()\n", ""),), "s0/fwd/0:blocks.0.drop", False),
    ("global-dtype-change", ENTRY, (("entry.py", "def build():\n", "def build():\n    torch.set_default_dtype(torch.float64)\n"),),
     "s0/fwd/0:inp", False),
    ("missing-zero-grad", SCRIPT, (("train.py", "        opt.zero_grad(set_to_none=True)\n", ""),), "s1/grad/", False),
    ("autocast-dropped", SCRIPT_AMP, (("train.py", "enabled=args.amp):", "enabled=False):"),), "s0/fwd/0:inp", False),
    ("unscale-before-clipping-dropped", SCRIPT_AMP, (("train.py", "        scaler.unscale_(opt)\n", ""),), "s0/grad/", False),
    ("tensor-left-on-cpu", ENTRY, (("model.py", 'torch.ones(x.shape[-1]).to("neuron")', "torch.ones(x.shape[-1])"),),
     None, True),
    ("wrong-device-index", ENTRY, (("entry.py", '    model.eval()\n    x = torch.randn(4, 8, device="neuron")', '    model.eval()\n    x = torch.randn(4, 8, device="neuron:1")'),),
     None, True),
]


@pytest.mark.parametrize(("mode", "patches", "first", "emulator"), [d[1:] for d in DEFECTS], ids=[d[0] for d in DEFECTS])
def test_seeded_defect_is_flagged(mlp, tmp_path, mode, patches, first, emulator):
    if emulator and PORT_DEVICE != "neuron":
        pytest.skip("needs the emulated neuron device: on the CPU redirect the defect is invisible")
    port = copy_with_patches(mlp / "port", tmp_path / "port", patches)
    # No golden: each defect is gross against the reference, and the suite runs on 2 cores.
    r = validate(mlp / "original", port, golden=False, **mode)
    assert r.verdict in (Verdict.FAIL, Verdict.ERROR)
    if r.verdict is Verdict.ERROR:
        assert [f.role for f in r.failures] == ["port"]
        assert "device" in r.failures[0].message.lower()
    if first is not None:
        assert r.verdict is Verdict.FAIL and r.exit_code == 1
        assert r.divergence is not None and r.divergence.key.removeprefix("logic/").startswith(first), r.divergence


def test_divergence_names_the_responsible_migrate_edit(mlp, tmp_path):
    """A wrong rewrite of the line CN101 ported: the finding at that line in the original is named."""
    port = copy_with_patches(mlp / "port", tmp_path / "port",
                             (("model.py", 'torch.ones(x.shape[-1]).to("neuron")', 'torch.full((x.shape[-1],), 2.0).to("neuron")'),))
    r = validate(mlp / "original", port, entry="entry:build", golden=False)
    d = r.divergence
    assert d is not None and d.module_path == "0:blocks.0" and d.module_class == "Block"
    line = next(i for i, text in enumerate((mlp / "original" / "model.py").read_text().splitlines(), 1) if ".cuda()" in text)
    assert [(f.code, f.path, f.line) for f in d.findings] == [("CN101", "model.py", line)]


def test_divergence_names_module_class_and_source(mlp, tmp_path):
    port = copy_with_patches(mlp / "port", tmp_path / "port", (("model.py", "F.gelu(", "F.relu("),))
    r = validate(mlp / "original", port, entry="entry:build", golden=False)
    d = r.divergence
    assert d is not None and d.module_path == "0:blocks.0.drop" and d.module_class == "Dropout"
    # nn.Dropout has no source of ours: the walk goes up to the user's Block class in model.py
    assert d.class_file == "model.py"
    text = (mlp / "original" / "model.py").read_text().splitlines()
    assert text[d.class_lines[0] - 1].startswith("class Block")
    # the edit made by hand after migrate is named by its line in the port, the diverging class's
    # file first (the fixture port has other hand edits: train.py keeps its GradScaler enabled)
    line = next(i for i, t in enumerate((port / "model.py").read_text().splitlines(), 1) if "F.relu(" in t)
    assert (d.hand_edits[0].path, d.hand_edits[0].line, d.hand_edits[0].kind) == ("model.py", line, "changed")


def test_divergence_in_a_class_without_migrate_edits_shows_that_class_and_the_hand_edit(mlp, tmp_path):
    """The source shown is the nearest user class of the diverging module, even when the migrate
    findings listed come from an enclosing class; a dropped line outside the model is named."""
    scaled = ("model.py", "class Block(nn.Module):",
              "class Scaled(nn.Module):\n    def forward(self, x):\n        return x * 0.5\n\n\nclass Block(nn.Module):")
    use = ("model.py", "self.drop = nn.Dropout(dropout)", "self.drop = Scaled()")
    original = copy_with_patches(mlp / "original", tmp_path / "original", (scaled, use))
    port = copy_with_patches(mlp / "port", tmp_path / "port", (scaled, use, ("model.py", "x * 0.5", "x * 0.25")))
    r = validate(original, port, entry="entry:build", golden=False)
    d = r.divergence
    assert d is not None and d.module_path == "0:blocks.0.drop" and d.module_class == "Scaled", d
    text = (original / "model.py").read_text().splitlines()
    assert text[d.class_lines[0] - 1].startswith("class Scaled")
    assert [f.code for f in d.findings] == ["CN101"] and d.findings_scope.startswith("class Block")
    assert (d.hand_edits[0].path, d.hand_edits[0].line, d.hand_edits[0].text) == ("model.py", 12, "return x * 0.25")


def test_a_dropped_line_in_the_entry_is_named_as_a_hand_edit(mlp, tmp_path):
    port = copy_with_patches(mlp / "port", tmp_path / "port", (("entry.py", "    model.eval()\n", ""),))
    r = validate(mlp / "original", port, entry="entry:build", golden=False)
    assert r.divergence is not None
    line = next(i for i, t in enumerate((port / "entry.py").read_text().splitlines(), 1) if "torch.randn" in t)
    assert ("entry.py", line, "removed", "model.eval()") in [(h.path, h.line, h.kind, h.text) for h in r.divergence.hand_edits]


# Errors: (id, patches to original, patches to port, request kwargs, failing role, kind)
ERRORS = [
    ("original-crashes", (("entry.py", "def build():\n", "def build():\n    raise ValueError('broken original')\n"),), (),
     ENTRY, "reference", "crash"),
    ("entry-not-found", (), (), {"entry": "nope:build"}, "reference", "entry-not-found"),
    ("entry-attr-not-found", (), (), {"entry": "entry:nope"}, "reference", "entry-not-found"),
    ("script-without-training-loop", (), (), {"script": "infer.py"}, "reference", "no-training-loop"),
    ("port-hangs", (), (("entry.py", "def build():\n", "def build():\n    import time; time.sleep(3600)\n"),),
     {**ENTRY, "timeout": 12.0}, "port", "timeout"),
]


# The hang waits out its 12 s timeout (the reference needs a few seconds of it on a loaded machine).
@pytest.mark.parametrize(("orig_patches", "port_patches", "kw", "role", "kind"),
                         [pytest.param(*e[1:], id=e[0], marks=[pytest.mark.slow] if e[0] == "port-hangs" else [])
                          for e in ERRORS])
def test_errors(mlp, tmp_path, orig_patches, port_patches, kw, role, kind):
    original = copy_with_patches(mlp / "original", tmp_path / "original", orig_patches)
    port = copy_with_patches(mlp / "port", tmp_path / "port", port_patches)
    r = validate(original, port, golden=False, **kw)
    assert r.verdict is Verdict.ERROR and r.exit_code == 2
    failure = next(f for f in r.failures if f.role == role)
    assert failure.kind == kind, failure
    if kind == "crash":
        assert "ValueError: broken" in failure.message
        assert "entry.py" in failure.traceback  # the user's own traceback is shown


def test_port_raising_in_its_own_code_is_a_fail_naming_the_line(mlp, tmp_path):
    """The original ran through, the port's code raised: a defect of the port (exit 1), not an error
    of validate — the failure keeps its traceback and names the port line."""
    port = copy_with_patches(mlp / "port", tmp_path / "port", (
        ("entry.py", "def build():\n", "def build():\n    raise ValueError('broken port')\n"),))
    r = validate(mlp / "original", port, golden=False, **ENTRY)
    assert r.verdict is Verdict.FAIL and r.exit_code == 1, (r.verdict, r.failures)
    [failure] = r.failures
    line = next(i for i, t in enumerate((port / "entry.py").read_text().splitlines(), 1) if "broken port" in t)
    assert (failure.role, failure.kind, failure.location) == ("port", "defect", f"entry.py:{line}"), failure
    assert "ValueError: broken port" in failure.message and "entry.py" in failure.traceback
    crash = [c for c in r.comparisons if c.kind == "crash"]
    assert [c.verdict for c in crash] == [Verdict.FAIL] and f"entry.py:{line}" in crash[0].reason, crash
    assert r.divergence is not None and r.divergence.key == "crash"
    assert ("entry.py", line, "added") in [(h.path, h.line, h.kind) for h in r.divergence.hand_edits]


def test_model_compute_left_on_cpu_is_a_residency_finding(mlp, tmp_path):
    """Values stay right (the port moves the result back), but the work ran on the host."""
    if PORT_DEVICE != "neuron":
        pytest.skip("needs the emulated neuron device (op accounting)")
    port = copy_with_patches(mlp / "port", tmp_path / "port", (
        ("model.py", "        return x + self.drop(F.gelu(self.norm(self.fc(x)))) * scale",
         "        h = self.drop(F.gelu(self.norm(self.fc(x))))\n"
         "        return (x.cpu() + h.cpu() * scale.cpu()).to(x.device)"),
    ))
    r = validate(mlp / "original", port, entry="entry:build", golden=False)
    assert r.audit is not None and r.audit.available
    assert r.audit.verdict in (Verdict.WARN, Verdict.FAIL)
    assert any("model.py" in reason for reason in r.audit.reasons)
    assert r.verdict in (Verdict.WARN, Verdict.FAIL)
    # No tensor diverged, so the audit itself names the lines edited after migrate.
    assert r.divergence is None
    line = next(i for i, t in enumerate((port / "model.py").read_text().splitlines(), 1) if "x.cpu()" in t)
    assert ("model.py", line) in [(h.path, h.line) for h in r.audit.hand_edits]
    assert r.audit.hand_edits[0].path == "model.py"  # where the CPU work ran is searched first
