"""Distributed family (CN4xx): aliases, shadowing, name tracing and several rules in one file.

The rules' own VALID/INVALID examples cover each shape alone; these tables cover what only shows
up in combination. Every case runs the CN4 family only, so other families landing on main do not
change these expectations (fixture pairs run the full catalog).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from cuda2neuron.core import Config, Settings
from cuda2neuron.workspace import fix_source, lint_source

from cuda2neuron.rules._shared.visible_devices import visible_cores


def _config(target: str = "neuron", unsafe: bool = False, **settings) -> Config:
    return Config(select=("CN4",), unsafe_fixes=unsafe, settings=replace(Settings(target=target), **settings))


def _fix(source: str, **kw) -> str:
    fixed, _ = fix_source(source, "example.py", _config(**kw))
    compile(fixed, "example.py", "exec")
    again, _ = fix_source(fixed, "example.py", _config(**kw))
    assert again == fixed, "second run changed the output"
    return fixed


REWRITES = [
    pytest.param(
        "import torch.distributed as td\ntd.init_process_group('nccl')\n",
        "import torch.distributed as td\ntd.init_process_group('neuron')\n",
        id="module-alias",
    ),
    pytest.param(
        "from torch import distributed as dist\ndist.init_process_group(backend='nccl')\n",
        "from torch import distributed as dist\ndist.init_process_group(backend='neuron')\n",
        id="from-import-alias",
    ),
    pytest.param(
        "import torch as th\nth.distributed.init_process_group('nccl')\n",
        "import torch as th\nth.distributed.init_process_group('neuron')\n",
        id="torch-alias",
    ),
    pytest.param(
        "from torch.distributed import init_process_group as ipg\nipg('nccl')\n",
        "from torch.distributed import init_process_group as ipg\nipg('neuron')\n",
        id="function-alias",
    ),
    # The backend name in every shape it comes in (a device-to-backend dict, a conditional on
    # is_nccl_available, an attribute, an argparse default), in one file, with CN401/CN402/CN403 together
    pytest.param(
        "import os\n"
        "import torch.distributed as dist\n"
        "BACKENDS = {'cuda': 'nccl', 'cpu': 'gloo'}\n"
        "backend = 'nccl' if dist.is_nccl_available() else 'gloo'\n"
        "pg_backend = 'gloo' if os.name == 'nt' else 'nccl'\n"
        "args.dist_backend = 'nccl'\n"
        "parser.add_argument('--dist-backend', default='nccl', choices=['nccl', 'gloo'])\n"
        "if dist.get_backend() == 'nccl' or args.dist_backend == dist.Backend.NCCL:\n"
        "    print('nccl')\n"
        "dist.init_process_group(BACKENDS[device.type])\n",
        "import os\n"
        "import torch.distributed as dist\n"
        "BACKENDS = {'cuda': 'nccl', 'neuron': 'neuron', 'cpu': 'gloo'}\n"
        "backend = 'neuron' if dist.is_backend_available(\"neuron\") else 'gloo'\n"
        "pg_backend = 'gloo' if os.name == 'nt' else 'neuron'\n"
        "args.dist_backend = 'neuron'\n"
        "parser.add_argument('--dist-backend', default='neuron', choices=['neuron', 'gloo'])\n"
        "if dist.get_backend() == 'neuron' or args.dist_backend == \"neuron\":\n"
        "    print('nccl')\n"
        "dist.init_process_group(BACKENDS[device.type])\n",
        id="backend-name-in-every-shape",
    ),
    # a plain name is traced to the backend position even when assigned after a use elsewhere
    pytest.param(
        "import torch.distributed as dist\n"
        "def main():\n"
        "    comm = 'nccl'\n"
        "    dist.init_process_group(comm)\n",
        "import torch.distributed as dist\n"
        "def main():\n"
        "    comm = 'neuron'\n"
        "    dist.init_process_group(comm)\n",
        id="traced-plain-name",
    ),
    pytest.param(
        "import torch.distributed as dist\n"
        "def build(rank):\n"
        "    return dist.new_group(ranks=[0, 1], backend='nccl')\n",
        "import torch.distributed as dist\n"
        "def build(rank):\n"
        "    return dist.new_group(ranks=[0, 1], backend='neuron')\n",
        id="new-group-keyword",
    ),
    # set_device moved; the backend literal is fixed in the next round (fixed point)
    pytest.param(
        "import torch\nimport torch.distributed as dist\n"
        "def setup(local_rank):\n"
        "    torch.cuda.set_device(local_rank)\n"
        "    dist.init_process_group(backend='nccl')\n",
        "import torch\nimport torch.distributed as dist\n"
        "def setup(local_rank):\n"
        "    dist.init_process_group(backend='neuron')\n"
        "    torch.cuda.set_device(local_rank)\n",
        id="order-and-backend-compose",
    ),
    # torchvision-style init_distributed_mode: the backend assignment between the two calls is
    # inert, so set_device moves; the literal inside the moved block is fixed the round after
    pytest.param(
        "import torch\n"
        "def init_distributed_mode(args):\n"
        "    torch.cuda.set_device(args.gpu)\n"
        "    args.dist_backend = 'nccl'\n"
        "    print(f'| distributed init (rank {args.rank}): {args.dist_url}', flush=True)\n"
        "    torch.distributed.init_process_group(backend=args.dist_backend, init_method=args.dist_url)\n"
        "    torch.distributed.barrier()\n",
        "import torch\n"
        "def init_distributed_mode(args):\n"
        "    args.dist_backend = 'neuron'\n"
        "    print(f'| distributed init (rank {args.rank}): {args.dist_url}', flush=True)\n"
        "    torch.distributed.init_process_group(backend=args.dist_backend, init_method=args.dist_url)\n"
        "    torch.cuda.set_device(args.gpu)\n"
        "    torch.distributed.barrier()\n",
        id="torchvision-init-distributed-mode",
    ),
    pytest.param(
        "import os\n"
        "os.environ['CUDA_VISIBLE_DEVICES'] = '0,1,2,3'\n"
        "os.environ['NCCL_DEBUG'] = 'INFO'\n",
        "import os\n"
        "os.environ['NEURON_RT_VISIBLE_CORES'] = '0-3'\n"
        "os.environ['NCCL_DEBUG'] = 'INFO'\n",
        id="visible-devices-and-nccl-env",
    ),
]


@pytest.mark.parametrize(("source", "expected"), REWRITES)
def test_rewrites(source, expected):
    assert _fix(source) == expected


# "nccl" where the tool cannot follow it to a process group: the safety net (CN409) reports it
# for a person to judge; nothing is rewritten.
REPORTED_ONLY = [
    pytest.param("def f(dist):\n    dist.init_process_group('nccl')\n", id="shadowed-module-parameter"),
    pytest.param(
        "def init_process_group(name):\n    pass\ninit_process_group('nccl')\n", id="own-init-function"
    ),
    pytest.param("import torch.distributed as dist\nname = 'nccl'\nprint(name)\n", id="name-not-passed"),
    pytest.param("assert impl in ['ref', 'nccl']\n", id="selector-list"),
]


@pytest.mark.parametrize("source", REPORTED_ONLY)
@pytest.mark.parametrize("target", ["neuron", "accelerator"])
def test_unfollowed_backend_names_are_reported_not_rewritten(source, target):
    findings = lint_source(source, "example.py", _config(target=target))
    assert findings and {f.code for f in findings} == {"CN409"}
    assert all(f.fix is None for f in findings)
    assert _fix(source, target=target) == source


UNTOUCHED = [
    pytest.param("class Backend:\n    NCCL = 'x'\nb = Backend.NCCL\n", id="own-backend-class"),
    pytest.param("import logging\nlogging.info('init nccl: %s', 'nccl')\n", id="log-text"),
    pytest.param('"""Run with backend="nccl" and CUDA_VISIBLE_DEVICES=0,1."""\n', id="docstring"),
    pytest.param(
        "import torch\nimport torch.distributed as dist\n"
        "dist.init_process_group(backend=dist.get_default_backend_for_device("
        "torch.accelerator.current_accelerator()))\n"
        "torch.accelerator.set_device_index(rank)\n",
        id="already-portable",
    ),
    pytest.param("import os\nn = os.environ.get('WORLD_SIZE', '1')\n", id="other-env-vars"),
]


@pytest.mark.parametrize("source", UNTOUCHED)
@pytest.mark.parametrize("target", ["neuron", "accelerator"])
def test_untouched(source, target):
    assert lint_source(source, "example.py", _config(target=target)) == ()
    assert _fix(source, target=target) == source


DDP_SOURCE = (
    "import torch.distributed as dist\n"
    "from torch.nn.parallel import DistributedDataParallel as DDP\n"
    "dist.init_process_group('neuron')\n"
    "model = DDP(model, device_ids=[local_rank], output_device=local_rank)\n"
)


def test_ddp_device_ids_stay_on_neuron_and_fall_back_to_none_on_accelerator():
    # Neuron: DDP device_ids=[local_rank] works as written. Accelerator: a CPU-only run needs
    # None there (CN407), the rest stays.
    assert lint_source(DDP_SOURCE, "example.py", _config(target="neuron")) == ()
    assert _fix(DDP_SOURCE, target="neuron") == DDP_SOURCE
    fixed = _fix(DDP_SOURCE, target="accelerator")
    assert "device_ids=([local_rank] if torch.accelerator.is_available() else None)" in fixed
    assert "output_device=(local_rank if torch.accelerator.is_available() else None)" in fixed


def test_accelerator_reuses_user_alias():
    source = "import torch\nimport torch.distributed as dist\nbackend = 'nccl'\n"
    assert _fix(source, target="accelerator") == (
        "import torch\nimport torch.distributed as dist\n"
        "backend = dist.get_default_backend_for_device(torch.accelerator.current_accelerator() or \"cpu\")\n"
    )


def test_accelerator_backend_runs_on_cpu():
    """The accelerator spelling must not crash where there is no accelerator (it used to be a
    plain string assignment); torch maps "cpu" to gloo."""
    torch = pytest.importorskip("torch")
    source = _fix("import torch\nimport torch.distributed as dist\nbackend = 'nccl'\n", target="accelerator")
    namespace: dict[str, object] = {}
    exec(compile(source, "example.py", "exec"), namespace)
    expected = "gloo" if torch.accelerator.current_accelerator() is None else None
    if expected is not None:
        assert namespace["backend"] == expected


SET_DEVICE_REPORT_ONLY = [
    pytest.param(
        "import torch\nimport torch.distributed as dist\n"
        "def setup(rank):\n"
        "    torch.cuda.set_device(rank)\n"
        "    torch.manual_seed(0)\n"
        "    dist.init_process_group('neuron')\n",
        id="torch-call-between",
    ),
    pytest.param(
        "import torch\nimport torch.distributed as dist\n"
        "def setup(rank):\n"
        "    torch.cuda.set_device(rank); x = 1\n"
        "    dist.init_process_group('neuron')\n",
        id="set-device-shares-a-line",
    ),
    pytest.param(
        "import torch\nimport torch.distributed as dist\n"
        "def setup(rank):\n"
        "    torch.cuda.set_device(rank)\n"
        "    if rank >= 0:\n"
        "        dist.init_process_group('neuron')\n",
        id="init-nested-in-if",
    ),
    pytest.param(
        "import torch\nimport torch.distributed as dist\n"
        "def setup(rank):\n"
        "    torch.cuda.set_device(rank)\n"
        "    device = f'cuda:{rank}'\n"
        "    dist.init_process_group('neuron')\n",
        id="device-named-between",
    ),
]


@pytest.mark.parametrize("source", SET_DEVICE_REPORT_ONLY)
def test_set_device_reported_without_move(source):
    findings = [f for f in lint_source(source, "example.py", _config()) if f.code == "CN404"]
    assert len(findings) == 1 and findings[0].fix is None and findings[0].guidance
    assert _fix(source) == source


def test_set_device_only_before_counts():
    source = (
        "import torch\nimport torch.distributed as dist\n"
        "def setup(rank):\n"
        "    dist.init_process_group('neuron')\n"
        "    torch.cuda.set_device(rank)\n"
        "def again(rank):\n"
        "    torch.cuda.set_device(rank)\n"
    )
    assert [f for f in lint_source(source, "example.py", _config()) if f.code == "CN404"] == []


VISIBLE = [
    ("0,1,2,3", "0-3"),
    ("2", "2"),
    (" 4, 5 ", "4-5"),
    ("0,2", None),
    ("3,2", None),
    ("", None),
    ("GPU-8f6d", None),
    ("-1", None),
    ("1,1", None),
]


@pytest.mark.parametrize(("cuda", "neuron"), VISIBLE, ids=[repr(c) for c, _ in VISIBLE])
def test_visible_cores(cuda, neuron):
    assert visible_cores(cuda) == neuron
