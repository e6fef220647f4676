"""The residual pass (CN902): a code line that still names CUDA and that no finding covers is
reported, once, in every kind it reads; comments, prose, covered lines and the project's own names
are not; it honours select / ignore / per-file-ignores and suppression comments, judges coverage
against the whole catalog, is cached with the file, and is counted apart in every report."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import pytest

from cuda2neuron.core import Config, FileStatus, RunOptions
from cuda2neuron.kinds import process_bytes
from cuda2neuron.report import build_report, render
from cuda2neuron.workspace import ResultCache, SourceFile, fix_source, lint_source, process_files, with_project_facts
from cuda2neuron.workspace import _runner

CN902 = "CN902"


def _residual_lines(source: str, path: str, config: Config | None = None) -> list[int]:
    return sorted(f.span.start_line for f in lint_source(source, path, config or Config()) if f.code == CN902)


# (path, source, lines CN902 reports): one row per kind and per thing that is or is not code.
_ROWS = {
    # Python
    "python-subprocess-nvcc": ("build.py", "import subprocess\nsubprocess.run(['nvcc', '-V'])\n", [2]),
    "python-comment-docstring-message": (
        "m.py", '"""Runs on CUDA."""\n# nvcc needed\nprint("built with nvcc 12")\nraise RuntimeError("NCCL failed")\n', [],
    ),
    "python-covered-by-a-rule": ("m.py", "import torch\nx = torch.zeros(3).cuda()\n", []),
    "python-whole-statement-covered": ("m.py", "import torch\nx = torch.zeros(\n    3, device='cuda',\n    dtype=None)\n", []),
    "python-own-name": ("m.py", "def use_cuda_graphs(m):\n    return m\ny = use_cuda_graphs(1)\n", []),
    "python-own-import": ("pkg/m.py", "from .random import get_cuda_rng_tracker\nt = get_cuda_rng_tracker()\n", []),
    "python-foreign-import": ("m.py", "from gpu_utils.checks import is_cuda_ready\nok = is_cuda_ready()\n", [1, 2]),
    # CN213 covers the call, and the import of what it reports with it.
    "python-library-probe": ("m.py", "from transformers.utils import is_torch_cuda_available\nok = is_torch_cuda_available()\n", []),
    "python-path-part": ("m.py", "import os, tempfile\nd = os.path.join(tempfile.gettempdir(), 'cnn_cuda_example')\n", []),
    "python-path-into-cuda": ("m.py", "import os\ncuda_home = find_toolkit()\nnvcc = os.path.join(cuda_home, 'bin', 'nvcc_wrapper')\n", [3]),
    "python-str-join-is-no-path": ("m.py", "x = ', '.join(['use_cuda_x'])\n", [1]),
    "python-literal-type": ("m.py", 'from typing import Literal\n\ndef f(accelerator: Literal["cpu", "cuda"] = "cpu"):\n    pass\n', []),
    # NVIDIA the company: a Hub namespace (litgpt's model table), a hosted API (FastChat's providers)
    "python-vendor-org": ("m.py", 'cfg = dict(name="Llama-Nemotron", hf_config=dict(org="nvidia", name="Llama-Nemotron"))\n', []),
    "python-vendor-api": ("m.py", 'def run(api):\n    if api["api_type"] == "nvidia":\n        return post(api)\n', []),
    # unsloth's consent-gate tests: the organisation a call answers for one of its Hub repositories
    "python-vendor-hub-owner": ("m.py", 'def test():\n    assert owner("NVIDIA/Nemotron", []) == "NVIDIA"\n', []),
    "python-vendor-compared-without-hub-id": ("m.py", 'def test():\n    assert vendor(name) == "NVIDIA"\n', [2]),
    "python-vendor-gpu-name": ("m.py", 'import torch\nif "nvidia" in gpu_name:\n    check_links()\n', [2]),
    # trl: a list of variables a child drops is names, not settings
    # Megatron's package_info.py (inside DeepSpeedExamples): whom to write to; a GPU vendor's setting stays
    "python-package-contact": (
        "pkg/package_info.py", "__contact_names__ = 'NVIDIA'\n__contact_emails__ = 'nemo-toolkit@nvidia.com'\n"
        "gpu_vendor = 'nvidia'\n", [3],
    ),
    "python-env-name-list": ("m.py", '_STRIP = ("RANK", "WORLD_SIZE", "NCCL_DEBUG_FILE")\n', []),
    "python-upper-device-words": ("m.py", 'KINDS = ["CPU", "CUDA"]\n', [1]),
    # a keyword of a callee the module binds itself or imports from the project (unsloth's tests
    # build a host with its fields); a keyword handed to a library stays
    "python-own-callee-keyword": (
        "tests/test_host.py",
        "import installer\nHostInfo = installer.HostInfo\nh = HostInfo(has_usable_nvidia=False,\n"
        "    nvidia_smi=None)\n\ndef make(**fields):\n    return fields\n\nm = make(driver_cuda_version=(13, 1))\n",
        [],
    ),
    "python-library-callee-keyword": (
        "m.py", "from gpu_tools import probe\nok = probe(has_usable_nvidia=True)\n", [2],
    ),
    "python-own-enum-member": ("pkg/m.py", "from .helper import DeviceType\nif t == DeviceType.CUDA:\n    pass\n", []),
    # a page's address, a web service's credential, letters of a word across two words of a name
    "python-web-address": ("m.py", 'DOCS = "https://docs.nvidia.com/deploy/nccl-tuning"\n', []),
    "python-credential-name": ("m.py", 'import os\nkey = os.environ["NVIDIA_API_KEY"]\n', []),
    # a string literal as source spells it, looked for in a module's text (unsloth's installer tests)
    "python-quoted-literal-searched-in-source": ("m.py", "src = open(p).read()\nassert '\"cuda\"' in src[10:500]\n", []),
    # a loop whose variable is only ever a key walks keys (unsloth's fingerprint test); one that
    # hands its variable to a call walks values
    # a word looked for in a text the test read from a file or from source (unsloth's installer
    # and ROCm tests); the same word looked for in the environment is a setting
    "python-word-searched-in-a-file-read": (
        "m.py", "def t(p):\n    content = p.read_text()\n    assert '/proc/driver/nvidia' in content\n", [],
    ),
    "python-word-searched-in-source-read": (
        "m.py", "import inspect\ndef t(f):\n    src = inspect.getsource(f)\n    assert '/proc/driver/nvidia' in src\n", [],
    ),
    "python-word-searched-in-what-a-call-returns": (
        "m.py", "def t(paths):\n    found = paths()\n    assert '/proc/driver/nvidia' in found\n", [3],
    ),
    # a call's result the module searches elsewhere for a word no environment key holds (`=`) is
    # a text (unsloth's crash-message tests); a path searched in it proves nothing (the row above)
    "python-word-searched-in-a-message-a-call-returns": (
        "m.py",
        "def t1():\n    message = advice('vulkan')\n    assert 'BACKEND=cpu' in message\n\n"
        "def t2():\n    message = advice(None)\n    assert 'CUDA_VISIBLE_DEVICES' not in message\n",
        [],
    ),
    # a slice of a file's text is text; a pattern looked for in it is a needle (unsloth's tests)
    "python-word-searched-in-a-slice-of-a-file-read": (
        "m.py", "def t(p):\n    source = p.read_text()\n    body = source[3:9]\n    assert '_nvidia_detected' in body\n", [],
    ),
    "python-pattern-searched-in-a-file-read": (
        "m.py", "import re\ndef t(p):\n    stack = p.read_text()\n    m = re.search(r'_CUDA_SPEC[^(]*', stack)\n", [],
    ),
    "python-pattern-searched-in-a-call-result": (
        "m.py", "import re\ndef t(run):\n    out = run()\n    m = re.search(r'_CUDA_SPEC[^(]*', out)\n", [4],
    ),
    "python-hub-namespace-prefix": (
        "m.py", "def t(name):\n    return name.lower().startswith('nvidia/')\n", [],
    ),
    "python-word-searched-in-a-name-bound-twice": (
        "m.py", "def t(p, q):\n    content = p.read_text()\n    content = q\n    assert '/proc/driver/nvidia' in content\n", [4],
    ),
    # a device a CLI test writes into the parser and asserts back is test data
    # (lm-evaluation-harness's --model_args tests); one a test also hands to torch is a device
    "python-test-round-trips-a-device-through-a-parser": (
        "m.py",
        "import argparse\ndef test_args():\n    parser = argparse.ArgumentParser()\n"
        "    args = parser.parse_args(['--model_args', 'pretrained=gpt2,device=cuda'])\n"
        "    assert args.model_args == {'pretrained': 'gpt2', 'device': 'cuda'}\n",
        [],
    ),
    "python-test-hands-the-device-to-torch-too": (
        "m.py",
        "import argparse\nimport torch\ndef test_args():\n    parser = argparse.ArgumentParser()\n"
        "    args = parser.parse_args(['--model_args', 'pretrained=gpt2,device=cuda'])\n"
        "    assert args.model_args == {'pretrained': 'gpt2', 'device': 'cuda'}\n    torch.ones(1, device='cuda')\n",
        [5],
    ),
    "python-helper-round-trips-a-device": (
        "m.py",
        "import argparse\ndef check():\n    parser = argparse.ArgumentParser()\n"
        "    args = parser.parse_args(['--model_args', 'pretrained=gpt2,device=cuda'])\n"
        "    assert args.model_args == {'pretrained': 'gpt2', 'device': 'cuda'}\n",
        [4],
    ),
    # what a program printed, as pytest's capfd / capsys give it back: a log searched for a word
    "python-word-in-captured-output": (
        "m.py", "def test_log(capfd):\n    log()\n    captured = capfd.readouterr()\n    assert 'CUDA' in captured.out\n", [],
    ),
    "python-word-in-captured-out-bound": (
        "m.py", "def test_log(capsys):\n    log()\n    out = capsys.readouterr().out\n    assert 'CUDA_DEVICE_ORDER=' in out\n", [],
    ),
    "python-word-in-another-result-out": (
        "m.py", "def test_log(run):\n    out = run().out\n    assert 'CUDA_DEVICE_ORDER=' in out\n", [3],
    ),
    # a pattern looked for in an exception's message (walking `__cause__`); in a plain parameter it may be anything
    "python-pattern-in-an-exception-message": (
        "m.py",
        "import re\ndef wanted(error):\n    current = error\n    while current is not None:\n        message = str(current)\n"
        "        m = re.search(r'libcudart\\.so\\.(\\d+)', message)\n        current = getattr(current, '__cause__', None)\n",
        [],
    ),
    "python-pattern-in-a-parameter-text": (
        "m.py", "import re\ndef wanted(error):\n    message = str(error)\n    m = re.search(r'libcudart\\.so\\.(\\d+)', message)\n", [4],
    ),
    # markers of a log: a list bound once that holds a phrase, searched in each line
    "python-markers-of-a-log": (
        "m.py",
        "def oom(output):\n    lines = output.lower().splitlines()\n    gpu = ('cuda', 'rocm', 'device memory')\n"
        "    return any(any(m in line for m in gpu) for line in lines)\n",
        [],
    ),
    "python-words-without-a-phrase": (
        "m.py", "def pick(output):\n    gpu = ('cuda_x', 'rocm')\n    return any(m in output for m in gpu)\n", [2],
    ),
    # the name a file is loaded under (unsloth's tests load a sibling spoof module by path)
    "python-module-name-loaded-from-a-file": (
        "m.py", "import importlib.util\nspec = importlib.util.spec_from_file_location('_cuda_spoof', path)\n", [],
    ),
    "python-module-imported-by-name": ("m.py", "import importlib\nmod = importlib.import_module('pycuda_helpers')\n", [2]),
    # a config's list of what is left out: nothing named there is installed
    "json-skip-list": ("ci/pins.json", '{"skip": [\n  "nvidia-nccl-cu12",\n  "triton"\n], "keep": ["nvidia-cudnn-cu12"]}\n', [4]),
    # a job script a Python launcher writes (nanotron's sbatch f-string) is read as a script file:
    # its commands are code, its comments and quoted messages are not
    "python-script-string": (
        "launch.py",
        'def script(args):\n    return f"""#!/bin/bash\n#SBATCH --nodes={args.nodes}\n'
        '{"# " if args.quiet else ""}export WANDB_MODE=disabled\n# export NCCL_DEBUG=WARN\n'
        'export CUDA_DEVICE_MAX_CONNECTIONS=1\necho "checks the cuda version"\nnvidia-smi\n"""\n',
        [6, 8],
    ),
    # a multi-line message whose quotes inside come before the last CUDA word: still one string
    "python-prose-string-past-the-last-word": (
        "m.py", 'def help(x):\n    return f"""\n{"a" if x else ""} then\nsee the nvcc docs\n"""\n', [],
    ),
    "python-loop-over-keys": ("m.py", "def t(fp):\n    for k in ('torch', 'torch_cuda'):\n        assert k in fp and fp[k]\n", []),
    "python-loop-over-values": ("m.py", "def t(run):\n    for k in ('torch', 'torch_cuda'):\n        run(k)\n", [2]),
    "python-camel-case-crossing": ("m.py", "from openai import AsyncClient\nclient = AsyncClient()\n", []),
    "python-camel-case-crossing-in-a-string": ("m.py", 'CALLS = r"\\b(?:httpx)\\.(get|post|AsyncClient)\\b"\nK = "CudaGraph"\n', [2]),
    "python-lowercase-word-kept": ("m.py", "from vllm.distributed import pynccl\nc = pynccl.PyNcclCommunicator(g)\n", [1, 2]),
    # a CI expression's spaces make no message (`echo "CUDA=${{ matrix.cuda }}" >> $GITHUB_ENV`);
    # actions/github-script's `script:` is JavaScript: its `// don't` opens no shell quote that would
    # hide the later steps (axolotl's docker-e2e.yml)
    "yaml-ci-expression-after-javascript": (
        ".github/workflows/e2e.yml",
        "jobs:\n  e2e:\n    steps:\n      - uses: actions/github-script@v7\n        with:\n          script: |\n"
        "            // don't scan the body\n            core.setOutput('skip', 'no')\n"
        "      - run: |\n          echo \"CUDA=${{ matrix.cuda }}\" >> $GITHUB_ENV\n"
        "          echo \"tests for ${{ matrix.cuda }} builds\"\n",
        [10],
    ),
    # a quote left open in one `run:` value stays in it: the later steps' commands are code
    "yaml-open-quote-stays-in-its-value": (
        ".github/workflows/ci.yml",
        "jobs:\n  a:\n    steps:\n      - run: echo Don't panic\n      - run: nvcc -V\n", [5],
    ),
    "yaml-web-address": ("config/train.yaml", "docs: https://docs.nvidia.com/cuda/\n", []),
    # a tag or name that says *without* CUDA (axolotl's CI matrix), beside one that names a CUDA build
    "yaml-negated-tag": (
        "ci.yml", "matrix:\n  include:\n    - IMAGE_TAG: trainer-without-cuda-extras\n    - variant: build-cuda-off\n"
        "    - variant: build-cuda\n", [5],
    ),
    "shell-negated-flag": ("run.sh", "python train.py --no-cuda\npython train.py --cuda\n", [2]),
    # shell
    "shell-nvcc": ("build.sh", "nvcc -O3 -o k k.cu\n", [1]),
    "shell-comment-message-heredoc": (
        "run.sh", "# nvcc first\necho \"install nvcc first\"\ncat <<EOF\nnvcc\nEOF\n", [],
    ),
    "shell-quoted-value": ("run.sh", "python train.py --collective 'nccl'\n", [1]),
    "shell-directive": ("job.slurm", "#SBATCH --licenses=nvidia_sdk\n", [1]),
    "shell-covered": ("run.sh", "export NCCL_DEBUG=INFO\n", []),
    # configs
    "yaml-value": ("config/build.yaml", "build:\n  compiler: nvcc\n", [2]),
    "yaml-key-is-own-setting": ("config/train.yaml", "use_cuda_graphs: false\ncudnn_benchmark: true\n", []),
    "yaml-prose-and-comment": ("config/train.yaml", "description: trains on CUDA GPUs\n# device: cuda\n", []),
    "yaml-env-key": ("ci.yml", "env:\n  MY_CUDA_FLAG: 1\n", [2]),
    "yaml-label-and-path": ("ci.yml", "name: tests_cuda\nfile: ./docker/docker-cuda/Dockerfile\n", []),
    "yaml-template": ("chart/t.yaml", "a: {{ .Values.x }}\nb: nvcc\n# nvcc\n", [2]),
    "json-value": ("c.json", '{"launcher": {"toolkit": "nvcc"}}\n', [1]),
    "json-data-not-read": ("results.json", '[{"device": "nvcc"}]\n', []),
    "toml-value": ("c.toml", '[build]\ncompiler = "nvcc"  # nvcc\n', [2]),
    "ini-value": ("setup.cfg", "[build]\ncompiler = nvcc\n", [2]),
    "requirements-line": ("requirements.txt", "nvidia-dali-tools-private==1.0\n# cuda\n", []),
    "requirements-left": ("requirements.txt", "my-cuda-helpers==1.0  # cuda\n", [1]),
    # build files and containers
    "makefile-recipe-shell": ("Makefile", "all:\n\tnvidia-modprobe -u\n", [2]),
    "cmake-message-prose": ("CMakeLists.txt", 'message(STATUS "Building without CUDA")\n', []),
    "dockerfile-label": ("Dockerfile", "FROM ubuntu:22.04\nLABEL gpu.vendor=nvidia\n", [2]),
    "dockerfile-heredoc-is-data": ("Dockerfile", "FROM ubuntu:22.04\nRUN python - <<'EOF'\nprint(1) # nvcc\nimport cuda\nEOF\n", []),
    # not read by the pass: a CUDA source is reported as a whole (CN741)
    "cuda-source": ("k.cu", "#include <cuda_runtime.h>\n", []),
}


