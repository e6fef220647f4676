"""The README is what a new user needs in five minutes, and it tells the truth: the commands it
starts with are the ones CI runs, and the rule table it points to is generated from the catalog."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from cuda2neuron.cli._rules import catalog_markdown
from cuda2neuron.kinds import catalog

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RULES_PAGE = ROOT / "docs" / "rules.md"


def _commands(text: str) -> list[str]:
    """The ```bash blocks of the README's Quick start, in order."""
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, re.S)]


def test_readme_is_short():
    # History, measurements and long tables live in docs/ (issue 31: it was 52 KB).
    assert len(README.read_bytes()) <= 25_000


def test_readme_starts_with_the_two_commands_of_a_fresh_machine():
    text = README.read_text(encoding="utf-8")
    main, tests = _commands(text)[:2]
    assert text.index("```bash") < text.index("\n## ", text.index("## Quick start"))  # the first section
    # One installs and runs the main job on the bundled example; the other installs and runs the tests.
    assert main.startswith("python3 -m venv .venv && ") and "cuda2neuron migrate examples/cnn_cuda" in main
    assert "cuda2neuron validate examples/cnn_cuda" in main
    assert tests.startswith("python3 -m venv .venv && ") and tests.endswith("python -m pytest -q -n 2")
    # Both take torch's CPU build first (PyPI's Linux default is the CUDA build).
    for command in (main, tests):
        assert 'pip install "torch==2.13.0" --extra-index-url https://download.pytorch.org/whl/cpu' in command
    # How long the tests take, and how to run fewer.
    after = text.split(tests, 1)[0].rsplit("\n\n", 1)[-1] + text.split(tests, 1)[1][:400]
    assert re.search(r"about \d+ minutes", after) and '-m "not slow"' in after


def test_ci_runs_exactly_the_readme_test_command():
    tests = _commands(README.read_text(encoding="utf-8"))[1]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in ci.splitlines()


def test_readme_links_resolve():
    text = README.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(((?:docs/|examples/|CHANGELOG|LICENSE)[^)#]*)", text):
        assert (ROOT / target).exists(), target


def test_rule_table_matches_catalog():
    text = RULES_PAGE.read_text(encoding="utf-8")
    block = text.split("## All rules\n\n", 1)[1].split("\n\n", 1)[0] + "\n"
    assert block == catalog_markdown(catalog())
    assert f"[docs/rules.md](docs/rules.md)" in README.read_text(encoding="utf-8")


def test_rules_page_matches_catalog(request):
    """docs/rules.md (the rule table, SARIF's helpUri and the HTML report link to it) is
    generated from the catalog; `pytest tests/test_readme.py --update-fixtures` rewrites it."""
    from cuda2neuron.report import rules_reference

    expected = rules_reference(catalog())
    if request.config.getoption("--update-fixtures"):
        RULES_PAGE.write_text(expected, encoding="utf-8")
    assert RULES_PAGE.read_text(encoding="utf-8") == expected, (
        "docs/rules.md is out of date: run `pytest tests/test_readme.py --update-fixtures`"
    )
    for code, rule in catalog().items():
        assert expected.count(f'<a id="{code.lower()}"></a>') == 1 and f"## {code} `{rule.name}`" in expected


def test_ci_says_the_cpu_capability_it_ran_on():
    # The EXIT trap runs once the README's command has activated the venv: its python is torch's.
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    function = re.search(r"^cpu_capability\(\) \{\n.*?^\}\n", ci, re.S | re.M)
    assert function and "\ntrap cpu_capability EXIT\n" in ci
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "ATEN_CPU_CAPABILITY": "default"}
    said = subprocess.run(["bash", "-c", function.group(0) + "cpu_capability"], env=env, capture_output=True,
                          text=True, check=True).stdout
    assert "CPU capability: DEFAULT\n" in said and "ATEN_CPU_CAPABILITY=default\n" in said
