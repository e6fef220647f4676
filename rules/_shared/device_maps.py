"""accelerate's device maps and memory plans: what keys name a GPU or a CUDA device, and what to do instead on Trainium.

Shared by CN111 (Python: ``from_pretrained(max_memory=...)``) and CN738 (the same settings in configs).
"""

from __future__ import annotations

import re

__all__ = ["CUDA_KEY_RE", "GPU_KEY_RE", "MAX_MEMORY_GUIDANCE"]

# A GPU named by a string key: "cuda:0", or "0" (a JSON config's integer keys arrive as strings).
GPU_KEY_RE = re.compile(r"(?:cuda:)?\d+")
# A max_memory key that names a CUDA device. An integer key (0, "0") is not one: accelerate hands
# it to torch, and torch >= 2.13 reads an integer device as the current accelerator's index, so
# `device_map="auto", max_memory={0: "20GiB"}` loads the model on neuron:0 (measured on the
# emulated device, accelerate 1.14.0 / transformers 5.25.0; issue 39).
CUDA_KEY_RE = re.compile(r"cuda:\d+")

MAX_MEMORY_GUIDANCE = (
    'accelerate takes integer device indices, "cpu", "mps" and "disk" as max_memory keys and refuses '
    'other names: key the budget by the core\'s index ({0: "20GiB"}), which torch reads as the current '
    "accelerator's (neuron:0 on Trainium)"
)
