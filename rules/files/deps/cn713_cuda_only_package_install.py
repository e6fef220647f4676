"""CN713: ``pip install`` of CUDA-only packages in launch scripts."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, ProjectFacts, TextReport, Valid
from cuda2neuron.documents.requirements import normalise, requirement_name
from cuda2neuron.documents.shell import ShellScript, command_end, unquote, word_end
from cuda2neuron.documents.structured import ConfigDocument

from .._helpers import TextRule
from ..conda._helpers import conda_cuda_package
from ._helpers import CUDA_WHEEL_RE, REPOSITORY_WORDS, cuda_only_package

__all__ = ["CudaOnlyPackageInstall"]

# A project whose setup.py builds its `gpu` extra from flash-attn (llm-foundry's).
_GPU_EXTRA = (("project", ProjectFacts(cuda_extras=frozenset({("llm-foundry", "gpu", "flash-attn", "setup.py:107")}))),)


_PIP_INSTALL_RE = re.compile(r"(?<![\w.-])(?:pip3?|uv pip|python3? -m pip)[ \t]+install(?![\w-])")
# pip options that take a value (the value is not a requirement).
_PIP_VALUE_OPTIONS = frozenset({
    "-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url",
    "-f", "--find-links", "-t", "--target", "--prefix", "--root", "--src", "--python-version",
    "--platform", "--implementation", "--abi", "--progress-bar", "--log", "--cache-dir",
    "--trusted-host", "--upgrade-strategy", "-C", "--config-settings", "--global-option",
    # `--no-binary flash-attn flash-attn==2.5.6`: the option names the package, the requirement
    # follows; counted once, at the requirement.
    "--no-binary", "--only-binary",
})
_ANY_NAME_RE = re.compile(r"[A-Za-z_]\w*")
# An install of a project with extras: its folder (`.[gpu]`, `./llm-foundry[gpu,openai]`) or a name.
_EXTRAS_RE = re.compile(r"(\.{1,2}(?:/[^\s\[\]]*)?|[A-Za-z0-9][A-Za-z0-9._-]*)\[([^\]]+)\]")
# Config keys whose value is `pip install`'s arguments: the MosaicML platform's git_repo
# integration (`integrations: [{integration_type: git_repo, pip_install: .[gpu]}]`, mcli run
# configs: llm-foundry's mcli/*.yaml), installed after the clone.
_PIP_ARGUMENT_KEYS = frozenset({"pip_install"})
_CONDA_INSTALL_RE = re.compile(r"(?<![\w./-])(?:conda|mamba|micromamba)[ \t]+install(?![\w-])")
_PIP_INDEX_OPTIONS = frozenset({"-i", "--index-url", "--extra-index-url", "-f", "--find-links"})
_GIT_CLONE_RE = re.compile(r"(?<![\w./-])git[ \t]+clone(?![\w-])")
# git clone options that take a value as the next word.
_CLONE_VALUE_OPTIONS = frozenset({
    "-b", "--branch", "-o", "--origin", "-c", "--config", "--depth", "--reference", "-j", "--jobs",
    "--filter", "--template", "-u", "--upload-pack", "--separate-git-dir", "--shallow-since", "--shallow-exclude",
})


class CudaOnlyPackageInstall(TextRule):
    """
    ## What it does
    Reports ``pip install`` of CUDA-only packages or from a CUDA wheel index. Launch scripts
    and notebooks (``!pip install``, ``%pip install``) are read; the packages are CN711's list
    (flash-attn, xformers, apex, bitsandbytes, triton, ...) and the indexes CN712's
    (``--index-url https://download.pytorch.org/whl/cu121``). ``conda`` / ``mamba`` /
    ``micromamba install`` of conda's CUDA packages (``pytorch-cuda=11.8``, ``cudatoolkit``,
    ``cuda-nvcc``: CN771's list) and ``-c nvidia`` are reported too, and a CUDA-only package built
    from its repository: ``git clone`` of it (then ``pip install .`` or ``python setup.py
    install``), and a variable set to its URL (``apex_url=git+https://github.com/NVIDIA/apex.git``,
    xtuner's ``DEEP_EP_URL=https://github.com/deepseek-ai/DeepEP@<commit>`` handed to a
    Dockerfile that clones and builds it). An install of the project itself with an extra
    (``pip install -e ".[gpu]"``, ``pip install llm-foundry[gpu]``, and a MosaicML run config's
    ``pip_install: .[gpu]``) is reported where the project's setup.py or pyproject.toml makes that
    extra pull a CUDA-only package (llm-foundry's ``gpu`` extra is flash-attn).

    ## Why is this bad?
    Setup scripts and the first cell of a notebook install the CUDA stack before anything runs:
    on a Trainium host the install fails (no CUDA toolkit to build against) or drags in CUDA
    wheels that are never used.

    ## Example
    ```bash
    pip install flash-attn --no-build-isolation
    ```
    Port the code to ``torch.nn.functional.scaled_dot_product_attention`` and drop the install.

    ## Fix safety
    Report only: the install can go once the code that imports the package has been ported.
    """

    code = "CN713"
    name = "cuda-only-package-install"
    file_kinds = frozenset({"shell"})
    triggers = ("install", *REPOSITORY_WORDS)
    # A repository's name is written in any case (`DeepEP`, `GroupedGEMM`): its words are compared folded.
    triggers_as_keys = True
    VALID = (
        Valid("pip install numpy einops\n", path="setup_env.sh"),
        Valid("pip install -r requirements.txt\n", path="setup_env.sh"),
        Valid("echo 'pip install flash-attn'\n", path="setup_env.sh"),
        Valid("# pip install xformers\n", path="setup_env.sh"),
        Valid("git clone https://github.com/huggingface/transformers && pip install -e transformers\n", path="setup_env.sh"),
        Valid("echo see https://github.com/NVIDIA/apex\n", path="setup_env.sh"),
        # the project's extras that pull nothing CUDA-only, or another project's extra
        Valid('pip install -e ".[dev,openai]"\n', path="setup_env.sh", options=_GPU_EXTRA),
        Valid("pip install 'transformers[torch]'\n", path="setup_env.sh", options=_GPU_EXTRA),
        Valid("integrations:\n- integration_type: git_repo\n  pip_install: .[openai]\n", path="mcli/eval.yaml", options=_GPU_EXTRA),
    )
    INVALID = (
        Invalid('apex_url=git+https://github.com/NVIDIA/apex.git@25.04\npip install -v --no-build-isolation "$apex_url"\n', path="setup.sh"),
        Invalid("conda install -y pytorch torchvision pytorch-cuda=11.8 cuda-nvcc -c pytorch -c nvidia\n", path="setup.sh"),
        Invalid("pip install flash-attn --no-build-isolation\n", path="setup_env.sh"),
        Invalid("python -m pip install -U 'bitsandbytes>=0.43' numpy\n", path="setup_env.sh"),
        Invalid("pip3 install torch --index-url https://download.pytorch.org/whl/cu121\n", path="setup_env.sh"),
        Invalid("uv pip install \\\n    xformers \\\n    triton\n", path="setup_env.sh"),
        Invalid("pip install torch==2.9.1 -i ${PYTORCH_WHEELS_URL}/cu128 --extra-index-url=\"${MIRROR}/cu126\"\n", path="build_image.sh"),
        # built from the repository: cloned, or named in a variable a Dockerfile clones (xtuner)
        Invalid("git clone --depth 1 https://github.com/NVIDIA/apex && cd apex && python setup.py install --cuda_ext\n", path="setup.sh"),
        Invalid("export DEEP_EP_URL=https://github.com/deepseek-ai/DeepEP@9af0e0d # v1.2.1\n", path="image_build.sh"),
        Invalid("export DEEP_GEMM_URL=https://github.com/deepseek-ai/DeepGEMM@c9f8b34\n", path="image_build.sh"),
        Invalid("GROUPED_GEMM_URL=https://github.com/InternLM/GroupedGEMM@aa5ffb2\n", path="image_build.sh"),
        Invalid("pip install --no-build-isolation git+https://github.com/deepseek-ai/DeepEP.git\n", path="setup.sh"),
        # the project's own extra, by what its setup.py makes it pull (llm-foundry: `gpu` -> flash-attn)
        Invalid('pip install -e ".[gpu]"\n', path="setup_env.sh", options=_GPU_EXTRA),
        Invalid("pip install llm-foundry[gpu]\n", path="setup_env.sh", options=_GPU_EXTRA),
        Invalid(
            "integrations:\n- integration_type: git_repo\n  git_repo: org/llm-foundry\n  pip_install: .[gpu,openai]\n",
            path="mcli/mcli-1b.yaml", options=_GPU_EXTRA,
        ),
    )

    @classmethod
    def check_text(cls, doc: ShellScript, settings) -> list[TextReport]:
        text = doc.text
        out: list[TextReport] = []
        # MosaicML platform run configs: `pip_install: .[gpu]` is what the platform hands to
        # `pip install` after cloning the repository (llm-foundry's mcli/*.yaml); the value is
        # outside the config's shell view, so it is read from the scalars.
        if isinstance(doc, ConfigDocument) and "pip_install" in doc.raw:
            for s in doc.scalars:
                if s.key in _PIP_ARGUMENT_KEYS and s.literal:
                    q = len(s.quote)
                    out += _pip_arguments(doc.raw, s.start + q, s.end - q, settings.project)
        if "install" not in text and "://" not in text:
            return out
        for m in doc.code_matches(_PIP_INSTALL_RE):
            out += _pip_arguments(text, m.end(), len(text), settings.project)
        # `conda install -y pytorch-cuda=11.8 cuda-nvcc -c pytorch -c nvidia` (conda, mamba, micromamba).
        for m in doc.code_matches(_CONDA_INSTALL_RE):
            end = command_end(text, m.end())
            channel_next = False
            for w in re.finditer(r"\S+", text[m.end():end]):
                a = m.end() + w.start()
                word = unquote(w.group(0)) or ""
                if channel_next:
                    channel_next = False
                    if word.rstrip("/").rsplit("/", 1)[-1] == "nvidia":
                        out.append(TextReport(
                            a, a + len(w.group(0)), "installs from NVIDIA's conda channel (CUDA packages)",
                            guidance="drop the channel together with the CUDA packages", effort=Effort.LOW,
                        ))
                    continue
                if word in ("-c", "--channel"):
                    channel_next = True
                    continue
                if word.startswith("-"):
                    continue
                info = conda_cuda_package(word)
                if info is not None:
                    what, instead, effort = info
                    out.append(TextReport(a, a + len(w.group(0)), f"installs `{word}`, which is {what}", guidance=instead, effort=effort))
        # `git clone https://github.com/NVIDIA/apex && cd apex && pip install .`: the clone is what
        # names the package; the build after it is `pip install .` / `python setup.py install`.
        for m in doc.code_matches(_GIT_CLONE_RE):
            end = command_end(text, m.end())
            value_next = False
            for w in re.finditer(r"\S+", text[m.end():end]):
                word = unquote(w.group(0)) or ""
                if value_next:
                    value_next = False
                    continue
                if word.startswith("-"):
                    value_next = word in _CLONE_VALUE_OPTIONS
                    continue
                name = requirement_name(word) if "://" in word or word.startswith("git@") else None
                info = cuda_only_package(normalise(name)) if name else None
                if info is not None:
                    what, instead, effort = info
                    a = m.end() + w.start()
                    out.append(TextReport(
                        a, a + len(w.group(0)), f"clones `{normalise(name)}` to build it from source, which is CUDA-only: {what}",
                        guidance=instead, effort=effort,
                    ))
                break  # the repository is the first word that is not an option
        # `apex_url=git+https://github.com/NVIDIA/apex.git@25.04`, then `pip install "$apex_url"`:
        # a CUDA-only package named by URL where it is assigned.
        for ns, ne, vs, ve in doc.assignments(_ANY_NAME_RE):
            value = unquote(text[vs:ve]) or ""
            if not value.startswith(("git+", "http://", "https://")):
                continue
            name = requirement_name(value)
            info = cuda_only_package(normalise(name)) if name else None
            if info is None:
                continue
            what, instead, effort = info
            out.append(TextReport(
                vs, ve, f"`{text[ns:ne]}` names `{normalise(name)}`, which is CUDA-only: {what}",
                guidance=instead, effort=effort,
            ))
        return out


def _pip_arguments(text: str, i: int, stop: int, facts: ProjectFacts) -> list[TextReport]:
    """What the arguments of one ``pip install`` starting at ``i`` (up to ``stop``) install that
    is CUDA-only: packages, CUDA wheel indexes, and the project's own extras that pull such a
    package (``pip install -e ".[gpu]"``: ``ProjectFacts.cuda_extras``)."""
    out: list[TextReport] = []
    expect_value: str | None = None
    while i < stop:
        # Skip blanks and `\` line continuations; stop at the end of the command.
        while i < stop and text[i] in " \t":
            i += 1
        if text.startswith("\\\n", i) or text.startswith("\\\r\n", i):
            i += 2 if text[i + 1] == "\n" else 3
            continue
        if i >= stop or text[i] in "\r\n;&|)#":
            break
        end = min(word_end(text, i), stop)
        if end == i:
            break
        word = unquote(text[i:end]) or ""
        # An index under a variable's base (`-i ${PYTORCH_WHEELS_URL}/cu128`, xtuner's Dockerfile)
        # is a CUDA index all the same: its CUDA part is written.
        index = word or text[i:end]
        if expect_value is not None:
            if expect_value in _PIP_INDEX_OPTIONS and CUDA_WHEEL_RE.search(index):
                out.append(TextReport(
                    i, end, f"`{index}` serves CUDA builds of PyTorch",
                    guidance="install torch from the CPU index (https://download.pytorch.org/whl/cpu) "
                    "or the Neuron pip repository",
                    effort=Effort.LOW,
                ))
            expect_value = None
        elif index.startswith("-"):
            option, eq, value = index.partition("=")
            if option in _PIP_VALUE_OPTIONS and not eq:
                expect_value = option
            elif option in _PIP_INDEX_OPTIONS and CUDA_WHEEL_RE.search(value):
                out.append(TextReport(
                    i, end, f"`{value}` serves CUDA builds of PyTorch",
                    guidance="install torch from the CPU index or the Neuron pip repository",
                    effort=Effort.LOW,
                ))
        elif (extra := _project_extra(index, facts)) is not None:
            out.append(TextReport(i, end, extra[0], guidance=extra[1], effort=extra[2]))
        else:
            name = requirement_name(word)
            info = cuda_only_package(normalise(name)) if name else None
            if info is not None:
                what, instead, effort = info
                out.append(TextReport(
                    i, end, f"installs `{normalise(name)}`, which is CUDA-only: {what}",
                    guidance=instead, effort=effort,
                ))
        i = end
    return out


def _project_extra(word: str, facts: ProjectFacts) -> tuple[str, str, Effort] | None:
    """(message, guidance, effort) where ``word`` installs an extra of the project (its folder,
    ``.[gpu]`` / ``./sub[gpu]``, or its distribution name, ``llm-foundry[gpu]``) that pulls a
    CUDA-only package; None otherwise."""
    m = _EXTRAS_RE.fullmatch(word)
    if m is None or not facts.cuda_extras:
        return None
    distribution = "" if m.group(1).startswith(".") else normalise(m.group(1))
    for extra in m.group(2).split(","):
        found = facts.cuda_extra(distribution, normalise(extra.strip()))
        if found is not None:
            package, where = found
            what, instead, effort = cuda_only_package(package) or ("CUDA-only", "", Effort.MEDIUM)
            return (
                f"installs the project's extra `{extra.strip()}`, which pulls `{package}` ({where}), CUDA-only: {what}",
                f"install the project without that extra; {instead}",
                effort,
            )
    return None
