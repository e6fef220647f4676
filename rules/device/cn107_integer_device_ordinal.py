"""CN107: integer device ordinals (``.to(local_rank)``, ``device=rank``)."""

from __future__ import annotations

import ast
import re
from functools import lru_cache

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Safety, Settings

from .._shared.args import arg_by_name, positional_args
from .._shared.consumers import device_test_form, kernel_test, library_callee, takes_torch_device
from .._shared.strings import string_value
from .._shared.target import device_expr
from ._helpers import ordinal_word

__all__ = ["IntegerDeviceOrdinal"]

# Calls that return a device index (an int).
_INT_CALLS = frozenset(
    {
        "int",
        "len",
        "torch.distributed.get_rank",
        "torch.distributed.get_local_rank",
        "torch.distributed.get_node_local_rank",
        "torch.cuda.current_device",
        "torch.cuda.device_count",
        "torch.neuron.current_device",
        "torch.neuron.device_count",
        "torch.accelerator.current_device_index",
        "torch.accelerator.current_device_idx",
        "torch.accelerator.device_count",
    }
)
_INT_CALL_NAMES = frozenset(q.rsplit(".", 1)[-1] for q in _INT_CALLS)
# Calls that return the *current* device index: "neuron" with no index means the same.
_CURRENT = frozenset({"torch.cuda.current_device", "torch.neuron.current_device"})
_INT_OPS = (cst.Modulo, cst.FloorDivide, cst.Add, cst.Subtract, cst.Multiply)
# Calls whose device= takes an index on the target too (moved by CN2xx, same signature).
_INDEX_APIS = ("torch.cuda.", "torch.neuron.", "torch.accelerator.", "torch.amp.", "torch.cuda.amp.", "torch.autocast")


_hint_word = ordinal_word


def _ordinal_hint(node: cst.BaseExpression) -> bool:
    """A name or attribute whose (last) word hints at an index: ``rank``, ``args.gpu_id``."""
    word = node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute) else ""
    return bool(word) and _hint_word(word)


# -- the wake test: what the file's text must show for the rule to be able to fire ------------
# The rule looks at two places: the device argument of ``.to(...)`` and ``device=`` of any call.
# It reports there only (1) an integer literal, or arithmetic starting with one; (2) a call of
# int/len/one of _INT_CALLS (or of an alias of current_device); (3) a name, ``self.X`` or
# ``args.X`` proven to hold an int, alone or starting arithmetic; (4) a name or attribute whose
# last word hints at an index. Each shows in the argument's text: how it starts (1-3) or how
# it ends (4). A name can only be proven an int by an assignment, an ``int`` annotation or (for
# ``args.X``) an argparse ``type=int`` in the same file, so those are looked for too, loosely:
# any doubt wakes the rule.
_ID = rb"[A-Za-z_\x80-\xff][\w\x80-\xff]*"
_CHAIN = rb"%s(?:[ \t\\]*\.[ \t\\]*%s)*" % (_ID, _ID)
# An integer literal (not a float: ``1.0``, ``1e3`` and ``2j`` are no index).
_INTEGER = rb"(?:0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|[0-9][0-9_]*)(?![.\w])"
# Where a device argument starts: after ``.to(`` (its first argument, or a keyword), or after
# ``device=`` that follows ``(`` or ``,`` (a keyword argument, not an assignment).
_TO = re.compile(rb"\.to\(")
_DEVICE_KEYWORD = re.compile(rb"device[ \t\\]*=(?!=)")
# An argument's head: opening brackets, stars and blanks skipped, then a digit or a dotted chain
# (and whether it is called).
_HEAD = re.compile(rb"[\s(*\\]*(?:(?P<digit>%s)|(?P<chain>%s)(?P<call>[\s\\]*\()?)" % (_INTEGER, _CHAIN))
# What ends an argument (outside brackets and strings): a comma or a closing bracket.
_ARG_TOKEN = re.compile(rb"""[rRbBuUfF]{0,2}(?:"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')|[()\[\]{},;]""")
_TAIL = re.compile(rb"[\w\x80-\xff]+")
_LONGEST_ARG = 2000  # bytes; an argument not closed by then wakes the rule
# `type=int` (a whole word `type`: the byte before it is read back by hand, since a pattern that
# starts with ``\b`` makes the engine try every byte of the file).
_INT_OPTION = re.compile(rb"type[ \t]*=[ \t]*int\b")
_CURRENT_NAMES = tuple(sorted({q.rsplit(".", 1)[-1].encode() for q in _CURRENT}))
_ALIAS = re.compile(rb"\b(?:%s)[ \t]+as[ \t]+(%s)" % (b"|".join(_CURRENT_NAMES), _ID))
_CONSTANTS = frozenset({"None", "True", "False"})
_WORD_BYTE = re.compile(rb"[\w.\x80-\xff]")
_WORD_BYTE_ONLY = re.compile(rb"\w")  # what ``\b`` reads as a word byte
_QUOTE_BYTES = frozenset(b"\"'")


