"""`check --fix` counts what is left in the files it wrote: a rerun reports the same findings.

gpt_trainer printed "fixed 28, 6 remaining" and a rerun of `check` reported 5: a rule woken by a
word of the input reported on the output, where a run on the output never wakes it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

PROJECTS = Path(__file__).parents[1] / "fixtures" / "projects"


@pytest.mark.parametrize("name", ["gpt_trainer", "amp_vit"])
def test_remaining_after_fix_is_what_a_rerun_reports(tmp_path, run, name):
    root = tmp_path / name
    shutil.copytree(PROJECTS / name, root)
    _, _, err = run("check", "--no-cache", "--fix", "--unsafe-fixes", ".", cwd=root)
    fixed = re.search(r"fixed (\d+), (\d+) remaining", err)
    assert fixed, err
    _, out, err_again = run("check", "--no-cache", "--output-format", "concise", ".", cwd=root)
    left = re.search(r"(\d+) finding\(s\)", err_again)
    assert left, err_again
    assert int(fixed.group(2)) == int(left.group(1)) == len(out.splitlines())