@pytest.mark.parametrize(("path", "source", "lines"), _ROWS.values(), ids=_ROWS.keys())
def test_residual_lines(path, source, lines):
    assert _residual_lines(source, path) == lines


def test_one_finding_per_line_naming_every_word():
    findings = [f for f in lint_source("nvcc -I/usr/local/cuda k.cu  # nvcc\n", "b.sh") if f.code == CN902]
    assert len(findings) == 1
    assert "`nvcc`" in findings[0].message and "`-I/usr/local/cuda`" in findings[0].message
    assert findings[0].span.start_col == 0 and findings[0].fix is None


def test_a_rewritten_line_is_covered():
    fixed, findings = fix_source("import torch\nx = torch.zeros(3).cuda()\n", "m.py", Config())
    assert "neuron" in fixed and not [f for f in findings if f.code == CN902]


# Coverage is judged against the whole catalog: narrowing a run never turns a rule's lines into
# residual ones.
@pytest.mark.parametrize(
    "config",
    [
        pytest.param(Config(ignore=("CN704",)), id="ignored-rule"),
        pytest.param(Config(select=("CN9",)), id="narrow-select"),
        pytest.param(Config(per_file_ignores=(("*.sh", ("CN704",)),)), id="per-file-ignore"),
        pytest.param(Config().with_overrides(target="accelerator"), id="rule-of-the-other-target"),
    ],
)
def test_lines_a_deselected_rule_knows_are_not_residual(config):
    assert _residual_lines("export NCCL_DEBUG=INFO\n", "run.sh", config) == []


