"""``CUDA_VISIBLE_DEVICES`` values as ``NEURON_RT_VISIBLE_CORES`` values.

One conversion for the Python rule (CN405) and the launch-script rule (CN701), so a port of a
script and of the code it starts agree on which cores are visible.
"""

from __future__ import annotations

__all__ = ["visible_cores"]


def visible_cores(value: str) -> str | None:
    """``CUDA_VISIBLE_DEVICES`` value -> ``NEURON_RT_VISIBLE_CORES`` value, or None.

    Neuron takes one index or an inclusive consecutive range ``a-b``, never a comma list:
    "0,1,2,3" -> "0-3", "2" -> "2"; "0,2" (gaps), "3,2" (order matters for CUDA's renumbering),
    "" (hide every GPU) and "GPU-<uuid>" forms have no Neuron spelling.
    """
    parts = [p.strip() for p in value.split(",")]
    if not parts or not all(p.isdigit() for p in parts):
        return None
    numbers = [int(p) for p in parts]
    if numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        return None
    if len(numbers) == 1:
        return str(numbers[0])
    return f"{numbers[0]}-{numbers[-1]}"
