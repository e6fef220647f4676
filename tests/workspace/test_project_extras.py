"""The project's own extras that pull CUDA-only packages (``ProjectFacts.cuda_extras``), read by the
sweep from setup.py and pyproject.toml; CN713 reports an install of such an extra."""

from __future__ import annotations

import pytest

from cuda2neuron.workspace import discover, project_facts
from workspace_helpers import write_tree

# llm-foundry's setup.py: the extras are filled one by one, and `gpu` copies `gpu-flash2`.
SETUP_BY_ITEMS = (
    "import copy\nfrom setuptools import setup\n\n_PACKAGE_NAME = 'llm-foundry'\nextra_deps = {}\n"
    "extra_deps['dev'] = ['pytest>=7']\nextra_deps['gpu-flash2'] = [\n    'flash-attn==2.7.4.post1',\n]\n"
    "extra_deps['gpu'] = copy.deepcopy(extra_deps['gpu-flash2'])\n"
    "extra_deps['all'] = {dep for key, deps in extra_deps.items() for dep in deps if 'gpu' not in key}\n"
    "setup(name=_PACKAGE_NAME, extras_require=extra_deps)\n"
)
PYPROJECT = (
    '[project]\nname = "Proj_Kit"\ndependencies = ["torch"]\n\n[project.optional-dependencies]\n'
    'quant = ["bitsandbytes>=0.43"]\ndocs = ["sphinx"]\nall = ["proj-kit[quant,docs]"]\n'
)

CASES = [
    pytest.param(
        {"setup.py": SETUP_BY_ITEMS, "pkg/__init__.py": ""},
        {("llm-foundry", "gpu-flash2", "flash-attn", "setup.py:8"), ("llm-foundry", "gpu", "flash-attn", "setup.py:8")},
        id="setup-py-extras-filled-by-subscript-and-copied",
    ),
    pytest.param(
        {"setup.py": "from setuptools import setup\nsetup(name='p', extras_require={'ext': ['apex'] + ['numpy']})\n"},
        {("p", "ext", "apex", "setup.py:2")}, id="setup-py-extras-as-a-dict-display",
    ),
    pytest.param(
        {"pyproject.toml": PYPROJECT, "pkg/__init__.py": ""},
        {("proj-kit", "quant", "bitsandbytes", "pyproject.toml:6"), ("proj-kit", "all", "bitsandbytes", "pyproject.toml:6")},
        id="pyproject-extras-and-an-extra-naming-another",
    ),
    pytest.param(
        {"setup.py": "from setuptools import setup\nsetup(name='p', extras_require={'dev': ['pytest']})\n"},
        set(), id="extras-without-a-cuda-only-package",
    ),
    pytest.param(
        {"setup.py": "from setuptools import setup\nsetup(name='p', extras_require=make_extras())\n"},
        set(), id="extras-built-by-a-call-are-unknown",
    ),
]


@pytest.mark.parametrize(("files", "expected"), CASES)
def test_the_sweep_reads_the_extras_that_pull_cuda_only_packages(tmp_path, files, expected):
    root = write_tree(tmp_path / "proj", files)
    facts = project_facts(discover([root]).files, extra_roots=[root])
    assert set(facts.cuda_extras) == expected
