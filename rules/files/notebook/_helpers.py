"""Helpers of the notebook rules (CN72x): building example notebooks."""

from __future__ import annotations

import json

__all__ = ["notebook"]


def notebook(*cells: str, metadata: dict | None = None) -> str:
    """A minimal nbformat-4 notebook with one code cell per argument, as Jupyter writes it;
    ``metadata``'s keys join the notebook's top-level metadata (Colab's ``accelerator``)."""
    return (
        json.dumps(
            {
                "cells": [
                    {"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {},
                     "outputs": [], "source": src.splitlines(keepends=True)}
                    for i, src in enumerate(cells)
                ],
                "metadata": {"language_info": {"name": "python"}, **(metadata or {})},
                "nbformat": 4,
                "nbformat_minor": 5,
            },
            indent=1,
            sort_keys=True,
            ensure_ascii=False,
        )
        + "\n"
    )

