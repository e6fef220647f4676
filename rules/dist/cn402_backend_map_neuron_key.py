"""CN402: ``{"cuda": "nccl", "cpu": "gloo"}`` device-to-backend tables need a "neuron" entry."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Invalid, Rule, Safety

from .._shared.strings import make_string, string_value

__all__ = ["BackendMapNeuronKey"]

_NCCL_ENUM = frozenset({"torch.distributed.Backend.NCCL", "torch.distributed.distributed_c10d.Backend.NCCL"})


class BackendMapNeuronKey(Rule):
    """
    ## What it does
    Adds a ``"neuron": "neuron"`` entry to device-to-backend tables such as
    ``{"cuda": "nccl", "cpu": "gloo"}``.

    Only dict literals with a ``"cuda": "nccl"`` entry and no ``"neuron"`` key are changed.

    ## Why is this bad?
    Such a table is looked up with the device type (``BACKENDS[device.type]``). The device rules
    turn the device into ``"neuron"``, so the lookup key becomes ``"neuron"`` and the table
    raises ``KeyError``. Renaming the ``"cuda"`` key instead would break the same code on CUDA
    (and under ``--target accelerator`` the key is whatever the accelerator is): a *new* key is
    what keeps both working.

    ## Example
    ```python
    BACKENDS = {"cuda": "nccl", "cpu": "gloo"}
    ```
    becomes
    ```python
    BACKENDS = {"cuda": "nccl", "neuron": "neuron", "cpu": "gloo"}
    ```

    ## Fix safety
    Safe: adding a key changes no existing lookup; ``"neuron"`` is the backend TorchNeuron
    registers for the ``neuron`` device. Tables that already have a ``"neuron"`` key are left
    alone.
    """

    code = "CN402"
    name = "backend-map-neuron-key"
    fixes = frozenset({Safety.SAFE})
    triggers = ("nccl", "NCCL")
    VALID = (
        'BACKENDS = {"cuda": "nccl", "neuron": "neuron", "cpu": "gloo"}\n',
        'COLORS = {"cuda": "green", "cpu": "gray"}\n',
        'cfg = {"backend": "nccl"}\n',  # a config entry, not a device table (CN401's case)
        "table = {**base, 'cpu': 'gloo'}\n",
    )
    INVALID = (
        Invalid(
            'BACKENDS = {"cuda": "nccl", "cpu": "gloo"}\n',
            'BACKENDS = {"cuda": "nccl", "neuron": "neuron", "cpu": "gloo"}\n',
        ),
        Invalid(
            "backend = {'cpu': 'gloo', 'cuda': 'nccl'}[device.type]\n",
            "backend = {'cpu': 'gloo', 'cuda': 'nccl', 'neuron': 'neuron'}[device.type]\n",
        ),
        Invalid(
            'BACKENDS = {\n    "cuda": "nccl",\n    "cpu": "gloo",\n}\n',
            'BACKENDS = {\n    "cuda": "nccl",\n    "neuron": "neuron",\n    "cpu": "gloo",\n}\n',
        ),
        Invalid(
            'BACKENDS = {\n    "cpu": "gloo",\n    "cuda": "nccl"\n}\n',
            'BACKENDS = {\n    "cpu": "gloo",\n    "cuda": "nccl",\n    "neuron": "neuron"\n}\n',
        ),
        Invalid(
            'BACKENDS = {"cuda": "nccl", "cpu": "gloo"}\n',
            'BACKENDS = {"cuda": "nccl", "neuron": "neuron", "cpu": "gloo"}\n',
            target="accelerator",
        ),
        Invalid(
            "import torch.distributed as dist\nB = {'cuda': dist.Backend.NCCL}\n",
            "import torch.distributed as dist\nB = {'cuda': dist.Backend.NCCL, 'neuron': 'neuron'}\n",
        ),
    )

    def _is_nccl(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Attribute):
            return value.attr.value == "NCCL" and self.qualname(value) in _NCCL_ENUM
        return (string_value(value) or "").lower() == "nccl"

    def visit_Dict(self, node: cst.Dict) -> None:
        cuda_at = None
        for i, element in enumerate(node.elements):
            if not isinstance(element, cst.DictElement):
                continue
            key = string_value(element.key)
            if key == "neuron":
                return
            if key == "cuda" and self._is_nccl(element.value):
                cuda_at = i
        if cuda_at is None:
            return
        cuda = node.elements[cuda_at]
        assert isinstance(cuda, cst.DictElement)
        is_last = cuda_at == len(node.elements) - 1
        if isinstance(cuda.comma, cst.Comma):
            comma = cuda.comma
        else:
            # The "cuda" entry ended the dict without a trailing comma: the new entry goes on the
            # same kind of line the "cuda" entry started on (its predecessor's comma says which).
            before = node.elements[cuda_at - 1].comma if cuda_at > 0 else cst.MaybeSentinel.DEFAULT
            comma = before if isinstance(before, cst.Comma) else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        new = cst.DictElement(
            key=make_string("neuron", like=cuda.key),
            value=make_string("neuron", like=cuda.value if isinstance(cuda.value, cst.SimpleString) else cuda.key),
            whitespace_before_colon=cuda.whitespace_before_colon,
            whitespace_after_colon=cuda.whitespace_after_colon,
            comma=cuda.comma if is_last else comma,
        )
        elements = list(node.elements)
        elements[cuda_at] = cuda.with_changes(comma=comma)
        elements.insert(cuda_at + 1, new)
        self.report(
            node,
            'device-to-backend table has no "neuron" entry',
            replacement=node.with_changes(elements=elements),
            safety=Safety.SAFE,
            description='add "neuron": "neuron" next to "cuda": "nccl"',
        )
