"""A CUDA word that its neighbour negates: ``trainer-without-cuda-extras``, ``no-cuda``, ``cuda-off``.

A tag, a variant name or a label selects what its words say, and some say *without* CUDA (axolotl's
CI matrix builds ``IMAGE_TAG: trainer-without-cuda-extras``). The image rules and the residual pass
both judge a CUDA word by the word next to it, never by the CUDA word's own spelling.
"""

from __future__ import annotations

import re

__all__ = ["negated_cuda_word"]

# The words of a tag or a name: what separators (`-`, `_`, `.`, `:`, `/`) leave.
_WORD_RE = re.compile(r"[^/:\-_.\s=]+")
_NEGATING_BEFORE = frozenset({"no", "non", "not", "without", "wo", "disable", "disabled", "skip"})
_NEGATING_AFTER = frozenset({"off", "disabled", "free", "less"})


def negated_cuda_word(text: str, start: int, end: int) -> bool:
    """Whether the CUDA word at ``text[start:end]`` (a match may start at its separator) is
    negated by the word right before it or right after it within ``text``."""
    before = _WORD_RE.findall(text[:start])
    after = _WORD_RE.findall(text[end:])
    # Only the same token: a word across a space belongs to a sentence, not to the name.
    joined_before = not text[:start].endswith((" ", "\t")) and bool(before)
    joined_after = not text[end:].startswith((" ", "\t")) and bool(after)
    return (joined_before and before[-1].lower() in _NEGATING_BEFORE) or (
        joined_after and after[0].lower() in _NEGATING_AFTER
    )
