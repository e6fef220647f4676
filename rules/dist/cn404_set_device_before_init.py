"""CN404: ``set_device`` before ``init_process_group`` -- TorchNeuron needs the process group first."""

from __future__ import annotations

import re

import libcst as cst

from cuda2neuron.core import Invalid, Rule, Safety


__all__ = ["SetDeviceBeforeInit"]

_SET_DEVICE = frozenset(
    {
        "torch.cuda.set_device",
        "torch.neuron.set_device",  # already renamed by CN2xx: the order is still wrong
        "torch.accelerator.set_device_index",
        "torch.accelerator.set_device_idx",
    }
)
_SET_DEVICE_ATTRS = frozenset(q.rsplit(".", 1)[1] for q in _SET_DEVICE)
_INIT = frozenset(
    {"torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group"}
)
# A statement between the two calls that mentions any of these may touch the device, so moving
# set_device past it could change what it does; the fix is then withheld (report only).
_DEVICE_WORDS = frozenset({"cuda", "neuron", "accelerator", "device", "to", "set_device", "Tensor", "tensor"})
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BLOCKS = (cst.IndentedBlock, cst.Module)

_MESSAGE = "`set_device` is called before `init_process_group`; TorchNeuron needs the process group first"
_GUIDANCE = (
    "Call `init_process_group(backend=\"neuron\")` before anything touches the device, then "
    "`torch.neuron.set_device(local_rank)`; move the set_device call (and any tensor created "
    "before it) below init_process_group."
)


def _name(func: cst.BaseExpression) -> str | None:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return None