def test_a_silenced_finding_leaves_no_residual():
    assert _residual_lines("export NCCL_DEBUG=INFO  # cuda2neuron: ignore[CN704]\n", "run.sh") == []


@pytest.mark.parametrize(
    ("source", "config"),
    [
        pytest.param("nvcc k.cu  # cuda2neuron: ignore[CN902] reviewed\n", Config(), id="comment"),
        pytest.param("nvcc k.cu\n", Config(ignore=("CN902",)), id="ignore"),
        pytest.param("nvcc k.cu\n", Config(select=("CN7",)), id="not-selected"),
        pytest.param("nvcc k.cu\n", Config(per_file_ignores=(("*.sh", ("CN902",)),)), id="per-file-ignore"),
    ],
)
def test_the_pass_honours_selection_and_suppressions(source, config):
    assert _residual_lines(source, "b.sh", config) == []


def test_per_file_ignores_silence_json():
    source = '{"toolkit": "nvcc"}\n'
    assert _residual_lines(source, "c.json") == [1]
    assert _residual_lines(source, "c.json", Config(per_file_ignores=(("*.json", ("CN902",)),))) == []


def test_a_suppression_of_the_residual_is_used():
    # CN901 judges use with the residual pass's findings too: the comment below is needed.
    findings = lint_source("nvcc k.cu  # cuda2neuron: ignore[CN902]\n", "b.sh", Config())
    assert [f.code for f in findings] == []


