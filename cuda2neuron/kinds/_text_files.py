"""Files read as text: launch scripts, dependency lists, structured configs (YAML, JSON, TOML,
INI), build files, CUDA sources, Dockerfiles.

Each is decoded, the rules reading its kind run over its parsed document (``cuda2neuron.documents``)
and the fixed text is encoded back byte for byte outside the edits.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

from cuda2neuron.core import (
    Config,
    Finding,
    Rule,
    RunOptions,
    SourceError,
    TextItem,
    key_folded_text,
    run_text_rules,
    to_finding,
)
from cuda2neuron.documents.plaintext import PlainText
from cuda2neuron.documents.requirements import parse_pyproject, parse_requirements
from cuda2neuron.documents.shell import ShellScript

from ._catalog import rules_for
from ._prefilter import may_trigger

__all__ = [
    "CONFIG_KINDS",
    "JSON_DATA_BYTES",
    "is_build_file",
    "is_config_file",
    "is_cuda_source",
    "is_dependency_file",
    "is_dockerfile",
    "is_ini_file",
    "is_json_file",
    "is_shell_script",
    "is_toml_file",
    "process_build_findings",
    "process_config_findings",
    "process_cuda_source_findings",
    "process_dependencies_findings",
    "process_dockerfile_findings",
    "process_ini_findings",
    "process_json_findings",
    "process_shell_findings",
    "process_toml_findings",
    "shell_items",
]

CONFIG_SUFFIXES = frozenset({".yaml", ".yml"})
CUDA_SUFFIXES = frozenset({".cu", ".cuh"})
# Launch scripts, and the batch scripts of Slurm, PBS and LSF (shell with #SBATCH / #PBS /
# #BSUB directive comments).
SHELL_SUFFIXES = frozenset({".sh", ".bash", ".slurm", ".sbatch", ".pbs", ".lsf", ".qsub"})
# The structured-config kinds: the CN73x rules read all of them through one document model.
CONFIG_KINDS = frozenset({"config", "json", "toml", "ini"})
# A JSON file this large, or one whose top level is an array, is data (a tokenizer vocabulary,
# benchmark results, a dataset), not a config: it is not read.
JSON_DATA_BYTES = 512 * 1024
_BUILD_NAMES = frozenset({"makefile", "gnumakefile", "cmakelists.txt"})
_BUILD_SUFFIXES = frozenset({".mk", ".make", ".cmake"})
_SHEBANG_RE = re.compile(rb"#![ \t]*\S*/(?:env[ \t]+(?:-\S+[ \t]+)*)?(?:ba)?sh(?:[ \t]|\r?$)")
_DOCKER_NAMES = frozenset({"dockerfile", "containerfile"})
_NOT_DOCKERFILES = frozenset({"md", "rst", "txt"})  # Dockerfile.md documents one
_DOCKER_VARIANT_RE = re.compile(r"(?:dockerfile|containerfile)[-_][\w-]+")
_TEMPLATE_SUFFIXES = frozenset({"jinja", "j2", "tmpl", "template"})
# The launch-script rules read a Dockerfile's shell view; the Dockerfile's own rules read the file.
_DOCKER_KINDS = frozenset({"shell", "dockerfile"})


def is_shell_script(path: Path) -> bool:
    """``*.sh`` / ``*.bash``, or an extensionless file whose shebang runs sh or bash.

    Discovery asks this of every file in a tree, so only files without a suffix (bin/train,
    scripts/launch) are opened, and only their first line is read. ``zsh``, ``python`` and
    other interpreters do not count.
    """
    if path.suffix in SHELL_SUFFIXES:
        return True
    name = path.name
    # Environment files (`.env`, `.env.local`, `train.env`) are `KEY=value` lines in shell
    # syntax: docker compose and the launch scripts read them.
    if name == ".env" or name.startswith(".env.") or path.suffix == ".env":
        return True
    if path.suffix or name.startswith("."):
        return False
    try:
        with open(path, "rb") as fh:
            first = fh.readline(256)
    except OSError:
        return False
    return _SHEBANG_RE.match(first.rstrip(b"\n")) is not None


def _triggered_rules(rules: tuple[type[Rule], ...], text: str) -> tuple[type[Rule], ...]:
    """The rules one of whose trigger words ``text`` holds, as written or, for a rule that
    compares setting keys (``Rule.triggers_as_keys``: ``--Use-Flash-Attn`` is ``flash_attn``),
    as keys compare."""
    folded: str | None = None
    kept = []
    for rule in rules:
        if rule.triggers_as_keys:
            if folded is None:
                folded = key_folded_text(text)
            hit = any(key_folded_text(t) in folded for t in rule.triggers)
        else:
            hit = any(t in text for t in rule.triggers)
        if hit:
            kept.append(rule)
    return tuple(kept)


def shell_rules(config: Config, path: str) -> tuple[type[Rule], ...]:
    return tuple(r for r in rules_for(config, path) if "shell" in r.file_kinds)


def shell_items(
    text: str, config: Config, path: str, options: RunOptions
) -> tuple[str | None, list[TextItem]]:
    if not may_trigger(text, "shell"):
        return None, []  # no shell rule can fire: the catalog stays unloaded
    rules = shell_rules(config, path)
    # The cheap pre-check Python files get from triggers: most scripts mention none of them.
    rules = _triggered_rules(rules, text)
    if not rules:
        return None, []
    return run_text_rules(text, rules, ShellScript, config.settings, fix=options.fix, unsafe=options.unsafe)


def process_shell_findings(
    path: str, data: bytes, config: Config, options: RunOptions
) -> tuple[bytes | None, list[Finding]]:
    if b"\x00" in data:
        raise SourceError("decode", "file contains NUL bytes (binary file?)")
    # surrogateescape: a Latin-1 comment in a script must survive the round trip byte for byte.
    text = data.decode("utf-8", "surrogateescape")
    new, items = shell_items(text, config, path, options)
    findings = [to_finding(it, path, it.span) for it in items]
    return (None if new is None else new.encode("utf-8", "surrogateescape")), findings


def is_dependency_file(path: Path) -> bool:
    name = path.name
    if is_dependency_toml(path):
        return True
    if not name.endswith(".txt"):
        return False
    # requirements.txt, requirements-dev.txt, dev-requirements.txt, requirements/train.txt
    return name.startswith("requirements") or name.endswith("requirements.txt") or path.parent.name == "requirements"


def dependency_rules(config: Config, path: str) -> tuple[type[Rule], ...]:
    return tuple(r for r in rules_for(config, path) if "requirements" in r.file_kinds)


def process_dependencies_findings(
    path: str, data: bytes, config: Config, options: RunOptions
) -> tuple[bytes | None, list[Finding]]:
    if b"\x00" in data:
        raise SourceError("decode", "file contains NUL bytes (binary file?)")
    try:
        text = data.decode("utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError("decode", f"not UTF-8: {exc}") from None
    if is_dependency_toml(Path(path)):
        parse = partial(parse_pyproject, path=path)
    else:
        parse = parse_requirements
    if not may_trigger(data, "requirements"):
        # No dependency rule can fire, so the catalog stays unloaded; the file is still read,
        # because a broken pyproject.toml is an error whatever it declares.
        parse(text)
        return None, []
    rules = dependency_rules(config, path)
    if not rules:
        return None, []
    new, items = run_text_rules(text, rules, parse, config.settings, fix=options.fix, unsafe=options.unsafe)
    findings = [to_finding(it, path, it.span) for it in items]
    # Dependency rules are report-only today; a future fix would come back through `new`.
    return (None if new is None else new.encode("utf-8")), findings


def is_dependency_toml(path: Path) -> bool:
    """``pyproject.toml``, and PEP 621 / Poetry files named otherwise: ``pyproject-moe.toml``,
    ``requirements/extras.toml``."""
    name = path.name
    if not name.endswith(".toml"):
        return False
    return name.startswith("pyproject") or path.parent.name == "requirements"


def is_config_file(path: Path) -> bool:
    """YAML: training configs, CI workflows, docker compose, Kubernetes manifests, conda
    environments, accelerate configs."""
    return path.suffix.lower() in CONFIG_SUFFIXES


def is_json_file(path: Path) -> bool:
    return path.suffix.lower() in (".json", ".jsonc")


def is_toml_file(path: Path) -> bool:
    return path.suffix.lower() == ".toml" and not is_dependency_toml(path)


def is_ini_file(path: Path) -> bool:
    return path.suffix.lower() in (".ini", ".cfg")


def is_build_file(path: Path) -> bool:
    """Makefiles and CMake files."""
    name = path.name.lower()
    return name in _BUILD_NAMES or path.suffix.lower() in _BUILD_SUFFIXES


def is_cuda_source(path: Path) -> bool:
    return path.suffix.lower() in CUDA_SUFFIXES


def process_text_file(
    kind: str, kinds: frozenset[str], parse, path: str, data: bytes, config: Config, options: RunOptions
) -> tuple[bytes | None, list[Finding]]:
    """A file read as text: the rules reading any of ``kinds`` run over ``parse(text)``.

    ``kind`` names the file's own coarse prefilter words (kinds/_prefilter.py).
    """
    if b"\x00" in data:
        raise SourceError("decode", "file contains NUL bytes (binary file?)")
    # surrogateescape: bytes that are not UTF-8 (a Latin-1 comment) survive the round trip.
    text = data.decode("utf-8", "surrogateescape")
    if not may_trigger(text, kind):
        return None, []  # no rule of this kind can fire: the catalog stays unloaded
    rules = _triggered_rules(tuple(r for r in rules_for(config, path) if r.file_kinds & kinds), text)
    if not rules:
        return None, []
    new, items = run_text_rules(text, rules, parse, config.settings, fix=options.fix, unsafe=options.unsafe)
    findings = [to_finding(it, path, it.span) for it in items]
    return (None if new is None else new.encode("utf-8", "surrogateescape")), findings


def process_config_findings(path: str, data: bytes, config: Config, options: RunOptions) -> tuple[bytes | None, list[Finding]]:
    # YAML: the config rules read its scalars, the launch-script rules its shell view (`run:`).
    from cuda2neuron.documents.structured import parse_yaml

    return process_text_file("config", frozenset({"config", "shell"}), partial(parse_yaml, path=path), path, data, config, options)


def process_json_findings(path: str, data: bytes, config: Config, options: RunOptions) -> tuple[bytes | None, list[Finding]]:
    if is_json_data(data):
        return None, []
    from cuda2neuron.documents.structured import parse_json

    return process_text_file("json", frozenset({"json"}), partial(parse_json, path=path), path, data, config, options)


def is_json_data(data: bytes) -> bool:
    """A JSON file that is data, not a config: larger than ``JSON_DATA_BYTES``, or an array at
    its top level (records)."""
    return len(data) > JSON_DATA_BYTES or data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"["


def process_toml_findings(path: str, data: bytes, config: Config, options: RunOptions) -> tuple[bytes | None, list[Finding]]:
    from cuda2neuron.documents.structured import parse_toml

    return process_text_file("toml", frozenset({"toml"}), partial(parse_toml, path=path), path, data, config, options)


def process_ini_findings(path: str, data: bytes, config: Config, options: RunOptions) -> tuple[bytes | None, list[Finding]]:
    from cuda2neuron.documents.structured import parse_ini

    return process_text_file("ini", frozenset({"ini"}), partial(parse_ini, path=path), path, data, config, options)


def process_build_findings(path: str, data: bytes, config: Config, options: RunOptions) -> tuple[bytes | None, list[Finding]]:
    # Makefile recipes are shell; CMake has none (execute_process arguments are not a shell).
    from cuda2neuron.documents.buildfile import parse_build

    return process_text_file("build", frozenset({"build", "shell"}), partial(parse_build, path=path), path, data, config, options)


def process_cuda_source_findings(path: str, data: bytes, config: Config, options: RunOptions) -> tuple[bytes | None, list[Finding]]:
    return process_text_file("cuda-source", frozenset({"cuda-source"}), PlainText, path, data, config, options)


def is_dockerfile(path: Path) -> bool:
    """``Dockerfile``, ``Containerfile``, ``Dockerfile.gpu``, ``train.Dockerfile``, and Apptainer /
    Singularity definition files (``*.def`` that start with a ``Bootstrap:`` header)."""
    name = path.name.lower()
    stem, dot, suffix = name.partition(".")
    # `Dockerfile-uv-base`, `Dockerfile_gpu`, `Containerfile-cuda` (a variant named with a dash or
    # an underscore, as projects with several images do), and the variants' templates
    # (`Dockerfile-uv.jinja`).
    if _DOCKER_VARIANT_RE.fullmatch(stem) is not None:
        # `dockerfile-lint.sh` is a script: a dashed variant takes no extension but a template's.
        return not dot or suffix in _TEMPLATE_SUFFIXES
    variant = bool(dot) and stem in _DOCKER_NAMES and suffix.isidentifier() and suffix not in _NOT_DOCKERFILES
    return name in _DOCKER_NAMES or variant or name.endswith(".dockerfile") or is_apptainer_definition(path)


def is_apptainer_definition(path: Path) -> bool:
    """``Singularity`` / ``Apptainer`` (``Singularity.gpu``), or a ``.def`` file whose first lines
    say ``Bootstrap:`` (a Windows module-definition file, the other ``.def``, does not).
    Discovery opens only ``.def`` files, and reads 1 KiB."""
    if path.name.lower().partition(".")[0] in ("singularity", "apptainer"):
        return True
    if path.suffix.lower() != ".def":
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(1024)
    except OSError:
        return False
    return re.search(rb"(?im)^[ \t]*bootstrap[ \t]*:", head) is not None


def is_apptainer_name(path: str) -> bool:
    """A definition file among the Dockerfile kind (already matched: no need to read it)."""
    name = Path(path).name.lower()
    return name.endswith(".def") or name.partition(".")[0] in ("singularity", "apptainer")


def process_dockerfile_findings(path: str, data: bytes, config: Config, options: RunOptions) -> tuple[bytes | None, list[Finding]]:
    from cuda2neuron.documents.dockerfile import parse_apptainer, parse_dockerfile

    parse = parse_apptainer if is_apptainer_name(path) else parse_dockerfile
    return process_text_file("dockerfile", _DOCKER_KINDS, parse, path, data, config, options)
