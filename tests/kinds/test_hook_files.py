"""The pre-commit hooks pass what ``check`` reads: their ``files:`` is generated from ``KINDS``
(``hook_files``), and every path a kind accepts matches it (issue 43: ``types_or`` let a JSON
config, requirements.txt, a Makefile or setup.cfg through unchecked)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from cuda2neuron.kinds import KINDS, hook_files, kind_of

ROOT = Path(__file__).resolve().parents[2]

# kind -> paths its matcher accepts (the unusual ones each matcher names in its docstring)
ACCEPTED: dict[str, list[str]] = {
    "python": ["train.py", "pkg/stubs.pyi"],
    "shell": ["run.sh", "x/launch.bash", "job.slurm", "a.sbatch", "b.pbs", "c.lsf", "d.qsub", "bin/train"],
    "requirements": ["requirements.txt", "requirements-dev.txt", "dev-requirements.txt", "requirements/train.txt",
                     "pyproject.toml", "sub/pyproject-moe.toml", "requirements/extras.toml"],
    "notebook": ["nb/explore.ipynb"],
    "config": ["conf/run.yaml", "ci.yml", "ENV.YAML"],
    "json": ["conf/tune.json", "settings.jsonc", "DS.JSON"],
    "toml": ["conf/run.toml", "Cfg.TOML"],
    "ini": ["setup.cfg", "tox.ini", "x/Run.INI"],
    "build": ["Makefile", "sub/GNUmakefile", "CMakeLists.txt", "rules.mk", "a.make", "cmake/cuda.cmake"],
    "cuda-source": ["k.cu", "inc/k.cuh", "K.CU"],
    "dockerfile": ["Dockerfile", "docker/Dockerfile.gpu", "Containerfile", "train.Dockerfile", "Singularity",
                   "Apptainer.gpu", "env/app.def"],
}
NO_KIND = ["README.md", "docs/guide.rst", "logo.png", "data/train.csv", "notes.txt", "model.pt", "a.b/c.md"]


def test_every_kind_has_paths():
    assert set(ACCEPTED) == {k.name for k in KINDS}, "add paths for the new kind"


def _write(tmp_path: Path, name: str, kind: str | None = None) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    # A shebang makes the extensionless script one, a Bootstrap: header the Apptainer definition.
    path.write_text("#!/bin/bash\necho hi\n" if kind == "shell" else "Bootstrap: docker\nFrom: ubuntu\n")
    return path


@pytest.mark.parametrize(("kind", "name"), [(k, n) for k, names in ACCEPTED.items() for n in names],
                         ids=lambda v: v)
def test_every_path_check_reads_is_passed_by_the_hook(tmp_path, kind, name):
    path = _write(tmp_path, name, kind)
    assert kind_of(path) == kind  # the table reads it as this kind ...
    assert re.search(hook_files(), name)  # ... and the hook passes it


@pytest.mark.parametrize("name", NO_KIND)
def test_files_no_kind_reads_stay_out(tmp_path, name):
    assert kind_of(_write(tmp_path, name)) is None
    assert not re.search(hook_files(), name)


def test_the_hook_definitions_use_the_generated_selection():
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert [h["id"] for h in hooks] == ["cuda2neuron-check", "cuda2neuron-fix"]
    for hook in hooks:
        assert hook["files"] == hook_files(), "regenerate `files:` from cuda2neuron.kinds.hook_files()"
        assert hook["require_serial"] is True and "types_or" not in hook and "types" not in hook


def test_the_readme_local_hook_uses_the_generated_selection():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## pre-commit\n", 1)[1].split("\n## ", 1)[0]
    local = yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))
    (hook,) = local["repos"][0]["hooks"]
    assert local["repos"][0]["repo"] == "local" and hook["files"] == hook_files()
    assert hook["require_serial"] is True