def test_a_file_without_the_words_costs_nothing(monkeypatch):
    from cuda2neuron.kinds import _residual

    def boom(*args):
        raise AssertionError("candidate lines were searched in a file without CUDA words")

    monkeypatch.setattr(_residual, "_text_hits", boom)
    monkeypatch.setattr(_residual, "_python_hits", boom)
    for path, text in (("m.py", b"import os\n"), ("r.sh", b"echo gpu\n"), ("c.yaml", b"a: gpu\n")):
        assert process_bytes(path, text, Config(), RunOptions()).findings == ()


def test_the_residual_is_cached_with_the_file(tmp_path, monkeypatch):
    path = tmp_path / "b.sh"
    path.write_text("nvcc k.cu\n")
    src = SourceFile.at(path, tmp_path)
    cache = ResultCache(tmp_path / "cache")
    cold = process_files([src], Config(), RunOptions(), jobs=1, cache=cache)
    assert [f.code for f in cold[0].findings] == [CN902]
    monkeypatch.setattr(_runner, "process_kind", lambda *a: pytest.fail("processed again"))
    assert process_files([src], Config(), RunOptions(), jobs=1, cache=cache) == cold


def _report(findings_source: dict[str, str]):
    results = [process_bytes(p, s.encode(), Config(), RunOptions()) for p, s in findings_source.items()]
    return build_report("check", "neuron", results)


