"""Loaded first by every Python process that `cuda2neuron emulate` starts (this folder is put
at the front of PYTHONPATH, and Python imports the first ``sitecustomize`` it finds).

With CUDA2NEURON_EMULATE=1 it arranges for the emulated ``neuron`` device (and its process-group
backend) to be registered the moment the program imports torch: not before, so Python processes
that never use torch (pip, a compiler wrapper, torchrun's helpers) pay nothing. The environment is
inherited, so this reaches torchrun workers and multiprocessing "spawn" children too.

It then runs the ``sitecustomize`` this one shadows, if there is one (the trap: shadowing it
silently would drop a site's own setup). Standard library only: it runs in every interpreter.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _activate_after_torch_import() -> None:
    # Called once torch has finished importing: activate the device, then the process group.
    try:
        from cuda2neuron.backend import activate
        from cuda2neuron.backend.distributed import register
    except ImportError as exc:
        raise ImportError(
            f"cuda2neuron emulate: this Python ({sys.executable}) cannot import cuda2neuron ({exc}); run the "
            "program with the Python that cuda2neuron is installed in") from exc

    activate()
    register()


class _ActivateOnTorchImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``torch`` with the normal finders and activates the device right after it executes."""

    def __init__(self) -> None:
        self._inner: importlib.abc.Loader | None = None

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001 - importlib's protocol
        if name != "torch":
            return None
        sys.meta_path.remove(self)  # one shot: never wrap a second time, never recurse
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        if spec is None or spec.loader is None:
            return spec
        self._inner = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):  # noqa: ANN001
        assert self._inner is not None
        return self._inner.create_module(spec)

    def exec_module(self, module) -> None:  # noqa: ANN001
        assert self._inner is not None
        self._inner.exec_module(module)
        _activate_after_torch_import()


def _chain_shadowed_sitecustomize() -> None:
    others = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


if os.environ.get("CUDA2NEURON_EMULATE") == "1":
    if "torch" in sys.modules:  # imported by a .pth file already
        _activate_after_torch_import()
    else:
        sys.meta_path.insert(0, _ActivateOnTorchImport())
_chain_shadowed_sitecustomize()
