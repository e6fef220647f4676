"""A ``"nccl"`` handed to the project's own launcher, defined in another file, whose parameter
reaches ``init_process_group`` (modded-nanogpt, detectron2): ``migrate`` rewrites it only where
the project sweep ties the argument to that parameter."""

from __future__ import annotations

import pytest

from cuda2neuron.cli import main

LAUNCHER = """\
import torch.distributed as dist


class Strategy:
    def connect(self, model, rank, pg):
        dist.init_process_group(pg, rank=rank)
        return model


def setup(rank, backend):
    dist.init_process_group(backend=backend)


class DDPStrategy:
    def wrap_model(self, model, local_rank, backend):
        if backend == "nccl":  # CN401 rewrites the test: its callers' "nccl" must follow
            return model
        return None
"""

# Two classes define `join`: a call of `x.join(...)` cannot be told apart by its name.
AMBIGUOUS = """\
import torch.distributed as dist


class A:
    def join(self, kind):
        dist.init_process_group(kind)


class B:
    def join(self, kind):
        dist.init_process_group(kind)
"""


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        pytest.param('strategy.connect(model, 0, "nccl")', 'strategy.connect(model, 0, "neuron")', id="method-positional"),
        pytest.param('strategy.connect(model, 0, pg="nccl")', 'strategy.connect(model, 0, pg="neuron")', id="method-keyword"),
        pytest.param('setup(0, "nccl")', 'setup(0, "neuron")', id="function-positional"),
        pytest.param('ddp.wrap_model(model, 0, "nccl")', 'ddp.wrap_model(model, 0, "neuron")', id="method-testing-the-backend"),
        pytest.param('strategy.connect(model, "nccl", 0)', None, id="another-position"),
        pytest.param('a.join("nccl")', None, id="two-definitions-of-the-name"),
        pytest.param('other.launch(model, 0, "nccl")', None, id="not-the-projects-function"),
    ],
)
def test_a_backend_passed_to_the_projects_launcher(tmp_path, call, expected):
    src = tmp_path / "proj"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pkg" / "launch.py").write_text(LAUNCHER)
    (src / "pkg" / "conn.py").write_text(AMBIGUOUS)
    (src / "train.py").write_text(f"from pkg.launch import Strategy, setup\n\n{call}\n")
    out = tmp_path / "port"
    main(["migrate", str(src), "--out", str(out), "--no-cache", "-q"])
    assert (out / "train.py").read_text().splitlines()[-1] == (expected or call)
