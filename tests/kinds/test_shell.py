"""Shell launch scripts: what is code, what is rewritten, and that every other byte survives."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cuda2neuron.core import Config, Settings
from cuda2neuron.workspace import fix_source, lint_source
from cuda2neuron.documents.shell import CODE, COMMENT, DQUOTE, HEREDOC, SQUOTE, scan, unquote, word_end

NEURON = Config()
ACCEL = Config(settings=Settings(target="accelerator"))
UNSAFE = Config(unsafe_fixes=True)


def _state_of(text: str, needle: str) -> str:
    return scan(text)[text.index(needle)]


@pytest.mark.parametrize(
    ("text", "needle", "state"),
    [
        pytest.param("nvidia-smi\n", "nvidia-smi", CODE, id="plain-command"),
        pytest.param("ls # nvidia-smi\n", "nvidia-smi", COMMENT, id="comment"),
        pytest.param("echo a#nvidia-smi\n", "nvidia-smi", CODE, id="hash-inside-word-is-not-comment"),
        pytest.param("echo 'nvidia-smi'\n", "nvidia-smi", SQUOTE, id="single-quotes"),
        pytest.param('echo "run nvidia-smi"\n', "nvidia-smi", DQUOTE, id="double-quoted-text"),
        pytest.param('echo "$(nvidia-smi -L)"\n', "nvidia-smi", CODE, id="substitution-in-dquotes"),
        pytest.param('echo "`nvidia-smi -L`"\n', "nvidia-smi", CODE, id="backticks-in-dquotes"),
        pytest.param("cat <<EOF\nnvidia-smi\nEOF\nls\n", "nvidia-smi", HEREDOC, id="heredoc-body"),
        pytest.param("cat <<'EOF'\nx\nEOF\nnvidia-smi\n", "nvidia-smi", CODE, id="after-heredoc"),
        pytest.param("cat <<-EOF\n\tx\n\tEOF\nnvidia-smi\n", "nvidia-smi", CODE, id="after-dash-heredoc"),
        pytest.param('echo "a \\" # b" nvidia-smi\n', "nvidia-smi", CODE, id="escaped-quote"),
        pytest.param("x=$(echo $((1+2)) )\nnvidia-smi\n", "nvidia-smi", CODE, id="arithmetic-nesting"),
    ],
)
def test_lexer_states(text, needle, state):
    assert _state_of(text, needle) == state


@pytest.mark.parametrize(
    ("text", "start", "word"),
    [
        pytest.param("A=0,1 torchrun", 2, "0,1", id="plain"),
        pytest.param('A="0, 1" x', 2, '"0, 1"', id="double-quoted-with-space"),
        pytest.param("N=$(nvidia-smi -L | wc -l) x", 2, "$(nvidia-smi -L | wc -l)", id="substitution"),
        pytest.param("N=${X:-1};y", 2, "${X:-1}", id="parameter-expansion"),
        pytest.param("(N=1)", 3, "1", id="subshell-close"),
    ],
)
def test_word_end(text, start, word):
    assert text[start : word_end(text, start)] == word


REWRITES = [
    pytest.param(
        "#!/bin/bash\nset -e\nCUDA_VISIBLE_DEVICES=0,1,2,3 python train.py\n",
        "#!/bin/bash\nset -e\nNEURON_RT_VISIBLE_CORES=0-3 python train.py\n",
        NEURON,
        id="prefix-assignment-range",
    ),
    # In front of torchrun every rank would reserve cores 0-3: an unsafe fix, not applied here.
    pytest.param(
        "#!/bin/bash\nset -e\nCUDA_VISIBLE_DEVICES=0,1,2,3 torchrun --nproc_per_node=4 train.py\n",
        "#!/bin/bash\nset -e\nCUDA_VISIBLE_DEVICES=0,1,2,3 torchrun --nproc_per_node=4 train.py\n",
        NEURON,
        id="prefix-of-torchrun-left",
    ),
    pytest.param(
        "export CUDA_VISIBLE_DEVICES=0,1\r\necho \"using ${CUDA_VISIBLE_DEVICES}\"\r\n",
        "export NEURON_RT_VISIBLE_CORES=0-1\r\necho \"using ${NEURON_RT_VISIBLE_CORES}\"\r\n",
        NEURON,
        id="crlf-kept-and-read-renamed",
    ),
    pytest.param(
        "export CUDA_VISIBLE_DEVICES='2,3'  # pair B\nunset CUDA_VISIBLE_DEVICES\n",
        "export NEURON_RT_VISIBLE_CORES='2-3'  # pair B\nunset NEURON_RT_VISIBLE_CORES\n",
        NEURON,
        id="quotes-comment-and-unset",
    ),
    pytest.param(
        "CUDA_VISIBLE_DEVICES=0 \\\n  python a.py && CUDA_VISIBLE_DEVICES=1 python b.py\n",
        "NEURON_RT_VISIBLE_CORES=0 \\\n  python a.py && NEURON_RT_VISIBLE_CORES=1 python b.py\n",
        NEURON,
        id="continuation-and-two-commands",
    ),
    pytest.param(
        "export CUDA_VISIBLE_DEVICES=0,1\n",
        "export CUDA_VISIBLE_DEVICES=0,1 NEURON_RT_VISIBLE_CORES=0-1\n",
        ACCEL,
        id="accelerator-adds-neuron-variable",
    ),
    pytest.param(
        "CUDA_VISIBLE_DEVICES=$1 python w.py\necho $CUDA_VISIBLE_DEVICES\n",
        "NEURON_RT_VISIBLE_CORES=$1 python w.py\necho $NEURON_RT_VISIBLE_CORES\n",
        UNSAFE,
        id="run-time-value-unsafe",
    ),
]


@pytest.mark.parametrize(("source", "expected", "config"), REWRITES)
def test_rewrites(source, expected, config):
    fixed, _ = fix_source(source, "launch.sh", config)
    assert fixed == expected
    again, _ = fix_source(fixed, "launch.sh", config)
    assert again == fixed


UNTOUCHED = [
    # One assignment without a range form blocks the others: renaming only some would leave a
    # later read of an unset variable.
    pytest.param(
        "export CUDA_VISIBLE_DEVICES=0,1\nCUDA_VISIBLE_DEVICES=0,2 python b.py\necho $CUDA_VISIBLE_DEVICES\n",
        UNSAFE,
        id="mixed-script-all-or-nothing",
    ),
    # A computed read makes the whole rename unsafe; without the opt-in nothing moves.
    pytest.param(
        "export CUDA_VISIBLE_DEVICES=0,1\nN=$(echo $CUDA_VISIBLE_DEVICES | tr , ' ' | wc -w)\n",
        NEURON,
        id="computed-read-needs-unsafe",
    ),
    pytest.param("export CUDA_VISIBLE_DEVICES=0,2\necho $CUDA_VISIBLE_DEVICES\n", NEURON, id="non-consecutive"),
    pytest.param("CUDA_VISIBLE_DEVICES=1,0 python a.py\n", NEURON, id="descending-order-remaps"),
    pytest.param("CUDA_VISIBLE_DEVICES=GPU-8a3f python a.py\n", NEURON, id="uuid"),
    pytest.param("CUDA_VISIBLE_DEVICES=$1 python w.py\n", NEURON, id="run-time-value-needs-unsafe"),
    pytest.param("python train.py --cuda --device cuda:0\n", NEURON, id="cuda-flags"),
    pytest.param("# CUDA_VISIBLE_DEVICES=0,1 torchrun\n", NEURON, id="comment"),
    pytest.param("cat > env.sh <<EOF\nexport CUDA_VISIBLE_DEVICES=0,1\nEOF\n", NEURON, id="heredoc"),
]


@pytest.mark.parametrize(("source", "config"), UNTOUCHED)
def test_left_untouched(source, config):
    fixed, _ = fix_source(source, "launch.sh", config)
    assert fixed == source


FINDINGS = [
    pytest.param(
        "export CUDA_VISIBLE_DEVICES=0,2\n", NEURON, [("CN701", 1, 7)], id="non-consecutive-reported"
    ),
    pytest.param(
        "NGPUS=$(nvidia-smi -L | wc -l)\ntorchrun --nproc_per_node=$NGPUS t.py\n",
        NEURON,
        [("CN702", 1, 8), ("CN703", 2, 9)],
        id="gpu-count-through-variable",
    ),
    pytest.param(
        'echo "$(nvidia-smi -L | wc -l) GPUs"  # nvidia-smi\n', NEURON, [("CN702", 1, 8)],
        id="comment-not-reported",
    ),
    pytest.param("export NCCL_DEBUG=INFO\n", ACCEL, [], id="nccl-silent-for-accelerator"),
    pytest.param("export NCCL_DEBUG=INFO\n", NEURON, [("CN704", 1, 7)], id="nccl-reported-for-neuron"),
    pytest.param(
        "export CUDA_LAUNCH_BLOCKING=1 CUDA_VISIBLE_DEVICES=0\n", NEURON,
        [("CN705", 1, 7), ("CN701", 1, 30)], id="cuda-env-and-visible-devices",
    ),
    pytest.param("nvidia-smi  # cuda2neuron: ignore[CN702]\n", NEURON, [], id="suppression-comment"),
]


@pytest.mark.parametrize(("source", "config", "expected"), FINDINGS)
def test_findings(source, config, expected):
    found = [(f.code, f.span.start_line, f.span.start_col) for f in lint_source(source, "launch.sh", config)]
    assert sorted(found) == sorted(expected)


def test_non_utf8_bytes_survive_a_rewrite():
    source = b"# caf\xe9 (latin-1 comment)\nCUDA_VISIBLE_DEVICES=0,1 python a.py\n"
    fixed, findings = fix_source(source, "launch.sh", NEURON)
    assert fixed == b"# caf\xe9 (latin-1 comment)\nNEURON_RT_VISIBLE_CORES=0-1 python a.py\n"
    assert [f.code for f in findings if f.applied] == ["CN701"]


def test_select_limits_shell_rules():
    source = "export NCCL_DEBUG=INFO\nnvidia-smi\n"
    codes = {f.code for f in lint_source(source, "launch.sh", replace(NEURON, select=("CN702",)))}
    assert codes == {"CN702"}


def test_guidance_is_concrete():
    (finding,) = lint_source("torchrun --nproc_per_node=gpu t.py\n", "run.bash", NEURON)
    assert finding.code == "CN703" and "NeuronCore" in finding.guidance and finding.manual


@pytest.mark.parametrize(
    ("source", "reported"),
    [
        pytest.param("pip install flash-attn einops\n", ["flash-attn"], id="one-of-two"),
        pytest.param("pip install -r requirements.txt -c xformers.txt\n", [], id="option-values-are-files"),
        pytest.param(
            "pip install --extra-index-url=https://download.pytorch.org/whl/cu118 torch\n",
            ["--extra-index-url=https://download.pytorch.org/whl/cu118"],
            id="index-option-with-equals",
        ),
        pytest.param("pip install xformers && python train.py triton\n", ["xformers"], id="stops-at-command-end"),
        pytest.param(
            "pip install \\\n  'apex @ git+https://github.com/NVIDIA/apex' \\\n  numpy\n",
            ["'apex @ git+https://github.com/NVIDIA/apex'"],
            id="continuations-and-direct-reference",
        ),
        pytest.param("conda install pytorch\n", [], id="not-pip"),
        pytest.param("pipx install gpustat\n", [], id="pipx-is-not-pip"),
    ],
)
def test_pip_install_of_cuda_only_packages(source, reported):
    findings = [f for f in lint_source(source, "setup.sh", NEURON) if f.code == "CN713"]
    lines = source.splitlines()
    assert [lines[f.line - 1][f.span.start_col : f.span.end_col] for f in findings] == reported


@pytest.mark.parametrize(
    ("word", "literal"),
    [
        pytest.param('"Org/Model:transformer/*.safetensors:bitsandbytes_nf4"', "Org/Model:transformer/*.safetensors:bitsandbytes_nf4", id="glob-in-double-quotes-is-literal"),
        pytest.param('"transformer-engine[pytorch]==2.17.0"', "transformer-engine[pytorch]==2.17.0", id="brackets-in-double-quotes"),
        pytest.param("'x*'", "x*", id="single-quotes"),
        pytest.param('"$OPTIM"', None, id="variable-in-double-quotes"),
        pytest.param('"`date`"', None, id="command-in-double-quotes"),
        pytest.param("*.py", None, id="bare-glob"),
        pytest.param("adamw_torch", "adamw_torch", id="bare-word"),
    ],
)
def test_unquote_reads_what_the_shell_leaves_literal(word, literal):
    assert unquote(word) == literal
