"""The non-Python files of the kernels_ecosystem fixture project, against its EXPECTED.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda2neuron.core import Config, FileStatus, RunOptions
from cuda2neuron.workspace import SourceFile, process_file
from cuda2neuron.documents.nbjson import locate_cells

PROJECT = Path(__file__).parents[1] / "fixtures" / "projects" / "kernels_ecosystem"


def _outside_sources(text: str) -> str:
    """The notebook text with every cell's source value cut out."""
    pieces, last = [], 0
    for cell in locate_cells(text).cells:
        pieces.append(text[last : cell.start])
        last = cell.end
    return "".join(pieces) + text[last:]


def _codes(result) -> list[tuple[str, int]]:
    return sorted((f.code, f.line) for f in result.findings)


def test_launch_script_is_reported_not_rewritten():
    # 0,2 is not consecutive: no NEURON_RT_VISIBLE_CORES form, so nothing is written and the
    # `${CUDA_VISIBLE_DEVICES}` read in the echo stays with it.
    result = process_file(SourceFile.at(PROJECT / "launch.sh"), Config(), RunOptions(fix=True))
    assert result.status is FileStatus.UNCHANGED
    assert _codes(result) == [
        ("CN701", 6),
        ("CN701", 11),
        ("CN702", 10),
        ("CN702", 15),
        ("CN703", 15),
        ("CN704", 7),
        ("CN704", 8),
    ]
    assert all(f.guidance for f in result.findings)


def test_requirements_report_each_cuda_only_dependency():
    result = process_file(SourceFile.at(PROJECT / "requirements.txt"), Config(), RunOptions(fix=True))
    assert result.status is FileStatus.UNCHANGED
    lines = (PROJECT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    reported = [lines[f.line - 1].split()[0] for f in result.findings]
    assert reported == ["triton>=2.3", "apex", "flash-attn>=2.5.0", "xformers>=0.0.26", "bitsandbytes>=0.43", "nvidia-ml-py>=12.535"]
    assert {f.code for f in result.findings} == {"CN711"}


@pytest.mark.parametrize("name", ["explore.ipynb", "quickcheck.ipynb"])
def test_notebooks_keep_everything_but_code_sources(name):
    old = (PROJECT / name).read_text(encoding="utf-8")
    result = process_file(SourceFile.at(PROJECT / name), Config(), RunOptions(fix=True))
    assert result.error is None
    new = result.new_bytes.decode("utf-8") if result.new_bytes else old
    assert _outside_sources(new) == _outside_sources(old)
    old_nb, new_nb = json.loads(old), json.loads(new)
    for before, after in zip(old_nb["cells"], new_nb["cells"]):
        if before["cell_type"] != "code":
            assert after == before
        else:
            assert {k: v for k, v in after.items() if k != "source"} == {k: v for k, v in before.items() if k != "source"}
    # Magics and shell lines survive verbatim.
    for line in ("%matplotlib inline", "!nvidia-smi", "%%time", "!nvidia-smi --query-gpu=name --format=csv,noheader"):
        assert (line in old) == (line in new)
    assert any(f.code == "CN702" for f in result.findings), "the !nvidia-smi line is reported"


def test_quickcheck_style_is_not_jupyters():
    data = (PROJECT / "quickcheck.ipynb").read_bytes()
    result = process_file(SourceFile.at(PROJECT / "quickcheck.ipynb"), Config(), RunOptions(fix=True))
    new = result.new_bytes or data
    assert "résumé".encode() in new and b"\\u00e9" not in new
    assert new.startswith(b'{\n  "nbformat": 4,')


def test_cuda_source_reports_each_kernel_and_is_never_edited():
    result = process_file(SourceFile.at(PROJECT / "csrc" / "fused_bias_act.cu"), Config(), RunOptions(fix=True))
    assert result.status is FileStatus.UNCHANGED
    assert [f.message for f in result.findings] == [
        "CUDA kernel `bias_act_fwd_kernel`",
        "CUDA kernel `bias_act_bwd_kernel`",
    ]
    assert {(f.code, f.effort.value) for f in result.findings} == {("CN741", "high")}
    assert all("NKI" in f.guidance for f in result.findings)
