"""CN206: ``torch.cuda.get_rng_state_all()`` / ``set_rng_state_all(states)`` -> per-device calls."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety

from .._shared.args import positional_args
from .._shared.names import call_qualname, import_to_drop, terminal_name

__all__ = ["CudaRngStateAll"]

_GET = frozenset({"torch.cuda.get_rng_state_all", "torch.cuda.random.get_rng_state_all"})
_SET = frozenset({"torch.cuda.set_rng_state_all", "torch.cuda.random.set_rng_state_all"})

_GUIDANCE_ACCELERATOR = (
    "torch.accelerator has no RNG-state API. Without this state a checkpoint no longer restores "
    "the device's random streams (dropout masks differ after a resume): keep a "
    "torch.Generator(device=...) per device and save its get_state(), or keep the torch.cuda "
    "call behind a check of torch.accelerator.current_accelerator().type."
)
_GUIDANCE_SHAPE = (
    "Write the per-device form: `[torch.neuron.get_rng_state(i) for i in "
    "range(torch.neuron.device_count())]`, and `for i, s in enumerate(states): "
    "torch.neuron.set_rng_state(s, i)`."
)


class CudaRngStateAll(Rule):
    """
    ## What it does
    Rewrites ``torch.cuda.get_rng_state_all()`` to the list of every device's state,
    ``[torch.neuron.get_rng_state(i) for i in range(torch.neuron.device_count())]``, and a
    ``torch.cuda.set_rng_state_all(states)`` statement to a loop that sets each device's state
    with ``torch.neuron.set_rng_state(state, index)``.

    ## Why is this bad?
    TorchNeuron has ``get_rng_state`` / ``set_rng_state`` per device but no ``*_all`` forms. A
    checkpoint that saves ``get_rng_state_all()`` fails on Trainium, and one that drops the call
    silently loses the device's random state (a resumed run draws other dropout masks).

    ## Example
    ```python
    state = {"cuda_rng": torch.cuda.get_rng_state_all()}
    torch.cuda.set_rng_state_all(state["cuda_rng"])
    ```
    becomes
    ```python
    state = {"cuda_rng": [torch.neuron.get_rng_state(i) for i in range(torch.neuron.device_count())]}
    for device_index, device_state in enumerate(state["cuda_rng"]):
        torch.neuron.set_rng_state(device_state, device_index)
    ```

    ## Fix safety
    Safe: these are what ``torch.cuda``'s ``*_all`` functions do, one device at a time, and
    ``torch.neuron.get_rng_state`` / ``set_rng_state`` take the device index as torch.cuda's
    do. The loop's names are chosen so that they clash with no name of the file. A
    ``set_rng_state_all(...)`` that is not a statement of its own line (its None used as a
    value) and calls with other arguments are reported. With ``--target accelerator`` there is
    no RNG-state API to write: the call is reported.
    """

    code = "CN206"
    name = "cuda-rng-state-all"
    fixes = frozenset({Safety.SAFE})
    triggers = ("rng_state_all",)
    emits = ("torch.neuron.get_rng_state", "torch.neuron.set_rng_state", "torch.neuron.device_count")
    VALID = (
        "import torch\nstates = [torch.neuron.get_rng_state(i) for i in range(torch.neuron.device_count())]\n",
        "import torch\ns = torch.cuda.get_rng_state()\n",  # one device: a row of cuda_api.toml (CN201)
        "rng.get_rng_state_all()\n",  # not torch.cuda
    )
    INVALID = (
        Invalid(
            "import torch\nckpt = {'rng': torch.cuda.get_rng_state_all()}\n",
            "import torch\nckpt = {'rng': [torch.neuron.get_rng_state(i) for i in range(torch.neuron.device_count())]}\n",
        ),
        Invalid(
            "import torch\n\ndef load(ckpt):\n    torch.cuda.set_rng_state_all(ckpt['rng'])\n    return ckpt\n",
            "import torch\n\ndef load(ckpt):\n    for device_index, device_state in enumerate(ckpt['rng']):\n"
            "        torch.neuron.set_rng_state(device_state, device_index)\n    return ckpt\n",
        ),
        # The loop's names are taken: others are chosen.
        Invalid(
            "import torch\ndevice_state = 1\ntorch.cuda.set_rng_state_all(states)\n",
            "import torch\ndevice_state = 1\nfor device_index, device_state_1 in enumerate(states):\n"
            "    torch.neuron.set_rng_state(device_state_1, device_index)\n",
        ),
        Invalid(
            "from torch.cuda import get_rng_state_all\nstates = get_rng_state_all()\n",
            "import torch\n\nstates = [torch.neuron.get_rng_state(i) for i in range(torch.neuron.device_count())]\n",
        ),
        Invalid("import torch\nok = torch.cuda.set_rng_state_all(states) or True\n"),
        Invalid("import torch\nckpt = {'rng': torch.cuda.get_rng_state_all()}\n", target="accelerator"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = terminal_name(node.func)
        if name not in ("get_rng_state_all", "set_rng_state_all"):
            return
        qualified = call_qualname(self, node)
        if qualified in _GET:
            self._get(node, qualified)
        elif qualified in _SET:
            self._set(node, qualified)

    def _message(self, qualified: str) -> str:
        return f"`{qualified}` has no TorchNeuron equivalent of that name"

    def _accelerator(self, node: cst.Call, qualified: str) -> bool:
        if self.context.settings.target == "neuron":
            return False
        self.report(node, self._message(qualified), guidance=_GUIDANCE_ACCELERATOR, effort=Effort.MEDIUM)
        return True

    def _get(self, node: cst.Call, qualified: str) -> None:
        if self._accelerator(node, qualified):
            return
        get, dev_count = self.spell("torch.neuron.get_rng_state"), self.spell("torch.neuron.device_count")
        if node.args or get is None or dev_count is None:
            self.report(node, self._message(qualified), guidance=_GUIDANCE_SHAPE, effort=Effort.LOW)
            return
        (get_func, imports), (count_func, more) = get, dev_count
        # `i` is the comprehension's own: it cannot clash with a name of the file.
        index = cst.Name("i")
        replacement = cst.ListComp(
            elt=cst.Call(func=get_func, args=[cst.Arg(index)]),
            for_in=cst.CompFor(
                target=index,
                iter=cst.Call(func=cst.Name("range"), args=[cst.Arg(cst.Call(func=count_func))]),
            ),
        )
        self.report(
            node,
            self._message(qualified),
            replacement=replacement,
            safety=Safety.SAFE,
            imports=tuple(dict.fromkeys(imports + more)),
            unused_imports=import_to_drop(self, node.func),
            description="collect every device's RNG state",
        )

    def _set(self, node: cst.Call, qualified: str) -> None:
        if self._accelerator(node, qualified):
            return
        spelled = self.spell("torch.neuron.set_rng_state")
        ancestors = self.context.chain_above(node)
        line = ancestors[-2] if len(ancestors) >= 2 else None
        own_line = (
            isinstance(ancestors[-1] if ancestors else None, cst.Expr)
            and isinstance(line, cst.SimpleStatementLine)
            and len(line.body) == 1
        )
        args = positional_args(node)
        if spelled is None or not own_line or len(node.args) != 1 or len(args) != 1:
            self.report(node, self._message(qualified), guidance=_GUIDANCE_SHAPE, effort=Effort.LOW)
            return
        assert isinstance(line, cst.SimpleStatementLine)
        func, imports = spelled
        index_name, state_name = self._free("device_index"), self._free("device_state")
        body = cst.SimpleStatementLine(
            [cst.Expr(cst.Call(func=func, args=[cst.Arg(cst.Name(state_name)), cst.Arg(cst.Name(index_name))]))]
        )
        loop = cst.For(
            target=cst.Tuple(
                [cst.Element(cst.Name(index_name)), cst.Element(cst.Name(state_name))], lpar=[], rpar=[]
            ),
            iter=cst.Call(func=cst.Name("enumerate"), args=[cst.Arg(args[0].value)]),
            body=cst.IndentedBlock([body]),
            leading_lines=line.leading_lines,
        )
        self.report(
            line,
            self._message(qualified),
            replacement=loop,
            safety=Safety.SAFE,
            imports=imports,
            unused_imports=import_to_drop(self, node.func),
            description="set each device's RNG state",
            ancestors=ancestors[:-2],
        )

    def _free(self, base: str) -> str:
        """``base``, or ``base_N``: a name the file does not use anywhere (the loop's variables
        live on in the enclosing scope and must not overwrite one of the program's)."""
        code = self.context.module.code
        candidate, n = base, 0
        while candidate in code:
            n += 1
            candidate = f"{base}_{n}"
        return candidate
