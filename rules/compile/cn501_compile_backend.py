"""CN501: ``torch.compile`` without the neuron backend."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety

from .._shared.args import add_kwarg, arg_by_name
from .._shared.names import terminal_name
from .._shared.strings import make_string, string_value
from ._helpers import compile_callee, compile_gate, has_star_kwargs, wakes_on_compile

__all__ = ["CompileBackend"]

# Backends that only make sense on CUDA (or that Neuron does not provide): replaced.
# "eager"/"aot_eager" are debugging backends that run anywhere: left alone.
_REPLACED = frozenset({"inductor", "cudagraphs", "tensorrt", "torch_tensorrt", "onnxrt"})

_GUIDANCE_ACCELERATOR = (
    'On Trainium pass backend="neuron" (the default inductor backend targets CUDA and CPU); to '
    'keep one source for both, choose it at run time, e.g. backend="neuron" when '
    'torch.accelerator.current_accelerator().type == "neuron" else "inductor".'
)


class CompileBackend(Rule):
    """
    ## What it does
    Adds ``backend="neuron"`` to ``torch.compile(...)`` (also the bare ``@torch.compile``
    decorator, and the method ``nn.Module.compile(...)`` as in ``model.compile(dynamic=False)``)
    and replaces CUDA-oriented backends such as ``"inductor"`` and ``"cudagraphs"``.

    ## Why is this bad?
    TorchNeuron compiles through its own Dynamo backend, ``backend="neuron"``. The default,
    ``"inductor"``, generates Triton/C++ kernels for CUDA and CPU; it is not the Neuron compiler.

    ## Example
    ```python
    model = torch.compile(model)
    @torch.compile
    def step(x): ...
    ```
    becomes
    ```python
    model = torch.compile(model, backend="neuron")
    @torch.compile(backend="neuron")
    def step(x): ...
    ```

    ## Fix safety
    Safe for ``--target neuron``: on the neuron device the neuron backend is the one that
    compiles; the model's meaning does not change. Debugging backends (``"eager"``,
    ``"aot_eager"``) and backends given as variables or callables are left alone (a variable is
    reported). A call that passes ``**kwargs`` and no ``backend=`` is reported, not changed: the
    mapping may hold a backend, and a second one is a TypeError. ``X.compile(...)`` counts as
    ``nn.Module.compile`` only when ``X`` is no imported module, every argument is a keyword of
    ``torch.compile`` and the file imports torch and not keras/TensorFlow/JAX (whose
    ``model.compile(optimizer=..., loss=...)`` is another method) nor defines a ``compile`` of
    its own. With ``--target accelerator`` nothing is rewritten (the code must keep compiling
    with inductor on CUDA); the finding says how to pick the backend at run time.
    """

    code = "CN501"
    name = "compile-backend"
    fixes = frozenset({Safety.SAFE})
    triggers = ("compile",)
    wakes = classmethod(wakes_on_compile)
    detect = classmethod(compile_gate)  # a gate: no finding without a compile call (issue 42)
    emits = ()
    VALID = (
        'import torch\nmodel = torch.compile(model, backend="neuron")\n',
        'import torch\nmodel = torch.compile(model, backend="aot_eager")\n',
        "model = compile(src, 'f.py', 'exec')\n",  # the builtin
        "import re\npat = re.compile('cuda')\n",
        # Other compile() methods: keras (by its import and its arguments), a project's own.
        "import torch\nimport keras\nmodel.compile(optimizer='adam', loss='mse')\n",
        "import torch\nmodel.compile(optimizer='adam', loss='mse')\n",
        "import torch\nimport tensorflow as tf\nmodel.compile()\n",
        "import torch\n\nclass Graph:\n    def compile(self):\n        pass\n\ng.compile()\n",
        "import torch\nimport jax\nf = jax.jit(g)\nprog.compile(mode='fast')\n",
        "model.compile()\n",  # no torch in the file
        'import torch\nmodel.compile(backend="neuron")\n',
    )
    INVALID = (
        Invalid(
            "import torch\nmodel = torch.compile(model)\n",
            'import torch\nmodel = torch.compile(model, backend="neuron")\n',
        ),
        Invalid(
            "import torch\nmodel = torch.compile(model, backend='inductor')\n",
            "import torch\nmodel = torch.compile(model, backend='neuron')\n",
        ),
        Invalid(
            "import torch as th\nm = th.compile(m, fullgraph=True)\n",
            'import torch as th\nm = th.compile(m, fullgraph=True, backend="neuron")\n',
        ),
        # A multi-line call keeps its layout: no trailing blank, `)` stays on its own line.
        Invalid(
            "import torch\nf = torch.compile(\n    fn, options=cfg\n)\ng = torch.compile(\n    fn,\n    dynamic=False\n)\n",
            'import torch\nf = torch.compile(\n    fn, options=cfg, backend="neuron"\n)\n'
            'g = torch.compile(\n    fn,\n    dynamic=False,\n    backend="neuron"\n)\n',
        ),
        Invalid(
            "from torch import compile as tc\nm = tc(m)\n",
            'from torch import compile as tc\nm = tc(m, backend="neuron")\n',
        ),
        Invalid(
            "import torch\n\n@torch.compile\ndef step(x):\n    return x\n",
            'import torch\n\n@torch.compile(backend="neuron")\ndef step(x):\n    return x\n',
        ),
        Invalid(
            "import torch\n\n@torch.compile(fullgraph=True)\ndef step(x):\n    return x\n",
            'import torch\n\n@torch.compile(fullgraph=True, backend="neuron")\ndef step(x):\n    return x\n',
        ),
        Invalid(
            "import torch\nm = torch.compile(\n    m,\n    fullgraph=True,\n)\n",
            'import torch\nm = torch.compile(\n    m,\n    fullgraph=True,\n    backend="neuron",\n)\n',
        ),
        # A backend chosen at run time is reported, not guessed.
        Invalid("import torch\nm = torch.compile(m, backend=args.backend)\n"),
        Invalid("import torch\nm = torch.compile(m)\n", target="accelerator"),
        # nn.Module.compile forwards its keywords to torch.compile.
        Invalid(
            "import torch\nmodel.compile(dynamic=False)\n",
            'import torch\nmodel.compile(dynamic=False, backend="neuron")\n',
        ),
        Invalid("import torch.nn as nn\nself.net.compile()\n", 'import torch.nn as nn\nself.net.compile(backend="neuron")\n'),
        Invalid("import torch\nmodel.compile(backend='inductor')\n", "import torch\nmodel.compile(backend='neuron')\n"),
        # A `**` mapping may hold the backend already: reported, the line is kept as it is.
        Invalid("import torch\nm = torch.compile(m, **cfg)\n"),
        Invalid("import torch\nmodel.compile(**compile_kwargs)\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        callee = compile_callee(self, node)
        if callee is None:
            return
        backend = arg_by_name(node, "backend")
        if backend is None and has_star_kwargs(node):
            # `torch.compile(f, **cfg)`: cfg may hold a backend already, and a second one is a
            # TypeError ("got multiple values for keyword argument 'backend'").
            self.report(
                node,
                f"`{callee}` takes its keywords from a `**` mapping; the backend may be in it",
                guidance='Make sure the mapping holds backend="neuron" on Trainium (add the key '
                "where the mapping is built; a keyword next to `**` fails if the key is there)."
                + ("" if self.context.settings.target == "neuron" else " " + _GUIDANCE_ACCELERATOR),
                effort=Effort.LOW,
            )
            return
        if backend is None:
            self._report(node, add_kwarg(node, "backend", make_string("neuron")), "uses the default inductor backend", callee)
            return
        value = string_value(backend.value)
        if value is None:
            if self.context.settings.target == "neuron":
                self.report(
                    node,
                    f"`{callee}` backend is chosen at run time",
                    guidance='Make sure the value is "neuron" when running on Trainium.',
                    effort=Effort.LOW,
                )
            return
        if value in _REPLACED:
            new_arg = backend.with_changes(value=make_string("neuron", like=backend.value))
            new = node.with_changes(args=[new_arg if a is backend else a for a in node.args])
            self._report(node, new, f'uses backend="{value}", which does not compile for Neuron', callee)

    def visit_Decorator(self, node: cst.Decorator) -> None:
        deco = node.decorator
        if isinstance(deco, cst.Call) or terminal_name(deco) != "compile":
            return
        if self.qualname(deco) != "torch.compile":
            return
        call = cst.Call(func=deco, args=[])
        # The visited Decorator is what we report and replace (the engine rebuilds along the
        # visited node's ancestors).
        new = node.with_changes(decorator=add_kwarg(call, "backend", make_string("neuron")))
        self._report(node, new, "uses the default inductor backend")

    def _report(self, node: cst.CSTNode, replacement: cst.CSTNode, why: str, callee: str = "torch.compile") -> None:
        message = f"`{callee}` {why}"
        if self.context.settings.target != "neuron":
            self.report(node, message, guidance=_GUIDANCE_ACCELERATOR, effort=Effort.LOW)
            return
        self.report(
            node,
            message,
            replacement=replacement,
            safety=Safety.SAFE,
            description='compile with backend="neuron"',
        )
