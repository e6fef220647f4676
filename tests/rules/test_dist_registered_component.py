"""A ``"nccl"`` that names one of the project's own components (verl registers its NCCL checkpoint
engine with ``@CheckpointEngineRegistry.register("nccl")`` and looks it up by that name): CN401
reports it where it is an argument of the project's own code and leaves it, since "neuron" is no
key of that registry (issue 38, class 2: the value moved while the registry that reads it kept
"nccl"). torch's own backend arguments, and backend words the project keeps elsewhere, still move."""

from __future__ import annotations

import pytest

from cuda2neuron.cli import main

REGISTRY = """\
class EngineRegistry:
    _engines = {}

    @classmethod
    def register(cls, name):
        def wrap(engine):
            cls._engines[name] = engine
            return engine

        return wrap

    @classmethod
    def get(cls, name):
        return cls._engines[name]


@EngineRegistry.register("nccl")
class NcclEngine:
    def send(self, weights):
        return weights
"""

USER = """\
import torch.distributed as dist

from pkg.engines import EngineRegistry


class EngineManager:
    def __init__(self, backend, trainer):
        self.engine = EngineRegistry.get(backend)()
        self.trainer = trainer


manager = EngineManager(backend="nccl", trainer=None)
config_backend = "nccl"
dist.init_process_group(backend="nccl")
"""


# Another module looks the engine up by a config field (verl's worker reads
# `rollout_config.checkpoint_engine.backend`); a test script stores its "nccl" there.
WORKER = """\
from pkg.engines import EngineRegistry


class Worker:
    def __init__(self, rollout_config):
        backend = rollout_config.checkpoint_engine.backend
        self.engine = EngineRegistry.get(backend)()
"""

SCRIPT = """\
import torch


def make_config(config):
    config.rollout.checkpoint_engine.backend = "nccl" if torch.cuda.is_available() else "gloo"
    config.trainer.dist.backend = "nccl"
    return config
"""


def _port(tmp_path) -> dict[str, list[str]]:
    src = tmp_path / "proj"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pkg" / "engines.py").write_text(REGISTRY)
    (src / "pkg" / "worker.py").write_text(WORKER)
    (src / "use.py").write_text(USER)
    (src / "script.py").write_text(SCRIPT)
    out = tmp_path / "port"
    main(["migrate", str(src), "--out", str(out), "--no-cache", "-q", "-j1"])
    return {name: (out / name).read_text().splitlines() for name in ("use.py", "script.py")}


@pytest.fixture(scope="module")
def ported(tmp_path_factory):
    # One port for every row (without the decorator, CN401's own examples show each line moving).
    return _port(tmp_path_factory.mktemp("registered"))


@pytest.mark.parametrize(
    ("module", "line", "expected"),
    [
        pytest.param("use.py", 12, 'manager = EngineManager(backend="nccl", trainer=None)', id="component-argument-kept"),
        pytest.param("use.py", 13, 'config_backend = "neuron"', id="other-backend-words-move"),
        pytest.param("use.py", 14, 'dist.init_process_group(backend="neuron")', id="torch-backend-moves"),
        pytest.param(
            "script.py", 5, '    config.rollout.checkpoint_engine.backend = "nccl" if torch.cuda.is_available() else "gloo"',
            id="component-field-the-registry-reads-kept",
        ),
        pytest.param("script.py", 6, '    config.trainer.dist.backend = "neuron"', id="another-config-field-moves"),
    ],
)
def test_a_backend_word_the_project_registers(ported, module, line, expected):
    assert ported[module][line - 1] == expected
