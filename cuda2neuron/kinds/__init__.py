"""File kinds: which files cuda2neuron reads, and how one file's bytes become a ``FileResult``.

One static table (``KINDS``) names every kind, how its files are recognised and the function
that processes them: Python sources through the libcst engine, text files (launch scripts,
dependency lists, structured configs — YAML, JSON, TOML, INI —, build files, CUDA sources,
Dockerfiles) through the text-rule protocol,
notebooks through both. A path is matched once, when it is found (``kind_of``); processing then
goes straight to its kind. The rule catalog loads only when a file's coarse words say a rule
could fire (``_prefilter``).

To add a kind: a matcher and a ``process_*_findings`` function in a module here, a row in
``KINDS``, its coarse words in ``_prefilter.COARSE_WORDS``, and rules with that kind in
``file_kinds``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

from cuda2neuron.core import Config, FileResult, FileStatus, RunOptions

from ._catalog import catalog, known_codes, rules_for, unknown_selectors
from ._guard import Body, guarded
from ._local_imports import found_modules, worded_imports
from ._project_names import NamePool, file_words
from ._suppressions import CHECKED_KINDS, check_suppressions, directives
from ._prefilter import COARSE_WORDS, covers, may_trigger, words_for
from ._residual import RESIDUAL, RESIDUAL_KINDS, with_residual
from ._python import is_python_source
from ._text_files import (
    is_build_file,
    is_config_file,
    is_cuda_source,
    is_dependency_file,
    is_dockerfile,
    is_ini_file,
    is_json_file,
    is_shell_script,
    is_toml_file,
)

__all__ = [
    "COARSE_WORDS",
    "KINDS",
    "NamePool",
    "RESIDUAL",
    "RESIDUAL_KINDS",
    "Kind",
    "catalog",
    "covers",
    "directives",
    "file_words",
    "found_modules",
    "guarded",
    "hook_files",
    "kind_named",
    "kind_of",
    "known_codes",
    "may_trigger",
    "process_bytes",
    "process_kind",
    "verify_rewrite",
    "worded_imports",
    "rules_for",
    "unknown_selectors",
    "words_for",
]


def is_notebook(path: Path) -> bool:
    return path.suffix == ".ipynb"


@dataclass(frozen=True)
class Kind:
    name: str
    matches: Callable[[Path], bool]
    # "module:function" of the processing body, imported on first use: the notebook machinery
    # loads only once a notebook turns up.
    body: str
    # A regular expression over a slash-separated path that matches every path ``matches`` can
    # accept, by name alone (pre-commit's ``files:``; ``hook_files`` joins them). It may match
    # more: where ``matches`` reads the file (a shebang, a ``Bootstrap:`` header), the hook passes
    # every candidate and ``check`` skips the rest.
    names: str

    def process(self, path: str, data: bytes, config: Config, options: RunOptions) -> FileResult:
        module, function = self.body.split(":")
        body: Body = getattr(import_module(module, __name__), function)
        # The residual pass (CN902) runs on the kind's output, inside the same guard; the
        # suppression check below reruns this same body, so it sees the pass's findings too.
        body = with_residual(self.name, body)
        result = guarded(path, data, config, options, body)
        if self.name in CHECKED_KINDS and b"cuda2neuron:" in (result.new_bytes or data):
            # Suppression comments: unknown codes fail the file, unused ones are CN901.
            result = check_suppressions(self.name, path, data, result, config, options, body)
        return result


KINDS: tuple[Kind, ...] = (
    Kind("python", is_python_source, "._python:process_python_findings", r"\.pyi?$"),
    # Extensionless: a shebang may make it a script.
    Kind("shell", is_shell_script, "._text_files:process_shell_findings",
         r"\.(bash|lsf|pbs|qsub|sbatch|sh|slurm)$|(^|/)[^/.]+$"),
    Kind("requirements", is_dependency_file, "._text_files:process_dependencies_findings",
         r"requirements[^/]*\.txt$|(^|/)requirements/[^/]*\.(txt|toml)$|(^|/)pyproject[^/]*\.toml$"),
    Kind("notebook", is_notebook, "._notebook:process_notebook_findings", r"\.ipynb$"),
    Kind("config", is_config_file, "._text_files:process_config_findings", r"(?i:\.ya?ml)$"),  # YAML
    Kind("json", is_json_file, "._text_files:process_json_findings", r"(?i:\.jsonc?)$"),
    Kind("toml", is_toml_file, "._text_files:process_toml_findings", r"(?i:\.toml)$"),
    Kind("ini", is_ini_file, "._text_files:process_ini_findings", r"(?i:\.(cfg|ini))$"),
    Kind("build", is_build_file, "._text_files:process_build_findings",
         r"(?i:(^|/)(cmakelists\.txt|gnumakefile|makefile)|\.(cmake|make|mk))$"),
    Kind("cuda-source", is_cuda_source, "._text_files:process_cuda_source_findings", r"(?i:\.cuh?)$"),
    # ``*.def``: an Apptainer definition only with a Bootstrap: header, which check reads.
    Kind("dockerfile", is_dockerfile, "._text_files:process_dockerfile_findings",
         r"(?i:(^|/)(apptainer|containerfile|dockerfile|singularity)(\.[^/]*)?|\.dockerfile|\.def)$"),
)
_BY_NAME = {k.name: k for k in KINDS}


def hook_files() -> str:
    """pre-commit's ``files:`` for the hooks: every path some kind can read, from ``KINDS`` (one
    source: the hook passes what ``check`` reads; tests/kinds/test_hook_files.py checks the hook
    definitions and the README say it)."""
    lines = [f"{'|' if i else ' '} {k.names}  # {k.name}" for i, k in enumerate(KINDS)]
    return "(?x)\n" + "\n".join(lines) + "\n"  # verbose: one kind a line, named


def kind_of(path: Path) -> str | None:
    """The name of the kind that reads ``path``, or None when cuda2neuron does not handle it."""
    for kind in KINDS:
        if kind.matches(path):
            return kind.name
    return None


def kind_named(name: str) -> Kind:
    return _BY_NAME[name]


def process_kind(kind: str | None, path: str, data: bytes, config: Config, options: RunOptions) -> FileResult:
    """Process bytes already known to be of ``kind`` (None: a file no kind reads)."""
    if kind is None:
        return FileResult(path, FileStatus.SKIPPED, skip_reason="not a file kind cuda2neuron handles")
    return _BY_NAME[kind].process(path, data, config, options)


def verify_rewrite(kind: str | None, path: str, new: bytes) -> bool:
    """Whether rewritten bytes that did not come from this run's engine (a cache entry) pass
    the checks a fresh rewrite of ``kind`` passes before it is handed back; False for the text
    kinds, whose rewrites are recomputed instead."""
    if kind == "python":
        from ._python import rewrite_compiles

        return rewrite_compiles(new, path)
    if kind == "notebook":
        import json

        try:
            return isinstance(json.loads(new), dict)
        except (ValueError, RecursionError):
            return False
    # A text kind's rewrite has no compiler to check it against, and recomputing it costs no
    # more than a cache miss of a small file: it is never taken from the cache, so not even an
    # entry signed with the user's key (a restored CI cache) can have migrate write its bytes.
    return False


def process_bytes(path: str, data: bytes, config: Config, options: RunOptions) -> FileResult:
    """Process bytes, their kind taken from ``path``."""
    return process_kind(kind_of(Path(path)), path, data, config, options)
