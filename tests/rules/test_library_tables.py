"""The library tables of cuda_kernels.toml (issue 29) reach their rules row by row.

Every Trainer optimizer name of ``[trainer_optim.*]`` is reported where it sets the option, with
the fix safety its row declares (safe only where the torch optimizer does the same update), and
every class of ``[quantization_config.*]`` is reported when built from transformers or diffusers.
A malformed row fails at load with the table's name. So for the CUDA probes of
``rules/cuda_api/library_probes.toml`` (CN213): each is rewritten to its row's neuron call, a
name the rule declares it emits (so the emulated device is checked to have it).
"""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config, Safety
from cuda2neuron.workspace import fix_source, lint_source

from cuda2neuron.rules._shared import kernels
from cuda2neuron.rules._shared.kernels import KernelTableError, quantization_configs, trainer_optimizers


@pytest.mark.parametrize("row", list(trainer_optimizers().values()), ids=lambda r: r.name)
def test_every_optimizer_name_is_reported_with_its_declared_safety(row):
    source = f'from transformers import TrainingArguments\nargs = TrainingArguments(output_dir="o", optim="{row.name}")\n'
    findings = [f for f in lint_source(source, "t.py", Config()) if f.code == "CN626"]
    assert len(findings) == 1, findings
    fix = findings[0].fix
    if not row.instead:
        assert fix is None
        return
    assert fix is not None and fix.safety is (Safety.SAFE if row.same_update else Safety.UNSAFE)
    if row.same_update:
        out, _ = fix_source(source, "t.py", Config())
        assert f'optim="{row.instead}"' in out


@pytest.mark.parametrize("name", sorted(quantization_configs()))
@pytest.mark.parametrize("library", ["transformers", "diffusers"])
def test_every_quantization_config_is_reported(name, library):
    source = f"from {library} import {name}\nq = {name}()\n"
    assert [f.code for f in lint_source(source, "t.py", Config())] == ["CN625"]


def test_a_malformed_row_names_the_table(monkeypatch):
    monkeypatch.setattr(kernels, "_table", lambda: {"trainer_optim": {"x": {"package": "p", "what": "w"}}})
    trainer_optimizers.cache_clear()
    try:
        with pytest.raises(KernelTableError, match=r"cuda_kernels.toml: \[trainer_optim.x\]"):
            trainer_optimizers()
    finally:
        trainer_optimizers.cache_clear()


def _probe_rows():
    from cuda2neuron.rules.cuda_api import cn213_library_cuda_probe as cn213

    return cn213, cn213._table()


@pytest.mark.parametrize("qualified", sorted(_probe_rows()[1]))
def test_every_library_probe_is_rewritten_to_its_neuron_call(qualified):
    cn213, rows = _probe_rows()
    row = rows[qualified]
    assert {row.neuron, row.accelerator} - {None} <= set(cn213.LibraryCudaProbe.emits)
    module, _, name = qualified.rpartition(".")
    source = f"from {module} import {name}\nok = {name}()\n"
    assert [f.code for f in lint_source(source, "t.py", Config())] == ["CN213"]
    out, _ = fix_source(source, "t.py", Config())
    assert f"ok = {row.neuron}()" in out, out


def test_a_malformed_probe_row_fails_naming_the_table(tmp_path, monkeypatch):
    cn213, _ = _probe_rows()
    table = tmp_path / "library_probes.toml"
    table.write_text('[probe."lib.is_cuda_ok"]\nasks = "whether CUDA is available"\n', encoding="utf-8")
    monkeypatch.setattr(cn213, "TABLE", table)
    cn213._table.cache_clear()
    try:
        with pytest.raises(cn213.ProbeTableError, match=r"library_probes.toml: \[probe.\"lib.is_cuda_ok\"\] needs asks and neuron"):
            cn213._table()
    finally:
        cn213._table.cache_clear()
