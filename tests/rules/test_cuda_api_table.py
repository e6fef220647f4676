"""Every row of rules/cuda_api/cuda_api.toml checked in five import shapes (plain, aliased, from-imports) on both targets.

The expected output is derived from the row itself (torch.cuda.X -> torch.neuron.X, or the
accelerator name valid for min-torch), so a new row is tested the moment it is added.
"""

from __future__ import annotations

import importlib
from dataclasses import replace

import pytest

from cuda2neuron.core import Config, Settings
from cuda2neuron.workspace import fix_source, lint_source
from cuda2neuron.rules.cuda_api._helpers import ApiMove, accelerator_name_for, load_moves

ROWS = sorted({move.name: move for move in load_moves().values()}.values(), key=lambda m: m.name)
MIN_TORCH = (2, 9)

# (id, source template, alias the output reuses or None when `import torch` is added)
SHAPES = [
    ("plain", "import torch\nf = torch.cuda.{name}\n", "torch"),
    ("alias", "import torch as th\nf = th.cuda.{name}\n", "th"),
    ("from-name", "from torch.cuda import {name}\nf = {name}\n", None),
    ("from-module", "from torch import cuda\nf = cuda.{name}\n", None),
    ("submodule-alias", "import torch.cuda as tc\nf = tc.{name}\n", None),
]


def _config(target: str, unsafe: bool = False, min_torch=MIN_TORCH) -> Config:
    settings = replace(Settings(target=target), min_torch=min_torch)
    return Config(select=("CN201",), unsafe_fixes=unsafe, settings=settings)


def _expected(source: str, alias: str | None, qualified: str) -> str:
    """The output for ``source`` (one import line, then ``f = <reference>``)."""
    first_line = source.split("\n")[0]
    if alias is not None:
        head, _, rest = qualified.partition(".")
        return f"{first_line}\nf = {alias}.{rest}\n"
    # `import torch.cuda as tc` binds no name `torch`: the rewrite asks for `import torch`, and
    # the aliased import, now unused, is removed.
    return f"import torch\n\nf = {qualified}\n"


def _params(target: str):
    for move in ROWS:
        for shape, template, alias in SHAPES:
            yield pytest.param(move, template, alias, id=f"{target}-{move.name}-{shape}")


@pytest.mark.parametrize(("move", "template", "alias"), list(_params("neuron")))
def test_neuron_target_moves_every_row(move: ApiMove, template: str, alias: str | None):
    source = template.format(name=move.name)
    fixed, findings = fix_source(source, "t.py", _config("neuron"))
    assert [f.code for f in findings] == ["CN201"]
    assert fixed == _expected(source, alias, move.neuron_name)
    assert fix_source(fixed, "t.py", _config("neuron"))[0] == fixed


@pytest.mark.parametrize(("move", "template", "alias"), list(_params("accelerator")))
def test_accelerator_target_moves_or_reports_every_row(move: ApiMove, template: str, alias: str | None):
    source = template.format(name=move.name)
    target = accelerator_name_for(move, MIN_TORCH)
    fixed, findings = fix_source(source, "t.py", _config("accelerator", unsafe=True))
    assert [f.code for f in findings] == ["CN201"]
    if target is None:
        assert fixed == source, "an API torch.accelerator lacks must be reported, not rewritten"
        assert findings[0].guidance, "a report needs guidance"
        return
    assert fixed == _expected(source, alias, target)
    if move.accelerator_unsafe:
        safe_only, _ = fix_source(source, "t.py", _config("accelerator", unsafe=False))
        assert safe_only == source


GATES = [
    # (api, min torch, expected name or None = reported)
    ("current_device", (2, 5), None),
    ("current_device", (2, 6), "torch.accelerator.current_device_idx"),
    ("current_device", (2, 7), "torch.accelerator.current_device_index"),
    ("set_device", (2, 6), "torch.accelerator.set_device_idx"),
    ("set_device", (2, 10), "torch.accelerator.set_device_index"),
    ("synchronize", (2, 6), "torch.accelerator.synchronize"),
    ("empty_cache", (2, 8), None),
    ("empty_cache", (2, 9), "torch.accelerator.memory.empty_cache"),
    ("max_memory_allocated", (2, 9), "torch.accelerator.memory.max_memory_allocated"),
    ("memory_summary", (2, 13), None),
]


