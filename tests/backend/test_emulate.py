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

from cuda2neuron.backend import _emulate
from cuda2neuron.backend._emulate import SITECUSTOMIZE_DIR, build_backend_command, emulation_env

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
    import sys
    import torch

    x = torch.arange(6, dtype=torch.float32).to("neuron")
    y = (x * 2).sum()
    print("DEVICE", y.device.type, torch.neuron.device_count(), float(y.cpu()))
    print("IMPORTED", "cuda2neuron" in " ".join(sys.modules))
"""


def test_a_ported_script_runs_without_importing_cuda2neuron(tmp_path: Path) -> None:
    proc = emulate(sys.executable, str(_script(tmp_path, "ported.py", PORTED)))
    assert proc.returncode == 0, proc.stderr
    device_line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("DEVICE"))
    _, dev, count, value = device_line.split()
    assert dev == "neuron" and int(count) >= 2 and float(value) == 30.0


def test_without_emulate_the_same_script_has_no_neuron_device(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(_script(tmp_path, "ported.py", PORTED))], capture_output=True,
                          text=True, timeout=TIMEOUT, env=_clean_env())
    assert proc.returncode != 0
    assert "neuron" in proc.stderr


SPAWN = """
    import multiprocessing as mp
    import torch

    def child(q):
        t = torch.ones(3, device="neuron") * 7
        q.put((t.device.type, t.sum().item()))

    if __name__ == "__main__":
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start()
        print("CHILD", *q.get(timeout=200))
        p.join(timeout=200)
        raise SystemExit(p.exitcode)
"""

DATALOADER = """
    import torch
    from torch.utils.data import DataLoader, Dataset

    class OnDevice(Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            # Runs in the worker: the device must exist there too.
            return torch.tensor([float(i)], device="neuron").cpu() + torch.neuron.device_count()

    if __name__ == "__main__":
        loader = DataLoader(OnDevice(), batch_size=2, num_workers=1, multiprocessing_context="spawn")
        (batch,) = list(loader)
        print("CHILD", "neuron", batch.sum().item())
"""


@pytest.mark.parametrize(("body", "expected"), [(SPAWN, "CHILD neuron 21.0"), (DATALOADER, None)],
                         ids=["multiprocessing-spawn", "dataloader-spawn-worker"])
def test_spawned_children_see_the_device(tmp_path: Path, body: str, expected: str | None) -> None:
    proc = emulate(sys.executable, str(_script(tmp_path, "spawner.py", body)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("CHILD"))
    if expected is not None:
        assert line == expected
    else:
        assert line.split()[1] == "neuron" and float(line.split()[2]) >= 5.0  # 0+1 + 2*count, count >= 2


@pytest.mark.parametrize("code", [0, 3, 42], ids=["exit-0", "exit-3", "exit-42"])
def test_the_exit_code_is_the_programs(code: int) -> None:
    proc = emulate(sys.executable, "-c", f"import sys; sys.exit({code})")
    assert proc.returncode == code


def test_a_python_child_that_never_imports_torch_does_not_load_it() -> None:
    proc = emulate(sys.executable, "-c", "import sys, os; print(os.environ['CUDA2NEURON_EMULATE'], 'torch' in sys.modules)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "False"]


def test_an_existing_sitecustomize_still_runs(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['SITE_MARK'] = 'chained'\n")
    env = _clean_env(PYTHONPATH=str(site))
    proc = emulate(sys.executable, "-c", "import os, torch; print(os.environ.get('SITE_MARK'), torch.neuron.device_count() > 0)",
                   env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["chained", "True"]


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
