"""The rule catalog. Importing this package registers every rule.

Code prefixes (the policy; a new rule takes the next free code in its family):

* CN1xx device placement: device strings, ``.cuda()``, ``is_cuda``, legacy tensor types, ordinals
* CN2xx ``torch.cuda.*`` APIs: same-name moves, APIs with no equivalent, cuDNN/TF32 flags
* CN3xx automatic mixed precision: autocast, GradScaler, custom_fwd/bwd
* CN4xx distributed: process-group backend, DDP arguments, device visibility variables
* CN5xx ``torch.compile``
* CN6xx the CUDA-only ecosystem: Triton, CUDA extensions, apex, flash-attn, xformers, ...
* CN7xx files that are not Python: launch scripts, requirements
* CN8xx numerics and processes the device handles differently: float64, complex, fork

Rules register themselves by subclassing ``cuda2neuron.core.Rule``; there is no list to keep
in sync: every module in this package is imported here.
"""

from __future__ import annotations

import importlib
import pkgutil

__all__: list[str] = []

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")
