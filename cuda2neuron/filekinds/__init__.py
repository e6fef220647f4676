"""File kinds beyond ``.py``: shell launch scripts, requirements / pyproject dependencies,
Jupyter notebooks, YAML configs and CUDA C++ sources.

Importing this package registers one engine handler per kind (the engine imports it lazily from
``handler_for``). Each handler runs the rules whose ``file_kinds`` name its kind — CN7xx text rules
for scripts and dependency lists; for notebooks the whole Python catalog on the code cells plus
the shell rules on ``!`` lines and ``%%bash`` cells.
"""

from __future__ import annotations

from functools import partial

from cuda2neuron.engine import Handler, guarded, register_handler

from ._min_torch import min_torch_from_requirements
from ._notebook import is_notebook, process_notebook_findings
from ._plain import is_config_file, is_cuda_source, process_config_findings, process_cuda_source_findings
from ._requirements import is_dependency_file, process_dependencies_findings
from ._shell_file import is_shell_script, process_shell_findings
from ._text import TextReport

__all__ = ["TextReport", "min_torch_from_requirements"]


def _handler(name, matches, body) -> Handler:
    # partial, not a lambda: handlers stay picklable for the process pool.
    return register_handler(Handler(name, matches, partial(guarded, body=body)))


_handler("shell", is_shell_script, process_shell_findings)
_handler("requirements", is_dependency_file, process_dependencies_findings)
_handler("notebook", is_notebook, process_notebook_findings)
_handler("config", is_config_file, process_config_findings)
_handler("cuda-source", is_cuda_source, process_cuda_source_findings)