@lru_cache(maxsize=4096)
def _binding(name: str) -> re.Pattern[bytes]:
    """``name = v``, ``name: T = v``, ``name := v``, ``f(name=v)`` (loosely), or ``name: int``
    (an annotation or a parameter); ``self.X`` as ``self . X`` too."""
    spelled = rb"[ \t]*\.[ \t]*".join(re.escape(p.encode()) for p in name.split("."))
    # An annotation holds no ":" (so ``a: T, b: int = 0`` does not bind ``a`` to 0).
    return re.compile(spelled + rb"[ \t]*(?::[ \t]*(?P<annotation>int\b)|(?::[^=\n:;()]*)?=(?!=))")


@lru_cache(maxsize=4096)
def _option(attr: str) -> re.Pattern[bytes]:
    """The name of the argparse option that ``args.<attr>`` reads, before a closing quote
    (``--local-rank"``, ``dest="local_rank"``, a positional ``"gpu"``): ``_names_option`` reads
    the dashes and the opening quote before it back by hand. The pattern starts with the name,
    a literal the engine skips to; one that starts with the quote tried every quote of the file."""
    spelled = rb"[-_]".join(re.escape(p.encode()) for p in attr.split("_"))
    return re.compile(spelled + rb"[\"']")


def _names_option(code: bytes, attr: str) -> bool:
    """Does a string of ``code`` name the option ``args.<attr>`` reads (a quote, dashes, the name, a quote)?"""
    for m in _option(attr).finditer(code):
        i = m.start() - 1
        while i >= 0 and code[i] == 0x2D:  # "-"
            i -= 1
        if i >= 0 and code[i] in _QUOTE_BYTES:
            return True
    return False


def _int_option(code: bytes) -> bool:
    """``type=int`` with ``type`` a whole word."""
    return any(m.start() == 0 or not _WORD_BYTE_ONLY.match(code, m.start() - 1) for m in _INT_OPTION.finditer(code))


def _keyword_at(code: bytes, i: int) -> bool:
    """Is ``device`` at ``i`` a keyword argument: a whole word after ``(`` or ``,``?"""
    before = code[max(0, i - 200) : i].rstrip(b" \t\r\n\\")
    return bool(before) and before[-1:] in (b"(", b",") and not _WORD_BYTE.match(code, i - 1)


def _parts(chain: bytes) -> list[str]:
    return [p.strip(b" \t\\").decode("utf-8", "replace") for p in chain.split(b".")]


