"""A file name may hold any byte but "/": what we print of it must not be a terminal command,
and the XML we write must stay XML (issue 44: names with ESC and \\x01 were printed raw and broke
the JUnit report)."""

from __future__ import annotations

from xml.etree import ElementTree as ET

import pytest

from cuda2neuron.core import printable

NAME = "run\x1b[2Jx\x01.py"  # ESC [2J clears a terminal; \x01 is not allowed in XML 1.0
SHOWN = "run\\x1b[2Jx\\x01.py"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        pytest.param("plain.py", "plain.py", id="plain-unchanged"),
        pytest.param("tab\tand\nnewline", "tab\tand\nnewline", id="tab-and-newline-kept"),
        pytest.param("a\x1bb", "a\\x1bb", id="escape"),
        pytest.param("a\x7fb\x9b", "a\\x7fb\\x9b", id="delete-and-c1"),
        pytest.param("a\udcffb", "a\\udcffb", id="surrogate-escaped-byte"),
        pytest.param("naïve—ok", "naïve—ok", id="printable-unicode-kept"),
    ],
)
def test_printable(text, shown):
    assert printable(text) == shown


@pytest.mark.parametrize("fmt", ["concise", "full", "text", "junit"])
def test_a_control_character_in_a_file_name_is_shown_escaped(tmp_path, run_cli, fmt):
    (tmp_path / NAME).write_text("import torch\nx = torch.zeros(2).cuda()\n")
    code, out, err = run_cli("check", "--no-cache", "--output-format", fmt, str(tmp_path), cwd=tmp_path)
    assert code == 1, err
    for stream in (out, err):
        assert "\x1b[2J" not in stream and "\x01" not in stream
    assert SHOWN in out
    if fmt == "junit":
        suites = ET.fromstring(out).findall("testsuite")
        assert [s.get("name").endswith(SHOWN) for s in suites] == [True]
