"""accelerate's device maps and memory plans: what keys name a GPU, and what to do instead on Trainium.

Shared by CN111 (Python: ``from_pretrained(max_memory=...)``) and CN738 (the same settings in configs).
"""

from __future__ import annotations

import re

__all__ = ["GPU_KEY_RE", "MAX_MEMORY_GUIDANCE"]

# A GPU named by a string key: "cuda:0", or "0" (a JSON config's integer keys arrive as strings).
GPU_KEY_RE = re.compile(r"(?:cuda:)?\d+")

MAX_MEMORY_GUIDANCE = (
    "accelerate reads integer keys of max_memory as CUDA/XPU/NPU device indices and drops those "
    "it cannot find, so on Trainium the model is placed on the CPU (and disk): load it on one "
    'NeuronCore with device_map="neuron" (or {"": "neuron:<local rank>"} per process) and shard '
    "a model too large for one core with FSDP or tensor parallelism instead"
)
