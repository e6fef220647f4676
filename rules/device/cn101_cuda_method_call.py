"""CN101: ``.cuda()`` method calls."""

from __future__ import annotations

import ast

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Safety, Settings, Valid

from .._shared.args import arg_by_name, keyword_arg, positional_args
from .._shared.consumers import kernel_test, pointer_buffer
from .._shared.detector import AstDetector, may_be_linked
from .._shared.kernel_free import kernel_free
from .._shared.kernel_gates import handed_to_kernel
from .._shared.names import is_device_word
from .._shared.target import NEURON, device_expr
from ._index_kinds import IndexKind, index_kind

__all__ = ["CudaMethodCall"]

_FORWARDED_GUIDANCE = (
    "write the move with the target device yourself: `.cuda(*args, **kwargs)` reads a forwarded "
    "positional argument as the device index, `.to()` reads it as a dtype; e.g. "
    "`device = args[0] if args else kwargs.pop(\"device\", None)` then "
    "`.to(\"neuron\" if device is None else f\"neuron:{device}\", **kwargs)`"
)

_OVERRIDE_GUIDANCE = (
    "what this method does besides moving (a cast, a kernel library's setup, a cached device) no "
    "longer runs on Trainium: do it where the model is placed, or in the class's `to()`; callers "
    "that still call `.cuda()` on it are rewritten to `.to()`"
)


def _holds_device(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Name):
        return is_device_word(node.value)
    return isinstance(node, cst.Attribute) and is_device_word(node.attr.value)


