"""Fixture pairs: every ``tests/fixtures/pairs/<family>/NAME.in.EXT`` against its expected outputs.

An input has one or more expected outputs; the part of the output's name between ``NAME`` and
``.out.EXT`` is the *variant*, the run that produces it:

    NAME.in.py                        the source, migrated as ``NAME.py``
    NAME.out.py + NAME.findings.txt   default run (neuron target, safe fixes)
    NAME.accelerator.out.py + NAME.accelerator.findings.txt          --target accelerator
    NAME.unsafe.out.py + NAME.unsafe.findings.txt                    --unsafe-fixes
    NAME.accelerator-unsafe.out.py + NAME.accelerator-unsafe.findings.txt   both

So one source is checked under several runs without being copied. Settings that describe the
input's own project rather than the run (``amp_dtype``, ``min_torch``) go on its first line:
``# cuda2neuron-test: amp_dtype=float16 min_torch=2.7``. Non-Python kinds live in ``files/``
(``requirements-gpu.in.txt`` is migrated as ``requirements-gpu.txt``).

``pytest --update-fixtures`` rewrites every expected file (and writes the default pair of an input
that has none yet; create an empty ``NAME.<variant>.out.EXT`` to add a variant); review the diff
like code. Every output is also checked for idempotence (fixing it again changes nothing) and for
still being a valid file of its kind.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from cuda2neuron.core import Config, Settings
from cuda2neuron.workspace import fix_source

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PAIRS = Path(__file__).parent / "fixtures" / "pairs"

# Variant words in an expected file's name, and what each changes in the run.
VARIANTS = {
    "accelerator": lambda c: replace(c, settings=replace(c.settings, target="accelerator")),
    "unsafe": lambda c: replace(c, unsafe_fixes=True),
}
# The first-line settings an input may carry (they describe the input, not the run).
HEADER = "# cuda2neuron-test:"
HEADER_KEYS = {"amp_dtype", "min_torch"}
# Per family, the rule selection. `files/` is pinned to CN101 (the engine's exemplar) and the
# file-kind family CN7 so that other rule families landing do not churn these outputs; notebooks
# under the whole catalog are covered by tests/kinds/test_kernels_ecosystem.py. The residual
# pass (CN902) runs on `files/` (whose lines it judges); the Python families leave it out, so
# that a rule of theirs never churns another family's residual lines (tests/kinds/test_residual.py
# covers the pass on Python).
SELECT = {"files": ("CN101", "CN7", "CN902")}
IGNORE = {"files": ()}


@dataclass(frozen=True)
class Pair:
    source: Path  # NAME.in.EXT
    variant: tuple[str, ...]  # () for the default run

    @property
    def stem(self) -> str:
        return self.source.name.partition(".in.")[0]

    @property
    def ext(self) -> str:
        return self.source.name.partition(".in.")[2]

    @property
    def logical_name(self) -> str:
        return f"{self.stem}.{self.ext}"

    def _expected(self, tail: str) -> Path:
        middle = f".{'-'.join(self.variant)}" if self.variant else ""
        return self.source.with_name(f"{self.stem}{middle}.{tail}")

    @property
    def out(self) -> Path:
        return self._expected(f"out.{self.ext}")

    @property
    def findings(self) -> Path:
        return self._expected("findings.txt")

    @property
    def id(self) -> str:
        return self.out.relative_to(PAIRS).as_posix()


def _variant(word: str, where: Path) -> tuple[str, ...]:
    words = tuple(word.split("-"))
    unknown = [w for w in words if w not in VARIANTS]
    if unknown or len(set(words)) != len(words) or list(words) != sorted(words, key=list(VARIANTS).index):
        raise ValueError(f"{where}: variant {word!r} is not a '-'-joined list of {list(VARIANTS)} in that order")
    return words


def _discover() -> tuple[list[Pair], set[Path]]:
    """Every (input, variant) and every file those pairs account for."""
    pairs: list[Pair] = []
    for source in sorted(PAIRS.rglob("*.in.*")):
        stem, _, ext = source.name.partition(".in.")
        pattern = re.compile(rf"{re.escape(stem)}(?:\.([a-z-]+))?\.out\.{re.escape(ext)}")
        variants = [
            () if m.group(1) is None else _variant(m.group(1), source)
            for p in sorted(source.parent.iterdir())
            if (m := pattern.fullmatch(p.name))
        ]
        # An input without outputs yet: its default pair (written by --update-fixtures).
        pairs += [Pair(source, v) for v in sorted(variants or [()])]
    accounted = {p.source for p in pairs} | {p.out for p in pairs} | {p.findings for p in pairs}
    return pairs, accounted


PAIR_LIST, ACCOUNTED = _discover()


def _config(pair: Pair, source: bytes) -> Config:
    family = pair.source.relative_to(PAIRS).parts[0]
    config = Config(select=SELECT.get(family, ("CN",)), ignore=IGNORE.get(family, ("CN902",)))
    first = source.split(b"\n", 1)[0].decode("utf-8", "replace")
    if first.startswith(HEADER):
        settings = Settings()
        for item in first[len(HEADER) :].split():
            key, _, value = item.partition("=")
            assert key in HEADER_KEYS, f"{pair.source.name}: {key!r} in the first line; run variants go in the output's name"
            if key == "min_torch":
                major, minor = value.split(".")
                settings = replace(settings, min_torch=(int(major), int(minor)))
            else:
                settings = replace(settings, **{key: value})
        config = replace(config, settings=settings)
    for word in pair.variant:
        config = VARIANTS[word](config)
    return config


def _render(findings) -> str:
    lines = []
    for f in findings:
        state = "applied" if f.applied else ("fixable" if f.fix else "manual")
        lines.append(f"{f.span.start_line}:{f.span.start_col} {f.code} {f.name} [{state}] {f.message}")
    return "\n".join(lines) + ("\n" if lines else "")


def _still_valid(out: bytes, name: str) -> None:
    if name.endswith(".py"):
        compile(out, name, "exec")
    elif name.endswith(".ipynb"):
        json.loads(out)
    elif name.endswith(".toml"):
        tomllib.loads(out.decode("utf-8"))
    elif name.endswith(".sh") and shutil.which("bash"):
        check = subprocess.run(["bash", "-n"], input=out, capture_output=True, check=False)
        assert check.returncode == 0, check.stderr.decode()


@pytest.mark.parametrize("pair", PAIR_LIST, ids=[p.id for p in PAIR_LIST])
def test_fixture_pair(pair: Pair, request):
    source = pair.source.read_bytes()
    config = _config(pair, source)
    fixed, findings = fix_source(source, pair.logical_name, config)
    rendered = _render(findings)
    if request.config.getoption("--update-fixtures"):
        pair.out.write_bytes(fixed)
        pair.findings.write_text(rendered, encoding="utf-8")
    assert pair.out.exists(), f"no {pair.out.name}: run pytest --update-fixtures and review the new files"
    assert fixed == pair.out.read_bytes()
    assert rendered == pair.findings.read_text(encoding="utf-8")
    _still_valid(fixed, pair.logical_name)
    again, _ = fix_source(fixed, pair.logical_name, config)
    assert again == fixed, "second run changed the output"


def test_every_fixture_file_belongs_to_a_pair():
    """A renamed input or a misspelt variant must not leave expected files that nothing checks."""
    stray = sorted(
        p.relative_to(PAIRS).as_posix() for p in PAIRS.rglob("*") if p.is_file() and p not in ACCOUNTED
    )
    assert stray == []