class _Wake:
    """The text-level test, on one file's code (see the comment above)."""

    def __init__(self, code: bytes) -> None:
        self.code = code
        self.calls = set(_INT_CALL_NAMES)
        if any(n in code for n in _CURRENT_NAMES):
            self.calls.update(m.group(1).decode("utf-8", "replace") for m in _ALIAS.finditer(code))
        self._ints: dict[str, bool] = {}
        self._int_options: bool | None = None
        self._arguments: dict[bytes, bool] = {}  # an argument's text: may it be reported?

    def int_options(self) -> bool:
        """Does the file declare an argparse option ``type=int``?"""
        if self._int_options is None:
            self._int_options = _int_option(self.code)
        return self._int_options

    def is_int(self, name: str) -> bool:
        """May the file prove ``name`` (or ``self.X``) to hold an int? It is bound to an integer,
        to an int call or to another such name somewhere, or annotated ``int``."""
        known = self._ints.get(name)
        if known is None:
            # Reachability from ``name`` to an int binding: each name explored once per question.
            known = self._ints[name] = self._reaches_int(name, set())
        return known

    def _reaches_int(self, name: str, seen: set[str]) -> bool:
        if self._ints.get(name):
            return True
        if name.split(".", 1)[0] in _CONSTANTS:
            return False  # None, True, False: never bound
        seen.add(name)
        code = self.code
        for m in _binding(name).finditer(code):
            if m.start() > 0 and _WORD_BYTE.match(code, m.start() - 1):
                continue  # part of a longer name or an attribute of something else
            if m["annotation"]:
                break
            head = _HEAD.match(code, m.end())
            if head is None:
                continue
            if head["digit"] or (head["call"] and _parts(head["chain"])[-1] in self.calls):
                break
            if head["chain"] and not head["call"]:
                source = ".".join(_parts(head["chain"]))
                if source not in seen and self._reaches_int(source, seen):
                    break
        else:
            return False
        # Only a yes is kept for later questions: a no may hang on a name still being explored.
        self._ints[name] = True
        return True

    def argument(self, start: int) -> bool:
        """Can the argument that starts at ``start`` be reported?"""
        end = self._end(start)
        if end is None:
            return True
        text = self.code[start:end]
        known = self._arguments.get(text)
        if known is None:
            known = self._arguments[text] = self._may_report(text)
        return known

    def _may_report(self, text: bytes) -> bool:
        head = _HEAD.match(text)
        if head is not None:
            if head["digit"]:
                return True
            parts = _parts(head["chain"])
            if head["call"]:
                if parts[-1] in self.calls:
                    return True
            elif len(parts) == 1 or (len(parts) == 2 and parts[0] == "self"):
                if self.is_int(".".join(parts)):
                    return True
            elif len(parts) == 2 and self.int_options() and _names_option(self.code, parts[1]):
                return True
        # The last word, read backwards: ``args.gpu_id``, ``(local_rank)``.
        tail = _TAIL.match(text.rstrip(b" \t\r\n)\\")[::-1])
        return tail is not None and _hint_word(tail.group()[::-1].decode("utf-8", "replace"))

    def _end(self, start: int) -> int | None:
        depth = 0
        for m in _ARG_TOKEN.finditer(self.code, start, start + _LONGEST_ARG):
            tok = m.group()
            if tok in (b"(", b"[", b"{"):
                depth += 1
            elif tok in (b")", b"]", b"}", b",", b";"):
                if depth == 0:
                    return m.start()
                if tok != b"," and tok != b";":
                    depth -= 1
        return None


