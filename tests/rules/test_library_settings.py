"""The library-settings table (issue 39): one row read in Python, configs and launch scripts.

A setting is one row whichever language writes it: the same key and value are matched in a
call keyword (CN627), a config key (CN737) and a command-line flag (CN709), each value read as
its language writes it. Every row names its source and where it is read.
"""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config
from cuda2neuron.workspace import lint_source

from cuda2neuron.rules._shared.library_settings import library_calls, library_settings, match_setting


@pytest.mark.parametrize("row", library_settings(), ids=lambda r: r.id)
def test_every_row_names_its_source_and_what_to_do(row):
    assert row.source and row.what and row.keys
    assert row.port or row.guidance or row.values_from, f"{row.id}: neither a port nor guidance"


@pytest.mark.parametrize("call", library_calls().values(), ids=lambda c: c.name)
def test_every_call_row_names_its_source(call):
    assert call.source and call.guidance and "." in call.name


@pytest.mark.parametrize(
    ("key", "value", "where", "expected"),
    [
        ("attn_implementation", "flash_attention_2", "python", "sdpa"),
        ("--attn-implementation", '"flash_attention_2"', "cli", "sdpa"),
        ("tf32", "True", "python", "false"),
        ("tf32", "yes", "config", "false"),
        ("tf32", "False", "cli", None),
        ("optim", "paged_adamw_32bit", "config", "adamw_torch"),
        ("optim", "paged_adamw_32bit", "python", None),  # CN626's
        ("load_in_4bit", "true", "python", None),  # CN625's
        ("deepspeed", "null", "config", None),
        ("deepspeed", "ds.json", "config", ""),
        ("strategy", "ddp", "config", None),
        ("strategy", "cuda fp16 *10 -> cpu fp32", "config", ""),
        ("strategy", "cuda fp16", "python", None),  # configs and flags only
        # the rwkv package's strategies: any group of layers on cuda / cuda:N (its PyPI description)
        ("strategy", "cpu fp32 *6 -> cuda fp16", "config", ""),
        ("strategy", "cuda:0 fp16 *10 -> cuda:1 fp16 *8 -> cpu fp32", "config", ""),
        ("strategy", "cpu fp32", "config", None),
        # litgpt's quantize: bitsandbytes' formats (config_hub YAMLs, --quantize, LLM.distribute)
        ("quantize", "bnb.nf4", "config", ""),
        ("--quantize", '"bnb.nf4-dq"', "cli", ""),
        ("quantize", '"bnb.int8"', "python", ""),
        ("quantize", "int8wo", "config", None),
        # Modal's GPU types (its GPU acceleration guide), and a count
        ("gpu", "RTX-PRO-6000", "python", ""),
        ("gpu", "B200+", "python", ""),
        ("gpu", "H100!:8", "python", ""),
        ("gpu", "cpu", "python", None),
        # accelerate's planned placements: it counts no Neuron device (rows device_map_planned)
        ("device_map", "auto", "python", ""),
        ("--device-map", "balanced_low_0", "cli", ""),
        ("device_map", "sequential", "config", ""),
        ("device_map", "neuron", "python", None),
        ("device_map", "cpu", "config", None),
        # llm-foundry's MPT configs
        ("attn_impl", "flash", "config", ""),
        ("attn_impl", "torch", "config", None),
        ("ffn_type", "mb_dmoe", "config", ""),
        ("ffn_type", "torch_dmoe", "config", None),
        # TRL's vLLM generation: configs only (other trainers' flags keep their own defaults)
        ("use_vllm", "true", "config", ""),
        ("use_vllm", "True", "python", None),
        ("--use_vllm", "true", "cli", None),
        ("vllm_mode", "server", "config", ""),
        ("vllm_mode", "colocate", "config", None),
    ],
    ids=lambda v: str(v),
)
def test_a_value_is_read_as_its_language_writes_it(key, value, where, expected):
    found = match_setting(key, value, where)
    assert (found.port if found is not None else None) == expected


