"""A backend field the project hands to a CUDA-only library (Megatron's
``tp_comm_bootstrap_backend: Literal["nccl", "mpi", "gloo"] = "nccl"``, read in another module as
``initialize_ub(bootstrap_backend=args.tp_comm_bootstrap_backend)`` of Transformer Engine): its
"nccl" is that library's setting, so CN401 reports it and leaves it (issue 38, class 2: the default
moved to "neuron" while its only reader was a CUDA-only library that knows no such backend). A
backend field that reaches torch's own process group still moves."""

from __future__ import annotations

import pytest

from cuda2neuron.cli import main

CONFIG = """\
from dataclasses import dataclass
from typing import Literal


@dataclass
class ParallelConfig:
    overlap_bootstrap_backend: Literal["nccl", "mpi"] = "nccl"
    distributed_backend: Literal["nccl", "gloo"] = "nccl"
"""

SETUP = """\
import torch.distributed as dist


def start(cfg):
    dist.init_process_group(backend=cfg.distributed_backend)
    from transformer_engine.pytorch import module as te_module

    te_module.base.initialize_ub(shape=[1], bootstrap_backend=cfg.overlap_bootstrap_backend)
"""


@pytest.fixture(scope="module")
def ported(tmp_path_factory):
    root = tmp_path_factory.mktemp("library_backend")
    src = root / "proj"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pkg" / "config.py").write_text(CONFIG)
    (src / "pkg" / "setup_run.py").write_text(SETUP)
    out = root / "port"
    main(["migrate", str(src), "--out", str(out), "--no-cache", "-q", "-j1"])
    return (out / "pkg" / "config.py").read_text().splitlines()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param(7, '    overlap_bootstrap_backend: Literal["nccl", "mpi"] = "nccl"', id="library-backend-kept"),
        pytest.param(8, '    distributed_backend: Literal["neuron", "gloo"] = "neuron"', id="process-group-backend-moves"),
    ],
)
def test_a_backend_field_handed_to_a_cuda_only_library(ported, line, expected):
    assert ported[line - 1] == expected