@pytest.mark.parametrize(("api", "min_torch", "expected"), GATES, ids=[f"{g[0]}-{g[1][0]}.{g[1][1]}" for g in GATES])
def test_accelerator_names_follow_min_torch(api, min_torch, expected):
    source = f"import torch\ntorch.cuda.{api}()\n"
    fixed, findings = fix_source(source, "t.py", _config("accelerator", min_torch=min_torch))
    assert [f.code for f in findings] == ["CN201"]
    if expected is None:
        assert fixed == source
        assert "torch" in findings[0].message
    else:
        assert fixed == f"import torch\n{_port_of_call_statement(load_moves()[f'torch.cuda.{api}'], expected)}"


def _port_of_call_statement(move: ApiMove, name: str) -> str:
    """``torch.cuda.X()`` as a statement, ported: guarded where the row says the call needs an
    accelerator (``accelerator-no-device``)."""
    if move.accelerator_no_device == "skip":
        return f"if torch.accelerator.is_available():\n    {name}()\n"
    if move.accelerator_no_device:
        return f"{name}() if torch.accelerator.is_available() else {move.accelerator_no_device}\n"
    return f"{name}()\n"


def _resolve(qualified: str):
    module, _, rest = qualified.partition(".")
    obj = importlib.import_module(module)
    for part in rest.split("."):
        obj = getattr(obj, part)
    return obj


ACCELERATOR_NAMES = sorted({q for m in ROWS for _, q in m.accelerator})


@pytest.mark.parametrize("qualified", ACCELERATOR_NAMES)
def test_accelerator_names_exist_in_torch(qualified):
    pytest.importorskip("torch")
    assert callable(_resolve(qualified)) or isinstance(_resolve(qualified), type)


def test_neuron_names_exist_in_emulated_backend():
    backend = pytest.importorskip("cuda2neuron.backend")
    api = getattr(backend, "NEURON_MODULE_API", None)
    if api is None:
        pytest.skip("the emulated backend does not publish NEURON_MODULE_API yet")
    missing = sorted(m.neuron_name for m in ROWS if m.neuron_name.rpartition(".")[2] not in api)
    assert missing == []


MISMATCH = [
    ("device-keyword", "import torch\ntorch.cuda.synchronize(device=0)\n"),
    ("event-positional", "import torch\ne = torch.cuda.Event(True, False)\n"),
]


@pytest.mark.parametrize("source", [m[1] for m in MISMATCH], ids=[m[0] for m in MISMATCH])
def test_accelerator_reports_arguments_that_change_meaning(source):
    fixed, findings = fix_source(source, "t.py", _config("accelerator"))
    assert fixed == source
    assert [f.code for f in findings] == ["CN201"] and findings[0].fix is None


def test_lint_never_reports_accelerator_code_on_accelerator_target():
    source = "import torch\ntorch.accelerator.synchronize()\nn = torch.accelerator.device_count()\n"
    assert lint_source(source, "t.py", _config("accelerator")) == ()


def test_unused_from_import_is_removed():
    """`torch.neuron.synchronize` is not a use of the from-imported `synchronize`."""
    source = "from torch.cuda import synchronize\nsynchronize()\n"
    fixed, _ = fix_source(source, "t.py", _config("neuron"))
    assert fixed == "import torch\n\ntorch.neuron.synchronize()\n"


BAD_TABLES = [
    ("unknown-key", '[api.synchronize]\naccelerator = { "2.6" = "torch.accelerator.synchronize" }\nneuron = "x"\n', "unknown keys ['neuron']"),
    ("bad-version", '[api.synchronize]\naccelerator = { "two" = "torch.accelerator.synchronize" }\n', "bad torch version 'two'"),
    ("bad-safety", '[api.seed]\naccelerator = { "2.0" = "torch.seed" }\naccelerator-safety = "maybe"\n', "[api.seed] accelerator-safety"),
    ("no-accelerator-column-or-note", "[api.init]\n", "[api.init] needs an accelerator name or note"),
    ("not-toml", "[api.init\n", "cuda_api.toml:"),
]


@pytest.mark.parametrize(("text", "fragment"), [b[1:] for b in BAD_TABLES], ids=[b[0] for b in BAD_TABLES])
def test_malformed_move_table_is_a_clear_error(text: str, fragment: str):
    from cuda2neuron.rules.cuda_api._helpers import MoveTableError, parse_moves

    with pytest.raises(MoveTableError) as info:
        parse_moves(text)
    assert fragment in str(info.value)


def test_accelerator_reports_kwargs_splat():
    source = "import torch\ntorch.cuda.synchronize(**opts)\n"
    fixed, findings = fix_source(source, "t.py", _config("accelerator"))
    assert fixed == source and findings[0].fix is None and "**kwargs" in findings[0].message
