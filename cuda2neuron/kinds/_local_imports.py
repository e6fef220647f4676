"""Which of a Python file's imports Python finds beside it: the project's own modules, not packages.

DeepSpeedExamples' BERT scripts run ``python run_glue_classifier_bert_base.py`` from their own
folder and import ``from nvidia.modeling import BertConfig``: ``nvidia/`` is a folder of theirs
beside the script (Python puts a script's folder first on ``sys.path``), not NVIDIA's package.
The project's top-level packages (``ProjectFacts.own_packages``) do not name it, since it sits
deep in the tree; only the file system around the file does. A module of that folder imports it
too (``turing/models.py`` is imported by the script one folder up), so the folders above count as
long as the file could be a module of a package run from there.

What is read beyond the file's bytes must be part of its cache key, or a warm run answers for a
folder that has changed. Only imports whose statement names a CUDA word are resolved (the residual
pass judges nothing else), and those that bind a class whose CUDA-worded member a line reads
(unsloth's studio tests: ``from utils.hardware import (..., DeviceType)``, then
``DeviceType.CUDA``, with the backend root on ``sys.path``): ``worded_imports`` names them, ``found_modules`` resolves them, and the
results cache keeps, for a file that has some, its entry under what they resolved to (a small
entry under the file's own key names them: ``workspace._cache``). A warm run of a file without
one reads no folder and scans nothing more. Nothing is memoised across calls: a long-lived
process (an editor's, the tests') must see a folder change.
"""

from __future__ import annotations

import os
import re

__all__ = ["found_modules", "local_modules", "worded_imports"]

# An import statement (a parenthesised one over several lines included), as bytes.
_IMPORT = re.compile(
    rb"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import\b[ \t]*(?:\([^)]*\)|[^\n]*)|import[ \t]+([^\n#;]*))", re.MULTILINE
)
_WORDS = re.compile(rb"cuda(?!2neuron)|nccl|cudnn|nvidia|nvcc", re.IGNORECASE)
# The same words for `bytes.find` in a lowered copy (a statement whose only word is
# `cuda2neuron` is dropped by `_WORDS` when its text is read).
_WORD_LIST = (b"cuda", b"nccl", b"cudnn", b"nvidia", b"nvcc")
_INDENT = re.compile(rb"[ \t]*")
# The name a dotted member is read from, ending at the dot (`DeviceType` of `DeviceType.CUDA`).
_OWNER = re.compile(rb"([A-Za-z_]\w*)\Z")
_IDENT_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# A folder that holds one of these is the project's root: no folder above it is searched.
_ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
# How many folders above the file's own are searched at most. The trap: a checkout without a
# root marker (no .git, no pyproject.toml) must not reach the user's home folder, where an
# unrelated `cuda/` folder would excuse `import cuda` everywhere.
_MAX_UP = 3


def local_modules(path: str, data: bytes) -> frozenset[str]:
    """The top-level names of ``data``'s absolute imports that name a CUDA word and that Python
    finds as a module or package in the file's folder or a folder above it (see the module's
    docstring); empty for a file with no such import or no folder on disk (stdin)."""
    return found_modules(path, _worded_import_tops(data))


def worded_imports(kind: str | None, data: bytes) -> tuple[str, ...]:
    """The names whose whereabouts processing ``data`` of ``kind`` reads from the file system
    (the tops of its imports that name a CUDA word), sorted; empty for most files. The results
    cache keys an entry by what ``found_modules`` says of them."""
    if kind != "python":
        return ()
    return tuple(sorted(_worded_import_tops(data)))


def found_modules(path: str, tops) -> frozenset[str]:  # noqa: ANN001 - an iterable of names
    """Which of ``tops`` Python finds beside ``path`` (in its folder or one above it)."""
    if not tops:
        return frozenset()
    folders = _import_folders(path)
    return frozenset(top for top in tops if any(_holds_module(folder, top) for folder in folders))


