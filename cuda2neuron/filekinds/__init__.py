"""File kinds beyond ``.py``: shell launch scripts, requirements / pyproject dependencies,
Jupyter notebooks, YAML configs, CUDA C++ sources and Dockerfiles.

Importing this package registers one engine handler per kind (the engine imports it lazily from
``handler_for``). Each handler runs the rules whose ``file_kinds`` name its kind — CN7xx text rules
for scripts and dependency lists; for notebooks the whole Python catalog on the code cells plus
the shell rules on ``!`` lines and ``%%bash`` cells.
"""

from __future__ import annotations

from functools import partial
from importlib import import_module

from cuda2neuron.engine import Handler, guarded, register_handler

from ._min_torch import min_torch_from_requirements
from ._text import TextReport

__all__ = ["TextReport", "min_torch_from_requirements"]


class _Lazy:
    """A function of one of this package's modules, imported on its first call.

    The CLI imports this package for ``min_torch_from_requirements`` on every run; the notebook
    and shell machinery loads only once a path of that kind turns up. A plain class, not a
    lambda, so handlers stay picklable for the process pool.
    """

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name

    def __call__(self, *args):
        return getattr(import_module(self.module, __name__), self.name)(*args)


def _handler(name: str, module: str, matches: str, body: str) -> Handler:
    return register_handler(Handler(name, _Lazy(module, matches), partial(guarded, body=_Lazy(module, body))))


_handler("shell", "._shell_file", "is_shell_script", "process_shell_findings")
_handler("requirements", "._requirements", "is_dependency_file", "process_dependencies_findings")
_handler("notebook", "._notebook", "is_notebook", "process_notebook_findings")
_handler("config", "._plain", "is_config_file", "process_config_findings")
_handler("cuda-source", "._plain", "is_cuda_source", "process_cuda_source_findings")
_handler("dockerfile", "._dockerfile", "is_dockerfile", "process_dockerfile_findings")
