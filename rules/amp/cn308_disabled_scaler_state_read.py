"""CN308: reads of a GradScaler's state that a disabled scaler (CN304's bfloat16 port) lacks."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety, Valid

from .._shared.strings import make_string, string_value

__all__ = ["DisabledScalerStateRead"]

_BF16_ONLY = "amp_dtype"
# What a disabled scaler's get_scale() answers (torch 2.13: `return 1.0` when not enabled); a
# live scaler's state_dict()["scale"] is its get_scale(), so `.get("scale", 1.0)` is the same
# value for both.
_NEUTRAL_SCALE = "1.0"
_GUIDANCE_OTHER_KEY = (
    "a disabled GradScaler's state_dict() is empty: read the value where the scaler is built "
    "(its growth_factor / backoff_factor / growth_interval arguments), or guard the read with "
    "`scaler.is_enabled()`"
)
_GUIDANCE_PRIVATE = (
    "a disabled GradScaler has no `_scale` attribute (AttributeError): use `scaler.get_scale()` "
    "(1.0 when disabled), or guard the read with `scaler.is_enabled()`"
)


def _scaler_name(node: cst.BaseExpression) -> str | None:
    """The receiver's last name when it names a scaler (``scaler``, ``loss_scaler``,
    ``self._scaler``, ``self.amp_scaler``); None for anything else."""
    word = node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute) else ""
    return word if "scaler" in word.lower() else None


def _state_dict_receiver(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``X`` of ``X.state_dict()`` (no arguments), when X names a scaler."""
    if not isinstance(node, cst.Call) or node.args or not isinstance(node.func, cst.Attribute):
        return None
    if node.func.attr.value != "state_dict":
        return None
    receiver = node.func.value
    return receiver if _scaler_name(receiver) is not None else None


class DisabledScalerStateRead(Rule):
    """
    ## What it does
    Keeps the reads of a GradScaler's state working where CN304 disables the scaler (bfloat16):
    ``scaler.state_dict()["scale"]`` becomes ``scaler.state_dict().get("scale", 1.0)``, and
    ``scaler._scale.item()`` becomes ``scaler.get_scale()``. Reads that have no such twin (other
    keys of the state dict, ``scaler._scale`` itself) are reported. The receiver is any name
    or attribute that names a scaler (``loss_scaler``, ``self._scaler``): the read is often in
    another file than the scaler (Swin-Transformer's loop reads
    ``loss_scaler.state_dict()["scale"]`` of a wrapper class defined in utils.py).

    ## Why is this bad?
    ``torch.amp.GradScaler("neuron", enabled=False)`` is a no-op whose ``state_dict()`` is ``{}``
    (checked on torch 2.13), so ``state_dict()["scale"]`` raises ``KeyError: 'scale'`` at the first
    logged step of the port, and a disabled scaler has no ``_scale`` attribute at all. What still
    works and is left alone: ``get_scale()`` (answers 1.0), ``is_enabled()``, ``state_dict()``
    saved into a checkpoint (``{}``), and ``load_state_dict(...)`` of a checkpoint written by a live
    CUDA scaler (a disabled scaler ignores it).

    ## Example
    ```python
    loss_scale_value = loss_scaler.state_dict()["scale"]
    ```
    becomes
    ```python
    loss_scale_value = loss_scaler.state_dict().get("scale", 1.0)
    ```

    ## Fix safety
    Safe: for a live scaler the value is the same (``state_dict()["scale"]`` is its
    ``get_scale()``; ``_scale.item()`` is ``get_scale()`` once scaling started), and a disabled
    scaler answers 1.0, what its ``get_scale()`` says. Only under ``amp-dtype = "bfloat16"``,
    where CN304 disables scalers; under float16 scalers stay live and nothing is reported.
    """

    code = "CN308"
    name = "disabled-scaler-state-read"
    fixes = frozenset({Safety.SAFE})
    triggers = ("scaler.state_dict()[", "scaler._scale")
    emits = ("torch.amp.GradScaler.get_scale",)
    VALID = (
        # A model's parameter named "scale" is not a scaler's state.
        'w = model.state_dict()["scale"]\n',
        "s = scaler.get_scale()\n",
        "scaler.load_state_dict(ckpt['scaler'])\n",
        "if scaler.is_enabled():\n    pass\n",
        # float16: scalers stay live, their state is there.
        Valid('v = loss_scaler.state_dict()["scale"]\n', options=((_BF16_ONLY, "float16"),)),
    )
    INVALID = (
        Invalid(
            'loss_scale_value = loss_scaler.state_dict()["scale"]\n',
            'loss_scale_value = loss_scaler.state_dict().get("scale", 1.0)\n',
        ),
        Invalid(
            "self.log('scale', self.scaler.state_dict()['scale'])\n",
            "self.log('scale', self.scaler.state_dict().get('scale', 1.0))\n",
        ),
        Invalid("s = scaler._scale.item()\n", "s = scaler.get_scale()\n"),
        Invalid('g = scaler.state_dict()["growth_factor"]\n'),
        Invalid("if scaler._scale is not None:\n    pass\n"),
    )

    @classmethod
    def applies(cls, settings) -> bool:  # noqa: ANN001 - Settings
        return settings.amp_dtype == "bfloat16"

    def visit_Subscript(self, node: cst.Subscript) -> None:
        receiver = _state_dict_receiver(node.value)
        if receiver is None or len(node.slice) != 1:
            return
        index = node.slice[0].slice
        key = string_value(index.value) if isinstance(index, cst.Index) else None
        if key is None:
            return
        scaler = self.context.code(receiver)
        if key != "scale":
            self.report(
                node,
                f"`{scaler}.state_dict()[{key!r}]` is a KeyError once the scaler is disabled under bfloat16",
                guidance=_GUIDANCE_OTHER_KEY,
                effort=Effort.LOW,
            )
            return
        call = node.value
        assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
        get = cst.Call(
            func=cst.Attribute(value=call, attr=cst.Name("get")),
            args=[cst.Arg(make_string("scale", index.value)), cst.Arg(cst.Float(_NEUTRAL_SCALE))],
        )
        self.report(
            node,
            f'`{scaler}.state_dict()["scale"]` is a KeyError once the scaler is disabled under bfloat16 '
            "(a disabled GradScaler's state_dict() is empty)",
            replacement=get,
            safety=Safety.SAFE,
            description='read the scale with `.get("scale", 1.0)` (1.0 is what a disabled scaler\'s get_scale() answers)',
        )

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "_scale" or _scaler_name(node.value) is None:
            return
        parent = self.context.parent
        scaler = self.context.code(node.value)
        grand = self.context.ancestors[-2] if len(self.context.ancestors) >= 2 else None
        if (
            isinstance(parent, cst.Attribute)
            and parent.attr.value == "item"
            and isinstance(grand, cst.Call)
            and grand.func is parent
            and not grand.args
        ):
            self.report(
                grand,
                f"`{scaler}._scale` does not exist once the scaler is disabled under bfloat16",
                replacement=cst.Call(func=cst.Attribute(value=node.value, attr=cst.Name("get_scale"))),
                safety=Safety.SAFE,
                description="read the scale with `get_scale()`",
                ancestors=tuple(self.context.ancestors[:-2]),
            )
            return
        self.report(
            node,
            f"`{scaler}._scale` does not exist once the scaler is disabled under bfloat16",
            guidance=_GUIDANCE_PRIVATE,
            effort=Effort.LOW,
        )