def _worded_import_tops(data: bytes) -> set[str]:
    """The top-level names of the import statements that hold a CUDA word or bind the class of a
    CUDA-worded member (``DeviceType.CUDA``). It runs for every
    Python file of a warm run (the cache key), so it reads no more than it must: each word's
    places in a lowered copy (``bytes.find``; a regex alternation is several times slower), one
    look per line, then only the statements those places sit in (an import's line, or an
    import's parenthesised name list)."""
    lowered = data.lower()
    lists = _name_lists(lowered)
    starts: set[int] = set()
    classes: set[bytes] = set()  # `DeviceType` of `DeviceType.CUDA`
    for word in _WORD_LIST:
        at = lowered.find(word)
        while at != -1:
            line = lowered.rfind(b"\n", 0, at) + 1
            end = lowered.find(b"\n", at)
            if lowered.startswith((b"from", b"import"), _INDENT.match(lowered, line).end()):
                starts.add(line)
            else:
                starts.update(start for start, close in lists if start < at < close)
                owner = _class_of_member(data, line, at)
                if owner is not None:
                    classes.add(owner)
            at = -1 if end == -1 else lowered.find(word, end)
    binding: set[int] = set()
    if classes:
        # The statement that binds the class names no CUDA word (`from utils.hardware import
        # (..., DeviceType)`), yet decides whether `DeviceType.CUDA` is the project's member.
        for m in _IMPORT.finditer(data):
            if m.group(3) is None and classes.intersection(re.findall(rb"\w+", m.group(0).split(b"import", 1)[1])):
                binding.add(m.start())
    tops: set[str] = set()
    for start in sorted(starts | binding):
        m = _IMPORT.match(data, start)
        if m is None or (start not in binding and _WORDS.search(m.group(0)) is None):
            continue
        if m.group(3) is not None:  # import a.b, c as d
            for item in m.group(3).split(b","):
                name = item.strip().split(b" ")[0].decode("ascii", "replace")
                top = name.split(".")[0]
                if _IDENTIFIER.fullmatch(top):
                    tops.add(top)
        elif not m.group(1) and m.group(2):  # from a.b import c (a relative import is the project's anyway)
            top = m.group(2).decode("ascii", "replace").split(".")[0]
            if _IDENTIFIER.fullmatch(top):
                tops.add(top)
    return tops


def _class_of_member(data: bytes, line: int, at: int) -> bytes | None:
    """``DeviceType`` when the identifier holding the word at ``at`` is read as a member of a
    class spelled as one (``DeviceType.CUDA``, ``Backend.NCCL``); never ``torch.cuda``."""
    start = at
    while start > line and data[start - 1] in _IDENT_BYTES:
        start -= 1
    if start <= line or data[start - 1] != 0x2E:  # "."
        return None
    m = _OWNER.search(data, line, start - 1)
    return m.group(1) if m is not None and m.group(1)[:1].isupper() else None


def _name_lists(lowered: bytes) -> list[tuple[int, int]]:
    """(statement start, closing parenthesis) of each ``from pkg import (`` name list."""
    out = []
    at = lowered.find(b"import (")
    while at != -1:
        close = lowered.find(b")", at)
        out.append((lowered.rfind(b"\n", 0, at) + 1, len(lowered) if close == -1 else close))
        at = lowered.find(b"import (", at + 8)
    return out


def _import_folders(path: str) -> tuple[str, ...]:
    return _folders_from(os.path.dirname(os.path.abspath(path)))


def _folders_from(folder: str) -> tuple[str, ...]:
    """``folder`` (a script's own: ``sys.path[0]``), then each folder above it from which the
    file is importable as a module of a (namespace) package, up to the project's root."""
    out = [folder]
    for _ in range(_MAX_UP):
        if _is_root(folder):
            break
        parent = os.path.dirname(folder)
        if parent == folder or not _IDENTIFIER.fullmatch(os.path.basename(folder)):
            break  # `DeepSpeed-Chat/`: no package is named so, the script must be run below it
        folder = parent
        out.append(folder)
    return tuple(out)


def _is_root(folder: str) -> bool:
    return any(os.path.exists(os.path.join(folder, marker)) for marker in _ROOT_MARKERS)


def _holds_module(folder: str, name: str) -> bool:
    """Whether ``import name`` finds a Python module or package of source in ``folder`` (a
    compiled extension, ``name.cpython-310-x86_64-linux-gnu.so``, is no module of the project's
    own source: a CUDA extension built beside the script is what the pass must report)."""
    if os.path.isfile(os.path.join(folder, name + ".py")):
        return True
    package = os.path.join(folder, name)
    try:
        with os.scandir(package) as entries:
            return any(e.name.endswith(".py") and e.is_file() for e in entries)
    except OSError:
        return False
