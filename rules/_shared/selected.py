"""The code a device test selects (``selected_code``) or opens (``opened_code``), and what runs
once an early exit was not taken (``after_exit``).

The engine's program pass asks the same question of a value's readers, so the answer lives in
``cuda2neuron/python/_branches.py``; the rules keep asking it here.
"""

from __future__ import annotations

from cuda2neuron.python import after_exit, opened_code, selected_code

__all__ = ["after_exit", "opened_code", "selected_code"]
