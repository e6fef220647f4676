"""CN709: library settings passed as command-line flags in launch scripts, and the DeepSpeed launcher."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, Safety, TextReport, Valid
from cuda2neuron.documents.shell import CODE, COMMENT, ShellScript, unquote, word_end

from ..._shared.library_settings import gpu_constants, list_settings, match_setting, normalize_key, setting_keys, table_markdown, with_table
from .._helpers import TextRule

__all__ = ["LibrarySettingFlag"]

# `--key=value` or `--key value` (a `\` line continuation may sit between); a dotted flag
# (`--ds.attn_implementation`, OpenRLHF / Hydra-style groups) names its last part.
_FLAG_RE = re.compile(r"(?<![\w.-])--(?:[A-Za-z][\w-]*\.)*([A-Za-z][\w-]*)(=|[ \t]*(?:\\\n[ \t]*)*)")
# A value inside quotes or a heredoc (a command kept in a variable: `cmd="python train.py
# --tf32 True"`, `read -d '' CMD <<EOF`) ends at a blank or a quote.
_TEXT_VALUE_RE = re.compile(r"[^\s\"'`;&|]*")
# The `deepspeed` launcher in command position: first word of a line, after variable
# assignments or a wrapper (`nohup`, `exec`, `time`); `pip install deepspeed` is not it.
_LAUNCHER_RE = re.compile(r"^[ \t]*(?:(?:[A-Za-z_]\w*=\S*|nohup|exec|time)[ \t]+)*(deepspeed)(?=[ \t])", re.MULTILINE)
# A hard-coded GPU count (`GPUS_PER_NODE=8`): the names of the table's [constant] row.
_CONSTANT_RE = re.compile(r"[A-Z_]*GPU[A-Z_]*")
_DEEPSPEED_GUIDANCE = (
    "DeepSpeed has no Neuron accelerator: launch with torchrun (--nproc_per_node=<#NeuronCores>) and shard "
    "with FSDP2 on the \"neuron\" process-group backend, or use NxD Training"
)



def _flags(doc: ShellScript) -> frozenset[str]:
    """Every flag the script's code passes (``--max_memory`` beside ``--device_map auto``)."""
    return frozenset(normalize_key(m.group(1)) for m in _FLAG_RE.finditer(doc.text) if doc.states[m.start()] != COMMENT)

def _ported(value: str, port: str) -> str:
    """``port`` written the way the value was: ``True`` becomes ``False``, quotes kept."""
    literal = unquote(value) or value
    if port == "false" and literal[:1].isupper():
        port = "False"
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{quote}{port}{quote}"


def _value_at(doc: ShellScript, i: int) -> str:
    """The flag's value starting at ``i``: a shell word in code (a quoted one too: its opening
    quote is not code), up to a blank or a quote inside a string or a heredoc."""
    if doc.states[i] == CODE or doc.text[i] in "'\"":
        return doc.text[i:word_end(doc.text, i)]
    return _TEXT_VALUE_RE.match(doc.text, i).group(0)


def _nccl_backend_flag(doc: ShellScript, m: re.Match[str], settings) -> list[TextReport]:
    """``--dist-backend nccl``, ``--vllm.sync_backend nccl``: a backend flag set to NCCL, read as
    CN732 reads a config's ``backend: nccl`` (the key says backend, the value names NCCL)."""
    text = doc.text
    vs = m.end()
    if m.group(2) == "" or vs >= len(text):
        return []
    value = _value_at(doc, vs)
    if (unquote(value) or "").lower() != "nccl":
        return []
    message = f"`--{m.group(1)} {value}` selects the NCCL process-group backend"
    if settings.target == "neuron":
        quote = value[0] if value[:1] in ("'", '"') else ""
        return [TextReport(vs, vs + len(value), message, replacement=f"{quote}neuron{quote}", description='pass the "neuron" backend')]
    return [TextReport(m.start(), vs + len(value), message, guidance="leave the backend out and let torch.distributed "
                       "choose the one for the device (torch.distributed.get_default_backend_for_device)", effort=Effort.LOW)]


