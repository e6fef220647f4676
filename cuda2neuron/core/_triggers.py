"""Trigger words: what a file must contain for a rule to be able to fire there.

Each rule declares its words; the file kinds (``cuda2neuron.kinds``) keep a few coarse words per
kind so that a file with none of them is left alone without importing the rule catalog. A rule
defined outside the catalog (tests, API users) is *admitted* here when its class is created, so
that the kinds' prefilter lets its words through as well. This module only records; the kinds
decide which admitted words their own coarse words already cover.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["admit", "admitted", "admitted_version", "has_trigger", "key_folded", "key_folded_text", "trigger_words"]

_admitted: dict[str, set[str]] = {}
_version = 0


def admit(file_kinds: Iterable[str], triggers: Iterable[str]) -> None:
    """Called for every rule class: its triggers count for the prefilter of its kinds."""
    global _version
    triggers = tuple(triggers)
    for kind in file_kinds:
        known = _admitted.setdefault(kind, set())
        if not known.issuperset(triggers):
            known.update(triggers)
            _version += 1


def admitted(kind: str) -> frozenset[str]:
    return frozenset(_admitted.get(kind, ()))


def admitted_version() -> int:
    """Grows whenever a rule adds words, so the kinds know when to rebuild their caches."""
    return _version


def trigger_words(words: set[str] | frozenset[str]) -> tuple[bytes, ...]:
    return tuple(w.encode() for w in sorted(words))


def has_trigger(data: bytes, words: tuple[bytes, ...]) -> bool:
    # Searched on raw bytes: every trigger word is ASCII, and ASCII bytes mean the same in every
    # encoding a Python source may declare (UTF-16 sources are not valid Python files).
    # One substring search per word: a regex alternation of the same words is about ten times
    # slower when the only match sits at the end of a large file.
    return any(w in data for w in words)


# ASCII upper case to lower, ``-`` to ``_``; every other byte kept (offsets too).
_KEY_FOLD = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ-", b"abcdefghijklmnopqrstuvwxyz_")
_KEY_FOLD_STR = {c: _KEY_FOLD[c] for c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZ-"}


def key_folded(data: bytes) -> bytes:
    """``data`` as setting keys are compared (``Rule.triggers_as_keys``): ``--Use-Flash-Attn``
    reads ``__use_flash_attn``. A word folded so is in the folded text wherever it is in the text
    as written, so matching folded loses nothing an exact match finds."""
    return data.translate(_KEY_FOLD)


def key_folded_text(text: str) -> str:
    """``key_folded`` of a decoded text (the text kinds); only ASCII letters change case."""
    return text.translate(_KEY_FOLD_STR)
