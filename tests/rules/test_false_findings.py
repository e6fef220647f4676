"""Findings a port review called false (issue 30), each kept false; and the true ones beside them.

Each row is a file, a rule and how many findings of that rule it must give: 0 for a shape that
is not what the rule is about, the right count where a line was reported twice.
"""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config
from cuda2neuron.workspace import fix_source, lint_source

ROWS = [
    # CN801: a dtype value is not a tensor on the device.
    ("beta-schedule-on-cpu", "s.py", "import torch\nbetas = torch.linspace(1e-4, 0.02, 1000, dtype=torch.float64).numpy()\n", "CN801", 0),
    ("dtype-membership", "s.py", "import torch\nif logits.dtype in [torch.float32, torch.float64]:\n    pass\n", "CN801", 0),
    ("dtype-name-table", "s.py", 'import torch\nNAMES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16"}\n', "CN801", 0),
    ("cpu-test-parametrization", "test_s.py",
     'import pytest, torch\n\n@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])\n'
     "def test_cast(dtype):\n    assert torch.zeros(2, dtype=dtype).dtype == dtype\n", "CN801", 0),
    ("cpu-tensor-cast", "s.py", "import torch\nref = out.detach().cpu().double()\n", "CN801", 0),
    ("device-tensor", "s.py", "import torch\nx = torch.zeros(3, dtype=torch.float64, device=device)\n", "CN801", 1),
    ("device-cast", "s.py", "import torch\nloss = criterion(logits.double(), y)\n", "CN801", 1),
    ("set-default", "s.py", "import torch\ntorch.set_default_dtype(torch.float64)\n", "CN801", 1),
    # a test module that names no device computes its float64 references on the CPU
    ("cpu-only-test-module", "tests/test_math.py",
     "import torch\n\ndef test_gram(make_matrix):\n    x = make_matrix(4).double()\n    assert torch.allclose(x @ x.T, (x @ x.T).T)\n", "CN801", 0),
    ("device-test-module", "tests/test_math.py",
     "import torch\n\ndef test_gram(make_matrix, device):\n    x = make_matrix(4, device).double()\n", "CN801", 1),
    # CN604: flash_attn's padding helpers are plain PyTorch; only their import is reported
    ("flash-attn-padding-helpers", "m.py",
     "from flash_attn.bert_padding import pad_input, unpad_input\n\ndef f(x, m):\n"
     "    h, idx, cu, mx, _ = unpad_input(x, m)\n    return pad_input(h, idx, 2, 8)\n", "CN604", 1),
    # OpenRLHF's ring attention: flash_attn.utils.distributed wraps torch.distributed collectives
    ("flash-attn-distributed-helpers", "m.py",
     "from flash_attn.utils.distributed import all_gather\n\ndef f(x, group):\n"
     "    return all_gather(x, group)\n", "CN604", 1),
    # CN737: accelerate's DeepSpeed config says DeepSpeed once, not at each of its keys
    ("accelerate-deepspeed-once", "accelerate.yaml",
     "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 2\n", "CN737", 1),
    ("dtype-through-a-name", "s.py", "import torch\n\ndef f(x):\n    dt = torch.float64\n    return x.to(dt)\n", "CN801", 1),
    # CN619: float8 tables and host tensors' dtype tests.
    ("fp8-table", "s.py", 'import torch\nFP8 = {torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2"}\n', "CN619", 0),
    ("fp8-cpu-dtype-test", "s.py", "import torch\nok = w.cpu().dtype == torch.float8_e4m3fn\n", "CN619", 0),
    ("fp8-device-cast", "s.py", "import torch\nw8 = w.to(torch.float8_e4m3fn)\n", "CN619", 1),
    # trl's hash_module: the name was rebound to a host copy a line above the test
    ("fp8-test-of-a-name-bound-to-a-host-copy", "s.py",
     "import torch\n\ndef digest(sd):\n    for t in sd.values():\n        t = t.detach().cpu()\n"
     "        if t.dtype in [torch.bfloat16, torch.float8_e4m3fn]:\n            t = t.float()\n", "CN619", 0),
    ("fp8-test-of-a-name-rebound-by-an-if", "s.py",
     "import torch\n\ndef f(t, dev):\n    t = t.cpu()\n    if dev:\n        t = t.to(dev)\n"
     "    return t.dtype == torch.float8_e4m3fn\n", "CN619", 1),
    ("fp8-test-of-a-parameter", "s.py", "import torch\n\ndef f(t):\n    return t.dtype == torch.float8_e4m3fn\n", "CN619", 1),
    # CN109: "cuda" among words looked for in an error message.
    ("error-keywords", "s.py", 'OOM = ["out of memory", "cuda", "cublas_status_alloc_failed"]\n', "CN109", 0),
    ("device-list", "s.py", 'devices = st.sampled_from(["cpu", "cuda"])\n', "CN109", 1),
    # words searched in a device's name are device words; in a caught exception's text, message words
    ("device-word-search", "s.py", 'ok = any(k in str(device) for k in ["cuda", "mps"])\n', "CN109", 1),
    ("error-word-search-cn109", "s.py",
     'try:\n    run()\nexcept Exception as e:\n    if any(k in str(e).lower() for k in ["oom", "cuda"]):\n        skip()\n', "CN109", 0),
    ("error-word-search-residual", "s.py",
     'try:\n    run()\nexcept Exception as e:\n    if any(k in str(e).lower() for k in ["out of memory", "cuda"]):\n        skip()\n', "CN902", 0),
    # accelerate's max_memory keyed by "cuda:0": CN111 says what to do; CN109's "add a neuron entry" would
    # not help (accelerate takes integer indices, "cpu", "mps" and "disk" only). One finding, not two.
    ("max-memory-cuda-keys-cn109", "s.py", 'm = AutoModel.from_pretrained("x", max_memory={"cuda:0": "20GiB", "cpu": "60GiB"})\n', "CN109", 0),
    ("max-memory-cuda-keys-cn111", "s.py", 'm = AutoModel.from_pretrained("x", max_memory={"cuda:0": "20GiB", "cpu": "60GiB"})\n', "CN111", 1),
    # Integer max_memory keys are the current accelerator's cores: with accelerate 1.14.0 and
    # transformers 5.25.0 on the emulated device, `device_map="auto", max_memory={0: ...}` loads the
    # model on neuron:0 (issue 39). Nothing to act on, in code or in a config.
    ("max-memory-integer-keys-cn111", "s.py",
     'm = AutoModel.from_pretrained("x", device_map="auto", max_memory={0: "20GiB", 1: "20GiB", "cpu": "60GiB"})\n', "CN111", 0),
    ("max-memory-range-keys-cn111", "s.py", "max_memory = {i: '40GiB' for i in range(n_gpus)}\nmax_memory[0] = '8GiB'\n", "CN111", 0),
    ("config-max-memory-integer-keys", "config/model.yaml", "device_map: auto\nmax_memory:\n  0: 20GiB\n  cpu: 60GiB\n", "CN738", 0),
    # CN627: a setting's value an assert expects a helper to return is no setting the test makes.
    ("assert-expects-setting", "tests/test_export.py",
     "def test_kwargs():\n    assert build_kwargs() == {'device_map': 'balanced'}\n    assert cfg.attn_implementation == 'flash_attention_2'\n", "CN627", 0),
    # CN627: a tokenizer loads no weights; a model's loading keyword handed to it is ignored.
    ("tokenizer-device-map", "scripts/convert.py",
     'from transformers import CLIPTokenizer\ntok = CLIPTokenizer.from_pretrained(name, pad_token="!", device_map="auto")\n', "CN627", 0),
    # CN738: one finding per max_memory mapping, however many GPUs it lists.
    ("config-max-memory-once", "config/model.yaml", "max_memory:\n  cuda:0: 20GiB\n  cuda:1: 20GiB\n  cuda:2: 20GiB\n", "CN738", 1),
    # CN713: `--no-binary flash-attn flash-attn==2.5.6` installs flash-attn once.
    ("no-binary-once", "setup.sh", "pip install --no-binary flash-attn flash-attn==2.5.6\n", "CN713", 1),
    # CN207 / CN405: a variable's name looked for in what a program printed (pytest's capsys /
    # capfd, unsloth's hardware-report tests) reads no environment; in another call's result it may
    ("env-name-in-captured-output", "tests/test_report.py",
     "def test_lists_devices(capsys):\n    show()\n    out = capsys.readouterr().out\n"
     "    assert 'CUDA_DEVICE_ORDER' not in out\n", "CN207", 0),
    ("env-name-in-captured-result", "tests/test_report.py",
     "def test_lists_devices(capfd):\n    show()\n    captured = capfd.readouterr()\n"
     "    assert 'CUDA_VISIBLE_DEVICES' not in captured.err\n", "CN405", 0),
    ("env-name-in-captured-inline", "tests/test_report.py",
     "def test_lists_devices(capsys):\n    show()\n    assert 'CUDA_DEVICE_ORDER' not in capsys.readouterr().out\n", "CN207", 0),
    ("env-name-in-another-calls-output", "tests/test_report.py",
     "def test_lists_devices(run):\n    out = run().out\n    assert 'CUDA_DEVICE_ORDER' not in out\n", "CN207", 1),
    # CN627: a `key=value` list whose only settings are quantization_bit / optim (the words alone
    # woke nothing: the bare `optim` is in every `optimizer`)
    ("arglist-quantization-bit-alone", "run_eval.py",
     "results = evaluate(model='hf', model_args='pretrained=m,quantization_bit=4')\n", "CN627", 1),
    ("arglist-optim-alone", "launch.py",
     "job = submit(extra='model=m,optim=paged_adamw_8bit')\n", "CN627", 1),
    # CN802: a table of dtype names (nanotron's dtype_to_str) makes no complex tensor; a factory does
    ("complex-dtype-name-table", "s.py",
     'import torch\nNAMES = {\n    torch.float32: "float32",\n    torch.complex64: "complex64",\n}\n', "CN802", 0),
    ("complex-dtype-factory", "s.py", "import torch\nz = torch.zeros(2, dtype=torch.complex64)\n", "CN802", 1),
    # CN616: MegaBlocks' all_to_all is a torch.distributed wrapper: its import is reported, not each call
    ("megablocks-all-to-all-helper", "moe.py",
     "from megablocks.layers.all_to_all import all_to_all\n\ndef f(x, s, r, g):\n    return all_to_all(x, s, r, g)\n", "CN616", 1),
    ("megablocks-kernel-op", "moe.py",
     "import megablocks.ops as ops\n\ndef f(x, n):\n    return ops.histogram(x, n)\n", "CN616", 2),
    ("optimizer-word-alone", "train.py", "optimizer = make_optimizer(model, lr=1e-4)\n", "CN627", 0),
]


