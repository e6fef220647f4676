"""CN737: library settings in configs that choose CUDA without naming it."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, Safety, TextReport, Valid

from ..._shared.library_settings import (
    match_setting,
    member_keys,
    normalize_key,
    normalize_value,
    setting_keys,
    table_markdown,
    with_table,
)
from .._helpers import TextRule
from ._helpers import CONFIG_EXAMPLE, CONFIG_KINDS, splice

__all__ = ["LibrarySettingInConfig"]

# A DeepSpeed config file: a top-level key only DeepSpeed's config schema has (train_batch_size,
# fp16, optimizer are every trainer's words). The first one found carries the finding.
_DEEPSPEED_CONFIG_KEYS = ("zero_optimization", "train_micro_batch_size_per_gpu", "steps_per_print", "wall_clock_breakdown")
# A config that does not parse as JSON is read for them as text: DeepSpeedExamples' sweep scripts
# fill `ds_config_TEMPLATE.json` (`"train_micro_batch_size_per_gpu": BATCH_SIZE_PER_GPU`) with sed;
# what they write is a DeepSpeed config all the same.
_TEMPLATE_KEY = re.compile(r'"(' + "|".join(_DEEPSPEED_CONFIG_KEYS) + r')"[ \t]*:')
_DEEPSPEED_GUIDANCE = (
    "DeepSpeed has no Neuron accelerator: shard with FSDP2 (torch.distributed.fsdp.fully_shard) on the "
    "\"neuron\" process-group backend, or use NxD Training"
)



def _beside(doc, scalar) -> frozenset[str]:  # noqa: ANN001 - ConfigDocument, Scalar
    """The other keys of the mapping ``scalar`` is a value of (``max_memory`` beside ``device_map``)."""
    parent = scalar.path[:-1]
    return frozenset(
        normalize_key(path[-1]) for document, path in doc.keys
        if document == scalar.document and path[:-1] == parent and isinstance(path[-1], str) and path != scalar.path
    )

def _keys_of_mappings(doc, keys: frozenset[str]):
    """``(document, start, end, key)`` of mapping keys in ``keys`` whose value is a mapping or list (the
    scalars' rows never see them: ``deepspeed_config: {zero_stage: 2}``)."""
    scalar_paths = {(s.document, s.path) for s in doc.scalars}
    for (document, path), (start, end) in doc.keys.items():
        if path and isinstance(path[-1], str) and normalize_key(path[-1]) in keys and (document, path) not in scalar_paths:
            yield document, start, end, path[-1]


def _members(doc, keys: frozenset[str]):
    """``(document, start, end, key, members)`` of the keys in ``keys`` whose value is a list or a
    mapping: each member as NAME (a list item, or a mapping key without a value: SkyPilot's set
    ``{A100:1, V100:1}``) or NAME:COUNT (``{A100: 8}``)."""
    held = [(d, p) for (d, p) in doc.keys if p and isinstance(p[-1], str) and normalize_key(p[-1]) in keys]
    if not held:
        return
    under: dict[tuple, list[str]] = {}
    for s in doc.scalars:
        if len(s.path) < 2:
            continue
        holder = (s.document, s.path[:-1])
        item = s.path[-1]
        if isinstance(item, int):
            member = s.value
        elif normalize_value(s.value) in ("", "null", "~", "none"):
            member = item
        else:
            member = f"{item}:{s.value}"
        under.setdefault(holder, []).append(member)
    for document, path in held:
        members = under.get((document, path))
        if members:
            start, end = doc.keys[(document, path)]
            yield document, start, end, path[-1], members


class LibrarySettingInConfig(TextRule):
    """
    ## What it does
    Reads training configs (YAML, JSON, TOML, INI) for the library settings of the table
    ``rules/_shared/library_settings.toml`` that choose CUDA without saying so:
    ``attn_implementation: flash_attention_2``, ``flash_attn: fa2``, ``tf32: true``,
    ``load_in_4bit: true``, ``optim: paged_adamw_8bit``, ``deepspeed: ds_z3.json``,
    ``dynamo_backend: INDUCTOR``, ``xformers_attention: true``, ... (the rows whose ``where``
    holds ``config``), and DeepSpeed config files themselves (a top-level key only DeepSpeed's schema has:
    ``zero_optimization``, ``train_micro_batch_size_per_gpu``, ``steps_per_print``, ``wall_clock_breakdown``; in a
    JSON template that a script fills in, such as ``"fp16": {"enabled": FP16}``, the key as written). Where
    the row has a port it is written on the neuron target (``sdpa``, ``false``, the Trainer's
    torch optimizer); the other rows are reported with what to do.

    ## Why is this bad?
    These values never say "cuda", yet the library they configure loads a CUDA-only package
    (flash_attn, bitsandbytes, DeepSpeed's accelerator) or raises where there is no CUDA GPU
    (``TrainingArguments(tf32=True)``): the port stops at start, far from the line to change.

    ## Example
    ```yaml
    attn_implementation: flash_attention_2
    tf32: true
    ```
    becomes
    ```yaml
    attn_implementation: sdpa
    tf32: false
    ```

    ## Fix safety
    Safe where the row has a port: SDPA computes the same attention, TF32 has no effect on
    Neuron (fp32 stays fp32), and the torch optimizers of the 32-bit names do the same update.
    Unsafe for the 8-bit optimizer names (full-precision state, four times the memory). Rows
    without a port are reported; with ``--target accelerator`` everything is reported.
    """

    code = "CN737"
    name = "config-library-setting"
    fixes = frozenset({Safety.SAFE, Safety.UNSAFE})
    file_kinds = CONFIG_KINDS
    triggers = (
        "flash_attn", "flash_attention", "xformers", "tf32", "load_in_", "quantization_bit", "optim",
        "deepspeed", "DEEPSPEED", "dynamo_backend", "compile_backend", "cuda", "liger",
        "train_micro_batch_size_per_gpu", "steps_per_print", "wall_clock_breakdown", "bnb.", "gpu",
        "accelerators", "varlen_attn", "attn_", "attention", "device_map", "use_vllm", "vllm_mode", "ffn_type",
    )
    # Keys are compared by normalize_key (`--Use-Flash-Attn` is use_flash_attn): so are these words.
    triggers_as_keys = True
    VALID = (
        Valid("attn_implementation: sdpa\n", path=CONFIG_EXAMPLE),
        Valid('{"train_batch_size": 32, "fp16": {"enabled": true}}\n', path="configs/train.json"),
        Valid("tf32: false\nbf16: true\n", path=CONFIG_EXAMPLE),
        Valid("deepspeed: null\n", path=CONFIG_EXAMPLE),
        Valid("optim: adamw_torch\n", path=CONFIG_EXAMPLE),
        Valid("description: uses flash_attention_2 on GPUs\n", path=CONFIG_EXAMPLE),
        Valid("strategy: ddp\n", path=CONFIG_EXAMPLE),
        Valid('{"config": {"runsOn": "CPU", "cpuFlavor": "cpu3c"}}\n', path=".runpod/hub.json"),
        # a project's own switch: Cog's `gpu:` is read in cog.yaml only
        Valid("gpu: true\n", path=CONFIG_EXAMPLE),
        Valid("resources:\n  instance_type: trn2.48xlarge\n  accelerators: null\n", path="sky/train.yaml"),
        Valid("resources:\n  accelerators: [tpu-v4-8]\n", path="sky/train.yaml"),
        Valid("accelerators:\n  neuron: trn2\n", path=CONFIG_EXAMPLE),
        # integer max_memory keys beside "auto" are the current accelerator's cores (measured):
        # the placement is planned, the model lands on neuron:0
        Valid("model:\n  device_map: auto\n  max_memory:\n    0: 20GiB\n", path=CONFIG_EXAMPLE),
        Valid("device_map: neuron\n", path=CONFIG_EXAMPLE),
        Valid("use_vllm: true\nvllm_mode: colocate\n", path="recipes/grpo.yaml"),
        Valid("model:\n  attn_config:\n    attn_impl: torch\n", path=CONFIG_EXAMPLE),
    )
    INVALID = (
        Invalid("model:\n  attn_implementation: flash_attention_2\n", "model:\n  attn_implementation: sdpa\n", path=CONFIG_EXAMPLE),
        Invalid('{"tf32": true, "bf16": true}\n', '{"tf32": false, "bf16": true}\n', path="configs/train.json"),
        Invalid("flash_attn: fa2\n", "flash_attn: sdpa\n", path="examples/lora.yaml"),
        Invalid("optim: paged_adamw_32bit\n", "optim: adamw_torch\n", path=CONFIG_EXAMPLE),
        Invalid("optim: adamw_bnb_8bit\n", "optim: adamw_torch\n", path=CONFIG_EXAMPLE, unsafe=True),
        Invalid("optimizer: paged_adamw_32bit\nflash_attn_rms_norm: true\n", "optimizer: adamw_torch\nflash_attn_rms_norm: true\n", path=CONFIG_EXAMPLE),
        Invalid("load_in_4bit: true\nadapter: qlora\n", path=CONFIG_EXAMPLE),
        Invalid("quantization_bit: 4\n", path=CONFIG_EXAMPLE),
        Invalid("deepspeed: examples/deepspeed/ds_z3_config.json\n", path=CONFIG_EXAMPLE),
        Invalid("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 2\n", path="accelerate.yaml"),
        Invalid('{\n  "zero_optimization": {"stage": 3},\n  "bf16": {"enabled": "auto"}\n}\n', path="ds_config.json"),
        Invalid('{\n  "train_batch_size": 64,\n  "steps_per_print": 100,\n  "fp16": {"enabled": true}\n}\n', path="ds_config.json"),
        Invalid('{\n  "train_micro_batch_size_per_gpu": BATCH_SIZE,\n  "fp16": {"enabled": FP16}\n}\n', path="ds_config_TEMPLATE.json"),
        Invalid("dynamo_config:\n  dynamo_backend: INDUCTOR\n", path="accelerate.yaml"),
        Invalid("flash_attention: true\nxformers_attention: false\n", path=CONFIG_EXAMPLE),
        Invalid("[model]\nattention = 'xformers'\n", path="config/model.toml"),
        Invalid("model:\n  strategy: cuda fp16 *20 -> cpu fp32\n", path=CONFIG_EXAMPLE),
        Invalid("tf32: true\n", path=CONFIG_EXAMPLE, target="accelerator"),
        # a cloud launcher's config (axolotl's examples/cloud/modal.yaml)
        Invalid("gpu: h100\ngpu_count: 1\nmemory: 128\n", path="examples/cloud/modal.yaml"),
        # serverless listings: RunPod Hub's hub.json and tests.json, Replicate's cog.yaml
        Invalid('{"config": {"runsOn": "GPU", "gpuCount": 1}}\n', path=".runpod/hub.json"),
        Invalid('{"config": {"gpuTypeId": "NVIDIA GeForce RTX 4090", "gpuCount": 1}}\n', path=".runpod/tests.json"),
        Invalid('build:\n  gpu: true\n  python_version: "3.11"\n', path="cog.yaml"),
        Invalid('{"id": "me/ci", "kernel_type": "notebook", "enable_gpu": "true"}\n', path="kernel-metadata.json"),
        # a SkyPilot task
        Invalid("resources:\n  accelerators: A100:8\nrun: python train.py\n", path="sky/train.yaml"),
        # its candidates: an ordered list, a set, a mapping NAME: COUNT
        Invalid("resources:\n  accelerators: [V100, A100]\n", path="sky/train.yaml"),
        Invalid("resources:\n  accelerators:\n    - L4:1\n    - H100:1\n", path="sky/train.yaml"),
        Invalid("resources:\n  accelerators: {A100:1, V100:1}\n", path="sky/train.yaml"),
        Invalid("resources:\n  accelerators: {A100: 8}\n", path="sky/train.yaml"),
        # accelerate counts no Neuron device: "auto" loads the model on the CPU (measured)
        Invalid("model_name_or_path: my-org/llm\ndevice_map: auto\n", path=CONFIG_EXAMPLE),
        # llm-foundry's MPT configs: flash_attn's kernels, MegaBlocks' MoE
        Invalid("model:\n  attn_config:\n    attn_impl: flash\n  ffn_config:\n    ffn_type: mb_dmoe\n", path=CONFIG_EXAMPLE),
        # TRL's GRPO recipes: server mode (the default up to 0.27) pushes weights over NCCL
        Invalid("use_vllm: true\nnum_generations: 8\n", path="recipes/grpo.yaml"),
        Invalid("use_vllm: true\nvllm_mode: server\n", path="recipes/grpo.yaml"),
    )

    @classmethod
    def check_text(cls, doc, settings) -> list[TextReport]:
        keys = setting_keys("config")
        out: list[TextReport] = []
        deepspeed_documents: set[int] = set()  # documents where DeepSpeed is already reported
        for s in doc.entries:
            if normalize_key(s.key) not in keys:
                continue
            found = match_setting(s.key, s.value, "config", doc.path)
            if found is None or (found.setting.unless_beside and found.setting.planned(_beside(doc, s))):
                continue
            message = f"`{s.key}: {s.value}` {found.what}"
            if found.setting.id.startswith("deepspeed") or found.setting.id.endswith("_deepspeed"):
                deepspeed_documents.add(s.document)
            replacement = splice(s, found.port) if found.port else None
            if replacement is not None and settings.target == "neuron":
                out.append(found.port_report(s.start, s.end, message, replacement, f"write `{found.port}`"))
                continue
            guidance = found.setting.guidance or (f"on Trainium write `{found.port}`" if found.port else "")
            out.append(TextReport(
                s.key_start if s.key_start >= 0 else s.start, s.end, message, guidance=guidance, effort=Effort.LOW,
            ))
        for _, start, end, key, members in _members(doc, member_keys() & keys):
            chosen = [m for m in members if match_setting(key, m, "config", doc.path, member=True) is not None]
            if chosen:
                found = match_setting(key, chosen[0], "config", doc.path, member=True)
                out.append(TextReport(
                    start, end, f"`{key}` lists {', '.join(chosen)}: {found.what}",
                    guidance=found.setting.guidance, effort=Effort.LOW,
                ))
        deepspeed_keys = frozenset({"deepspeed", "deepspeed_config", "deepspeed_config_file"}) & keys
        for document, start, end, key in _keys_of_mappings(doc, deepspeed_keys):
            if document in deepspeed_documents:
                continue  # `distributed_type: DEEPSPEED` beside it says it once
            out.append(TextReport(
                start, end, f"`{key}` configures DeepSpeed, which has no Neuron accelerator",
                guidance=_DEEPSPEED_GUIDANCE, effort=Effort.MEDIUM,
            ))
        if not doc.parsed and doc.format == "json":
            m = _TEMPLATE_KEY.search(doc.raw)
            if m is not None:
                out.append(TextReport(
                    m.start(), m.end(1) + 1, f"a DeepSpeed config template (`{m.group(1)}`): DeepSpeed has no Neuron accelerator",
                    guidance=_DEEPSPEED_GUIDANCE, effort=Effort.MEDIUM,
                ))
        for document in range(doc.documents):
            for key in _DEEPSPEED_CONFIG_KEYS:
                span = doc.keys.get((document, (key,)))
                if span is not None:
                    out.append(TextReport(
                        span[0], span[1], f"a DeepSpeed config (`{key}`): DeepSpeed has no Neuron accelerator",
                        guidance=_DEEPSPEED_GUIDANCE, effort=Effort.MEDIUM,
                    ))
                    break
        return out


# The table's rows and their sources belong to the rule's documentation (docs/rules.md, `cuda2neuron rules`).
LibrarySettingInConfig.__doc__ = with_table(LibrarySettingInConfig.__doc__ or "", "config")
LibrarySettingInConfig.reference = table_markdown("config")
