"""The README's next steps, end to end through the real binary: a git project migrated in
place, an entry written afterwards in CUDA terms (docs/validate.md), then `validate .`.

The entry is in no commit: the original run must get it as written and the port run migrated
in memory; the work tree is not touched. The emulator cache starts empty, so the run also
shows what a first `validate` prints into a pipe (a CI log) while the emulator is built: a
stand-in build (it takes a moment, ticks fast and copies the real library: a real cold build is
a minute of CPU) reports through the real progress path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from validate_helpers import PORT_DEVICE, REPO, needs_emulator

pytestmark = pytest.mark.slow  # a migrate and two validate runs in subprocesses

BINARY = str(Path(sys.executable).parent / "cuda2neuron")
EXAMPLE = REPO / "examples" / "cnn_cuda"

# Loaded by every Python process of the run (PYTHONPATH): the build child's compile step sleeps
# and copies the library the suite already built, the ticker ticks every 0.2 s and the
# estimate is 0.5 s, so the log shows the over-estimate line too.
FAKE_BUILD = textwrap.dedent('''
    import os, shutil, time

    _REAL = os.environ.get("C2N_TEST_FAKE_BUILD")
    if _REAL:
        from cuda2neuron.backend import _build

        _build._TICK_S = 0.2
        _build.estimate_build_seconds = lambda *a, **k: (0.5, "(a test's stand-in build)")
        _compile = _build._compile

        def _stand_in(d, *, verbose, progress):
            from torch.utils import cpp_extension

            def load(name, sources, build_directory, **_kw):
                time.sleep(1.5)
                target = os.path.join(build_directory, name + ".so")
                shutil.copy2(_REAL, target)
                return _build._import_library(_build.Path(target))

            cpp_extension.load = load
            return _compile(d, verbose=verbose, progress=progress)

        _build._compile = _stand_in
''')


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def flow(tmp_path_factory):
    root = tmp_path_factory.mktemp("in-place")
    proj = root / "proj"
    shutil.copytree(EXAMPLE, proj, ignore=shutil.ignore_patterns("validate_entry.py", "__pycache__"))
    _git(proj, "init", "-q")
    _git(proj, "add", "-A")
    _git(proj, "commit", "-qm", "the CUDA original")
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    migrate = subprocess.run([BINARY, "migrate", "."], cwd=proj, capture_output=True, text=True, env=env, timeout=300)
    assert migrate.returncode == 0, migrate.stderr
    # Written after the migrate, in CUDA terms, as docs/validate.md says.
    entry = (EXAMPLE / "validate_entry.py").read_text()
    (proj / "validate_entry.py").write_text(entry)
    cold = dict(env, CUDA2NEURON_CACHE=str(root / "cache"))
    if PORT_DEVICE == "neuron":
        from cuda2neuron.backend._build import cached_library

        real = cached_library()
        assert real is not None, "PORT_DEVICE is neuron, so the suite built the emulator"
        (root / "harness").mkdir()
        (root / "harness" / "sitecustomize.py").write_text(FAKE_BUILD)
        cold.update(C2N_TEST_FAKE_BUILD=str(real), PYTHONPATH=os.pathsep.join(
            [str(root / "harness"), *filter(None, [env.get("PYTHONPATH")])]))
    args = ["--steps", "1", "--no-golden", "--port-device", PORT_DEVICE]
    # stderr is a pipe: what a CI log gets.
    run = subprocess.run([BINARY, "validate", ".", "--entry", "validate_entry:build", *args], cwd=proj,
                         capture_output=True, text=True, env=cold, timeout=600)
    typo = subprocess.run([BINARY, "validate", ".", "--entry", "validate_entyr:build", *args], cwd=proj,
                          capture_output=True, text=True, env=cold, timeout=600)
    return proj, entry, run, typo


def test_an_entry_written_after_an_in_place_migrate_validates(flow):
    proj, entry, run, _ = flow
    assert run.returncode == 0, run.stderr
    assert "PASS" in run.stderr
    assert "not at git revision HEAD: validate_entry.py; the original run uses the work tree's copy as written" in run.stderr
    assert "the port run uses it migrated in memory with the project's rules: validate_entry.py (" in run.stderr
    # The work tree keeps the entry as written (CUDA terms) and nothing else appears in it.
    assert (proj / "validate_entry.py").read_text() == entry
    status = sorted(_git(proj, "status", "--porcelain").splitlines())
    assert status == [" M train.py", "?? validate_entry.py"], status


def test_errors_name_the_original_by_its_revision_never_a_temp_folder(flow):
    _, _, _, typo = flow
    assert typo.returncode == 2, typo.stderr
    assert "entry module 'validate_entyr' not found in . at HEAD" in typo.stderr
    assert "cuda2neuron-validate-" not in typo.stderr


@needs_emulator
def test_a_cold_emulator_build_reports_progress_into_a_pipe(flow):
    _, _, run, _ = flow
    lines = [line for line in run.stderr.splitlines() if line.startswith("cuda2neuron validate: ")]
    said = [line.removeprefix("cuda2neuron validate: ") for line in lines]
    start = next(i for i, s in enumerate(said) if s.startswith("building the neuron emulator for torch"))
    end = next(i for i, s in enumerate(said) if s.startswith("neuron emulator built in"))
    ticks = said[start + 1:end]
    assert ticks and all(t.startswith("building the neuron emulator: ") for t in ticks), said
    assert any("longer than the estimated" in t for t in ticks), ticks
    assert said[end + 1].startswith("running original and port"), said