def _is_self_attr(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"


class IntegerDeviceOrdinal(Rule):
    """
    ## What it does
    Rewrites integer device indices passed as a device into an explicit device. For example
    ``.to(local_rank)``, ``.to(0)``, ``device=rank`` and ``device=torch.cuda.current_device()``
    become ``.to(f"neuron:{local_rank}")``, ``.to("neuron:0")``, ``device=f"neuron:{rank}"`` and
    ``device="neuron"``.

    An argument counts as an index when the file proves it: an integer literal; ``int(...)``;
    ``dist.get_rank()``, ``torch.cuda.current_device()``/``device_count()``; arithmetic
    (``rank % torch.cuda.device_count()``) of such values; a name assigned only from such values
    (``local_rank = int(os.environ["LOCAL_RANK"])``) or a parameter annotated ``int``; the same
    for ``self.X``; or ``args.X`` where ``X`` is an argparse option declared ``type=int``.

    ## Why is this bad?
    No "cuda" appears, yet the integer means a GPU (``.to(local_rank)``). PyTorch 2.5+ maps a bare index to
    *the current accelerator*, so on TorchNeuron it usually lands right — but only if the neuron
    backend is the registered accelerator, and never on older torch. An explicit device says
    what the port means and is what validation can check.

    ## Example
    ```python
    local_rank = int(os.environ["LOCAL_RANK"])
    model = model.to(local_rank)
    ```
    becomes
    ```python
    local_rank = int(os.environ["LOCAL_RANK"])
    model = model.to(f"neuron:{local_rank}")
    ```

    ## Fix safety
    ``.to(x)`` is overloaded: ``x`` may be a device, a dtype or another tensor, so an unknown
    ``x`` is never touched. Proven indices are fixed safely in ``.to`` and in ``device=`` of torch
    calls and of libraries that hand the device on to torch (``pipeline(device=local_rank)``);
    in ``device=`` of a project's own function the fix is unsafe (the function may expect the
    int). Names that merely *look* like an index (``rank``, ``gpu``, ``args.gpu_id``) are
    reported with an unsafe fix: ``gpu`` is sometimes already a ``torch.device``. Calls whose
    ``device=`` is an index on the target too (``torch.cuda.*`` moved to ``torch.neuron.*``) and
    DDP's ``device_ids``/``output_device`` (which TorchNeuron accepts) are left alone.
    """

    code = "CN107"
    name = "integer-device-ordinal"
    fixes = frozenset({Safety.SAFE, Safety.UNSAFE})
    triggers = (".to(", "device")
    emits = ("torch.device", "torch.accelerator.current_accelerator")
    VALID = (
        # Another function's `device` holds the index; this one's is a parameter holding a string.
        (
            "import torch\n\ndef free():\n    device = torch.cuda.current_device()\n    return device\n\n"
            "def load(model, device='cuda'):\n    model.to(device)\n"
        ),
        "x = x.to(dtype)\n",
        "x = x.to(other)\n",
        "x = x.to(torch.float16)\n",
        "x = x.to(device)\n",
        "model = DDP(model, device_ids=[local_rank], output_device=local_rank)\n",
        "import torch\nm = torch.cuda.memory_allocated(device=0)\n",
        "x = x.to('neuron:0')\n",
        "where = 'cpu'\nx = x.to(where)\n",
        # a name that looks like an index but is assigned a device
        "import torch\ngpu = torch.device('cuda', 0)\nx = x.to(gpu)\n",
        "local_rank = f'cuda:{r}'\nx = x.to(local_rank)\n",
    )
    INVALID = (
        Invalid("x = x.to(0)\n", 'x = x.to("neuron:0")\n'),
        # A module's index read in a function that binds no name of its own so.
        Invalid("GPU = 0\n\ndef load(model):\n    model.to(GPU)\n", 'GPU = 0\n\ndef load(model):\n    model.to(f"neuron:{GPU}")\n'),
        # A test about the integer form keeps it; a library's own index is reported, kept.
        Invalid("def test_init_communicator_with_device_int(client):\n    client.init_communicator(device=0)\n"),
        Invalid("from simlib import Simulator\nsim = Simulator(scene, device=0)\n"),
        Invalid(
            "from transformers import pipeline\npipe = pipeline('text-generation', device=0)\n",
            "from transformers import pipeline\npipe = pipeline('text-generation', device=\"neuron:0\")\n",
        ),
        Invalid(
            "import os\nlocal_rank = int(os.environ['LOCAL_RANK'])\nmodel.to(local_rank)\n",
            "import os\nlocal_rank = int(os.environ['LOCAL_RANK'])\nmodel.to(f\"neuron:{local_rank}\")\n",
        ),
        Invalid(
            "import torch\nx = torch.zeros(3, device=torch.cuda.current_device())\n",
            'import torch\nx = torch.zeros(3, device="neuron")\n',
        ),
        Invalid(
            "import torch\nimport torch.distributed as dist\ndevice = dist.get_rank() % torch.cuda.device_count()\nx = x.to(device)\n",
            "import torch\nimport torch.distributed as dist\ndevice = dist.get_rank() % torch.cuda.device_count()\n"
            'x = x.to(f"neuron:{device}")\n',
        ),
        Invalid(
            "parser.add_argument('--local-rank', type=int, default=0)\nargs = parser.parse_args()\n"
            "x = x.to(args.local_rank, non_blocking=True)\n",
            "parser.add_argument('--local-rank', type=int, default=0)\nargs = parser.parse_args()\n"
            'x = x.to(f"neuron:{args.local_rank}", non_blocking=True)\n',
        ),
        Invalid("x = x.to(device=3)\n", 'x = x.to(device="neuron:3")\n'),
        Invalid(
            "class T:\n    def __init__(self, model, gpu_id: int):\n        self.gpu_id = gpu_id\n"
            "        self.model = model.to(self.gpu_id)\n",
            "class T:\n    def __init__(self, model, gpu_id: int):\n        self.gpu_id = gpu_id\n"
            '        self.model = model.to(f"neuron:{self.gpu_id}")\n',
        ),
        Invalid("def run(rank):\n    x = x.to(rank)\n", 'def run(rank):\n    x = x.to(f"neuron:{rank}")\n', unsafe=True),
        Invalid("x = torch.ones(2, device=args.gpu)\n", 'x = torch.ones(2, device=f"neuron:{args.gpu}")\n', unsafe=True),
        Invalid("rank = int(r)\nbuild(device=rank)\n", 'rank = int(r)\nbuild(device=f"neuron:{rank}")\n', unsafe=True),
        # A proven index handed to a library that passes it on to torch moves with the model.
        Invalid(
            "import os\nfrom transformers import pipeline\nlocal_rank = int(os.environ['LOCAL_RANK'])\n"
            "model.to(local_rank)\npipe = pipeline('sentiment-analysis', model=model, device=local_rank)\n",
            "import os\nfrom transformers import pipeline\nlocal_rank = int(os.environ['LOCAL_RANK'])\n"
            'model.to(f"neuron:{local_rank}")\npipe = pipeline(\'sentiment-analysis\', model=model, device=f"neuron:{local_rank}")\n',
        ),
        Invalid(
            "import torch\nx = x.to(0)\n",
            'import torch\nx = x.to(torch.device((torch.accelerator.current_accelerator() or torch.get_default_device()).type, 0))\n',
            target="accelerator",
        ),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """A gate (``_may_report``): no finding where no device argument of the file could be
        an index as ``_check`` reads one; unsure elsewhere (libcst runs)."""
        return None if _may_report(file) else []

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        # ".to(" and "device" are in most files of a model library; the argument there rarely
        # looks like an index (bench/check_prefilter.py: no finding is lost on real trees).
        wake = _Wake(code)
        return any(wake.argument(m.end()) for m in _TO.finditer(code)) or any(
            wake.argument(m.end()) for m in _DEVICE_KEYWORD.finditer(code) if _keyword_at(code, m.start())
        )

    def __init__(self, context) -> None:
        super().__init__(context)
        # Names proven to hold an int so far in this file (visited in source order), and the
        # attribute names of argparse options declared type=int. Flow-insensitive on purpose:
        # a name assigned anything that is not provably an int is dropped for good.
        # Keyed by (scope, name): a function's names are its own. ColossalChat's inference
        # example binds `device = torch.cuda.current_device()` in one function and takes
        # `device="cuda"` as a parameter in another; read file-wide, `model.to(device)` in the
        # second became `model.to(f"neuron:{device}")`, and with the default "neuron:neuron".
        # The scope is the innermost `def` around the name (0: the module; `self.X`: the file).
        self._ints: set[tuple[int, str]] = set()
        self._dropped: set[tuple[int, str]] = set()
        self._bound: set[tuple[int, str]] = set()  # names a function binds (parameters, assignments)
        self._int_options: set[str] = set()
        # Names assigned a string or a torch.device: whatever they look like, not an index.
        self._not_index: set[tuple[int, str]] = set()

    # -- learning which names hold ints ----------------------------------------------------
    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._learn(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        ann = node.annotation.annotation
        if isinstance(ann, cst.Name) and ann.value == "int" and isinstance(node.target, cst.Name):
            self._learn(node.target, cst.Integer("0"))
        elif node.value is not None:
            self._learn(node.target, node.value)

    def visit_Param(self, node: cst.Param) -> None:
        ann = node.annotation.annotation if node.annotation is not None else None
        if isinstance(ann, cst.Name) and ann.value == "int":
            self._learn(node.name, cst.Integer("0"))
            return
        # Any other parameter is a binding of the function's own: not an int it can prove (a
        # string default says it is no index either).
        key = (self._scopes()[0], node.name.value)
        self._bound.add(key)
        self._dropped.add(key)
        if isinstance(node.default, (cst.SimpleString, cst.FormattedString)):
            self._not_index.add(key)

    def _scopes(self) -> list[int]:
        """The ids of the ``def``s around the visited node, innermost first, then 0 (the module)."""
        # The visited module holds every `def` while the rule runs, so an id names one scope.
        return [id(a) for a in reversed(self.context.ancestors) if isinstance(a, cst.FunctionDef)] + [0]

    def _key(self, name: str) -> tuple[int, str]:
        """Where ``name`` is looked up: the innermost scope that binds it (``self.X``: the file)."""
        if name.startswith("self."):
            return 0, name
        scopes = self._scopes()
        return next(((s, name) for s in scopes if (s, name) in self._bound), (0, name))

    def _learn(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        # Plain names, and attributes of self (``self.local_rank = int(os.environ[...])``).
        if isinstance(target, cst.Name):
            name = target.value
        elif _is_self_attr(target):
            name = f"self.{target.attr.value}"  # type: ignore[attr-defined]
        else:
            return
        key = (0, name) if name.startswith("self.") else (self._scopes()[0], name)
        self._bound.add(key)
        if key in self._dropped:
            return
        if isinstance(value, (cst.SimpleString, cst.FormattedString)) or (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value == "device"
            and self.qualname(value.func) == "torch.device"
        ):
            self._not_index.add(key)
        if self._is_int(value):
            self._ints.add(key)
        else:
            self._ints.discard(key)
            self._dropped.add(key)

    def _is_int(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Integer):
            return True
        if isinstance(node, cst.Name):
            return self._key(node.value) in self._ints
        if isinstance(node, cst.Attribute):
            if _is_self_attr(node):
                return (0, f"self.{node.attr.value}") in self._ints
            return isinstance(node.value, cst.Name) and node.attr.value in self._int_options
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Name) and func.value in ("int", "len"):
                return self.qualname(func) is None  # the builtin, not an import
            # Cheap test on the last name before resolving (this runs for every assignment).
            last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            return last in _INT_CALL_NAMES and self.qualname(func) in _INT_CALLS
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _INT_OPS):
            return self._is_int(node.left) and self._is_int(node.right)
        return False

    # -- argparse options declared type=int ----------------------------------------------------
    def _learn_option(self, node: cst.Call) -> None:
        kind = arg_by_name(node, "type")
        if kind is None or not (isinstance(kind.value, cst.Name) and kind.value.value == "int"):
            return
        dest = arg_by_name(node, "dest")
        names = [string_value(dest.value)] if dest is not None else [string_value(a.value) for a in positional_args(node)]
        longs = [n for n in names if n and n.startswith("--")] or [n for n in names if n]
        if longs:
            self._int_options.add(longs[0].lstrip("-").replace("-", "_"))

    # -- device positions ---------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "add_argument":
            self._learn_option(node)
            return
        if isinstance(func, cst.Attribute) and func.attr.value == "to" and self.qualname(func) is None:
            arg = arg_by_name(node, "device", position=0)
            if arg is not None:
                self._check(node, arg, trusted=True)
            return
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "device":
                qualified = self.qualname(func)
                if qualified is not None and qualified.startswith(_INDEX_APIS):
                    return
                # A library that hands the device on to torch (transformers' `pipeline`) reads a
                # proven index as torch does. Left unsafe there while `.to(local_rank)` beside it
                # moved safely, the port put the model on Neuron and the pipeline's inputs on the
                # CPU (transformers maps an index to "cuda:N" only where CUDA exists).
                trusted = qualified is not None and (qualified.startswith("torch.") or takes_torch_device(qualified))
                self._check(node, arg, trusted=trusted)
                return

    def _kept_as_is(self, value: cst.BaseExpression, above: tuple[cst.CSTNode, ...]) -> str | None:
        """Why an index stays an index: the test is about that form, the test runs a CUDA kernel,
        or a library outside torch reads it itself. None: port it."""
        test = device_test_form(self)
        if test is not None:
            return (
                f"left as is: `{test}` tests the integer form of a device, which a string would no "
                "longer test. Keep the test for CUDA (skip it where no CUDA device exists), or add a "
                "neuron twin of it."
            )
        kernel = kernel_test(self)
        if kernel is not None:
            return f"left as is: the callee runs on NVIDIA GPUs only ({kernel}); port the call, then give it the target device."
        callee = library_callee(self, value, above)
        if callee is not None and not takes_torch_device(callee):
            return (
                f"left as is: `{callee}` reads the index itself (most libraries read an integer as a "
                "CUDA device); check what it does with it, and pass it a neuron device only if it "
                "hands the device on to torch."
            )
        return None

    def _check(self, call: cst.Call, arg: cst.Arg, *, trusted: bool) -> None:
        value = arg.value
        message = f"`{self.context.code(value)}` is an integer device index, which means a CUDA device"
        if isinstance(value, cst.Call) and self.qualname(value.func) in _CURRENT:
            built = device_expr(self)  # "neuron" without an index is the current device
            safety = Safety.SAFE
        elif self._is_int(value):
            built = device_expr(self, value)
            safety = Safety.SAFE if trusted or isinstance(value, cst.Integer) else Safety.UNSAFE
        elif (
            isinstance(value, (cst.Name, cst.Attribute))
            and _ordinal_hint(value)
            and not (isinstance(value, cst.Name) and self._key(value.value) in self._not_index)
        ):
            built = device_expr(self, value)
            safety = Safety.UNSAFE
        else:
            return
        guidance = f'pass a device: `f"neuron:{{{self.context.code(value)}}}"` if it is an index'
        # The visited node is the call; the finding names its argument's value.
        above = (*self.context.ancestors, call, arg)
        kept = self._kept_as_is(value, above)
        if kept is not None:
            self.report(value, message, guidance=kept, effort=Effort.LOW, ancestors=above)
            return
        if built is None:
            self.report(value, message, guidance=guidance, ancestors=above)
            return
        expr, imports = built
        self.report(
            value,
            message,
            replacement=expr,
            safety=safety,
            imports=imports,
            guidance="" if safety is Safety.SAFE else guidance + "; leave it if it already holds a device",
            effort=Effort.NONE if safety is Safety.SAFE else Effort.LOW,
            description="name the device explicitly",
            ancestors=above,
        )


# -- the gate on CPython's ast (``IntegerDeviceOrdinal.detect``) ------------------------------
_AST_INT_OPS = (ast.Mod, ast.FloorDiv, ast.Add, ast.Sub, ast.Mult)


def _may_report(file) -> bool:  # noqa: ANN001 - python.AstFile
    """Could ``_check`` report a device argument of ``file``? A superset of the visitor, read
    without scopes or order: a device argument (``.to``'s first, any call's ``device=``) that is
    an integer, int arithmetic, a call of ``int``/``len``/an ``_INT_CALLS`` name (or a name an
    import binds to one), a name or attribute whose word hints at an index, ``args.X`` in a file
    with an int option, or a name or ``self.X`` that some assignment, ``int`` annotation or
    parameter anywhere in the file could make an int (``_learn``, ``visit_Param``)."""
    calls: list[ast.Call] = []
    bindings: list[tuple[str, ast.expr | None]] = []  # (name, value); None: annotated int
    call_names = set(_INT_CALL_NAMES)
    for node in ast.walk(file.tree):
        if isinstance(node, ast.Call):
            calls.append(node)
        elif isinstance(node, ast.Assign):
            bindings += [(n, node.value) for t in node.targets if (n := _learned(t)) is not None]
        elif isinstance(node, ast.AnnAssign):
            name = _learned(node.target)
            if name is not None:
                if isinstance(node.annotation, ast.Name) and node.annotation.id == "int":
                    bindings.append((name, None))
                elif node.value is not None:
                    bindings.append((name, node.value))
        elif isinstance(node, ast.arg):
            if isinstance(node.annotation, ast.Name) and node.annotation.id == "int":
                bindings.append((node.arg, None))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            # ``from torch.cuda import current_device as cd``: resolved, ``cd()`` is one.
            call_names |= {a.asname for a in node.names if a.asname and a.name.rsplit(".", 1)[-1] in _INT_CALL_NAMES}
    options = _int_options(calls)
    ints: set[str] = set()
    while True:  # names that may hold an int, to a fixed point (``x = y`` after ``y = 0``)
        grown = {n for n, v in bindings if n not in ints and (v is None or _may_be_int(v, ints, call_names, options))}
        if not grown:
            break
        ints |= grown
    for call in calls:
        for value in _device_values(call):
            if _may_be_int(value, ints, call_names, options) or _ast_hint(value):
                return True
    return False


def _learned(target: ast.expr) -> str | None:
    """The key ``_learn`` keeps for an assignment target: a name, or ``self.X``."""
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        return f"self.{target.attr}"
    return None


def _device_values(call: ast.Call) -> list[ast.expr]:
    """The arguments ``visit_Call`` checks: ``.to``'s device (by keyword or first), the first
    ``device=`` of any call."""
    values = [k.value for k in call.keywords if k.arg == "device"][:1]
    if isinstance(call.func, ast.Attribute) and call.func.attr == "to" and not values and call.args:
        if not isinstance(call.args[0], ast.Starred):
            values.append(call.args[0])
    return values


def _int_options(calls: list[ast.Call]) -> frozenset[str] | None:
    """The attribute names ``_learn_option`` could learn from ``add_argument(..., type=int)``:
    every name written in such a call (not only the one it keeps); None (any) where one is
    not a plain string."""
    found: set[str] = set()
    for call in calls:
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument"):
            continue
        kinds = [k.value for k in call.keywords if k.arg == "type"]
        if not kinds or not (isinstance(kinds[0], ast.Name) and kinds[0].id == "int"):
            continue
        for value in [*call.args, *(k.value for k in call.keywords if k.arg == "dest")]:
            if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                return None
            found.add(value.value.lstrip("-").replace("-", "_"))
    return frozenset(found)


def _may_be_int(node: ast.expr, ints: set[str], call_names: set[str], options: frozenset[str] | None) -> bool:
    """``_is_int`` as a superset: no resolution, names read file-wide."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    if isinstance(node, ast.Name):
        return node.id in ints
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return f"self.{node.attr}" in ints
        return isinstance(node.value, ast.Name) and (options is None or node.attr in options)
    if isinstance(node, ast.Call):
        func = node.func
        last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        return last in call_names
    if isinstance(node, ast.BinOp) and isinstance(node.op, _AST_INT_OPS):
        return _may_be_int(node.left, ints, call_names, options) and _may_be_int(node.right, ints, call_names, options)
    return False


def _ast_hint(node: ast.expr) -> bool:
    word = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return bool(word) and _hint_word(word)
