"""A file that does not parse is reported at the 1-based line and column of the problem (the
reports show FileError.col as is)."""

from __future__ import annotations

import pytest

from cuda2neuron.core import SourceError
from cuda2neuron.python._source import parse_bytes


@pytest.mark.parametrize(
    ("source", "line", "col"),
    [
        pytest.param(b"a b\n", 1, 3, id="second-name"),
        pytest.param(b"x = y.cuda()\ndef (:\n", 2, 5, id="def-without-name"),
        pytest.param(b"x = (\n", 2, 1, id="end-of-file"),
    ],
)
def test_parse_error_location(source, line, col):
    with pytest.raises(SourceError) as info:
        parse_bytes(source)
    assert (info.value.line, info.value.col) == (line, col)