def _listed_settings(doc: ShellScript, m: re.Match[str], settings) -> list[TextReport]:
    """The table's settings among the items of a ``key=value`` list a flag passes as its value:
    lm-evaluation-harness's ``--model_args pretrained=gpt2,parallelize=true`` (``list_settings``
    decides which items count). Each item is reported on its own, its value ported where the row
    has a port."""
    vs = m.end()
    if m.group(2) == "" or vs >= len(doc.text):
        return []
    word = _value_at(doc, vs)
    if "=" not in word:
        return []
    quoted = word[:1] in ("'", '"') and word[-1:] == word[:1] and len(word) >= 2
    inner, at = (word[1:-1], vs + 1) if quoted else (word, vs)
    out: list[TextReport] = []
    for item in list_settings(inner):
        shown = inner[item.start:item.end]
        message = f"`{shown}` in `--{m.group(1)}` {item.match.what}"
        port = item.match.port
        if port and settings.target == "neuron":
            out.append(item.match.port_report(
                at + item.value_start, at + item.value_end, message, _ported(item.value, port), f"pass `{item.key}={port}`",
            ))
            continue
        guidance = item.match.setting.guidance or (f"on Trainium pass `{item.key}={port}`" if port else "")
        out.append(TextReport(at + item.start, at + item.end, message, guidance=guidance, effort=Effort.LOW))
    return out


