"""Where each cell's ``source`` lives in a notebook's JSON text, so edits can be spliced in.

Re-serialising a notebook changes it: Jupyter writes 1-space indents and sorted keys, other
tools 2 spaces and insertion order, some escape non-ASCII (``\\u00e9``) and some do not. Instead
of guessing the style we never re-serialise: we find the byte range of every code cell's
``source`` value (and of each of its line strings) and replace only the lines that changed.
Everything else — outputs, metadata, ids, key order, indentation, escapes — is untouched.

Values we do not care about are skipped with ``JSONDecoder.raw_decode`` (C speed for large
outputs); only the top object, the ``cells`` array and each cell object are walked here.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass

__all__ = ["CellLoc", "NotebookJson", "NotebookShapeError", "locate_cells", "render_source"]

_DECODER = json.JSONDecoder()
_WS = " \t\n\r"


@dataclass(frozen=True)
class CellLoc:
    number: int  # 1-based among all cells, markdown included (what a reader counts)
    cell_type: str
    start: int  # span of the `source` value (array or string)
    end: int
    # Spans of the line strings when `source` is an array; None when it is one string.
    elements: tuple[tuple[int, int], ...] | None
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        return "".join(self.lines)


@dataclass(frozen=True)
class NotebookJson:
    top: dict  # top-level keys other than "cells", decoded
    cells: tuple[CellLoc, ...]
    # Where the top-level "metadata" object is written (its braces included), so a rule can
    # place a finding on the line of one of its keys (Colab's `"accelerator": "GPU"`).
    metadata_span: tuple[int, int] | None = None


class NotebookShapeError(ValueError):
    pass


def _ws(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i] in _WS:
        i += 1
    return i


def _expect(text: str, i: int, ch: str) -> int:
    if i >= len(text) or text[i] != ch:
        raise NotebookShapeError(f"expected {ch!r} at offset {i}")
    return i + 1


def _object(text: str, i: int, on_value) -> int:
    """Walk an object at ``i``; ``on_value(key, i)`` returns the end of the value it consumed."""
    i = _ws(text, _expect(text, i, "{"))
    if text[i] == "}":
        return i + 1
    while True:
        key, i = _DECODER.raw_decode(text, i)
        i = _ws(text, _expect(text, _ws(text, i), ":"))
        i = _ws(text, on_value(key, i))
        if text[i] == ",":
            i = _ws(text, i + 1)
            continue
        return _expect(text, i, "}")


def _array(text: str, i: int, on_item) -> int:
    i = _ws(text, _expect(text, i, "["))
    if text[i] == "]":
        return i + 1
    while True:
        i = _ws(text, on_item(i))
        if text[i] == ",":
            i = _ws(text, i + 1)
            continue
        return _expect(text, i, "]")


def locate_cells(text: str) -> NotebookJson:
    """Cells and their source spans; raises NotebookShapeError when the shape is not nbformat 4."""
    top: dict = {}
    cells: list[CellLoc] = []
    spans: dict[str, tuple[int, int]] = {}

    def cell(i: int) -> int:
        if text[i] != "{":
            raise NotebookShapeError(f"cell {len(cells) + 1} is not an object")
        found: dict = {}

        def field(key: str, j: int) -> int:
            if key == "source":
                if text[j] == "[":
                    spans: list[tuple[int, int]] = []
                    lines: list[str] = []

                    def line(k: int) -> int:
                        value, end = _DECODER.raw_decode(text, k)
                        if not isinstance(value, str):
                            raise NotebookShapeError(f"cell {len(cells) + 1}: source holds a non-string")
                        spans.append((k, end))
                        lines.append(value)
                        return end

                    end = _array(text, j, line)
                    found["source"] = (j, end, tuple(spans), tuple(lines))
                    return end
                value, end = _DECODER.raw_decode(text, j)
                if not isinstance(value, str):
                    raise NotebookShapeError(f"cell {len(cells) + 1}: source is neither a string nor a list")
                found["source"] = (j, end, None, (value,) if value else ())
                return end
            value, end = _DECODER.raw_decode(text, j)
            found[key] = value
            return end

        end = _object(text, i, field)
        start_s, end_s, spans, lines = found.get("source", (i, i, (), ()))
        cells.append(CellLoc(len(cells) + 1, str(found.get("cell_type", "")), start_s, end_s, spans, lines))
        return end

    def top_field(key: str, i: int) -> int:
        if key == "cells" and text[i] == "[":
            return _array(text, i, cell)
        value, end = _DECODER.raw_decode(text, i)
        top[key] = value
        spans[key] = (i, end)
        return end

    _object(text, _ws(text, 0), top_field)
    metadata = spans.get("metadata") if isinstance(top.get("metadata"), dict) else None
    return NotebookJson(top, tuple(cells), metadata)


def render_source(text: str, cell: CellLoc, new_lines: list[str], ascii_only: bool) -> str:
    """The JSON for ``cell``'s new source, reusing the original tokens of unchanged lines."""
    if cell.elements is None:
        return json.dumps("".join(new_lines), ensure_ascii=ascii_only)
    old = cell.elements
    if not old:
        return json.dumps(new_lines, ensure_ascii=ascii_only)
    tokens: list[str] = []
    matcher = difflib.SequenceMatcher(a=list(cell.lines), b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            tokens += [text[s:e] for s, e in old[i1:i2]]
        else:
            tokens += [json.dumps(line, ensure_ascii=ascii_only) for line in new_lines[j1:j2]]
    if not tokens:
        return "[]"
    if len(old) >= 2:
        separator = text[old[0][1] : old[1][0]]  # ",\n    " as the notebook writes it
    else:
        separator = "," + text[cell.start + 1 : old[0][0]]
    return text[cell.start : old[0][0]] + separator.join(tokens) + text[old[-1][1] : cell.end]
