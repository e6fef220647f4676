"""``cuda2neuron emulate`` and ``cuda2neuron build-backend``: any program gets the emulated device
with no code change, in spawned children too; exit codes pass through; failures are clear."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from neuron_testutil import REPO

from cuda2neuron.backend._emulate import SITECUSTOMIZE_DIR, emulation_env
from cuda2neuron.cli import _emulate
from cuda2neuron.cli._build_backend import build_backend_command

TIMEOUT = 240


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA2NEURON_EMULATE", "PYTHONPATH")}
    env.update(extra)
    return env


def emulate(*program: str, env: dict[str, str] | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "cuda2neuron", "emulate", "--", *program]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, cwd=str(cwd),
                          env=env if env is not None else _clean_env())


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


# A ported script: it never imports cuda2neuron, it just uses the neuron device.
PORTED = """
    import os
    import sys
    import torch

    x = torch.arange(6, dtype=torch.float32).to("neuron")
    y = (x * 2).sum()
    print("DEVICE", y.device.type, torch.neuron.device_count(), float(y.cpu()))
    print("SITE", os.environ.get("SITE_MARK"))
"""


@pytest.fixture(scope="module")
def ported_run(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """PORTED under emulate, with a site's own sitecustomize on PYTHONPATH (one run, two checks)."""
    tmp = tmp_path_factory.mktemp("ported")
    site = tmp / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['SITE_MARK'] = 'chained'\n")
    proc = emulate(sys.executable, str(_script(tmp, "ported.py", PORTED)), env=_clean_env(PYTHONPATH=str(site)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _line(out: str, tag: str) -> list[str]:
    return next(ln for ln in out.splitlines() if ln.startswith(tag + " ")).split()[1:]


def test_a_ported_script_runs_without_importing_cuda2neuron(ported_run: subprocess.CompletedProcess[str]) -> None:
    dev, count, value = _line(ported_run.stdout, "DEVICE")
    assert dev == "neuron" and int(count) >= 2 and float(value) == 30.0


def test_an_existing_sitecustomize_still_runs(ported_run: subprocess.CompletedProcess[str]) -> None:
    assert _line(ported_run.stdout, "SITE") == ["chained"]


def test_without_emulate_the_same_script_has_no_neuron_device(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(_script(tmp_path, "ported.py", PORTED))], capture_output=True,
                          text=True, timeout=TIMEOUT, env=_clean_env())
    assert proc.returncode != 0
    assert "neuron" in proc.stderr


SPAWNER = """
    import multiprocessing as mp
    import torch
    from torch.utils.data import DataLoader, Dataset

    def child(q):
        t = torch.ones(3, device="neuron") * 7
        q.put((t.device.type, t.sum().item()))

    class OnDevice(Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            # Runs in the worker process: the device must exist there too.
            t = torch.tensor([float(i)], device="neuron")
            return t.cpu() + 10 * (t.device.type == "neuron")

    if __name__ == "__main__":
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start()
        print("PROCESS", *q.get(timeout=200), flush=True)
        p.join(timeout=200)
        loader = DataLoader(OnDevice(), batch_size=2, num_workers=1, multiprocessing_context="spawn")
        (batch,) = list(loader)
        print("WORKER", batch.sum().item(), flush=True)
        raise SystemExit(p.exitcode)
"""


@pytest.fixture(scope="module")
def spawn_run(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    proc = emulate(sys.executable, str(_script(tmp_path_factory.mktemp("spawn"), "spawner.py", SPAWNER)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.parametrize(("tag", "expected"), [("PROCESS", ["neuron", "21.0"]), ("WORKER", ["21.0"])],
                         ids=["multiprocessing-spawn-child", "dataloader-spawn-worker"])
def test_spawned_children_see_the_device(spawn_run: subprocess.CompletedProcess[str], tag: str,
                                         expected: list[str]) -> None:
    assert _line(spawn_run.stdout, tag) == expected


@pytest.mark.parametrize("code", [0, 3, 42], ids=["exit-0", "exit-3", "exit-42"])
def test_the_exit_code_is_the_programs(code: int) -> None:
    proc = emulate(sys.executable, "-c", f"import sys; sys.exit({code})")
    assert proc.returncode == code


def test_a_python_child_that_never_imports_torch_does_not_load_it() -> None:
    proc = emulate(sys.executable, "-c", "import sys, os; print(os.environ['CUDA2NEURON_EMULATE'], 'torch' in sys.modules)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "False"]


def test_the_emulate_parent_does_not_import_torch() -> None:
    # The parent waits for the whole run: it must not hold a second torch in memory meanwhile.
    probe = ("import sys\nfrom cuda2neuron.cli import main\n"
             f"code = main(['emulate', '--', {sys.executable!r}, '-c', 'pass'])\n"
             "print('CODE', code, 'TORCH', any(m == 'torch' or m.startswith('torch.') for m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=TIMEOUT,
                          env=_clean_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["CODE", "0", "TORCH", "False"]


def test_an_unknown_program_is_a_clear_error() -> None:
    proc = emulate("no-such-program-c2n", "--flag")
    assert proc.returncode == _emulate.EXIT_NOT_FOUND
    assert "no-such-program-c2n: command not found" in proc.stderr


def test_emulate_without_a_program_is_a_usage_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "cuda2neuron", "emulate"], capture_output=True, text=True,
                          timeout=TIMEOUT, env=_clean_env())
    assert proc.returncode == 2
    assert "PROGRAM" in proc.stderr


def test_emulate_refuses_next_to_the_real_torch_neuronx(tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    (fake / "torch_neuronx").mkdir(parents=True)
    (fake / "torch_neuronx" / "__init__.py").write_text("")
    proc = emulate(sys.executable, "-c", "print('ran')", env=_clean_env(PYTHONPATH=str(fake)))
    assert proc.returncode == _emulate.EXIT_UNAVAILABLE
    assert "torch_neuronx" in proc.stderr and "ran" not in proc.stdout


@pytest.mark.parametrize(
    ("base", "strict", "devices", "expected"),
    [
        ({}, None, None, {"CUDA2NEURON_EMULATE": "1"}),
        ({"PYTHONPATH": "/a:/b"}, True, 4, {"CUDA2NEURON_STRICT": "1", "CUDA2NEURON_DEVICE_COUNT": "4"}),
        ({"PYTHONPATH": f"{SITECUSTOMIZE_DIR}:/a"}, False, None, {"CUDA2NEURON_STRICT": "0"}),
    ],
    ids=["plain", "keeps-pythonpath-strict-devices", "no-duplicate-entry"],
)
def test_emulation_env(base: dict[str, str], strict: bool | None, devices: int | None,
                       expected: dict[str, str]) -> None:
    env = emulation_env(base, strict=strict, devices=devices)
    paths = env["PYTHONPATH"].split(os.pathsep)
    assert paths[0] == str(SITECUSTOMIZE_DIR) and paths.count(str(SITECUSTOMIZE_DIR)) == 1
    assert paths[1:] == [p for p in base.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(SITECUSTOMIZE_DIR)]
    assert env["CUDA2NEURON_EMULATE"] == "1"
    for key, value in expected.items():
        assert env[key] == value


def test_emulate_strict_reaches_the_program() -> None:
    cmd = [sys.executable, "-m", "cuda2neuron", "emulate", "--strict", "--", sys.executable, "-c",
           "import torch; torch.ones(2, dtype=torch.float64, device='neuron')"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=_clean_env())
    assert proc.returncode != 0
    assert "float64" in proc.stderr


def test_build_backend_prints_the_library() -> None:
    result = CliRunner().invoke(build_backend_command, [])
    assert result.exit_code == 0, result.output
    lib = Path(result.stdout.strip().splitlines()[-1])
    assert lib.is_file() and lib.suffix == ".so"
