"""The worker's configuration: built by the parent, sent as JSON in argv, read back typed and strict."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from cuda2neuron.validate._worker_config import WorkerConfig, WorkerConfigError

ENTRY = WorkerConfig(role="port", tree=Path("/proj/port"), fd=7, mode="entry", entry="entry:build", script=None,
                     args=(), steps=3, seed=0, port_device="neuron", in_fd=8, parent=100)
SCRIPT = WorkerConfig(role="reference", tree=Path("/proj/original"), fd=9, mode="script", entry=None,
                      script="train.py", args=("--epochs", "1", "--lr=0.5"), steps=1, seed=1234, port_device="cpu",
                      in_fd=10, parent=100)


_DROP = object()  # a key to leave out


def _json_with(config: WorkerConfig, **changes: object) -> str:
    data = json.loads(config.to_json())
    for key, value in changes.items():
        if value is _DROP:
            del data[key]
        else:
            data[key] = value
    return json.dumps(data)


@pytest.mark.parametrize("config", [ENTRY, SCRIPT, replace(SCRIPT, role="golden", args=("x",))],
                         ids=["entry-port", "script-reference", "script-golden"])
def test_round_trip_keeps_every_value_and_type(config):
    back = WorkerConfig.from_json(config.to_json())
    assert back == config
    assert isinstance(back.tree, Path)
    assert isinstance(back.args, tuple) and all(isinstance(a, str) for a in back.args)


def test_the_json_is_plain_data():
    data = json.loads(SCRIPT.to_json())
    assert data["tree"] == "/proj/original" and data["args"] == ["--epochs", "1", "--lr=0.5"]


# (id, changes to a valid config's JSON, fragment of the error)
BAD = [
    ("unknown-key", {"lr": 0.01}, "unknown key(s) lr"),
    ("unknown-keys-sorted", {"threads": 1, "lr": 0.01}, "unknown key(s) lr, threads"),
    ("missing-key", {"seed": _DROP}, "missing key(s) seed"),
    ("missing-keys", {"fd": _DROP, "steps": _DROP}, "missing key(s) fd, steps"),
    ("float-for-int", {"steps": 3.0}, "steps must be int, got float 3.0"),
    ("bool-for-int", {"seed": True}, "seed must be int, got bool True"),
    ("string-for-int", {"fd": "7"}, "fd must be int, got str '7'"),
    ("none-for-required", {"tree": None}, "tree must be a path string"),
    ("args-not-a-list", {"args": "--epochs 1"}, "args must be a list"),
    ("arg-not-a-string", {"args": ["--epochs", 1]}, "args must be str, got int 1"),
    ("unknown-role", {"role": "oracle"}, "role must be one of 'reference', 'golden', 'port', got 'oracle'"),
    ("unknown-mode", {"mode": "notebook"}, "mode must be one of 'entry', 'script'"),
    ("unknown-port-device", {"port_device": "cuda"}, "port_device must be one of 'neuron', 'cpu'"),
    ("entry-not-a-string", {"entry": 3}, "entry must be str, got int 3"),
]


@pytest.mark.parametrize(("changes", "fragment"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_config_that_does_not_match_is_refused_by_name(changes, fragment):
    with pytest.raises(WorkerConfigError) as info:
        WorkerConfig.from_json(_json_with(ENTRY, **changes))
    assert fragment in str(info.value)


@pytest.mark.parametrize(("text", "fragment"), [("{not json", "not JSON"), ("[1, 2]", "must be a JSON object, got list")],
                         ids=["not-json", "not-an-object"])
def test_text_that_is_not_a_config_object_is_refused(text, fragment):
    with pytest.raises(WorkerConfigError, match=fragment):
        WorkerConfig.from_json(text)


def test_optional_fields_take_none():
    assert WorkerConfig.from_json(ENTRY.to_json()).script is None
    assert WorkerConfig.from_json(SCRIPT.to_json()).entry is None


def test_importing_it_does_not_import_torch():
    probe = ("import sys, cuda2neuron.validate._worker_config; "
             "print(any(m == 'torch' or m.startswith('torch.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# When the original's ranks cannot each have a GPU of this machine (seen: `--nproc 2` on a one-GPU
# H200 crashed rank 1 with "invalid device ordinal"), the reference runs on the CPU shim instead.
GPU_FIT = [
    # id, GPUs, local ranks, why not (None: the GPUs hold the ranks)
    ("no-gpu", 0, 1, None),
    ("one-gpu-one-rank", 1, 1, None),
    ("two-gpus-two-ranks", 2, 2, None),
    ("one-gpu-two-ranks", 1, 2, "2 ranks need 2 GPUs, this machine has 1"),
    ("four-gpus-eight-ranks", 4, 8, "8 ranks need 8 GPUs, this machine has 4"),
]


@pytest.mark.parametrize(("gpus", "ranks", "why"), [c[1:] for c in GPU_FIT], ids=[c[0] for c in GPU_FIT])
def test_the_reference_uses_the_gpus_only_when_every_rank_gets_one(gpus, ranks, why):
    from cuda2neuron.validate._worker import gpus_short_of_ranks

    assert gpus_short_of_ranks(gpus, ranks) == why