def test_every_report_counts_the_residual_lines_apart():
    report = _report({"b.sh": "nvcc k.cu\nnvcc -V\n", "m.py": "import torch\nx = torch.zeros(3).cuda()\n"})
    assert len(report.residual) == 2 and len(report.remaining) == 3
    assert json.loads(render(report, "json"))["summary"]["residual_lines"] == 2
    assert json.loads(render(report, "sarif"))["runs"][0]["properties"]["residualLines"] == 2
    assert "2 lines still mention CUDA" in render(report, "markdown")
    assert "lines still mention CUDA" in render(report, "html")


def test_the_headline_says_how_many_lines_still_mention_cuda():
    from cuda2neuron.cli._render import headline

    left = _report({"b.sh": "nvcc k.cu\n"})
    assert "1 lines still mention CUDA" in headline(left, "changed")
    assert "nothing CUDA-specific left" not in headline(left, "changed")
    clean = _report({"b.sh": "echo done\n"})
    assert "nothing CUDA-specific left" in headline(clean, "changed") and "still mention" not in headline(clean, "changed")


def test_failed_files_get_no_residual():
    result = process_bytes("c.py", b"x = y.cuda(\nnvcc = 1\n", Config(), RunOptions())
    assert result.status is FileStatus.FAILED and result.findings == ()


def test_target_accelerator_keeps_script_variables_without_residual():
    fixed, findings = fix_source(
        "export NCCL_DEBUG=INFO\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n",
        "run.sh", replace(Config(), settings=replace(Config().settings, target="accelerator")),
    )
    assert [f.code for f in findings] == []


# `cuda2neuron suppress` writes a comment where the format has line comments; JSON and INI are
# refused with the reason (per-file-ignores instead).
@pytest.mark.parametrize(
    ("path", "kind", "source"),
    [
        pytest.param("conf/neox.yml", "config", '{\n  "distributed_backend": "nccl",\n  "x": "nvcc"\n}\n', id="yaml-flow"),
        pytest.param("conf/run.toml", "toml", '[b]\ncompiler = "nvcc"\n', id="toml"),
        pytest.param("kernels.mk", "build", "k.so: k.cu\n\tnvcc -o $@ $<\n", id="makefile"),
        pytest.param("CMakeLists.txt", "build", "enable_language(CUDA)\n", id="cmake"),
    ],
)
def test_suppression_comments_silence_new_kinds(path, kind, source):
    from cuda2neuron.workspace import add_suppressions

    findings = lint_source(source, path, Config())
    assert findings
    annotated = add_suppressions(source.encode(), kind, findings)
    assert annotated.new_bytes is not None and not annotated.refused
    assert lint_source(annotated.new_bytes, path, Config()) == ()


@pytest.mark.parametrize(("path", "kind"), [("c.json", "json"), ("setup.cfg", "ini")])
def test_suppress_refuses_formats_without_line_comments(path, kind):
    from cuda2neuron.workspace import add_suppressions

    source = '{"toolkit": "nvcc"}\n' if kind == "json" else "[b]\ncompiler = nvcc\n"
    annotated = add_suppressions(source.encode(), kind, lint_source(source, path, Config()))
    assert annotated.new_bytes is None and "per-file-ignores" in annotated.refused


def test_notebook_cells_are_read_at_their_file_lines():
    nb = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["Needs nvcc and CUDA.\n"]},
            {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [],
             "source": ["import subprocess\n", "# nvcc is needed\n", "subprocess.run(['nvcc', '-V'])\n", "!nvcc --version\n"]},
            {"cell_type": "code", "execution_count": 2, "metadata": {}, "outputs": [], "source": ["x = y.cuda()\n"]},
        ],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    text = json.dumps(nb, indent=1) + "\n"
    file_lines = text.splitlines()
    findings = [f for f in lint_source(text, "nb.ipynb", Config()) if f.code == CN902]
    assert [f.message.split(": CUDA")[0] for f in findings] == ["cell 2, line 3", "cell 2, line 4"]
    assert "subprocess.run" in file_lines[findings[0].span.start_line - 1]
    assert "!nvcc --version" in file_lines[findings[1].span.start_line - 1]


