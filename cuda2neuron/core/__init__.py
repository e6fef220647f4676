"""The bottom layer: the data every other layer shares, and nothing that parses or prints.

Findings, fixes and per-file results; settings and run options; the one configuration loader;
the rule base class and its registry; the text-rule protocol; suppression comments; trigger
words. Importing this package costs neither libcst nor torch.
"""

from __future__ import annotations

from ._config import (
    Config,
    ConfigError,
    config_from_table,
    CONFIG_NAMES,
    find_config,
    find_pyproject,
    load_config,
    load_validate_table,
    parse_min_torch,
    parse_min_torch_neuronx,
)
from ._convergence import MAX_ITERATIONS, ConvergenceError
from ._errors import SourceError
from ._negation import negated_cuda_word
from ._printable import printable
from ._model import Effort, FileError, FileResult, FileStatus, Finding, Fix, Safety, Span
from ._rule import Invalid, Report, Rule, RuleDefinitionError, Valid, example_fix_safeties, registered_rules
from ._settings import AMP_DTYPES, TARGETS, ProjectFacts, RunOptions, Settings
from ._suppress import Suppressions, continuation_starts, suppressions_disabled
from ._bytes import WORD_BYTES, search_unjoined
from ._kept_tree import kept_tree, parse_kept
from ._text_callees import once_bound_calls, text_callees, text_callees_of_source
from ._text import (
    CellProblem,
    CellReport,
    LineIndex,
    NotebookProblems,
    TextItem,
    TextReport,
    apply_text_fixes,
    run_text_rules,
    to_finding,
)
from ._triggers import admit, admitted, admitted_version, has_trigger, key_folded, key_folded_text, trigger_words
from ._write import StaleBackupError, atomic_write, remove_stale_temps

__all__ = [
    "WORD_BYTES",
    "search_unjoined",
    "kept_tree",
    "once_bound_calls",
    "parse_kept",
    "printable",
    "text_callees",
    "text_callees_of_source",
    "negated_cuda_word",
    "AMP_DTYPES",
    "MAX_ITERATIONS",
    "TARGETS",
    "CellProblem",
    "CellReport",
    "Config",
    "ConfigError",
    "ConvergenceError",
    "Effort",
    "FileError",
    "FileResult",
    "FileStatus",
    "Finding",
    "Fix",
    "Invalid",
    "LineIndex",
    "NotebookProblems",
    "ProjectFacts",
    "Report",
    "Rule",
    "RuleDefinitionError",
    "RunOptions",
    "Safety",
    "Settings",
    "SourceError",
    "StaleBackupError",
    "Span",
    "Suppressions",
    "continuation_starts",
    "suppressions_disabled",
    "TextItem",
    "TextReport",
    "Valid",
    "admit",
    "admitted",
    "admitted_version",
    "apply_text_fixes",
    "atomic_write",
    "remove_stale_temps",
    "config_from_table",
    "example_fix_safeties",
    "CONFIG_NAMES",
    "find_config",
    "find_pyproject",
    "has_trigger",
    "key_folded",
    "key_folded_text",
    "load_config",
    "load_validate_table",
    "parse_min_torch",
    "parse_min_torch_neuronx",
    "registered_rules",
    "run_text_rules",
    "to_finding",
    "trigger_words",
]
