"""The rule catalog. Importing this package registers every rule.

One sub-package per family, one rule per module, named by code and name
(``device/cn102_cuda_device_string.py``). Code prefixes (the policy; a new rule takes the next
free code in its family, in that family's folder):

* CN1xx ``device/`` device placement: device strings, ``.cuda()``, ``is_cuda``, legacy tensor
  types, ordinals
* CN2xx ``cuda_api/`` ``torch.cuda.*`` APIs: same-name moves (rows of ``cuda_api.toml``, not
  code), APIs with no equivalent, cuDNN/TF32 flags
* CN3xx ``amp/`` automatic mixed precision: autocast, GradScaler, custom_fwd/bwd
* CN4xx ``dist/`` distributed: process-group backend, DDP arguments, device visibility variables
* CN5xx ``compile/`` ``torch.compile``
* CN6xx ``ecosystem/`` the CUDA-only ecosystem: Triton, CUDA extensions, apex, flash-attn, ...
* CN7xx ``files/`` files that are not Python, one sub-package per kind of file (the tens digit):
  CN70x ``shell/`` launch scripts and batch jobs, CN71x ``deps/`` requirements and dependency
  lists, CN72x ``notebook/``, CN73x ``config/`` structured configs (YAML, JSON, TOML, INI),
  CN74x ``cuda_source/`` ``*.cu`` files, CN75x ``docker/`` Dockerfiles and container
  definitions, CN76x ``infra/`` docker compose, Kubernetes and CI files, CN77x ``conda/`` conda
  environments, CN78x ``build/`` Makefiles and CMake (CN79x is free)
* CN8xx ``numerics/`` numerics and processes the device handles differently: float64, complex, fork
* CN9xx ``meta/`` what the kinds layer checks after the other rules, since it needs their
  findings: unused suppressions (CN901), and CUDA references no finding covers (CN902, the
  residual pass)

Helpers live in ``_shared/`` (used by several families) or in a family's ``_helpers.py`` (used
by that family only); modules and packages whose name starts with ``_`` hold no rules.

Rules register themselves by subclassing ``cuda2neuron.core.Rule``; there is no list to keep
in sync: every public module below this package is imported here.
"""

from __future__ import annotations

import importlib
import pkgutil

__all__: list[str] = []


def _import_all(path: list[str], prefix: str) -> None:
    # Sorted, so rules register in the same order on every machine; private modules and
    # packages (``_shared``, ``_helpers``) are imported by the rules that use them.
    for info in sorted(pkgutil.iter_modules(path), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{prefix}{info.name}")
        if info.ispkg:
            _import_all(list(module.__path__), f"{module.__name__}.")


_import_all(list(__path__), f"{__name__}.")