@pytest.mark.parametrize(
    ("path", "source", "lines"),
    [
        pytest.param("ci.yml", "steps:\n  - run: python -m pytest --make-reports=reports/tests_cuda_stats.txt\n", [], id="report-file"),
        pytest.param("m.py", "open('nvidia_presentation.pdf')\nload('/usr/local/cuda/lib64')\n", [2], id="file-name-not-system-path"),
        pytest.param("Makefile", "check-cuda-install:\n\tpython -c 'import torch'\nall: check-cuda-install\n", [], id="make-target"),
        # DeepSpeedExamples' launchers: a config file under the script's folder variable names its
        # variant; the CUDA toolkit under a variable is still CUDA.
        pytest.param(
            "run.sh", "python train.py --ds_config ${base_dir}/ds_config_seq128_nccl.json\n"
            "CONF=${base_dir}/bert_lamb_nvidia_data.json\n${CUDA_HOME}/bin/nvcc -V\n",
            [3], id="file-under-a-variable",
        ),
        # DeepSpeedExamples' BERT launchers: a variable the script reads as a folder or a file name
        # holds a name (a job's, an output folder's); one read as a setting, the word alone, a
        # version, a variable named after CUDA are still CUDA.
        pytest.param(
            "run.sh", "JOB_NAME=bsz4k_seq128_nccl\nOUT=${base_dir}/bert_nvidia_data_outputs\nTOOLKIT=/usr/local/cuda\n"
            "NCCL_LIB=${base_dir}/nccl_2.18\nDIST=ddp_nccl\nmkdir -p $OUT\n"
            "python train.py --job_name $JOB_NAME --backend $DIST --ckpt ${base_dir}/saved/lamb_seq128_nccl/ &> ${JOB_NAME}.log\n"
            "${TOOLKIT}/bin/nvcc -V\n${NCCL_LIB}/lib\n",
            [3, 5, 8, 9], id="names-of-jobs-and-folders",
        ),
    ],
)
def test_labels_of_files_and_targets_are_not_residual(path, source, lines):
    assert _residual_lines(source, path) == lines


def test_coverage_follows_lines_a_fix_moved():
    # The fix removes an import line above; the finding left below is located in the file as read,
    # and still covers its line, one up in the output.
    source = "import torch\nfrom torch.cuda.amp import autocast\n\nwith autocast():\n    pass\ntorch.cuda.set_per_process_memory_fraction(0.5)\n"
    fixed, findings = fix_source(source, "m.py", Config())
    assert "from torch.cuda.amp" not in fixed and "set_per_process_memory_fraction" in fixed
    assert "CN211" in {f.code for f in findings} and CN902 not in {f.code for f in findings}


@pytest.mark.parametrize(
    ("path", "line"),
    [
        pytest.param("a.yaml", "devices: [{}]\n", id="yaml-flow-line"),
        pytest.param("b.toml", "devices = [{}]\n", id="toml-array"),
    ],
)
def test_the_residual_pass_is_linear_in_one_long_line(path, line):
    """Counted, not timed: Python-level calls inside the residual pass per CUDA word on one line.
    Each hit was looked up in its row one by one: a 269 KB YAML flow line took 111 s (issue 44)."""
    from cuda2neuron.kinds import _residual

    calls = 0

    def count(frame, event, _arg):
        nonlocal calls
        if event == "call" and frame.f_code.co_filename == _residual.__file__:
            calls += 1

    n = 3000
    text = line.format(", ".join(f'"cuda:{i}"' for i in range(n)))
    sys.setprofile(count)
    try:
        result = process_bytes(path, text.encode(), Config(), RunOptions())
    finally:
        sys.setprofile(None)
    assert result.findings
    assert calls < 40 * n, calls


def test_a_notebook_hub_repository_is_a_label():
    # trl's sft_nemotron_3 notebook: a Hub repository of NVIDIA's organisation, quoted in a cell.
    nb = {
        "cells": [{"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [],
                   "source": ['model_id = "nvidia/Nemotron-Mini-4B"\n', "load(model_id, tool='nvcc')\n"]}],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    findings = [f for f in lint_source(json.dumps(nb, indent=1) + "\n", "nb.ipynb", Config()) if f.code == CN902]
    assert [f.message.split(": CUDA")[0] for f in findings] == ["cell 1, line 2"]


def _project(tmp_path, files: dict[str, str]):
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)


# DeepSpeedExamples' BERT scripts: `nvidia/` and `turing/` are folders of the project beside the
# script (Python finds them first), not NVIDIA's packages; a module one folder down imports them as
# the script does; a compiled extension beside the script is CUDA's.
_SCRIPT = "from nvidia.modeling import BertConfig\nfrom turing.nvidia_modeling import Bert\nimport fused_cuda\n"
_LOCAL_IMPORT_ROWS = {
    "beside-the-script": ({"bert/nvidia/modeling.py": "", "bert/turing/nvidia_modeling.py": ""}, "bert/run.py", [3]),
    "one-folder-up": ({"bert/nvidia/modeling.py": "", "bert/turing/nvidia_modeling.py": ""}, "bert/sub/models.py", [3]),
    "not-found-is-foreign": ({"bert/nvidia/README.md": ""}, "bert/run.py", [1, 2, 3]),
    "compiled-extension-is-cuda": ({"bert/fused_cuda.cpython-311-x86_64-linux-gnu.so": ""}, "bert/run.py", [1, 2, 3]),
    # `import fused_cuda` of a module of source beside the script (unsloth's tests import their
    # `_zoo_aggressive_cuda_spoof` helper so): the project's own, as a `from` import is
    "plain-import-of-a-module-beside": ({"bert/fused_cuda.py": ""}, "bert/run.py", [1, 2]),
    # above the project's root (a folder with a pyproject.toml) nothing is the project's
    "not-above-the-root": ({"nvidia/modeling.py": "", "proj/pyproject.toml": ""}, "proj/run.py", [1, 2, 3]),
}


