"""AMP rules (CN3xx) together: aliases, shadowing, imports kept or dropped, comments, idempotence."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cuda2neuron.core import Config, Settings
from cuda2neuron.workspace import fix_source, lint_source


def _config(target: str = "neuron", amp_dtype: str = "bfloat16") -> Config:
    return Config(select=("CN3",), settings=replace(Settings(target=target), amp_dtype=amp_dtype))


# (id, source, expected output) — whole-file rewrites with every CN3 rule selected.
REWRITES = [
    (
        "submodule-alias",
        "import torch.cuda.amp as cuda_amp\nwith cuda_amp.autocast():\n    pass\n",
        'import torch\n\nwith torch.autocast("neuron", dtype=torch.bfloat16):\n    pass\n',
    ),
    (
        # The alias equals the module's last part: it reads like `from torch.cuda import amp`.
        "submodule-alias-named-like-the-module",
        "import torch\nimport torch.cuda.amp as amp\nscaler = amp.GradScaler()\nwith amp.autocast():\n    pass\n",
        'import torch\nscaler = torch.amp.GradScaler("neuron", enabled=False)\nwith torch.autocast("neuron", dtype=torch.bfloat16):\n    pass\n',
    ),
    (
        "from-import-still-used-is-kept",
        "import torch\nfrom torch.cuda import amp\nwith amp.autocast():\n    pass\nhelper = amp.common\n",
        'import torch\nfrom torch.cuda import amp\nwith torch.autocast("neuron", dtype=torch.bfloat16):\n    pass\nhelper = amp.common\n',
    ),
    (
        "from-torch-import-cuda-dropped",
        "from torch import cuda\nwith cuda.amp.autocast():\n    pass\n",
        'import torch\n\nwith torch.autocast("neuron", dtype=torch.bfloat16):\n    pass\n',
    ),
    (
        "comment-in-arguments-survives",
        'import torch\nwith torch.autocast(\n    "cuda",  # the device\n    enabled=False,\n):\n    pass\n',
        'import torch\nwith torch.autocast(\n    "neuron",  # the device\n    dtype=torch.bfloat16, enabled=False,\n):\n    pass\n',
    ),
    (
        "legacy-positional-comment-survives",
        "import torch\nwith torch.cuda.amp.autocast(\n    use_amp,  # from the config\n):\n    pass\n",
        'import torch\nwith torch.autocast(\n    "neuron", dtype=torch.bfloat16, enabled=use_amp,  # from the config\n):\n    pass\n',
    ),
    (
        "nested-decorators",
        "import torch\nclass F(torch.autograd.Function):\n    @staticmethod\n    @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)\n    def forward(ctx, x):\n        return x\n",
        'import torch\nclass F(torch.autograd.Function):\n    @staticmethod\n    @torch.amp.custom_fwd(device_type="neuron", cast_inputs=torch.float32)\n    def forward(ctx, x):\n        return x\n',
    ),
    (
        "alias-th",
        "import torch as th\ns = th.cuda.amp.GradScaler()\nwith th.autocast('cuda'):\n    pass\n",
        "import torch as th\ns = th.amp.GradScaler(\"neuron\", enabled=False)\nwith th.autocast('neuron', dtype=th.bfloat16):\n    pass\n",
    ),
    (
        "grad-scaler-device-keyword",
        'import torch\ns = torch.amp.GradScaler(device="cuda", init_scale=1024)\n',
        'import torch\ns = torch.amp.GradScaler(device="neuron", init_scale=1024, enabled=False)\n',
    ),
]


@pytest.mark.parametrize(("source", "expected"), [r[1:] for r in REWRITES], ids=[r[0] for r in REWRITES])
def test_rewrite(source: str, expected: str):
    fixed, _ = fix_source(source, "t.py", _config())
    assert fixed == expected
    compile(fixed, "t.py", "exec")
    assert fix_source(fixed, "t.py", _config())[0] == fixed


# Imports the port leaves unused are dropped; one still used is kept.
IMPORT_DROPS = [
    (
        "both-names-dropped-from-one-import",
        "from torch.cuda.amp import GradScaler, autocast\ns = GradScaler()\nwith autocast():\n    pass\n",
        'import torch\n\ns = torch.amp.GradScaler("neuron", enabled=False)\nwith torch.autocast("neuron", dtype=torch.bfloat16):\n    pass\n',
    ),
    (
        "one-name-of-two-still-used",
        "from torch.cuda.amp import GradScaler, autocast\nwith autocast():\n    pass\nT = GradScaler.__name__\n",
        'from torch.cuda.amp import GradScaler\nimport torch\n\nwith torch.autocast("neuron", dtype=torch.bfloat16):\n    pass\nT = GradScaler.__name__\n',
    ),
]


@pytest.mark.parametrize(("source", "expected"), [r[1:] for r in IMPORT_DROPS], ids=[r[0] for r in IMPORT_DROPS])
def test_unused_from_imports_are_dropped(source: str, expected: str):
    assert fix_source(source, "t.py", _config())[0] == expected


# (id, source): nothing to report, nothing rewritten.
UNTOUCHED = [
    ("param-shadows-torch", "import torch\ndef f(torch):\n    with torch.cuda.amp.autocast():\n        pass\n"),
    ("local-autocast-function", "def autocast(enabled=True):\n    pass\nwith autocast():\n    pass\n"),
    ("other-library-scaler", "from apex.amp import GradScaler\ns = GradScaler()\n"),
    ("cpu-autocast", "import torch\nwith torch.autocast('cpu', dtype=torch.bfloat16):\n    pass\n"),
    ("log-text", "import torch\nlogger.info('autocast on cuda with GradScaler')\n"),
    ("docstring", 'def f():\n    """Use torch.cuda.amp.autocast() and GradScaler("cuda")."""\n'),
    ("comment", "# with torch.cuda.amp.autocast():\nx = 1\n"),
    ("accelerator-autocast", "import torch\nwith torch.autocast(torch.accelerator.current_accelerator().type):\n    pass\n"),
    ("attribute-named-autocast", "import torch\ncfg.autocast = True\nrun(cfg.GradScaler)\n"),
]


@pytest.mark.parametrize("source", [u[1] for u in UNTOUCHED], ids=[u[0] for u in UNTOUCHED])
@pytest.mark.parametrize("target", ["neuron", "accelerator"])
def test_untouched(source: str, target: str):
    assert lint_source(source, "t.py", _config(target)) == ()
    assert fix_source(source, "t.py", _config(target))[0] == source


DTYPES = [
    # (id, amp dtype setting, source, expected autocast line)
    ("default-bf16", "bfloat16", "torch.cuda.amp.autocast()", 'torch.autocast("neuron", dtype=torch.bfloat16)'),
    ("setting-fp16", "float16", "torch.cuda.amp.autocast()", 'torch.autocast("neuron", dtype=torch.float16)'),
    ("user-fp16-kept", "bfloat16", "torch.cuda.amp.autocast(dtype=torch.float16)", 'torch.autocast("neuron", dtype=torch.float16)'),
    ("user-bf16-kept", "float16", "torch.autocast('cuda', dtype=torch.bfloat16)", "torch.autocast('neuron', dtype=torch.bfloat16)"),
    ("user-half-kept", "bfloat16", "torch.autocast('cuda', torch.half)", "torch.autocast('neuron', torch.half)"),
]


@pytest.mark.parametrize(("amp_dtype", "call", "expected"), [d[1:] for d in DTYPES], ids=[d[0] for d in DTYPES])
def test_dtype_policy(amp_dtype: str, call: str, expected: str):
    fixed, findings = fix_source(f"import torch\nwith {call}:\n    pass\n", "t.py", _config(amp_dtype=amp_dtype))
    assert fixed == f"import torch\nwith {expected}:\n    pass\n"
    user_fp16 = "float16" in call or "half" in call
    advised = any("bfloat16 is recommended" in f.message for f in findings)
    assert advised == (user_fp16 and amp_dtype == "bfloat16")


def test_fp16_port_keeps_scaler_live_and_warns_until_changed():
    source = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"
    fixed, findings = fix_source(source, "t.py", _config(amp_dtype="float16"))
    assert fixed == 'import torch\nscaler = torch.amp.GradScaler("neuron")\n'
    assert [(f.code, f.applied) for f in findings] == [("CN304", True), ("CN305", False)]
    # The warning stays on the ported file (report-only) and goes away under bf16.
    assert [f.code for f in lint_source(fixed, "t.py", _config(amp_dtype="float16"))] == ["CN305"]
    assert lint_source(fixed, "t.py", _config(amp_dtype="bfloat16")) == ()


def test_ported_file_checks_clean():
    source = (
        "import torch\nfrom torch.cuda import amp\n"
        "device_type = 'cuda'\n"
        "scaler = amp.GradScaler()\n"
        "with torch.autocast(device_type=device_type):\n    pass\n"
    )
    fixed, findings = fix_source(source, "t.py", _config())
    # The variable's literal is the device rules' job; until then CN303 points at the call.
    assert any(f.code == "CN303" and not f.applied for f in findings)
    ported = fixed.replace("'cuda'", "'neuron'")
    assert lint_source(ported, "t.py", _config()) == ()


SCALER_POLICY = [
    # (id, amp dtype setting, extra file content, scaler call, expected scaler)
    ("bf16-file-without-fp16", "bfloat16", "", "torch.cuda.amp.GradScaler(enabled=use_amp)",
     'torch.amp.GradScaler("neuron", enabled=False)'),
    ("bf16-file-runs-fp16-at-runtime", "bfloat16", "dtype = 'float16'\n",
     "torch.cuda.amp.GradScaler(enabled=(dtype == 'float16'))",
     "torch.amp.GradScaler(\"neuron\", enabled=(dtype == 'float16'))"),
    ("bf16-file-with-half", "bfloat16", "y = x.half()\n", "torch.cuda.amp.GradScaler()",
     'torch.amp.GradScaler("neuron")'),
    ("fp16-setting", "float16", "", "torch.cuda.amp.GradScaler(enabled=use_amp)",
     'torch.amp.GradScaler("neuron", enabled=use_amp)'),
    ("already-disabled", "bfloat16", "", "torch.cuda.amp.GradScaler(enabled=False)",
     'torch.amp.GradScaler("neuron", enabled=False)'),
]


@pytest.mark.parametrize(
    ("amp_dtype", "extra", "call", "expected"), [p[1:] for p in SCALER_POLICY], ids=[p[0] for p in SCALER_POLICY]
)
def test_grad_scaler_is_disabled_only_where_nothing_runs_float16(amp_dtype, extra, call, expected):
    source = f"import torch\n{extra}scaler = {call}\n"
    fixed, _ = fix_source(source, "t.py", _config(amp_dtype=amp_dtype))
    assert fixed == f"import torch\n{extra}scaler = {expected}\n"