class CudaMethodCall(Rule):
    """
    ## What it does
    Rewrites ``.cuda()`` on tensors and modules to ``.to(<device>)``, keeping the device index
    and ``non_blocking``. A class that defines its own ``cuda`` method (an ``nn.Module``
    override that also casts, or sets up a kernel library) is reported: the port's ``.to()``
    calls no longer run it.

    ## Why is this bad?
    ``.cuda()`` only ever means a CUDA device. TorchNeuron generates ``.neuron()``, but ``.to()``
    is the spelling AWS documents and the one that also works with a device variable.

    ## Example
    ```python
    model.cuda()
    x = x.cuda(non_blocking=True)
    y = y.cuda(rank)
    ```
    becomes
    ```python
    model.to("neuron")
    x = x.to("neuron", non_blocking=True)
    y = y.to(f"neuron:{rank}")
    ```

    ## Fix safety
    Safe: ``.to(device)`` is what ``.cuda(device)`` does for tensors and modules, rewritten by what
    the argument may hold as the same file says (a literal, a command-line option's ``type=`` and
    ``default=``, a parameter's default or annotation, a guard ``if x is not None:``): nothing
    or None is the current device (``.to("neuron")``), an int ``f"neuron:{i}"``, an int or None
    ``torch.device("neuron", i)`` (which reads None as the current device, where
    ``"neuron:None"`` raises). Unsafe where the file does not say (``cfg.gpu``,
    ``opts["gpu"]``) or says it may be None or a string: check the value first. A call that
    forwards ``*args``/``**kwargs`` (an override's ``super().cuda(*args, **kwargs)``) is reported
    without a fix: ``.cuda()`` reads a forwarded positional as the device, ``.to()`` as a dtype. Storages take
    the device only by keyword (``UntypedStorage.to(*, device)``), so inside a ``map_location``
    lambda — where the receiver is a storage — the fix writes ``.to(device=...)``. An argument
    named like a device (``.cuda(device)``) may hold a ``torch.device``, so it is passed through
    as ``.to(device)`` rather than formatted into ``f"neuron:{device}"``. A receiver that
    is not a torch object but has its own ``cuda`` method would be changed too; such classes are
    rare enough that suppressing the line (``# cuda2neuron: ignore[CN101]``) is the remedy.
    The ``def cuda`` of a class is reported without a fix: what it does besides moving is for a
    person to carry over.
    """

    code = "CN101"
    name = "cuda-method-call"
    fixes = frozenset({Safety.SAFE, Safety.UNSAFE})
    triggers = ("cuda",)
    VALID = (
        "x.to('neuron')",
        "torch.cuda.is_available()",
        "cuda()",  # a plain function, not a method
        "x.cuda",  # attribute access without a call is not a placement
        "def cuda():\n    return 1\n",  # a module-level function, not a method
        Valid("x.to(torch.accelerator.current_accelerator())", target="accelerator"),
    )
    INVALID = (
        Invalid("model.cuda()\n", 'model.to("neuron")\n'),
        # A TensorRT binding's buffer stays on CUDA: reported, kept.
        Invalid("def infer(ctx, x):\n    inp = x.cuda()\n    ctx.execute_v2([inp.data_ptr()])\n"),
        Invalid("x = x.cuda(non_blocking=True)\n", 'x = x.to("neuron", non_blocking=True)\n'),
        Invalid("y = y.cuda(0)\n", 'y = y.to("neuron:0")\n'),
        Invalid("y = y.cuda(rank)\n", 'y = y.to(f"neuron:{rank}")\n'),
        # What an option holds is read from its declaration in the same file: None is the
        # current device, which `torch.device("neuron", None)` keeps and "neuron:None" refuses.
        Invalid("y = y.cuda(device=args.gpu)\n", 'y = y.to(f"neuron:{args.gpu}")\n', unsafe=True),
        Invalid(
            'p.add_argument("--gpu", default=None, type=int)\nargs = p.parse_args()\ny = y.cuda(args.gpu)\n',
            'import torch\n\np.add_argument("--gpu", default=None, type=int)\nargs = p.parse_args()\ny = y.to(torch.device("neuron", args.gpu))\n',
        ),
        Invalid(
            'p.add_argument("--gpu", default=None, type=int)\nargs = p.parse_args()\nif args.gpu is not None:\n    y = y.cuda(args.gpu)\n',
            'p.add_argument("--gpu", default=None, type=int)\nargs = p.parse_args()\nif args.gpu is not None:\n    y = y.to(f"neuron:{args.gpu}")\n',
        ),
        Invalid(
            'p.add_argument("--gpu", type=int, default=0)\nargs, _ = p.parse_known_args()\ny = y.cuda(args.gpu)\n',
            'p.add_argument("--gpu", type=int, default=0)\nargs, _ = p.parse_known_args()\ny = y.to(f"neuron:{args.gpu}")\n',
        ),
        Invalid(
            "def f(x, gpu=None):\n    return x.cuda(gpu)\n",
            'import torch\n\ndef f(x, gpu=None):\n    return x.to(torch.device("neuron", gpu))\n',
            unsafe=True,
        ),
        Invalid("w = x.cuda(None)\n", 'w = x.to("neuron")\n'),
        Invalid(
            "import torch\nt = t.cuda(torch.cuda.current_device())\n",
            'import torch\nt = t.to(f"neuron:{torch.cuda.current_device()}")\n',
        ),
        Invalid("t = t.cuda(int(os.environ['LOCAL_RANK']))\n", "t = t.to(f\"neuron:{int(os.environ['LOCAL_RANK'])}\")\n"),
        Invalid("t = t.cuda(get_gpu())\n", 't = t.to(f"neuron:{get_gpu()}")\n', unsafe=True),
        # A device variable may hold a torch.device: passed through, not formatted into a string.
        Invalid("model.cuda(device)\n", "model.to(device)\n"),
        Invalid("x = x.cuda(self.device, non_blocking=True)\n", "x = x.to(self.device, non_blocking=True)\n"),
        Invalid("z = torch.zeros(3).cuda()\n", 'z = torch.zeros(3).to("neuron")\n'),
        Invalid("y = y.cuda(cfg['gpu'])\n", "y = y.to(f\"neuron:{cfg['gpu']}\")\n", unsafe=True),
        # A nested double quote cannot go inside an f-string before Python 3.12.
        Invalid(
            'y = y.cuda(cfg["gpu"])\n',
            'import torch\n\ny = y.to(torch.device("neuron", cfg["gpu"]))\n',
            unsafe=True,
        ),
        # map_location lambdas receive storages, whose .to() takes the device by keyword only.
        Invalid(
            "s = torch.load(p, map_location=lambda storage, loc: storage.cuda(gpu))\n",
            's = torch.load(p, map_location=lambda storage, loc: storage.to(device=f"neuron:{gpu}"))\n',
        ),
        # Forwarded arguments mean a device to .cuda() and a dtype to .to(): reported only.
        Invalid("class M(Module):\n    def cuda(self, *args, **kwargs):\n        return super().cuda(*args, **kwargs)\n", None),
        Invalid(
            "import torch\nm.cuda()\n",
            "import torch\nm.to(torch.accelerator.current_accelerator() or torch.get_default_device())\n",
            target="accelerator",
        ),
        # An override that does more than move (diffusers' InstantID pipeline): `.to()` skips it.
        Invalid(
            "class Pipe(Base):\n    def cuda(self, dtype=None, use_xformers=False):\n"
            "        self.to(dtype=dtype)\n        if use_xformers:\n            self.enable_xformers()\n",
            None,
        ),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        return _Detector(cls, file).findings(settings)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        ancestors = self.context.ancestors
        if node.name.value != "cuda" or len(ancestors) < 2 or not isinstance(ancestors[-2], cst.ClassDef):
            return
        self.report(
            node.name,
            f"`{ancestors[-2].name.value}.cuda()` overrides `.cuda()`: the port moves with `.to()`, which does not call it",
            guidance=_OVERRIDE_GUIDANCE,
            effort=Effort.LOW,
        )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "cuda"):
            return
        # `torch.cuda(...)` is not a method call on a tensor; the module is not callable anyway.
        if self.qualname(func) is not None:
            return
        if any(a.star for a in node.args):
            # `super().cuda(*args, **kwargs)` in an override forwards a device index (or
            # device=) that `.to()` would read as its dtype, or receive twice: no rewrite.
            self.report(
                node,
                "`.cuda()` places the tensor on a CUDA device",
                guidance=_FORWARDED_GUIDANCE,
                effort=Effort.LOW,
            )
            return
        # `B = w.half().cuda(device)` then `bnb.functional.int8_vectorwise_quant(B)` (InvokeAI's
        # int8 weights): the tensor is a CUDA kernel's input, as a device handed there is (CN102).
        kernel = kernel_test(self) or handed_to_kernel(self, node)
        if kernel is None and pointer_buffer(self, node):
            kernel = "its raw pointer (`data_ptr()`) is handed to CUDA code (a TensorRT binding, an extension)"
        if kernel is not None:
            # The buffer of CUDA-only code, or the input of a CUDA kernel's test: a neuron tensor
            # would only move the failure (as a device handed to such code is kept, CN102).
            self.report(
                node,
                f"`.cuda()` places the tensor on a CUDA device for CUDA-only code: {kernel}",
                guidance="left as is: the callee runs on NVIDIA GPUs only. Port the call (see its finding), "
                "then give the replacement the target device.",
                effort=Effort.LOW,
            )
            return
        device_arg = arg_by_name(node, "device", position=0)
        index = device_arg.value if device_arg is not None else None
        if isinstance(index, cst.Name) and index.value == "None":
            index = None  # `.cuda(None)`: the current device, as `.cuda()`
        safety, note = Safety.SAFE, ""
        kind = IndexKind.INT if index is None else index_kind(self.context, index, self.context.ancestors)
        if index is not None and _holds_device(index):
            # `.cuda(device)` with a variable named like a device: it may hold a torch.device
            # (f"neuron:{device}" would read "neuron:cuda:0"); its definition is ported by the
            # device-string rules, so pass it through. An int there means the current
            # accelerator's index in torch >= 2.5, which is the neuron device on Trainium.
            built = (index, ())
            if kind is IndexKind.NONE_OR_UNKNOWN:
                # Its default is None: `.cuda(None)` is the current device, `.to(None)` no move.
                safety, note = Safety.UNSAFE, " (it may be None: `.to(None)` does not move)"
        elif kind is IndexKind.INT_OR_NONE or kind is IndexKind.NONE_OR_UNKNOWN:
            # None is the current device for `.cuda()` and for `torch.device("neuron", None)`;
            # an f-string would write "neuron:None", which `.to()` refuses.
            built = self._device_with_index(index)
            if kind is IndexKind.NONE_OR_UNKNOWN:
                safety, note = Safety.UNSAFE, " (it may be None, or a value that is no index)"
        else:
            built = device_expr(self, index)
            if kind is IndexKind.UNKNOWN:
                safety, note = Safety.UNSAFE, " (the file does not say what it holds: None or a device would not fit)"
        if built is None:
            self.report(node, "`.cuda()` places the tensor on a CUDA device")
            return
        expr, imports = built
        rest = [
            a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
            for a in node.args
            if a is not device_arg
        ]
        if self._in_map_location():
            first = keyword_arg("device", expr)
        else:
            first = cst.Arg(expr)
        new_args = [first, *rest]
        replacement = node.with_changes(
            func=func.with_changes(attr=cst.Name("to")), args=new_args
        )
        self.report(
            node,
            "`.cuda()` places the tensor on a CUDA device",
            replacement=replacement,
            safety=safety,
            imports=imports,
            description="replace `.cuda(...)` with `.to(<device>)`" + note,
        )

    def _device_with_index(self, index: cst.BaseExpression) -> tuple[cst.BaseExpression, tuple] | None:
        """``torch.device("neuron", index)``, which reads None as the current device (the
        accelerator target builds the same call with its device type)."""
        if self.context.settings.target != NEURON:
            return device_expr(self, index)
        spelled = self.spell("torch.device")
        if spelled is None:
            return None
        func, imports = spelled
        return cst.Call(func=func, args=[cst.Arg(cst.SimpleString('"neuron"')), cst.Arg(index)]), imports

    def _in_map_location(self) -> bool:
        """Inside ``map_location=lambda storage, loc: ...`` (or torch.load's 2nd argument)?"""
        ancestors = self.context.ancestors
        for i in range(len(ancestors) - 1, 0, -1):
            node = ancestors[i]
            if isinstance(node, cst.Lambda):
                arg = ancestors[i - 1]
                if isinstance(arg, cst.Arg) and arg.keyword is not None and arg.keyword.value == "map_location":
                    return True
                if isinstance(arg, cst.Arg) and i >= 2 and isinstance(ancestors[i - 2], cst.Call):
                    call = ancestors[i - 2]
                    if self.qualname(call.func) in ("torch.load", "torch.jit.load"):
                        return arg.keyword is None and positional_args(call).index(arg) == 1
                return False
        return False