@pytest.mark.parametrize(("files", "script", "lines"), _LOCAL_IMPORT_ROWS.values(), ids=_LOCAL_IMPORT_ROWS.keys())
def test_imports_of_the_projects_own_folders_are_not_residual(tmp_path, files, script, lines):
    _project(tmp_path, {**files, script: _SCRIPT})
    assert _residual_lines(_SCRIPT, str(tmp_path / script)) == lines


# unsloth's studio tests import the project's own enum from a package beside the test folder
# (`from utils.hardware import (..., DeviceType)`, the backend root on sys.path): the statement
# that binds the class holds no CUDA word, yet decides whether `DeviceType.CUDA` is its member.
_ENUM_TEST = (
    "from unittest.mock import patch\n\nfrom {module} import (\n    get_device,\n    DeviceType,\n)\n\n\n"
    "def test_pick():\n    with patch('{module}.get_device', return_value = DeviceType.CUDA):\n"
    "        assert get_device() == DeviceType.CUDA\n"
)
_ENUM_ROWS = {
    "package-beside-the-tests": ("utils.hardware", {"backend/utils/__init__.py": "", "backend/utils/hardware.py": ""}, []),
    "package-not-found-is-foreign": ("devlib.hardware", {"backend/utils/__init__.py": ""}, [10, 11]),
}


@pytest.mark.parametrize(("module", "files", "lines"), _ENUM_ROWS.values(), ids=_ENUM_ROWS.keys())
def test_a_class_imported_from_a_folder_of_the_project_owns_its_members(tmp_path, module, files, lines):
    test = "backend/tests/test_pick.py"
    _project(tmp_path, {**files, test: _ENUM_TEST.format(module=module)})
    assert _residual_lines(_ENUM_TEST.format(module=module), str(tmp_path / test)) == lines


def test_the_cache_key_holds_the_folders_an_import_was_found_in(tmp_path, monkeypatch):
    # A warm run must see the folder change: the result read the file system beside the file.
    _project(tmp_path, {"bert/nvidia/modeling.py": "", "bert/run.py": "from nvidia.modeling import BertConfig\n"})
    src = SourceFile.at(tmp_path / "bert" / "run.py", tmp_path)
    cache = ResultCache(tmp_path / "cache")

    def residual() -> list[int]:
        (result,) = process_files([src], Config(), RunOptions(), jobs=1, cache=cache)
        return [f.span.start_line for f in result.findings if f.code == CN902]

    assert residual() == []
    with monkeypatch.context() as m:  # nothing changed: a hit
        m.setattr(_runner, "process_kind", lambda *a: pytest.fail("processed again"))
        assert residual() == []
    (tmp_path / "bert" / "nvidia" / "modeling.py").unlink()
    assert residual() == [1]
    (tmp_path / "bert" / "nvidia" / "modeling.py").write_text("")
    assert residual() == []


# Names another module of the project defines (unsloth's tests load `install_python_stack` with
# importlib, then call `stack_mod._cuda_family_sm_range(...)`, patch `"_maybe_fetch_windows_cudart"`
# by name and look for `"DeviceType.CUDA"`): the residual pass reads one file, the sweep the tree.
_ARCH = (
    "from enum import Enum\n\nUSE_CUDA = True\n\n\ndef _cuda_arch_range(f):\n    cuda13 = f\n    return cuda13\n\n\n"
    "class Dev(Enum):\n    CUDA = 1\n    CPU = 2\n\n\nclass FakeTorch:\n    cuda = None\n\n\nclass version:\n    cuda = None\n"
)
_USE = (
    "import importlib, os, gpu_lib.hw as hw\n"
    "arch = importlib.import_module('pkg.arch')\n"
    "r = arch._cuda_arch_range(7)\n"
    "patcher.setattr(arch, '_cuda_arch_range', None)\n"
    "wanted = ['Dev.CUDA', 'Dev.CPU']\n"
    "same = arch.Dev.CUDA is arch.Dev.CPU\n"
    "os.environ['USE_CUDA'] = '1'\n"
    "lines = ['cuda13']\n"
    "fake = importlib.import_module('torch')\n"
    "fake.cuda.empty_cache()\n"
    "found = 'torch.version.cuda'\n"
    "dev = hw.Dev.CUDA\n"
)
_TREE_ROWS = {
    # module A defines them: every use in module B is the project's own name (but a string
    # spelled as an environment variable is a setting, whatever module A names so; a local
    # variable of A's function, a field of A's class read off an instance and a member of a
    # class not spelled as one (a stub `class version`) are A's alone)
    "defined-in-another-module": ({"pkg/arch.py": _ARCH}, [7, 8, 10, 11]),
    # nothing in the tree defines them: a library's names, left for review
    "defined-nowhere": ({"pkg/arch.py": "X = 1\n"}, [3, 4, 5, 6, 7, 8, 10, 11, 12]),
    # a name a module imports from outside stays foreign, even where another module re-exports it
    "re-exported-from-outside": (
        {"pkg/arch.py": "from gpu_lib.arch import _cuda_arch_range\n", "pkg/other.py": "def _cuda_arch_range(f):\n    return f\n"},
        [3, 4, 5, 6, 7, 8, 10, 11, 12],
    ),
}