# A row with `files` is read only in a file of that name: cog.yaml's `gpu: true` is Cog's GPU
# build (its cog.yaml reference), the same key elsewhere is a project's own switch.
@pytest.mark.parametrize(
    ("key", "value", "path", "found"),
    [
        ("gpu", "true", "cog.yaml", True),
        ("gpu", "true", "models/sd/cog.yaml", True),
        ("gpu", "true", "config/train.yaml", False),
        ("gpu", "false", "cog.yaml", False),
        ("runsOn", "GPU", ".runpod/hub.json", True),
        ("runsOn", "CPU", ".runpod/hub.json", False),
        ("runsOn", "GPU", "ci/pipeline.json", False),
        ("gpuTypeId", "NVIDIA GeForce RTX 4090", ".runpod/tests.json", True),
        ("gpuTypeId", "", ".runpod/tests.json", False),
    ],
    ids=lambda v: str(v),
)
def test_a_row_with_files_is_read_in_those_files(key, value, path, found):
    assert (match_setting(key, value, "config", path) is not None) is found


@pytest.mark.parametrize(
    ("source", "path", "code"),
    [
        ('m = f(attn_implementation="flash_attention_2")\n', "train.py", "CN627"),
        ("attn_implementation: flash_attention_2\n", "config/train.yaml", "CN737"),
        ("python train.py --attn_implementation flash_attention_2\n", "run.sh", "CN709"),
    ],
    ids=["python", "config", "cli"],
)
def test_one_row_serves_every_language(source, path, code):
    findings = [f for f in lint_source(source, path, Config()) if f.code == code]
    assert len(findings) == 1 and "flash_attn" in findings[0].message


# A planned placement is the user's: `device_map="auto"` with `max_memory` beside it (measured on
# the emulated device with accelerate 1.14 / transformers 5.25: integer keys are the current
# accelerator's cores, so the model lands on neuron:0). Alone, "auto" loads it on the CPU.
@pytest.mark.parametrize(
    ("source", "path", "code", "reported"),
    [
        ('m = AutoModel.from_pretrained("x", device_map="auto")\n', "infer.py", "CN627", True),
        ('m = AutoModel.from_pretrained("x", device_map="auto", max_memory={0: "20GiB"})\n', "infer.py", "CN627", False),
        ('kw = {"device_map": "auto", "max_memory": plan}\n', "infer.py", "CN627", False),
        ('kw = {"device_map": "auto"}\nkw2 = {"max_memory": plan}\n', "infer.py", "CN627", True),
        ("model:\n  device_map: auto\n", "config/infer.yaml", "CN737", True),
        ("model:\n  device_map: auto\n  max_memory: {0: 20GiB}\n", "config/infer.yaml", "CN737", False),
        ("model:\n  device_map: auto\nquant:\n  max_memory: {0: 20GiB}\n", "config/infer.yaml", "CN737", True),
        ("python infer.py --device_map auto\n", "run.sh", "CN709", True),
        ("python infer.py --device_map auto --max_memory 0=20GiB\n", "run.sh", "CN709", False),
        ("python infer.py --device_map auto # --max_memory 0=20GiB\n", "run.sh", "CN709", True),
        # TRL: a vllm_mode beside use_vllm is judged by its own row
        ("use_vllm: true\n", "recipes/grpo.yaml", "CN737", True),
        ("use_vllm: true\nvllm_mode: colocate\n", "recipes/grpo.yaml", "CN737", False),
        # ms-swift's configs: no default mode (its launcher sets one), so TRL's default says nothing
        ("rlhf_type: grpo\nuse_vllm: true\n", "examples/ray/grpo.yaml", "CN737", False),
    ],
    ids=lambda v: str(v),
)
def test_a_key_set_beside_means_the_user_planned_it(source, path, code, reported):
    findings = [f for f in lint_source(source, path, Config()) if f.code == code]
    assert bool(findings) is reported, findings