@pytest.mark.parametrize(("source", "path", "code", "count"), [(r[2], r[1], r[3], r[4]) for r in ROWS], ids=[r[0] for r in ROWS])
def test_findings_of_a_rule(source, path, code, count):
    found = [f for f in lint_source(source, path, Config()) if f.code == code]
    assert len(found) == count, found


def test_a_dtype_table_keeps_its_keys_under_unsafe_fixes():
    # The unsafe fix made `{torch.float64: "F64", torch.float32: "F32"}` a dict with two
    # float32 keys, the second silently overwriting the first.
    source = 'import torch\nNAMES = {torch.float64: "F64", torch.float32: "F32"}\n'
    out, _ = fix_source(source, "s.py", Config(unsafe_fixes=True))
    assert out == source


def test_cn303_is_silent_once_the_port_left_no_cuda_device_literal():
    # The autocast line was reported after migrate rewrote the device string it reads: the file
    # still "said cuda" only in a comment and in a name that starts with the word.
    source = (
        "import torch\n"
        "device = 'cuda'  # or 'cuda:1'\n"
        "mode = 'cuda_graphs'\n"
        "device_type = 'cuda' if 'cuda' in device else 'cpu'\n"
        "ctx = torch.amp.autocast(device_type=device_type)\n"
    )
    out, findings = fix_source(source, "t.py", Config())
    assert "'neuron' if 'neuron' in device" in out
    assert [f for f in findings if f.code == "CN303"] == []
    assert [f for f in lint_source(source, "t.py", Config()) if f.code == "CN303"], "before the port it is reported"


def test_cn608_is_silent_on_the_branch_the_port_made_dead():
    source = (
        "import torch\n\n"
        "def configure(params, device_type):\n"
        "    use_fused = device_type == 'cuda'\n"
        "    extra = dict(fused=True) if use_fused else dict()\n"
        "    return torch.optim.AdamW(params, **extra)\n"
    )
    out, findings = fix_source(source, "t.py", Config())
    assert "use_fused = False" in out
    assert [f.applied for f in findings if f.code == "CN608"] == [True]