class LibrarySettingFlag(TextRule):
    """
    ## What it does
    Reads launch scripts for the library settings of the table
    ``rules/_shared/library_settings.toml`` passed as flags (the rows whose ``where`` holds
    ``cli``): ``--attn_implementation flash_attention_2``, ``--tf32 True``, ``--optim
    paged_adamw_8bit``, ``--deepspeed ds_config.json``, ``--dynamo_backend inductor``,
    ``--enable_xformers_memory_efficient_attention``, ... and reports the ``deepspeed`` launcher
    and hard-coded GPU counts (``GPUS_PER_NODE=8``, the table's ``[constant]`` names), and
    backend flags set to NCCL (``--dist-backend nccl``, read as CN732 reads ``backend: nccl``).
    A flag whose value is a ``key=value,key=value`` list (lm-evaluation-harness's ``--model_args
    pretrained=gpt2,parallelize=true``) is read item by item: the ``cli`` rows and the rows read
    only in such lists (``where = ["arglist"]``) fire on its items.
    Where the row has a port the flag's value is rewritten on the neuron target.

    ## Why is this bad?
    Hugging Face scripts turn every field of their argument dataclasses into a flag, so the
    setting that loads flash_attn or bitsandbytes, makes ``TrainingArguments`` raise without
    CUDA (``--tf32 True``) or runs DeepSpeed lives in the launch script, not in the code.

    ## Example
    ```bash
    torchrun --nproc_per_node 8 train.py --attn_implementation flash_attention_2 --tf32 True
    ```
    becomes
    ```bash
    torchrun --nproc_per_node 8 train.py --attn_implementation sdpa --tf32 False
    ```

    ## Fix safety
    As CN737: safe where the row has a port (unsafe for the 8-bit optimizer names), reported
    otherwise; a bare switch (``--tf32``) and values computed at run time are reported. With
    ``--target accelerator`` everything is reported.
    """

    code = "CN709"
    name = "library-setting-flag"
    fixes = frozenset({Safety.SAFE, Safety.UNSAFE})
    file_kinds = frozenset({"shell"})
    triggers = (
        "flash_attn", "flash_attention", "xformers", "tf32", "load_in_", "quantization_bit", "optim",
        "deepspeed", "DEEPSPEED", "dynamo_backend", "compile_backend", "cuda", "liger", "GPUS", "gpus", "nccl",
        "bnb.", "varlen_attn", "bitsandbytes", "attn_", "attention", "device_map", "ffn_type", "parallelize",
    )
    # Keys are compared by normalize_key (`--Use-Flash-Attn` is use_flash_attn): so are these words.
    triggers_as_keys = True
    VALID = (
        Valid("python train.py --attn_implementation sdpa --tf32 False\n", path="launch.sh"),
        Valid("GPUS_PER_NODE=0\n", path="launch.sh"),
        Valid("pip install deepspeed\n", path="launch.sh"),
        Valid("python train.py --optim adamw_torch --deepspeed ''\n", path="launch.sh"),
        Valid("# torchrun train.py --tf32 True\n", path="launch.sh"),
        Valid("python train.py --optim $OPTIM\n", path="launch.sh"),
        Valid("python infer.py --device_map auto --max_memory 0=20GiB\n", path="launch.sh"),
        # an item read only in lists, as a flag of its own; a list that turns it off; a value
        # computed at run time
        Valid("python eval.py --parallelize True\n", path="launch.sh"),
        Valid("lm_eval --model_args pretrained=gpt2,parallelize=False\n", path="launch.sh"),
        Valid("lm_eval --model_args pretrained=gpt2,parallelize=$PAR\n", path="launch.sh"),
        Valid("lm_eval --model_args pretrained=gpt2,device_map=auto,max_memory=0:20GiB\n", path="launch.sh"),
    )
    INVALID = (
        Invalid(
            "torchrun --nproc_per_node 8 train.py \\\n    --attn_implementation flash_attention_2 \\\n    --tf32 True\n",
            "torchrun --nproc_per_node 8 train.py \\\n    --attn_implementation sdpa \\\n    --tf32 False\n",
            path="launch.sh",
        ),
        Invalid("python train.py --optim=paged_adamw_32bit\n", "python train.py --optim=adamw_torch\n", path="launch.sh"),
        Invalid("python train.py --optim adamw_bnb_8bit\n", "python train.py --optim adamw_torch\n", path="launch.sh", unsafe=True),
        Invalid("python train.py --flash_attn fa2 --quantization_bit 4\n", "python train.py --flash_attn sdpa --quantization_bit 4\n", path="launch.sh"),
        Invalid("deepspeed --num_gpus 8 train.py --deepspeed configs/ds_z2.json\n", path="launch.sh"),
        Invalid("accelerate launch --dynamo_backend inductor train.py\n", path="launch.sh"),
        Invalid("accelerate launch train_dreambooth.py --enable_xformers_memory_efficient_attention --tf32\n", path="launch.sh"),
        Invalid(
            "read -r -d '' CMD <<EOF\nopenrlhf.cli.train_sft \\\n   --ds.attn_implementation flash_attention_2 \\\n   --ds.zero_stage 2\nEOF\n",
            "read -r -d '' CMD <<EOF\nopenrlhf.cli.train_sft \\\n   --ds.attn_implementation sdpa \\\n   --ds.zero_stage 2\nEOF\n",
            path="launch.sh",
        ),
        Invalid('CMD="python train.py --tf32 True"\n$CMD\n', 'CMD="python train.py --tf32 False"\n$CMD\n', path="launch.sh"),
        Invalid("python train.py --tf32 True\n", path="launch.sh", target="accelerator"),
        Invalid("GPUS_PER_NODE=8\nWORLD_SIZE=$((NUM_NODES*GPUS_PER_NODE))\n", path="launch.slurm"),
        Invalid(
            "python train.py --dist-backend nccl --vllm.sync_backend 'nccl'\n",
            "python train.py --dist-backend neuron --vllm.sync_backend 'neuron'\n",
            path="launch.sh",
        ),
        Invalid("ray job submit -- python3 -m trainer --actor.num_gpus_per_node 8 --ref.num_gpus_per_node 8\n", path="launch.sh"),
        Invalid("python export.py --model my-org/llm --device_map auto --quant_bits 4\n", path="launch.sh"),
        # lm-evaluation-harness's --model_args lists: each item is a setting of its own
        Invalid(
            "lm_eval --model hf \\\n    --model_args pretrained=bigscience/mt0-small,parallelize=true \\\n    --tasks afrisenti\n",
            path="run.sh",
        ),
        Invalid('lm_eval --model_args "pretrained=${model},parallelize: true"\n', path="run.sh"),
        Invalid(
            "lm_eval --model_args pretrained=gpt2,attn_implementation=flash_attention_2\n",
            "lm_eval --model_args pretrained=gpt2,attn_implementation=sdpa\n",
            path="run.sh",
        ),
        # DiffSynth-Studio's training scripts
        Invalid(
            "accelerate launch train.py \\\n  --quant_options \"Tongyi-MAI/Z-Image-Turbo:transformer/*.safetensors:bitsandbytes_nf4\" \\\n  --use_gradient_checkpointing\n",
            path="examples/z_image/lora/Z-Image-Turbo.sh",
        ),
    )

    @classmethod
    def check_text(cls, doc: ShellScript, settings) -> list[TextReport]:
        text = doc.text
        keys = setting_keys("cli")
        out: list[TextReport] = []
        states = doc.states
        for m in _FLAG_RE.finditer(text):
            flag = m.group(1)
            # Commands are also kept in strings and heredocs; comments are text.
            if states[m.start()] == COMMENT:
                continue
            if "backend" in flag.lower() and flag.lower() != "dynamo_backend":
                out.extend(_nccl_backend_flag(doc, m, settings))
                continue
            if normalize_key(flag) not in keys:
                out.extend(_listed_settings(doc, m, settings))
                continue
            vs = m.end()
            # A quote after the flag closes the string the flag sits in (`cmd="... --tf32"`); in code
            # it opens the value (`--deepspeed ''`).
            ends = "-\n;&|)#" if states[m.start()] == CODE else "-\n;&|)#\"'"
            bare = m.group(2) != "=" and (vs >= len(text) or text[vs] in ends or m.group(2) == "")
            if bare:
                value = "true"
            else:
                value = _value_at(doc, vs)
            if not bare and unquote(value) is None:
                continue  # computed at run time ($OPTIM): the script's caller decides
            found = match_setting(flag, value, "cli")
            if found is None or (found.setting.unless_beside and found.setting.planned(_flags(doc))):
                continue
            message = f"`--{flag}{'' if bare else ' ' + value}` {found.what}"
            if found.port and not bare and settings.target == "neuron":
                out.append(found.port_report(vs, vs + len(value), message, _ported(value, found.port), f"pass `{found.port}`"))
                continue
            guidance = found.setting.guidance or (f"on Trainium pass `--{flag} {found.port}`" if found.port else "")
            end = vs if bare else vs + len(value)
            out.append(TextReport(m.start(), end, message, guidance=guidance, effort=Effort.LOW))
        names, what, guidance, _source = gpu_constants()
        for ns, ne, vs, ve in doc.assignments(_CONSTANT_RE):
            value = unquote(text[vs:ve])
            if text[ns:ne] in names and value is not None and value.isdigit() and int(value) > 0:
                out.append(TextReport(ns, ve, f"`{text[ns:ve]}` {what}", guidance=guidance, effort=Effort.LOW))
        if "deepspeed" in text:
            for m in _LAUNCHER_RE.finditer(text):
                if doc.is_code(m.start(1)):
                    out.append(TextReport(
                        m.start(1), m.end(1), "the `deepspeed` launcher runs DeepSpeed, which has no Neuron accelerator",
                        guidance=_DEEPSPEED_GUIDANCE, effort=Effort.MEDIUM,
                    ))
        return out


# The table's rows and their sources belong to the rule's documentation (docs/rules.md, `cuda2neuron rules`).
LibrarySettingFlag.__doc__ = with_table(with_table(LibrarySettingFlag.__doc__ or "", "cli"), "arglist")
LibrarySettingFlag.reference = table_markdown("cli") + "\n" + table_markdown("arglist")
