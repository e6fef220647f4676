"""`--target accelerator --min-torch X`: no rule writes a torch name newer than X.

A table over every rule of the catalog × min-torch values: each rule's examples (INVALID and
VALID sources, unsafe fixes on) are fixed with the accelerator target at that min-torch,
and every ``torch.accelerator.*`` (and other version-gated) name the output holds and its input
did not must exist in that torch. The versions are PyTorch's (docs of each release), written
here independently of the rules' own table (``rules/_shared/target.py``) so that the test can
catch it being wrong. A second table: each accelerator-target INVALID example is still reported
under min-torch 1.5 (a rule that cannot write its fix must say so, not go silent).
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from cuda2neuron.core import Config, Invalid, Settings, Valid
from cuda2neuron.kinds import catalog
from cuda2neuron.workspace import fix_source

# The first release with each name (longest prefix wins). torch.accelerator arrived in 2.6.
INTRODUCED = {
    "torch.accelerator": (2, 6),
    "torch.accelerator.current_device_index": (2, 7),
    "torch.accelerator.set_device_index": (2, 7),
    "torch.accelerator.device_index": (2, 8),
    "torch.accelerator.memory": (2, 9),
    "torch.get_default_device": (2, 3),
    "torch.set_default_device": (2, 0),
    "torch.Stream": (2, 6),
    "torch.Event": (2, 6),
    "torch.distributed.get_default_backend_for_device": (2, 5),
}
MIN_TORCH = [(1, 5), (2, 0), (2, 3), (2, 5), (2, 6), (2, 7), (2, 8)]
_NAME = re.compile(r"\btorch(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def introduced(name: str) -> tuple[int, int] | None:
    best = None
    for prefix, version in INTRODUCED.items():
        if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, version)
    return best[1] if best else None


def _sources(rule):
    for ex in (*rule.INVALID, *rule.VALID):
        if isinstance(ex, (Invalid, Valid)):
            if not ex.path.endswith(".py"):
                continue
            yield ex.source, dict(ex.options)
        else:
            yield ex, {}


def _cases():
    for code, rule in catalog().items():
        if "python" not in rule.file_kinds:
            continue
        for version in MIN_TORCH:
            yield pytest.param(code, version, id=f"{code}-min-torch-{version[0]}.{version[1]}")


@pytest.mark.parametrize(("code", "min_torch"), list(_cases()))
def test_no_emitted_name_is_newer_than_min_torch(code, min_torch):
    rule = catalog()[code]
    too_new = []
    for source, options in _sources(rule):
        options.pop("min_torch", None)
        settings = replace(Settings(target="accelerator", min_torch=min_torch), **options)
        # Unsafe fixes on: every fix the rule can write is written.
        fixed, _ = fix_source(source, "example.py", Config(select=(code,), unsafe_fixes=True, settings=settings))
        before = set(_NAME.findall(source))
        for name in set(_NAME.findall(fixed)) - before:
            version = introduced(name)
            if version is not None and version > min_torch:
                too_new.append(f"{name} (torch {version[0]}.{version[1]}) in:\n{fixed}")
    assert not too_new, "\n".join(too_new)


def _reported_cases():
    for code, rule in catalog().items():
        for i, ex in enumerate(rule.INVALID):
            if isinstance(ex, Invalid) and ex.target == "accelerator" and ex.path.endswith(".py"):
                yield pytest.param(code, ex, id=f"{code}-{rule.name}-{i}")


@pytest.mark.parametrize(("code", "example"), list(_reported_cases()))
def test_an_old_min_torch_reports_what_it_cannot_rewrite(code, example):
    """Honouring min-torch never makes a finding disappear: what cannot be written is reported."""
    options = dict(example.options)
    options.pop("min_torch", None)
    settings = replace(Settings(target="accelerator", min_torch=(1, 5)), **options)
    _, findings = fix_source(example.source, example.path, Config(select=(code,), settings=settings))
    assert any(f.code == code for f in findings), f"{code} went silent under min-torch 1.5"


@pytest.mark.parametrize(
    ("name", "version"),
    [
        pytest.param("torch.accelerator.synchronize", (2, 6), id="module-member"),
        pytest.param("torch.accelerator.memory.empty_cache", (2, 9), id="longest-prefix"),
        pytest.param("torch.zeros", None, id="not-gated"),
    ],
)
def test_the_table_reads_by_longest_prefix(name, version):
    assert introduced(name) == version