_MESSAGE = "`.cuda()` places the tensor on a CUDA device"


class _Detector(AstDetector):
    """``visit_Call`` above on CPython's ``ast`` for the common calls: ``x.cuda()`` and
    ``x.cuda(non_blocking=...)`` (keywords other than ``device``), on one line, with the neuron
    target: ``.to("neuron", ...)``, safe; and ``.cuda(*args, **kwargs)``, reported without a fix.
    Unsure (None) wherever the visitor reads more than the call: a device argument (its kind is
    read from the file's options, parameters and guards), a ``def cuda`` override, a
    ``map_location`` lambda, a module whose kernel index may hold something (the tensor may be
    a CUDA kernel's input), a raw pointer taken in the module, a
    report the program pass could link (``may_be_linked``), the accelerator target."""

    def findings(self, settings: Settings) -> list[Finding] | None:
        # The accelerator target's device expression is libcst's to build: decided only where
        # the visitor reports nothing.
        self._neuron = settings.target == "neuron"
        self._kernels = None  # decided on the first call that needs it
        self._settings = settings
        return self.made_findings()

    def _finding(self, node: ast.AST, guidance: str, inner: str | None, ancestors: tuple[object, ...]) -> Finding:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            owner = ancestors[-1].name  # type: ignore[attr-defined]
            return Finding(
                code=self.rule.code,
                name=self.rule.name,
                message=f"`{owner}.cuda()` overrides `.cuda()`: the port moves with `.to()`, which does not call it",
                path=self.file.path,
                span=self._name_span(node),
                guidance=_OVERRIDE_GUIDANCE,
                effort=Effort.LOW,
            )
        if inner is None:
            return self.finding(node, _MESSAGE, guidance, Effort.LOW)
        func = node.func
        end = self.file.offset(func.end_lineno, func.end_col_offset)
        call_end = self.file.bounds(node)[1]
        new = '.to("neuron"' + (f", {inner}" if inner else "") + ")"
        at = end - len(".cuda")
        fix = self.edit(node, ancestors, at, call_end - at, new, Safety.SAFE, "replace `.cuda(...)` with `.to(<device>)`")
        return self.finding(node, _MESSAGE, "", Effort.NONE, fix)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        from cuda2neuron.python import Unsure

        if node.name == "cuda" and isinstance(self.ctx.parent, ast.ClassDef):
            if not self._neuron:
                raise Unsure("the accelerator target")
            self._reports.append((node, _OVERRIDE_GUIDANCE, None, tuple(self.ctx.ancestors)))

    def _name_span(self, node: ast.FunctionDef | ast.AsyncFunctionDef):  # noqa: ANN202 - core.Span
        """The span of a function's name, which ``ast`` does not position: after ``def`` (and
        ``async``) and the whitespace that follows, on the line the statement starts on."""
        from cuda2neuron.core import Span
        from cuda2neuron.python import Unsure

        self.file.check_line(node.lineno)
        start = self.file.offset(node.lineno, node.col_offset)
        text = self.file.text
        head = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
        if not text.startswith(head, start):
            raise Unsure("a function statement written otherwise")
        at = start + len(head)
        while at < len(text) and text[at] in " \t":
            at += 1
        if not text.startswith(node.name, at) or "\\" in text[start:at]:
            raise Unsure("a function's name not where it was looked for")
        col = self.file.column(node.lineno, node.col_offset) + (at - start)
        return Span(node.lineno, col, node.lineno, col + len(node.name))

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> None:
        from cuda2neuron.python import Unsure

        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "cuda"):
            return
        if self.ctx.qualname(func) is not None:
            return
        if not self._neuron:
            raise Unsure("the accelerator target")
        ancestors = tuple(self.ctx.ancestors)
        if may_be_linked(self.file, node, ancestors):
            raise Unsure("a report the program pass may link")
        self._kernel_free(ancestors)
        if any(a.star for a in self.ctx.args(node)):
            self._reports.append((node, _FORWARDED_GUIDANCE, None, ancestors))
            return
        if node.args or any(k.arg == "device" for k in node.keywords):
            raise Unsure("a device argument: its kind is read from the file")
        if any(isinstance(a, ast.Lambda) for a in ancestors):
            raise Unsure("a lambda: a map_location's storage takes the device by keyword")
        text = self.file.text
        end = self.file.offset(func.end_lineno, func.end_col_offset)
        call_end = self.file.bounds(node)[1]
        if text[end - len(".cuda") : end + 1] != ".cuda(" or text[call_end - 1] != ")":
            raise Unsure("a call written with spaces or a line break")
        inner = text[end + 1 : call_end - 1]
        # The keywords as libcst writes them back (`a.with_changes(comma=DEFAULT)`): one ", "
        # between, none after the last; a call written otherwise is left to libcst.
        written = ", ".join(f"{k.arg}={self.file.segment(k.value)}" for k in node.keywords)
        if inner != written:
            raise Unsure("keywords written with other spacing or a trailing comma")
        self._reports.append((node, "", inner, ancestors))

    def _kernel_free(self, ancestors: tuple[object, ...]) -> None:
        """Unsure where ``kernel_test``, ``handed_to_kernel`` or ``pointer_buffer`` could hold
        the call: each asks the module's kernel index first (a test's tensors are a kernel's
        inputs only where the module calls one), and ``kernel_free`` proves it empty (the word
        ``data_ptr`` included) or leaves the detector unsure."""
        from cuda2neuron.python import Unsure

        if self._kernels is None:
            self._kernels = kernel_free(self.file, self._settings)
        if not self._kernels:
            raise Unsure("the module may call CUDA-only code")
