"""CN106: legacy CUDA tensor types (``torch.cuda.FloatTensor`` and friends)."""

from __future__ import annotations

import ast
import re

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Safety, Settings

from .._shared.args import keyword_arg, positional_args
from .._shared.detector import AstDetector
from .._shared.strings import make_string, string_value
from .._shared.target import NEURON, compared_type_expr, device_expr

__all__ = ["LegacyCudaTensorType"]

_DTYPES = {
    "FloatTensor": "float32",
    "DoubleTensor": "float64",
    "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16",
    "ByteTensor": "uint8",
    "CharTensor": "int8",
    "ShortTensor": "int16",
    "IntTensor": "int32",
    "LongTensor": "int64",
    "BoolTensor": "bool",
}

_TYPE_WORDS = tuple(t.encode() for t in _DTYPES)
# Each type name as a whole word, searched only where the file holds it; the byte before it is
# read back by hand (not ``.``, not a word byte): a pattern that starts with a look-behind and
# an alternation makes the engine try every byte of the file.
_TYPE_WORD = {t: re.compile(re.escape(t) + rb"\b") for t in _TYPE_WORDS}
_NOT_BEFORE_BARE = frozenset(b".ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _bare_type(code: bytes) -> bool:
    """A type name not after a dot nor inside a longer name (``LongTensor``, not ``torch.LongTensor``)."""
    for t in _TYPE_WORDS:
        if t in code:
            for m in _TYPE_WORD[t].finditer(code):
                if m.start() == 0 or code[m.start() - 1] not in _NOT_BEFORE_BARE:
                    return True
    return False


class LegacyCudaTensorType(Rule):
    """
    ## What it does
    Replaces legacy CUDA tensor types (``torch.cuda.FloatTensor``, ``HalfTensor``,
    ``LongTensor`` and the rest) with factories that name a dtype and a device. The fixed forms are:

    * ``torch.cuda.FloatTensor(2, 3)`` (integer sizes) → ``torch.empty(2, 3, dtype=torch.float32, device="neuron")``
    * ``torch.cuda.LongTensor([1, 2])`` (literal data) → ``torch.tensor([1, 2], dtype=torch.int64, device="neuron")``
    * ``x.type(torch.cuda.HalfTensor)`` → ``x.to("neuron", dtype=torch.float16)``
    * ``isinstance(x, torch.cuda.FloatTensor)`` →
      ``(isinstance(x, torch.Tensor) and x.is_neuron and x.dtype == torch.float32)``

    The type's name as a string is ported too: in a test of a tensor's type string,
    ``x.type() == "torch.cuda.HalfTensor"`` (also ``!=``, ``in (...)``) becomes
    ``x.type() == "torch.neuron.HalfTensor"`` (the string torch gives a tensor of the renamed
    PrivateUse1 device), and ``x.type("torch.cuda.HalfTensor")`` becomes ``x.to("neuron",
    dtype=torch.float16)``; the string anywhere else is reported.

    ``torch.set_default_tensor_type(torch.cuda.HalfTensor)`` (also the type's name as a string)
    is reported with its two-call port, ``torch.set_default_dtype(torch.float16)`` and
    ``torch.set_default_device("neuron")``.
    Any other use (``Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor``, a
    constructor called with a variable) is reported with the factory to write instead, and so
    are the uses of such an alias — ``.type(Tensor)``, ``Tensor(n)`` — in the same file or
    imported from a project module (``from utils import FloatTensor``).

    ## Why is this bad?
    The legacy types exist only for CUDA and CPU; there is no ``torch.neuron.FloatTensor``.
    PyTorch has recommended ``dtype=`` and ``device=`` arguments for years.

    ## Example
    ```python
    mask = torch.cuda.ByteTensor(n, n)
    h = h.type(torch.cuda.FloatTensor)
    ```
    becomes
    ```python
    mask = torch.empty(n, n, dtype=torch.uint8, device="neuron")   # if n is a literal
    h = h.to("neuron", dtype=torch.float32)
    ```

    ## Fix safety
    Safe where the meaning is certain: integer-literal sizes give uninitialised memory exactly
    like the legacy constructor; list/tuple literals are data; ``.type(T)`` and ``.to(device,
    dtype=...)`` both return the tensor itself when nothing changes. (On a *module*,
    ``.type(T)`` also casts integer buffers, ``.to`` only floating ones — what a device port
    wants.) A type string compared with ``x.type()`` names the same dtype on the device the port
    runs on: ``Tensor.type()`` spells a tensor on the ``neuron`` device ``torch.neuron.HalfTensor``
    as it spells a CUDA one ``torch.cuda.HalfTensor``, and a CPU tensor still matches neither.
    With ``--target accelerator`` the string names the current accelerator's type
    (``f"torch.{...current_accelerator()...}.HalfTensor"``; with none, a string no tensor's type
    equals). A constructor called with a variable is reported: ``FloatTensor(n)`` is a size when
    ``n`` is an int and data when it is a list, and the source cannot tell which.
    """

    code = "CN106"
    name = "legacy-cuda-tensor-type"
    fixes = frozenset({Safety.SAFE})
    # The type names too: an alias imported from a project module has no "cuda" in the file.
    triggers = ("cuda", *_DTYPES)
    emits = (
        "torch.empty",
        "torch.tensor",
        "torch.Tensor",
        "torch.accelerator.current_accelerator",
        *(f"torch.{dtype}" for dtype in _DTYPES.values()),
    )
    VALID = (
        "import torch\nx = torch.FloatTensor(2, 3)\n",
        "import torch\nx = torch.empty(2, 3, dtype=torch.float32, device='neuron')\n",
        "from torch.cuda import FloatTensor\n",  # the import alone is not a use
        "class FloatTensor: pass\ny = FloatTensor(3)\n",
        "import torch\nm = (a == b).type(torch.FloatTensor)\n",  # torch's CPU type
        "from torch import FloatTensor\nm = (a == b).type(FloatTensor)\n",
        "import torch\ntorch.set_default_tensor_type('torch.FloatTensor')\n",
        "if x.type() == 'torch.FloatTensor':\n    pass\n",  # the CPU type string
        "print('expected torch.cuda.HalfTensor input')\n",  # prose
    )
    INVALID = (
        Invalid(
            "import torch\nx = torch.cuda.FloatTensor(2, 3)\n",
            'import torch\nx = torch.empty(2, 3, dtype=torch.float32, device="neuron")\n',
        ),
        Invalid(
            "import torch\nx = torch.cuda.FloatTensor()\n",
            'import torch\nx = torch.empty(0, dtype=torch.float32, device="neuron")\n',
        ),
        Invalid(
            "import torch\nidx = torch.cuda.LongTensor([1, 2])\n",
            'import torch\nidx = torch.tensor([1, 2], dtype=torch.int64, device="neuron")\n',
        ),
        Invalid(
            "import torch\nh = h.type(torch.cuda.HalfTensor)\n",
            'import torch\nh = h.to("neuron", dtype=torch.float16)\n',
        ),
        Invalid(
            "from torch.cuda import FloatTensor\nok = isinstance(x, FloatTensor)\n",
            'import torch\n\nok = (isinstance(x, torch.Tensor) and x.is_neuron and x.dtype == torch.float32)\n',
        ),
        Invalid("import torch\nTensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"),
        # A default type sets a dtype and a device: advice for both calls, not a rewrite.
        Invalid("import torch\ntorch.set_default_tensor_type(torch.cuda.HalfTensor)\n"),
        Invalid("import torch\ntorch.set_default_tensor_type('torch.cuda.FloatTensor')\n"),
        Invalid("import torch\nmask = torch.cuda.ByteTensor(n)\n"),
        # Uses of an alias are reported too: the alias may live in another module.
        Invalid("from utils import FloatTensor\nm = (a == b).type(FloatTensor)\n"),
        Invalid(
            "import torch\nLT = torch.cuda.LongTensor if cuda else torch.LongTensor\npos = LT(n)\n"
        ),
        # Type strings: compared with x.type(), passed to .type(), anywhere else.
        Invalid(
            "if z.type() == 'torch.cuda.HalfTensor':\n    pass\n",
            "if z.type() == 'torch.neuron.HalfTensor':\n    pass\n",
        ),
        Invalid(
            'ok = x.type() in ("torch.cuda.FloatTensor", "torch.cuda.HalfTensor")\n',
            'ok = x.type() in ("torch.neuron.FloatTensor", "torch.neuron.HalfTensor")\n',
        ),
        Invalid(
            "h = h.type('torch.cuda.HalfTensor')\n",
            'import torch\n\nh = h.to("neuron", dtype=torch.float16)\n',
        ),
        Invalid("KINDS = {'torch.cuda.HalfTensor': 2}\n"),
        Invalid(
            "if z.type() != 'torch.cuda.HalfTensor':\n    pass\n",
            "import torch\n\nif z.type() != f'torch.{getattr(torch.accelerator.current_accelerator(), \"type\", \"no accelerator\")}.HalfTensor':\n    pass\n",
            target="accelerator",
        ),
        Invalid(
            "import torch\nx = torch.cuda.FloatTensor(4)\n",
            "import torch\nx = torch.empty(4, dtype=torch.float32, device=torch.accelerator.current_accelerator() or torch.get_default_device())\n",
            target="accelerator",
        ),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        # Every report is about one of the type names (or an alias bound from one). A file
        # without "cuda" can only hold an alias imported from a project module, which shows as
        # the bare name; torch's CPU types (``torch.LongTensor``) follow a dot.
        if not any(t in code for t in _TYPE_WORDS):
            return False
        return b"cuda" in code or _bare_type(code)

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """A gate (``_Gate``): every report is a name or attribute the walk resolves to
        ``torch.cuda.<Type>``, a type name bound from another module's import, or a string that
        holds ``torch.cuda.`` (its text or its value). Where none is, no finding; unsure
        elsewhere (libcst runs). Most files CN106 wakes write ``torch.LongTensor`` (the CPU
        type) in an annotation beside some CUDA call."""
        return None if _Gate(cls, file).reports() is None else []

    def _resolve(self, node: cst.BaseExpression) -> str | None:
        """The dtype name for a reference to a legacy CUDA type, else None."""
        last = node.attr.value if isinstance(node, cst.Attribute) else node.value if isinstance(node, cst.Name) else ""
        if last not in _DTYPES:  # cheap test before resolving
            return None
        if self.qualname(node) != f"torch.cuda.{last}":
            return None
        return _DTYPES[last]

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._visit_ref(node)

    def __init__(self, context) -> None:
        super().__init__(context)
        # ``FloatTensor = torch.cuda.FloatTensor if use_cuda else torch.FloatTensor``: names
        # bound to a legacy CUDA type in this file, by name -> dtype; their uses are reported.
        self._aliases: dict[str, str] = {}

    def visit_Name(self, node: cst.Name) -> None:
        # cheap test first: this runs for every name in the file
        if node.value not in _DTYPES and node.value not in self._aliases:
            return
        parent = self.context.parent
        if isinstance(parent, (cst.Attribute, cst.ImportAlias)):
            return  # the tail of torch.cuda.X is visited as the Attribute; imports are no use
        if self._resolve(node) is None:
            self._visit_alias_use(node)
            return
        self._visit_ref(node)

    def _visit_alias_use(self, node: cst.Name) -> None:
        """``x.type(FloatTensor)`` / ``FloatTensor(n)`` where the name is an alias of a legacy
        CUDA type: bound in this file, or imported from a project module (``from utils import
        FloatTensor``) — torch's own CPU types (``torch.FloatTensor``) are not aliases."""
        name = node.value
        dtype = self._aliases.get(name)
        if dtype is None:
            qualified = self.qualname(node)
            if qualified is None or qualified.startswith("torch"):
                return
            dtype = _DTYPES[name]
        ancestors = self.context.ancestors
        parent = ancestors[-1] if ancestors else None
        grand = ancestors[-2] if len(ancestors) >= 2 else None
        is_call = isinstance(parent, cst.Call) and parent.func is node
        is_type_arg = (
            isinstance(parent, cst.Arg)
            and isinstance(grand, cst.Call)
            and isinstance(grand.func, cst.Attribute)
            and grand.func.attr.value == "type"
        )
        if not (is_call or is_type_arg):
            return
        self.report(
            node,
            f"`{name}` is an alias of a legacy CUDA tensor type",
            guidance=f"use `x.to(device, dtype=torch.{dtype})` instead of `.type({name})`, and "
            f"`torch.empty(sizes, dtype=torch.{dtype}, device=device)` instead of `{name}(sizes)`",
        )

    def _remember_alias(self, node: cst.BaseExpression, dtype: str) -> None:
        """Bound by ``name = <expr with torch.cuda.X>`` (through ``a if c else b``)?"""
        for anc in reversed(self.context.ancestors):
            if isinstance(anc, cst.IfExp):
                continue
            if isinstance(anc, cst.Assign) and len(anc.targets) == 1 and isinstance(anc.targets[0].target, cst.Name):
                self._aliases[anc.targets[0].target.value] = dtype
            return

    def _visit_ref(self, node: cst.BaseExpression) -> None:
        dtype = self._resolve(node)
        if dtype is None:
            return
        name = node.attr.value if isinstance(node, cst.Attribute) else node.value  # type: ignore[union-attr]
        unused = () if isinstance(node, cst.Attribute) else (("torch.cuda", name),)
        ancestors = self.context.ancestors
        parent = ancestors[-1] if ancestors else None
        grand = ancestors[-2] if len(ancestors) >= 2 else None
        message = f"`torch.cuda.{name}` is a legacy CUDA tensor type"
        guidance = (
            f"use `torch.empty(sizes, dtype=torch.{dtype}, device=device)` for a size or "
            f"`torch.tensor(data, dtype=torch.{dtype}, device=device)` for data"
        )
        built = None
        if (
            isinstance(parent, cst.Arg)
            and isinstance(grand, cst.Call)
            and self.qualname(grand.func) == "torch.set_default_tensor_type"
        ):
            self._default_type(grand, name, dtype)
            return
        if isinstance(parent, cst.Call) and parent.func is node:
            built = self._constructor(parent, dtype)
            target_node: cst.CSTNode = parent
            above = ancestors[:-1]
        elif isinstance(parent, cst.Arg) and isinstance(grand, cst.Call):
            built = self._as_argument(grand, parent, dtype)
            target_node = grand
            above = ancestors[:-2]
        if built is None:
            self.report(node, message, guidance=guidance)
            self._remember_alias(node, dtype)
            return
        replacement, imports = built
        self.report(
            target_node,
            message,
            replacement=replacement,
            safety=Safety.SAFE,
            imports=imports,
            unused_imports=unused,
            guidance=guidance,
            description=f"name dtype torch.{dtype} and the device",
            # The fix replaces the enclosing call, not the visited name.
            ancestors=above,
        )

    def visit_Call(self, node: cst.Call) -> None:
        # torch.set_default_tensor_type("torch.cuda.HalfTensor"): the type named by a string.
        if len(node.args) != 1 or not isinstance(node.args[0].value, cst.SimpleString):
            return
        value = string_value(node.args[0].value)
        if value is None or not value.startswith("torch.cuda.") or value[len("torch.cuda.") :] not in _DTYPES:
            return
        if self.qualname(node.func) == "torch.set_default_tensor_type":
            name = value[len("torch.cuda.") :]
            self._default_type(node, name, _DTYPES[name])

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        # "torch.cuda.HalfTensor" as a string: cheap test first, this runs for every literal.
        if "torch.cuda." not in node.value:
            return
        value = string_value(node)
        name = value[len("torch.cuda.") :] if value is not None and value.startswith("torch.cuda.") else ""
        if name not in _DTYPES:
            return
        anc = self.context.ancestors
        parent = anc[-1] if anc else None
        grand = anc[-2] if len(anc) >= 2 else None
        if isinstance(parent, cst.Arg) and isinstance(grand, cst.Call):
            if self.qualname(grand.func) == "torch.set_default_tensor_type":
                return  # visit_Call's
            built = self._as_argument(grand, parent, _DTYPES[name])
            if built is not None and isinstance(grand.func, cst.Attribute) and grand.func.attr.value == "type":
                replacement, imports = built
                self.report(
                    grand,
                    f'`.type("torch.cuda.{name}")` casts to a legacy CUDA tensor type',
                    replacement=replacement,
                    imports=imports,
                    safety=Safety.SAFE,
                    description=f"name dtype torch.{_DTYPES[name]} and the device",
                    ancestors=anc[:-2],
                )
                return
        if self._compared_with_type(anc):
            message = (
                f'`"torch.cuda.{name}"` is the type string of a CUDA tensor; a tensor on the '
                "device the port runs on has another"
            )
            fixed = self._type_string(node, name)
            if fixed is None:
                self.report(node, message, guidance=self._type_string_guidance(name))
                return
            replacement, imports = fixed
            self.report(
                node,
                message,
                replacement=replacement,
                imports=imports,
                safety=Safety.SAFE,
                guidance=self._type_string_guidance(name),
                description="compare with the device's type string",
            )
            return
        self.report(
            node,
            f'`"torch.cuda.{name}"` names a legacy CUDA tensor type',
            guidance=self._type_string_guidance(name),
        )

    @staticmethod
    def _type_string_guidance(name: str) -> str:
        return (
            f"test `x.dtype == torch.{_DTYPES[name]}` and the tensor's device "
            "(`x.device.type`) instead of its legacy type string"
        )

    def _compared_with_type(self, anc: tuple) -> bool:
        """Is the literal just visited one side of ``x.type() == s`` (or an element of the
        tuple/list/set in ``x.type() in (...)``), with ``x.type()`` a method call, not torch's?"""
        i = len(anc) - 1
        if i >= 2 and isinstance(anc[i], cst.Element) and isinstance(anc[i - 1], (cst.Tuple, cst.List, cst.Set)):
            i -= 2
        if i >= 0 and isinstance(anc[i], cst.ComparisonTarget):
            i -= 1
        comparison = anc[i] if i >= 0 else None
        if not isinstance(comparison, cst.Comparison):
            return False
        operands = [comparison.left, *(t.comparator for t in comparison.comparisons)]
        return any(
            isinstance(op, cst.Call)
            and not op.args
            and isinstance(op.func, cst.Attribute)
            and op.func.attr.value == "type"
            and self.qualname(op.func) is None
            for op in operands
        )

    def _type_string(self, node: cst.SimpleString, name: str) -> tuple[cst.BaseExpression, tuple] | None:
        """The string ``x.type()`` gives a ``name`` tensor on the port's device."""
        if self.context.settings.target == NEURON:
            return make_string(f"torch.{NEURON}.{name}", like=node), ()
        body = node.value[len(node.prefix) :]
        if node.prefix.lower() not in ("", "u") or body[:3] in ('"' * 3, "'" * 3):
            return None
        quote = body[0]
        inner = "'" if quote == '"' else '"'
        built = compared_type_expr(self, quote=inner)
        if built is None:
            return None
        expr, imports = built
        fstring = cst.FormattedString(
            parts=[
                cst.FormattedStringText("torch."),
                cst.FormattedStringExpression(expression=expr),
                cst.FormattedStringText(f".{name}"),
            ],
            start=f"f{quote}",
            end=quote,
        )
        return fstring, imports

    def _default_type(self, call: cst.Call, name: str, dtype: str) -> None:
        """``torch.set_default_tensor_type(torch.cuda.HalfTensor)`` sets two defaults at once:
        the dtype of new floating tensors and (the legacy way) their device. Its port is two
        calls, and the second one changes how every factory call runs, so it is advice."""
        device = '"neuron"' if self.context.settings.target == NEURON else (
            "torch.accelerator.current_accelerator() or torch.get_default_device()"
        )
        self.report(
            call,
            f"`torch.set_default_tensor_type(torch.cuda.{name})` makes new tensors CUDA {dtype} tensors",
            guidance=f"replace it with `torch.set_default_dtype(torch.{dtype})` and "
            f"`torch.set_default_device({device})` (torch >= 2.0). The default device applies to "
            "every factory call without a device= (data loading and CPU-side buffers included): "
            "prefer device= on the tensors that belong on the device, and check which tensors the "
            "program creates before relying on the default. The legacy constructors "
            "(`torch.Tensor([...])`, `torch.FloatTensor(...)`) ignore the default device, which the "
            "old call did set for them: write `torch.tensor([...])` there (nerf-pytorch's "
            "`torch.Tensor([1e10])` stays on the CPU otherwise).",
            effort=Effort.MEDIUM,
        )

    def _pieces(self, dtype: str) -> tuple[cst.BaseExpression, cst.BaseExpression, tuple] | None:
        dev = device_expr(self)
        dt = self.spell(f"torch.{dtype}")
        if dev is None or dt is None:
            return None
        return dev[0], dt[0], dev[1] + dt[1]

    def _constructor(self, call: cst.Call, dtype: str) -> tuple[cst.BaseExpression, tuple] | None:
        args = list(call.args)
        if any(a.keyword is not None or a.star for a in args):
            return None
        if not args:
            factory, data = "torch.empty", [cst.Arg(cst.Integer("0"))]
        elif all(isinstance(a.value, cst.Integer) for a in args):
            factory, data = "torch.empty", [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args]
        elif len(args) == 1 and isinstance(args[0].value, (cst.List, cst.Tuple, cst.ListComp)):
            factory, data = "torch.tensor", [args[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)]
        else:
            return None
        pieces = self._pieces(dtype)
        func = self.spell(factory)
        if pieces is None or func is None:
            return None
        dev, dt, imports = pieces
        new = cst.Call(
            func=func[0],
            args=[*data, keyword_arg("dtype", dt), keyword_arg("device", dev)],
        )
        return new, imports + func[1]

    def _as_argument(self, call: cst.Call, arg: cst.Arg, dtype: str) -> tuple[cst.BaseExpression, tuple] | None:
        func = call.func
        positions = positional_args(call)
        # x.type(torch.cuda.HalfTensor)
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "type"
            and positions[:1] == [arg]
            and len(call.args) == 1
            and self.qualname(func) is None
        ):
            pieces = self._pieces(dtype)
            if pieces is None:
                return None
            dev, dt, imports = pieces
            return (
                call.with_changes(
                    func=func.with_changes(attr=cst.Name("to")),
                    args=[cst.Arg(dev), keyword_arg("dtype", dt)],
                ),
                imports,
            )
        # isinstance(x, torch.cuda.FloatTensor) with a plain name as subject (evaluated twice)
        if (
            isinstance(func, cst.Name)
            and func.value == "isinstance"
            and len(positions) == 2
            and positions[1] is arg
            and isinstance(positions[0].value, (cst.Name, cst.Attribute))
            and self.qualname(func) is None
        ):
            subject = positions[0].value
            tensor = self.spell("torch.Tensor")
            dt = self.spell(f"torch.{dtype}")
            if tensor is None or dt is None:
                return None
            imports = tensor[1] + dt[1]
            if self.context.settings.target == NEURON:
                on_device: cst.BaseExpression = cst.Attribute(value=subject, attr=cst.Name("is_neuron"))
            else:
                built = compared_type_expr(self)
                if built is None:
                    return None
                on_device = cst.Comparison(
                    left=cst.Attribute(value=cst.Attribute(value=subject, attr=cst.Name("device")), attr=cst.Name("type")),
                    comparisons=[cst.ComparisonTarget(cst.Equal(), built[0])],
                )
                imports += built[1]
            check = cst.Call(func=cst.Name("isinstance"), args=[cst.Arg(subject), cst.Arg(tensor[0])])
            dtype_ok = cst.Comparison(
                left=cst.Attribute(value=subject, attr=cst.Name("dtype")),
                comparisons=[cst.ComparisonTarget(cst.Equal(), dt[0])],
            )
            expr = cst.BooleanOperation(
                left=cst.BooleanOperation(left=check, operator=cst.And(), right=on_device),
                operator=cst.And(),
                right=dtype_ok,
                lpar=[cst.LeftParen()],
                rpar=[cst.RightParen()],
            )
            return expr, imports
        return None


class _Gate(AstDetector):
    """Unsure at the first node where the visitor could report (``LegacyCudaTensorType.detect``).
    Names that ``ast`` holds as no expression (a function's, a class's, a parameter's, an import
    alias's, ``global``'s) are visited by libcst as ``Name``: one spelled as a type makes the gate
    unsure too."""

    def visit_Module(self, node: ast.Module) -> None:
        from cuda2neuron.python import Unsure

        text = self.file.text
        for inner in ast.walk(node):
            if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names: list = [inner.name]
            elif isinstance(inner, ast.arg):
                names = [inner.arg]
            elif isinstance(inner, ast.alias):
                names = [inner.asname, inner.name.rsplit(".", 1)[-1]]
            elif isinstance(inner, (ast.Global, ast.Nonlocal)):
                names = list(inner.names)
            elif isinstance(inner, ast.keyword):
                names = [inner.arg]
            elif isinstance(inner, (ast.Constant, ast.JoinedStr)):
                # The value (``torch.set_default_tensor_type("torch\\x2ecuda...")`` reads it) or
                # the text (``visit_SimpleString`` looks there first) may hold it.
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str) and "torch.cuda." in inner.value:
                    raise Unsure("a string naming torch.cuda.")
                if "torch.cuda." in text and "torch.cuda." in _segment(self.file, inner):
                    raise Unsure("a string written with torch.cuda.")
                continue
            else:
                continue
            if any(n in _DTYPES for n in names if n):
                raise Unsure("a legacy type's name where ast holds no expression")

    def visit_Name(self, node: ast.Name) -> None:
        self._name(node, node.id)

    def visit_KeywordName(self, node) -> None:  # noqa: ANN001 - python.KeywordName
        self._name(node, node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _DTYPES and self.ctx.qualname(node) == f"torch.cuda.{node.attr}":
            from cuda2neuron.python import Unsure

            raise Unsure("a reference to a legacy CUDA type")

    def _name(self, node: object, name: str) -> None:
        if name not in _DTYPES:
            return
        qualified = self.ctx.qualname(node)
        if qualified is not None and (qualified == f"torch.cuda.{name}" or not qualified.startswith("torch")):
            from cuda2neuron.python import Unsure

            raise Unsure("a legacy CUDA type or an alias imported from another module")


def _segment(file, node: ast.AST) -> str:  # noqa: ANN001 - python.AstFile
    start, end = file.bounds(node)
    return file.text[start:end]