class SetDeviceBeforeInit(Rule):
    """
    ## What it does
    Reports ``set_device`` calls that run before ``init_process_group`` in the same function,
    and moves them below it when that is safe.

    Covered: ``torch.cuda.set_device(...)`` and its ``torch.neuron`` / ``torch.accelerator``
    spellings before ``torch.distributed.init_process_group(...)``. The statement is moved to
    just after ``init_process_group`` when both are statements of the same block and nothing
    between them can touch a device.

    ## Why is this bad?
    The common CUDA recipe pins the GPU first (``torch.cuda.set_device(local_rank)``) and then
    creates the NCCL process group. TorchNeuron's ``neuron`` backend asserts that the Neuron
    runtime is not initialised yet when the process group is created; selecting the device
    initialises it, so the CUDA order fails on Trainium. The renaming of ``set_device`` itself is
    CN2xx's job; this rule is about order only, and both fixes compose.

    ## Example
    ```python
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl")
    ```
    becomes (with CN401 and the ``torch.cuda`` rules)
    ```python
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group(backend="neuron")
    torch.neuron.set_device(local_rank)
    ```

    ## Fix safety
    Safe when offered: the fix is only proposed when the two calls are statements of one block
    and every statement between them neither names torch (or any alias of it) nor mentions a
    device, so nothing observes the device selection being later; on CUDA the order
    init-then-set_device is equally valid. When set_device sits in another block (an ``if``),
    shares a line with other statements, or the statements in between might use the device, the
    finding is reported with guidance and nothing is moved.
    """

    code = "CN404"
    name = "set-device-before-init"
    fixes = frozenset({Safety.SAFE})
    triggers = ("init_process_group",)
    reports_names = tuple(sorted(_SET_DEVICE))
    VALID = (
        # the order TorchNeuron needs
        "import torch\nimport torch.distributed as dist\n"
        "def setup(rank):\n    dist.init_process_group('neuron')\n    torch.neuron.set_device(rank)\n",
        # different branches: only one of them runs
        "import torch\nimport torch.distributed as dist\n"
        "def setup(rank, ddp):\n    if not ddp:\n        torch.cuda.set_device(0)\n"
        "    else:\n        dist.init_process_group('nccl')\n",
        # different functions: the call order is not visible here
        "import torch\nimport torch.distributed as dist\n"
        "def pin(rank):\n    torch.cuda.set_device(rank)\n"
        "def init():\n    dist.init_process_group('nccl')\n",
        # a project's own set_device helper is not the torch one
        "import torch.distributed as dist\n"
        "def set_device(r):\n    pass\nset_device(0)\ndist.init_process_group('neuron')\n",
    )
    INVALID = (
        Invalid(
            "import torch\nimport torch.distributed as dist\n\n"
            "def setup(local_rank):\n"
            "    torch.cuda.set_device(local_rank)\n"
            "    dist.init_process_group(backend='neuron')\n",
            "import torch\nimport torch.distributed as dist\n\n"
            "def setup(local_rank):\n"
            "    dist.init_process_group(backend='neuron')\n"
            "    torch.cuda.set_device(local_rank)\n",
        ),
        # inert statements in between (plain Python, os.environ) do not block the move
        Invalid(
            "import os\nimport torch\nimport torch.distributed as dist\n\n"
            "def setup(args):\n"
            "    # pin the GPU\n"
            "    torch.cuda.set_device(args.gpu)\n"
            "    args.rank = int(os.environ['RANK'])\n"
            "    print(f'| distributed init (rank {args.rank})', flush=True)\n"
            "    dist.init_process_group(backend=args.dist_backend, rank=args.rank)\n"
            "    dist.barrier()\n",
            "import os\nimport torch\nimport torch.distributed as dist\n\n"
            "def setup(args):\n"
            "    args.rank = int(os.environ['RANK'])\n"
            "    print(f'| distributed init (rank {args.rank})', flush=True)\n"
            "    dist.init_process_group(backend=args.dist_backend, rank=args.rank)\n"
            "    # pin the GPU\n"
            "    torch.cuda.set_device(args.gpu)\n"
            "    dist.barrier()\n",
        ),
        # module level, already-renamed set_device, from-import of init_process_group
        Invalid(
            "import torch\nfrom torch.distributed import init_process_group\n"
            "torch.neuron.set_device(0)\ninit_process_group('neuron')\n",
            "import torch\nfrom torch.distributed import init_process_group\n"
            "init_process_group('neuron')\ntorch.neuron.set_device(0)\n",
        ),
        # a tensor between the two may already live on the device: report, do not move
        Invalid(
            "import torch\nimport torch.distributed as dist\n\n"
            "def setup(rank):\n"
            "    torch.cuda.set_device(rank)\n"
            "    x = torch.zeros(1).cuda()\n"
            "    dist.init_process_group('nccl')\n"
        ),
        # set_device guarded by an if: report, the move is the user's call
        Invalid(
            "import torch\nimport torch.distributed as dist\n\n"
            "def setup(args):\n"
            "    if args.gpu is not None:\n"
            "        torch.cuda.set_device(args.gpu)\n"
            "    dist.init_process_group('nccl')\n"
        ),
        Invalid(
            "import torch\nimport torch.distributed as dist\n\n"
            "def setup(rank):\n"
            "    torch.accelerator.set_device_index(rank)\n"
            "    dist.init_process_group()\n",
            "import torch\nimport torch.distributed as dist\n\n"
            "def setup(rank):\n"
            "    dist.init_process_group()\n"
            "    torch.accelerator.set_device_index(rank)\n",
            target="accelerator",
        ),
    )

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        # set_device calls seen so far, per owning function (or module): the call and a copy
        # of its ancestor chain, to find the block it shares with a later init_process_group.
        self._seen: dict[int, list[tuple[cst.Call, tuple[cst.CSTNode, ...]]]] = {}

    def _owner(self) -> cst.CSTNode:
        for node in reversed(self.context.ancestors):
            if isinstance(node, (cst.FunctionDef, cst.Lambda)):
                return node
        return self.context.ancestors[0]

    def visit_Call(self, node: cst.Call) -> None:
        name = _name(node.func)
        if name in _SET_DEVICE_ATTRS:
            if self.qualname(node.func) in _SET_DEVICE:
                self._seen.setdefault(id(self._owner()), []).append((node, tuple(self.context.ancestors)))
        elif name == "init_process_group" and self.qualname(node.func) in _INIT:
            pending = self._seen.pop(id(self._owner()), None)
            for call, chain in pending or ():
                self._check(call, chain)

    def _check(self, set_device: cst.Call, chain: tuple[cst.CSTNode, ...]) -> None:
        init_chain = self.context.ancestors
        on_init_path = {id(n) for n in init_chain}
        common_at = next((i for i in range(len(chain) - 1, -1, -1) if id(chain[i]) in on_init_path), None)
        if common_at is None:
            return
        common = chain[common_at]
        if isinstance(common, cst.SimpleStatementLine):
            self.report(set_device, _MESSAGE, ancestors=chain, guidance=_GUIDANCE)
            return
        if not isinstance(common, _BLOCKS):
            return  # different branches of an if/try: they do not both run in this order
        init_at = next(i for i, n in enumerate(init_chain) if n is common)
        fix = self._moved(common, chain[common_at + 1], init_chain[init_at + 1], set_device)
        if fix is None:
            self.report(set_device, _MESSAGE, ancestors=chain, guidance=_GUIDANCE)
            return
        self.report(
            common,
            _MESSAGE,
            ancestors=init_chain[:init_at],
            replacement=fix,
            safety=Safety.SAFE,
            guidance=_GUIDANCE,
            description="move set_device below init_process_group",
        )

    def _moved(
        self,
        block: cst.IndentedBlock | cst.Module,
        sd_stmt: cst.CSTNode,
        init_stmt: cst.CSTNode,
        set_device: cst.Call,
    ) -> cst.IndentedBlock | cst.Module | None:
        if not (isinstance(sd_stmt, cst.SimpleStatementLine) and isinstance(init_stmt, cst.SimpleStatementLine)):
            return None
        only = sd_stmt.body[0] if len(sd_stmt.body) == 1 else None
        if not (isinstance(only, cst.Expr) and only.value is set_device):
            return None
        body = list(block.body)
        start = next(i for i, s in enumerate(body) if s is sd_stmt)
        end = next(i for i, s in enumerate(body) if s is init_stmt)
        if not all(self._inert(s) for s in body[start + 1 : end]):
            return None
        new_body = body[:start] + body[start + 1 : end + 1] + [sd_stmt] + body[end + 1 :]
        return block.with_changes(body=new_body)

    def _inert(self, stmt: cst.CSTNode) -> bool:
        """Conservative: a simple statement that names neither torch nor anything device-like."""
        if not isinstance(stmt, cst.SimpleStatementLine):
            return False
        for word in set(_IDENT.findall(self.context.code(stmt))):
            if word in _DEVICE_WORDS:
                return False
            resolved = self.context.scope.lookup(word)
            if resolved is not None and resolved.split(".")[0] == "torch":
                return False
        return True
