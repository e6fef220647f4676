"""CN407: ``--target accelerator``: device arguments of init_process_group / DDP on a CPU-only machine."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety, Valid

from .._shared.names import call_qualname, terminal_name
from .._shared.target import checked_for_accelerator, needs_newer_torch, spell_for_target

__all__ = ["DeviceArgsWithoutAccelerator"]

_INIT = frozenset({"torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group"})
_DDP = frozenset(
    {"torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel"}
)
# The keywords that name a device (or device indices) and must be None without an accelerator.
_KEYWORDS = {"init_process_group": ("device_id",), "DistributedDataParallel": ("device_ids", "output_device")}
_CHECK = "torch.accelerator.is_available"


class DeviceArgsWithoutAccelerator(Rule):
    """
    ## What it does
    With ``--target accelerator``, makes the device arguments of
    ``torch.distributed.init_process_group(..., device_id=...)`` and of
    ``DistributedDataParallel(..., device_ids=[...], output_device=...)`` None where no
    accelerator exists: ``device_id=(d if torch.accelerator.is_available() else None)``.

    ## Why is this bad?
    The accelerator target's port must also run on a CPU-only machine (a CI runner, a laptop,
    gloo with one process), where the device expressions fall back to the CPU. There
    ``init_process_group`` refuses a ``device_id`` ("must be an accelerator with an index") and
    DDP refuses ``device_ids`` for a CPU module. Both arguments are optional: None is what a
    CPU run passes.

    ## Example
    ```python
    dist.init_process_group(backend, device_id=torch.device("cuda", local_rank))
    model = DDP(model, device_ids=[local_rank])
    ```
    becomes (with CN102)
    ```python
    dist.init_process_group(backend, device_id=(torch.device(acc_type, local_rank) if torch.accelerator.is_available() else None))
    model = DDP(model, device_ids=([local_rank] if torch.accelerator.is_available() else None))
    ```

    ## Fix safety
    Safe: where an accelerator exists the argument is what it was; where none exists the
    original could not run at all (it named CUDA), and None is the documented CPU value. An
    argument already behind an availability check, or None, is left alone. A DDP
    ``device_ids`` given positionally is reported, and so are the arguments when min-torch has
    no ``torch.accelerator`` to check with. Nothing happens on the neuron target.
    """

    code = "CN407"
    name = "device-args-without-accelerator"
    targets = frozenset({"accelerator"})
    fixes = frozenset({Safety.SAFE})
    triggers = ("init_process_group", "DistributedDataParallel")
    emits = (_CHECK,)
    VALID = (
        Valid("import torch.distributed as dist\ndist.init_process_group('gloo')\n", target="accelerator"),
        Valid(
            "import torch\nimport torch.distributed as dist\n"
            "dist.init_process_group(b, device_id=d if torch.accelerator.is_available() else None)\n",
            target="accelerator",
        ),
        Valid("from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m, device_ids=None)\n", target="accelerator"),
        Valid("from mylib import init_process_group\ninit_process_group(device_id=3)\n", target="accelerator"),
    )
    INVALID = (
        Invalid(
            "import torch\nimport torch.distributed as dist\n"
            "dist.init_process_group(backend, device_id=torch.device('cuda', rank))\n",
            "import torch\nimport torch.distributed as dist\n"
            "dist.init_process_group(backend, device_id=(torch.device('cuda', rank) if torch.accelerator.is_available() else None))\n",
            target="accelerator",
        ),
        Invalid(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "model = DDP(model, device_ids=[rank], output_device=rank)\n",
            "from torch.nn.parallel import DistributedDataParallel as DDP\nimport torch\n\n"
            "model = DDP(model, device_ids=([rank] if torch.accelerator.is_available() else None), "
            "output_device=(rank if torch.accelerator.is_available() else None))\n",
            target="accelerator",
        ),
        Invalid(
            "import torch\nmodel = torch.nn.parallel.DistributedDataParallel(model, [rank])\n",
            target="accelerator",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = terminal_name(node.func)
        if name not in ("init_process_group", "DistributedDataParallel", "DDP") and not isinstance(node.func, cst.Name):
            return
        qualified = call_qualname(self, node)
        if qualified in _INIT:
            keywords = _KEYWORDS["init_process_group"]
        elif qualified in _DDP:
            keywords = _KEYWORDS["DistributedDataParallel"]
            positional = [a for a in node.args if a.keyword is None and not a.star]
            if len(positional) >= 2:
                self.report(
                    node,
                    "`DistributedDataParallel` gets device_ids positionally; a CPU-only run needs None there",
                    guidance="Pass `device_ids=(... if torch.accelerator.is_available() else None)` as a keyword.",
                    effort=Effort.LOW,
                )
                return
        else:
            return
        if checked_for_accelerator(self, node):
            return
        spelled = spell_for_target(self, _CHECK)
        if spelled is None:
            present = [a.keyword.value for a in node.args if a.keyword is not None and a.keyword.value in keywords]
            why = needs_newer_torch(self)
            if present and why is not None and not any(
                _guarded_or_none(self, a.value) for a in node.args if a.keyword is not None and a.keyword.value in present
            ):
                self.report(
                    node,
                    f"`{', '.join(present)}` must be None where there is no accelerator (a CPU-only run)",
                    guidance=why,
                    effort=Effort.LOW,
                )
            return
        check, imports = spelled
        changed = []
        args = []
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in keywords and not _guarded_or_none(self, arg.value):
                guarded = cst.IfExp(
                    test=cst.Call(func=check),
                    body=arg.value,
                    orelse=cst.Name("None"),
                    lpar=[cst.LeftParen()],
                    rpar=[cst.RightParen()],
                )
                args.append(arg.with_changes(value=guarded))
                changed.append(arg.keyword.value)
            else:
                args.append(arg)
        if not changed:
            return
        self.report(
            node,
            f"`{', '.join(changed)}` must be None where there is no accelerator (a CPU-only run)",
            replacement=node.with_changes(args=args),
            safety=Safety.SAFE,
            imports=imports,
            description="pass the device only where an accelerator exists",
        )


def _guarded_or_none(rule: Rule, value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Name) and value.value == "None":
        return True
    if isinstance(value, cst.IfExp):
        stack: list[cst.CSTNode] = [value.test]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Call) and rule.qualname(node.func) in ("torch.accelerator.is_available", "torch.cuda.is_available"):
                return True
            stack.extend(node.children)
    return False
