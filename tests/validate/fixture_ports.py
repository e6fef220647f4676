"""Ports of the fixture projects: `cuda2neuron migrate --out`, then the edits the rule catalog
does not make yet (each taken from the project's EXPECTED.md).

The complement is tolerant: a row whose `old` text is gone (because a rule now makes that edit)
is skipped, so the table shrinks to nothing as the catalog grows — `test_fixture_projects.py`
reports how many rows were still needed.
"""

from __future__ import annotations

from pathlib import Path

from cuda2neuron.cli import main as cli_main

__all__ = ["COMPLEMENT", "migrate_fixture"]

_AC16 = 'torch.autocast("neuron", dtype=torch.bfloat16'
COMPLEMENT: dict[str, tuple[tuple[str, str, str], ...]] = {
    "cnn_cuda": (
        ("train.py", 'device = "cuda" if torch.cuda.is_available() else "cpu"',
         'device = "neuron" if torch.neuron.is_available() else "cpu"'),
        ("train.py", 'use_cuda = device == "cuda"', 'use_cuda = device == "neuron"'),
        ("train.py", "torch.cuda.manual_seed_all(", "torch.neuron.manual_seed_all("),
        ("train.py", "torch.cuda.amp.GradScaler(enabled=args.amp)", 'torch.amp.GradScaler("neuron", enabled=False)'),
        ("train.py", "torch.cuda.amp.autocast():", f"{_AC16}):"),
        ("train.py", "torch.cuda.amp.autocast(enabled=args.amp):", f"{_AC16}, enabled=args.amp):"),
        ("train.py", "torch.cuda.synchronize()", "torch.neuron.synchronize()"),
        ("train.py", "torch.cuda.max_memory_allocated()", "torch.neuron.max_memory_allocated()"),
        ("train.py", 'map_location="cuda:0"', 'map_location="neuron:0"'),
        ("validate_entry.py", 'torch.device("cuda")', 'torch.device("neuron")'),
        ("validate_entry.py", "torch.cuda.amp.autocast():", f"{_AC16}):"),
        ("validate_entry.py", 'device="cuda"', 'device="neuron"'),
        ("validate_entry.py", "torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("neuron", enabled=False)'),
    ),
    "gpt_trainer": (
        ("train.py", 'backend = "nccl"', 'backend = "neuron"'),
        ("train.py", 'device = "cuda"  #', 'device = "neuron"  #'),
        ("train.py", "torch.cuda.is_available() and torch.cuda.is_bf16_supported()",
         "torch.neuron.is_available() and torch.neuron.is_bf16_supported()"),
        ("train.py", 'if device_type == "cuda":', 'if device_type == "neuron":'),
        ("train.py", 'device = f"cuda:{ddp_local_rank}"', 'device = f"neuron:{ddp_local_rank}"'),
        ("train.py", "torch.cuda.set_device(device)", "torch.neuron.set_device(device)"),
        ("train.py", 'device_type = "cuda" if "cuda" in device else "cpu"', 'device_type = "neuron" if "neuron" in device else "cpu"'),
        ("train.py", 'torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))',
         'torch.amp.GradScaler("neuron", enabled=(dtype == "float16"))'),
        ("config/train_small.py", 'device = "cuda"', 'device = "neuron"'),
        ("config/train_small.py", 'backend = "nccl"', 'backend = "neuron"'),
        ("validate_entry.py", 'device = "cuda"', 'device = "neuron"'),
        ("validate_entry.py", 'torch.amp.autocast(device_type="cuda"', 'torch.amp.autocast(device_type="neuron"'),
        ("validate_entry.py", '(0.9, 0.95), device_type="cuda")', '(0.9, 0.95), device_type="neuron")'),
        ("validate_entry.py", "torch.cuda.amp.GradScaler(enabled=False)", 'torch.amp.GradScaler("neuron", enabled=False)'),
    ),
    "lstm_tagger": (
        ("validate_entry.py", "model.cuda(0)", 'model.to("neuron:0")'),
        ("validate_entry.py", "with torch.cuda.device(0):", "with torch.neuron.device(0):"),
        ("validate_entry.py", "tokens = tokens.cuda()", 'tokens = tokens.to("neuron")'),
        ("validate_entry.py", "lengths.to(0)", 'lengths.to("neuron:0")'),
        ("validate_entry.py", 'torch.device("cuda", 0)', 'torch.device("neuron", 0)'),
        # Legacy typed tensors have no Neuron twin and no automatic fix: ported by hand.
        ("utils.py", "use_cuda = torch.cuda.is_available()", "use_cuda = torch.neuron.is_available()"),
        ("utils.py", "    positions = torch.arange(max_len).type(LongTensor)\n    if lengths.is_neuron != positions.is_neuron:\n"
                     "        lengths = lengths.type(LongTensor)\n    return (positions[None, :] < lengths[:, None]).type(FloatTensor)",
         "    positions = torch.arange(max_len, device=lengths.device)\n"
         "    return (positions[None, :] < lengths[:, None]).float()"),
        ("train.py", 'def accuracy(model, corpus, device=torch.device("cuda", 0))', 'def accuracy(model, corpus, device=torch.device("neuron", 0))'),
        ("train.py", "(pred == tags).type(FloatTensor)", "(pred == tags).float()"),
        ("train.py", 'device = torch.device("cuda", args.gpu)', 'device = torch.device("neuron", args.gpu)'),
        ("train.py", "with torch.cuda.device(args.gpu):", "with torch.neuron.device(args.gpu):"),
        ("train.py", "next(model.parameters()).is_cuda", "next(model.parameters()).is_neuron"),
        ("train.py", "torch.cuda.empty_cache()", "torch.neuron.empty_cache()"),
        ("dist_utils.py", "    if not torch.cuda.is_available():", "    if not torch.neuron.is_available():"),
    ),
}


def migrate_fixture(src: Path, dst: Path, project: str) -> int:
    """Write the port of `src` to `dst`; returns how many complement rows were still needed."""
    rc = cli_main(["migrate", str(src), "--out", str(dst), "-q"])
    assert rc == 0, f"migrate failed on {src} (exit {rc})"
    needed = 0
    for rel, old, new in COMPLEMENT.get(project, ()):
        path = dst / rel
        text = path.read_text()
        if old in text:
            path.write_text(text.replace(old, new))
            needed += 1
    return needed