def _tree_residual(tmp_path, files: dict[str, str], cache: ResultCache | None = None) -> list[int]:
    _project(tmp_path, {"pkg/__init__.py": "", **files, "pkg/use.py": _USE})
    sources = [SourceFile.at(p, tmp_path) for p in sorted((tmp_path / "pkg").rglob("*.py"))]
    config = with_project_facts(Config(), sources)
    results = process_files(sources, config, RunOptions(), jobs=1, cache=cache)
    (use,) = [r for r in results if r.path.endswith("use.py")]
    return [f.span.start_line for f in use.findings if f.code == CN902]


@pytest.mark.parametrize(("files", "lines"), _TREE_ROWS.values(), ids=_TREE_ROWS.keys())
def test_names_the_project_defines_in_another_module_are_not_residual(tmp_path, files, lines):
    assert _tree_residual(tmp_path, files) == lines


def test_the_cache_key_holds_what_the_pooled_names_said(tmp_path, monkeypatch):
    # A warm run must see another module change: the result read the names the tree defines.
    cache = ResultCache(tmp_path / "cache")
    own, none = [7, 8, 10, 11], [3, 4, 5, 6, 7, 8, 10, 11, 12]
    assert _tree_residual(tmp_path, {"pkg/arch.py": _ARCH}, cache) == own
    with monkeypatch.context() as m:  # nothing changed: a hit
        m.setattr(_runner, "process_kind", lambda *a: pytest.fail("processed again"))
        assert _tree_residual(tmp_path, {"pkg/arch.py": _ARCH}, cache) == own
    assert _tree_residual(tmp_path, {"pkg/arch.py": "X = 1\n"}, cache) == none
    assert _tree_residual(tmp_path, {"pkg/arch.py": _ARCH}, cache) == own


# A script's own shell functions (unsloth's tests/sh call `make_mock_nvcc "12.4"`, its installer
# `if _has_usable_nvidia_gpu; then`) are the project's names, pooled by the sweep as a Python def
# is; a name spelled as an environment variable stays the variable even where a module assigns
# one so (a CUDA command is another rule's).
_MOCKS = 'make_mock_nvcc() {\n  echo "$1"\n}\nfunction _has_usable_nvidia_gpu {\n  nvidia-smi -L\n}\n'
_MOCK_USER = (
    "#!/bin/bash\nsource tools/mock.sh\n_bin=$(make_mock_nvcc 12.4)\n"
    "if _has_usable_nvidia_gpu; then echo gpu; fi\nUSE_CUDA=1 python train.py\nnvidia-smi -L\n"
)


def _script_residual(tmp_path, files: dict[str, str], cache: ResultCache | None = None) -> list[int]:
    _project(tmp_path, {"pkg/__init__.py": "", "pkg/arch.py": "USE_CUDA = True\n", **files, "tools/use.sh": _MOCK_USER})
    sources = [SourceFile.at(p, tmp_path) for p in sorted(tmp_path.rglob("*.*")) if p.suffix in (".py", ".sh")]
    config = with_project_facts(Config(), sources)
    results = process_files(sources, config, RunOptions(), jobs=1, cache=cache)
    (use,) = [r for r in results if r.path.endswith("use.sh")]
    return [f.span.start_line for f in use.findings if f.code == CN902]


def test_a_scripts_own_shell_functions_are_not_residual(tmp_path):
    assert _script_residual(tmp_path, {"tools/mock.sh": _MOCKS}) == [5]


def test_the_cache_key_of_a_script_holds_what_the_pooled_names_said(tmp_path):
    cache = ResultCache(tmp_path / "cache")
    assert _script_residual(tmp_path, {"tools/mock.sh": _MOCKS}, cache) == [5]
    # the functions gone from the other script: a warm run must not answer from the cache
    assert _script_residual(tmp_path, {"tools/mock.sh": "echo none\n"}, cache) == [3, 4, 5]
    assert _script_residual(tmp_path, {"tools/mock.sh": _MOCKS}, cache) == [5]


_FOREIGN = "import torch\nx = torch.zeros(3).cuda()\nfrom gpu_utils.checks import is_cuda_ready\nok = is_cuda_ready()\n"


@pytest.mark.parametrize(
    ("source", "parses"),
    [
        # The rules' finding had the splicer parse the file as read: the residual pass reads that tree.
        pytest.param(_FOREIGN.encode(), 0, id="splicers-tree-reused"),
        pytest.param(("# é\n" + _FOREIGN).encode(), 0, id="utf8-text-reused"),
        pytest.param(("# coding=utf-8\n# é\n" + _FOREIGN).encode(), 0, id="utf8-coding-line-reused"),
        # CPython could decode these bytes otherwise than the splicer's text: parsed again.
        pytest.param(("# -*- coding: latin-1 -*-\n" + _FOREIGN).encode(), 1, id="coding-line-parsed-again"),
        pytest.param(b"\xef\xbb\xbf" + _FOREIGN.encode(), 1, id="byte-order-mark-parsed-again"),
    ],
)
def test_the_residual_pass_reads_the_splicers_tree_of_the_same_text(monkeypatch, source, parses):
    import ast

    import cuda2neuron.kinds._leftover_python as leftover

    calls = []

    class _Counting:
        def __getattr__(self, name):
            return getattr(ast, name)

        @staticmethod
        def parse(*args, **kwargs):
            calls.append(1)
            return ast.parse(*args, **kwargs)

    monkeypatch.setattr(leftover, "ast", _Counting())
    findings = lint_source(source, "m.py", Config())
    lines = source.count(b"\n") - _FOREIGN.count("\n")
    assert sorted(f.span.start_line - lines for f in findings if f.code == CN902) == [3, 4]
    assert len(calls) == parses
