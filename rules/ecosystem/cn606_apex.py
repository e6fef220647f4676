"""CN606: NVIDIA apex (fused optimizers and norms, apex.amp, apex.parallel)."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Safety, Settings

from .._shared.args import add_kwarg, arg_by_name, positional_args, remove_arg
from .._shared.names import call_qualname
from .._shared.packages import PackageRule, imports_package, in_package
from ._fallbacks import fallback_norm

__all__ = ["Apex"]

_IMPORT_GUIDANCE = (
    "apex is built for CUDA and has no Neuron build. Use torch.optim.AdamW/Adam/SGD for the fused "
    "optimizers, torch.nn.LayerNorm/RMSNorm for the fused norms, torch.autocast('neuron', "
    "dtype=torch.bfloat16) for apex.amp and torch.nn.parallel.DistributedDataParallel for "
    "apex.parallel; remove the import once nothing uses it."
)

# Report-only apex APIs and what to write instead.
_ADVICE = {
    "apex.amp.initialize": (
        "Remove apex.amp.initialize (keep `model, optimizer` as they are) and run the forward "
        "pass under torch.autocast('neuron', dtype=torch.bfloat16); bf16 needs no loss scaling."
    ),
    "apex.amp.scale_loss": (
        "Replace `with amp.scale_loss(loss, optimizer) as scaled: scaled.backward()` by "
        "`loss.backward()` (bf16 autocast needs no loss scaling; with fp16 use torch.amp.GradScaler)."
    ),
    "apex.amp.master_params": "Use the model's parameters (e.g. for clip_grad_norm_): model.parameters().",
    "apex.parallel.DistributedDataParallel": "Use torch.nn.parallel.DistributedDataParallel.",
    "apex.parallel.convert_syncbn_model": "Use torch.nn.SyncBatchNorm.convert_sync_batchnorm(model).",
    "apex.parallel.SyncBatchNorm": "Use torch.nn.SyncBatchNorm.",
}

# FusedAdam(params, lr, bias_correction, betas, eps, adam_w_mode, weight_decay, amsgrad, ...)
_ADAM_PASS = frozenset({"params", "lr", "betas", "eps", "weight_decay", "amsgrad"})
_SGD_PASS = frozenset({"params", "lr", "momentum", "dampening", "weight_decay", "nesterov"})


# A file with apex optional and a fallback of its own (eps 1e-6, float32, a weight); the
# examples' sources and outputs start with it.
_FALLBACK = (
    "import torch\ntry:\n    from apex.normalization import FusedRMSNorm\n    HAVE_APEX = True\n"
    "except ImportError:\n    HAVE_APEX = False\n\n"
    "class RMSNorm(torch.nn.Module):\n    def __init__(self, d, eps=1e-6):\n        super().__init__()\n"
    "        self.weight = torch.nn.Parameter(torch.ones(d))\n\n    def forward(self, x):\n"
    "        return x.float()\n\n"
)
_FALLBACK_OUT = _FALLBACK.replace("    from apex.normalization import FusedRMSNorm\n", "")


def _float(text: str) -> float | None:
    """The value of a float literal (``1e-6``); None for an expression (``config.eps``)."""
    try:
        return float(text)
    except ValueError:
        return None


def _same_float(a: str, b: str) -> bool:
    """Two eps literals of the same value (``1e-6`` and ``0.000001``)."""
    return _float(a) is not None and _float(a) == _float(b)


def _literal_bool(node: cst.BaseExpression) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


class Apex(PackageRule):
    """
    ## What it does
    Reports every apex import and call. Rewrites ``FusedAdam`` to ``torch.optim.AdamW`` (or
    ``Adam`` with ``adam_w_mode=False``), ``FusedSGD`` to ``torch.optim.SGD``,
    ``FusedLayerNorm`` to ``torch.nn.LayerNorm`` and ``FusedRMSNorm`` to ``torch.nn.RMSNorm``;
    ``apex.amp`` and ``apex.parallel`` get concrete guidance.

    ## Why is this bad?
    apex's fused kernels are CUDA extensions: the package does not build or run on Trainium.
    PyTorch has had equivalents for years, and they run on the neuron device.

    ## Example
    ```python
    opt = FusedAdam(model.parameters(), lr=3e-4)
    norm = FusedLayerNorm(dim, eps=1e-6)
    ```
    becomes
    ```python
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0)
    norm = torch.nn.LayerNorm(dim, eps=1e-6)
    ```

    ## Fix safety
    ``FusedLayerNorm``/``FusedRMSNorm`` -> ``torch.nn`` is safe: same parameters, same
    ``weight``/``bias`` state-dict keys, same formula (``eps`` is written out for RMSNorm, whose
    default differs; RMSNorm needs torch >= 2.4, else only reported). Where the file runs a
    fallback of its own when apex is missing (``FusedRMSNorm(d) if HAVE_APEX else RMSNorm(d)``),
    that fallback is what the original ran on Trainium: the fix keeps its numerics (its ``eps``
    is written where the call leaves apex's default) and is unsafe where it cannot (another
    ``eps``, no learned weight, a computation in the input's dtype where torch's norms use
    float32, or a fallback class of another module). The optimizer fixes are
    unsafe: ``FusedAdam`` defaults to decoupled weight decay (``adam_w_mode=True``) with
    ``weight_decay=0``, while ``AdamW``'s default is 0.01, so the fix writes ``weight_decay=0.0``
    when absent; the update is the same maths, but the fused kernel rounds differently and
    options without a torch counterpart (``bias_correction=False``, ``capturable``,
    ``master_weights``...) make the call report-only.
    """

    code = "CN606"
    name = "apex"
    fixes = frozenset({Safety.SAFE, Safety.UNSAFE})
    packages = ("apex",)
    triggers = ("apex",)
    emits = ("torch.optim.AdamW", "torch.optim.Adam", "torch.optim.SGD", "torch.nn.LayerNorm", "torch.nn.RMSNorm")
    VALID = (
        "import torch\nopt = torch.optim.AdamW(model.parameters(), lr=1e-3)\n",
        "from mylib import FusedAdam\nopt = FusedAdam(params)\n",  # not apex
        "apex_enabled = False\n",
    )
    INVALID = (
        Invalid("import apex\n"),
        Invalid(
            "from apex.optimizers import FusedAdam\nopt = FusedAdam(model.parameters(), lr=3e-4)\n",
            "import torch\n\nopt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0)\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\nfrom apex.optimizers import FusedAdam\n"
            "opt = FusedAdam(ps, lr=1e-3, adam_w_mode=False, weight_decay=0.1, bias_correction=True)\n",
            "import torch\n"
            "opt = torch.optim.Adam(ps, lr=1e-3, weight_decay=0.1)\n",
            unsafe=True,
        ),
        Invalid("from apex.optimizers import FusedAdam\nopt = FusedAdam(ps, lr, False)\n"),
        Invalid("import apex\nopt = apex.optimizers.FusedAdam(ps, bias_correction=False)\n"),
        Invalid(
            "import torch\nfrom apex.normalization import FusedLayerNorm\nln = FusedLayerNorm(512, eps=1e-6)\n",
            "import torch\nln = torch.nn.LayerNorm(512, eps=1e-6)\n",
        ),
        Invalid(
            "import torch\nfrom apex.normalization import FusedRMSNorm\nn = FusedRMSNorm(512)\n",
            "import torch\nn = torch.nn.RMSNorm(512, eps=1e-5)\n",
        ),
        Invalid(
            "from apex.normalization import FusedRMSNorm\nn = FusedRMSNorm(512)\n",
            options=(("min_torch", (2, 3)),),
        ),
        Invalid(
            "import torch\nfrom apex.optimizers import FusedSGD\nopt = FusedSGD(ps, lr=0.1, momentum=0.9)\n",
            "import torch\nopt = torch.optim.SGD(ps, lr=0.1, momentum=0.9)\n",
            unsafe=True,
        ),
        Invalid("from apex import amp\nmodel, opt = amp.initialize(model, opt, opt_level='O1')\n"),
        Invalid(
            "from apex import amp\nwith amp.scale_loss(loss, opt) as scaled:\n    scaled.backward()\n"
        ),
        Invalid("from apex.parallel import DistributedDataParallel as DDP\nmodel = DDP(model)\n"),
        # Where apex is missing (always on Trainium) the file ran its own fallback: its eps.
        Invalid(
            _FALLBACK + "def norm(d):\n    return FusedRMSNorm(d) if HAVE_APEX else RMSNorm(d)\n",
            _FALLBACK_OUT + "def norm(d):\n    return torch.nn.RMSNorm(d, eps=1e-6) if HAVE_APEX else RMSNorm(d)\n",
        ),
        Invalid(
            _FALLBACK + "def norm(d):\n    if HAVE_APEX:\n        return FusedRMSNorm(d, eps=1e-5)\n    return RMSNorm(d)\n",
            _FALLBACK_OUT + "def norm(d):\n    if HAVE_APEX:\n        return torch.nn.RMSNorm(d, eps=1e-5)\n    return RMSNorm(d)\n",
            unsafe=True,
        ),
    )


    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """A gate: every report is an import of the package or a call resolved through one, so
        a file without such an import gets no finding; unsure elsewhere (libcst runs)."""
        return None if imports_package(file.tree, cls.packages) else []

    def report_import(self, node: cst.Import | cst.ImportFrom) -> None:
        self.report(node, "apex is CUDA-only and not available on Trainium", guidance=_IMPORT_GUIDANCE, effort=Effort.LOW)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = call_qualname(self, node)
        if not in_package(qualified, self.packages):
            return
        assert qualified is not None
        short = qualified.rsplit(".", 1)[-1]
        message = f"`{short}` comes from apex, which is CUDA-only"
        if short in ("FusedLayerNorm", "FusedRMSNorm") and qualified.startswith("apex.normalization"):
            self._norm(node, short, qualified, message)
        elif short in ("FusedAdam", "FusedSGD") and qualified.startswith("apex.optimizers"):
            self._optimizer(node, short, qualified, message)
        else:
            advice = _ADVICE.get(qualified, _IMPORT_GUIDANCE)
            effort = Effort.MEDIUM if qualified.startswith("apex.amp") else Effort.LOW
            self.report(node, message, guidance=advice, effort=effort)

    def _norm(self, node: cst.Call, short: str, qualified: str, message: str) -> None:
        if any(a.star for a in node.args) or len(positional_args(node)) > 3:
            self.report(node, message, guidance=_IMPORT_GUIDANCE, effort=Effort.LOW)
            return
        target = "torch.nn.LayerNorm"
        new = node
        if short == "FusedRMSNorm":
            if self.context.settings.min_torch < (2, 4):
                self.report(
                    node,
                    message,
                    guidance="torch.nn.RMSNorm needs torch >= 2.4; write x * torch.rsqrt(x.pow(2)"
                    ".mean(-1, keepdim=True) + eps) * weight, or raise the minimum torch version.",
                    effort=Effort.LOW,
                )
                return
            target = "torch.nn.RMSNorm"
        safety, why, eps = self._against_fallback(node)
        if eps is not None:
            # The fallback's eps, where the call leaves apex's default (1e-5): on Trainium apex
            # never imports, so the original ran the fallback there.
            new = add_kwarg(node, "eps", cst.parse_expression(eps))
        elif short == "FusedRMSNorm" and arg_by_name(node, "eps") is None and len(positional_args(node)) < 2:
            # torch's RMSNorm defaults eps to the dtype's machine epsilon, apex's to 1e-5.
            new = add_kwarg(node, "eps", cst.Float("1e-5"))
        self._replace(node, new, target, qualified, message, safety, why)

    def _against_fallback(self, node: cst.Call) -> tuple[Safety, str, str | None]:
        """The safety of replacing the apex norm ``node`` by torch's, judged against the
        fallback the file runs where apex is missing (``_fallbacks``), why it is unsafe, and the
        fallback's eps to write where the call leaves apex's default."""
        found = fallback_norm(self.context.module, "apex", node, self.context.ancestors, self.qualname)
        if found is None:
            return Safety.SAFE, "", None
        if found is True:
            return Safety.UNSAFE, " (the file's fallback norm for a missing apex is defined elsewhere: check its eps and dtype)", None
        norm, name = found.norm, found.name
        given = arg_by_name(node, "eps", position=1)
        affine = arg_by_name(node, "elementwise_affine", position=2)
        apex_affine = _literal_bool(affine.value) if affine is not None else True
        if norm.affine is None or apex_affine is None or norm.affine != apex_affine:
            return Safety.UNSAFE, f" (the fallback `{name}` has {'a' if norm.affine else 'no'} learned weight)", None
        if not norm.upcasts:
            return Safety.UNSAFE, f" (the fallback `{name}` computes in the input's dtype, torch's norm in float32)", None
        if norm.eps is None:
            return Safety.UNSAFE, f" (the fallback `{name}`'s eps is not known here)", None
        if given is not None:
            mine = self.context.code(given.value)
            if mine == norm.eps or _same_float(mine, norm.eps):
                return Safety.SAFE, "", None
            return Safety.UNSAFE, f" (the fallback `{name}` uses eps={norm.eps}, this call {mine})", None
        if _float(norm.eps) is not None:
            return Safety.SAFE, "", norm.eps
        return Safety.UNSAFE, f" (the fallback `{name}` uses eps={norm.eps})", None

    def _optimizer(self, node: cst.Call, short: str, qualified: str, message: str) -> None:
        passthrough = _ADAM_PASS if short == "FusedAdam" else _SGD_PASS
        target = "torch.optim.AdamW" if short == "FusedAdam" else "torch.optim.SGD"
        new = node
        # Positions differ from torch's (FusedAdam's third parameter is bias_correction):
        # only params and lr may be positional.
        ok = not any(a.star for a in node.args) and len(positional_args(node)) <= 2
        for arg in node.args:
            if not ok or arg.keyword is None or arg.keyword.value in passthrough:
                continue
            name = arg.keyword.value
            value = _literal_bool(arg.value)
            if short == "FusedAdam" and name == "adam_w_mode" and value is not None:
                target = "torch.optim.AdamW" if value else "torch.optim.Adam"
                new = remove_arg(new, next(a for a in new.args if a.keyword is not None and a.keyword.value == name))
            elif (name == "bias_correction" and value is True) or name == "set_grad_none":
                # Always-on in torch / the zero_grad(set_to_none=True) default: nothing to keep.
                new = remove_arg(new, next(a for a in new.args if a.keyword is not None and a.keyword.value == name))
            else:
                ok = False
        if not ok:
            self.report(
                node,
                message,
                guidance=f"Use {target}; the arguments here have no direct counterpart, port them by hand.",
                effort=Effort.LOW,
            )
            return
        if short == "FusedAdam" and arg_by_name(new, "weight_decay") is None:
            new = add_kwarg(new, "weight_decay", cst.Float("0.0"))
        self._replace(node, new, target, qualified, message, Safety.UNSAFE)

    def _replace(
        self, node: cst.Call, new: cst.Call, target: str, qualified: str, message: str, safety: Safety, why: str = ""
    ) -> None:
        spelled = self.spell(target)
        if spelled is None:
            self.report(node, message, guidance=f"Use {target}.", effort=Effort.LOW)
            return
        func, imports = spelled
        module, _, name = qualified.rpartition(".")
        self.report(
            node,
            message,
            replacement=new.with_changes(func=func),
            safety=safety,
            guidance=f"Use {target}{why}.",
            effort=Effort.LOW,
            imports=imports,
            unused_imports=((module, name),),
            description=f"use {target}{why}",
        )
