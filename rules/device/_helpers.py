"""Helpers of the device family (CN1xx): where a "cuda" string is a *device*.

A "cuda" literal is only rewritten in a device position; everywhere else ("impl='cuda'",
log text, ``--cuda`` flags, ``USE_CUDA``) it is a word, not a device. The position of a string
is found by walking up ``context.ancestors`` through nodes that only *pass a value on*
(``a if c else b``, ``a or b``, tuple/list elements, ``"cuda:%d" % i``, ``"cuda:{}".format(i)``)
until a node that *uses* it: a call argument, a parameter default, an assignment, a dict value,
a comparison. Every step is O(1) per ancestor, and the walk only starts on strings that already
look like a CUDA device, so files pay nothing for it.
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import Sequence
import re
from dataclasses import dataclass

import libcst as cst

from cuda2neuron.core import Rule, Safety
from cuda2neuron.python import Truth, asks_cuda, truth, visit_syntax

from .._shared.args import arg_by_name, positional_args
from .._shared.names import is_device_word, terminal_name
from .._shared.round_trip import device_texts, function_round_trip
from .._shared.strings import fstring_text, string_value
from .._shared.target import NEURON, Imports, compared_type_expr, device_type_expr
from .._shared.values import value_user

__all__ = [
    "Use",
    "UseKind",
    "comparison_safety",
    "find_use",
    "is_bare_prefix",
    "is_cuda_device_string",
    "is_test_data",
    "looks_like_cuda_fstring",
    "ordinal_word",
    "retarget_fstring",
    "retarget_string",
    "says_device",
]

# "cuda", "cuda:1", and the templates of "cuda:%d" % i / "cuda:{}".format(i).
_DEVICE_RE = re.compile(r"^cuda(:(\d+|%[dis]|\{[^{}]*\}))?$")
# A bare "cuda:" is a prefix: meaningful only for startswith/replace on a device string.
_PREFIX = "cuda:"
# What a placeholder-free f-string may hold to be a device: "cuda" or "cuda:N".
_PLAIN_DEVICE_RE = re.compile(r"^cuda(:\d+)?$")

# Calls whose positional argument N is a device, by qualified name (keyword in the second slot).
_DEVICE_PARAMS: dict[str, tuple[int, str]] = {
    "torch.device": (0, "type"),
    "torch.Generator": (0, "device"),
    "torch.load": (1, "map_location"),
    "torch.jit.load": (1, "map_location"),
    "torch.set_default_device": (0, "device"),
    "torch.cuda.device": (0, "device"),
    "torch.neuron.device": (0, "device"),
    # A device mesh is built for a device type ("cuda" -> "neuron"; the accelerator's type).
    **{
        f"torch.distributed.{module}.{name}": (0, "device_type")
        for module in ("device_mesh", "tensor", "_tensor")
        for name in ("init_device_mesh", "DeviceMesh")
    },
    # torch.cuda.* calls that take a device, and their moved torch.neuron.* twins: the move
    # (CN201) changes the module, the device argument must follow (``get_device_properties(
    # "cuda")`` on torch.neuron would be asked for a CUDA device). Calls with no twin
    # (get_device_capability, mem_get_info: CN202) stay CUDA calls, and so do their arguments:
    # ``torch.cuda.get_device_capability("neuron")`` breaks the CUDA path it was kept for.
    **{
        f"torch.{module}.{name}": (index, "device")
        for module in ("cuda", "neuron")
        for name, index in (
            ("get_device_properties", 0),
            ("get_device_name", 0),
            ("synchronize", 0),
            ("set_device", 0),
            ("current_stream", 0),
            ("default_stream", 0),
            ("memory_stats", 0),
            ("memory_summary", 0),
            ("memory_allocated", 0),
            ("max_memory_allocated", 0),
            ("memory_reserved", 0),
            ("max_memory_reserved", 0),
            ("reset_peak_memory_stats", 0),
            ("get_rng_state", 0),
            ("set_rng_state", 1),
        )
    },
}
# Keywords that hold a device in any call.
# Keywords whose value is a device in any call; `device_map="cuda"` is how Hugging Face's
# from_pretrained places a whole model on one device.
_DEVICE_KEYWORDS = frozenset({"device", "map_location", "device_map"})
# String methods that test or strip a device name: device-selection helpers strip a "cuda:"
# prefix from user input (``spec.startswith("cuda:")``, ``spec.replace("cuda:", "")``).
_STRING_TESTS = frozenset({"startswith", "endswith", "removeprefix", "replace", "split", "partition", "find", "index"})
# unittest.TestCase's assertions that compare their first two arguments.
_TEST_ASSERTIONS = frozenset({"assertEqual", "assertNotEqual", "assertEquals", "assertNotEquals", "assertIn", "assertNotIn"})
# Calls owned by the AMP family (CN3xx): their device_type/device arguments are rewritten there.
_AMP_PREFIXES = ("torch.amp.", "torch.cuda.amp.", "torch.cpu.amp.", "torch.autocast")


# Names that usually hold a device index; not proof (``gpu`` may be a torch.device).
_ORDINAL_WORDS = frozenset({"rank", "gpu", "id", "idx", "index", "ordinal", "gpus"})


def ordinal_word(word: str) -> bool:
    """``rank``, ``local_rank``, ``gpu``, ``gpu_id``, ``device_id``: usually an index."""
    lowered = word.lower()
    if lowered in ("device_id", "device_idx", "device_index"):
        return True
    parts = lowered.strip("_").split("_")
    return (parts[-1] in _ORDINAL_WORDS or parts[0] == "gpu") and not is_device_word(word)


def says_device(node: cst.BaseExpression, rule: Rule | None = None) -> bool:
    """Is ``node`` an expression whose name says it holds a device (or a device type)?"""
    if isinstance(node, cst.Name):
        return is_device_word(node.value)
    if isinstance(node, cst.Attribute):
        if node.attr.value == "type":
            # x.device.type, torch.device(d).type
            value = node.value
            if isinstance(value, cst.Call) and rule is not None:
                return rule.qualname(value.func) == "torch.device"
            # parallel_devices[0].type: the type of an element of a collection of devices (a
            # bare `devices[0]` may hold anything, such as Caffe2's device names).
            if isinstance(value, cst.Subscript) and len(value.slice) == 1 and isinstance(value.slice[0].slice, cst.Index):
                if isinstance(value.slice[0].slice.value, (cst.Integer, cst.Name, cst.UnaryOperation)):
                    return says_device(value.value, rule)
            return says_device(value, rule)
        return is_device_word(node.attr.value)
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
        index = node.slice[0].slice
        if isinstance(index, cst.Index):
            key = string_value(index.value)
            return key is not None and is_device_word(key)
        return False
    if isinstance(node, cst.Call):
        func = node.func
        # str(device), device.lower(), str(x.device).lower()
        if isinstance(func, cst.Name) and func.value == "str" and len(node.args) == 1:
            return says_device(node.args[0].value, rule)
        if isinstance(func, cst.Attribute) and func.attr.value in ("lower", "strip") and not node.args:
            return says_device(func.value, rule)
        # getattr(device, "type", None): the attribute read defensively.
        if isinstance(func, cst.Name) and func.value == "getattr" and 2 <= len(node.args) <= 3:
            return string_value(node.args[1].value) == "type" and says_device(node.args[0].value, rule)
        # get_current_device(), accelerator.get_device(): a helper named for what it returns.
        if isinstance(func, cst.Name):
            return is_device_word(func.value)
        if isinstance(func, cst.Attribute):
            return is_device_word(func.attr.value)
    return False


class UseKind(enum.Enum):
    PLACEMENT = "placement"  # the value is a device: argument, default, assignment, dict value
    COMPARISON = "comparison"  # the value is tested against a device: ==, in, startswith
    # The value is bound to a name that does not say device (``arg = "cuda:0"``); it is a
    # device only if that name is later used in a device position (``torch.device(arg)``).
    BINDING = "binding"


@dataclass(frozen=True)
class Use:
    kind: UseKind
    # The node that consumes the value: the Comparison, the string-test Call, or the user node.
    user: cst.CSTNode
    # Ancestors above ``user`` (outermost first), for safety decisions on comparisons.
    above: tuple[cst.CSTNode, ...]
    # For a binding, the bound name; for a placement, "map_location" where torch.load restores
    # storages to the device, "map-key" for a map_location dict *key* (where a checkpoint was
    # saved, not where it goes), else "".
    what: str = ""


def find_use(rule: Rule, node: cst.BaseExpression) -> Use | None:
    """Where the device-looking ``node`` is used, if that is a device position; else None."""
    ancestors = rule.context.ancestors
    chosen = _chosen_when_available(rule, ancestors, node)
    if chosen is not None:
        return chosen
    found = value_user(ancestors, node, templates=True)
    if found is None:
        return None
    i, child = found
    anc = ancestors[i]
    above = tuple(ancestors[:i])
    if isinstance(anc, cst.Arg) and i >= 1 and isinstance(ancestors[i - 1], cst.Call):
        if _parametrized_device(rule, ancestors, i, node):
            return Use(UseKind.PLACEMENT, ancestors[i - 1], above[:-1])
        return _arg_use(rule, ancestors[i - 1], anc, above[:-1])
    if isinstance(anc, cst.Param):
        if child is anc.default and is_device_word(anc.name.value):
            return Use(UseKind.PLACEMENT, anc, above)
        return None
    if isinstance(anc, cst.Assign):
        if child is not anc.value:
            return None
        if any(says_device(t.target, rule) for t in anc.targets):
            return Use(UseKind.PLACEMENT, anc, above)
        if len(anc.targets) == 1 and isinstance(anc.targets[0].target, cst.Name):
            return Use(UseKind.BINDING, anc, above, what=anc.targets[0].target.value)
        return None
    if isinstance(anc, cst.AnnAssign):
        if child is anc.value and says_device(anc.target, rule):
            return Use(UseKind.PLACEMENT, anc, above)
        return None
    if isinstance(anc, cst.DictElement):
        return _dict_use(rule, anc, child, above)
    # for device in ["cpu", "cuda"]: / [f(d) for d in (...)]: each element is bound to the loop
    # variable, whose name says device.
    if isinstance(anc, (cst.For, cst.CompFor)):
        if child is anc.iter and says_device(anc.target, rule):
            return Use(UseKind.PLACEMENT, anc, above)
        return None
    # def get_device(): return "cuda": what a helper named for a device returns is one.
    if isinstance(anc, cst.Return):
        function = next((a for a in reversed(ancestors[:i]) if isinstance(a, (cst.FunctionDef, cst.Lambda))), None)
        if isinstance(function, cst.FunctionDef) and is_device_word(function.name.value):
            return Use(UseKind.PLACEMENT, anc, above)
        return None
    if isinstance(anc, cst.Comparison):
        if child is anc.left and len(anc.comparisons) == 1 and says_device(anc.comparisons[0].comparator, rule):
            return Use(UseKind.COMPARISON, anc, above)
        return None
    if isinstance(anc, cst.ComparisonTarget) and i >= 1:
        comparison = ancestors[i - 1]
        if isinstance(comparison, cst.Comparison) and len(comparison.comparisons) == 1:
            if says_device(comparison.left, rule):
                return Use(UseKind.COMPARISON, comparison, above[:-1])
        return None
    return None


# Tests that a device is there: the value a conditional picks when they pass is that device.
_AVAILABILITY = frozenset({"torch.cuda.is_available", "torch.neuron.is_available", "torch.accelerator.is_available"})


def _chosen_when_available(rule: Rule, ancestors: Sequence[cst.CSTNode], node: cst.CSTNode) -> Use | None:
    """``["cuda"] if torch.cuda.is_available() else []`` (xformers' test device list): the value
    picked when CUDA is there is the CUDA device, whatever it is assigned to. CN201 moves the
    test; the value must move with it, or a Neuron host would list "cuda"."""
    child: cst.CSTNode = node
    for i in range(len(ancestors) - 1, -1, -1):
        anc = ancestors[i]
        if isinstance(anc, (cst.Element, cst.List, cst.Tuple, cst.Set)):
            child = anc
            continue
        if isinstance(anc, cst.IfExp) and child is anc.body:
            test = anc.test
            if isinstance(test, cst.Call) and rule.qualname(test.func) in _AVAILABILITY:
                return Use(UseKind.PLACEMENT, anc, tuple(ancestors[:i]))
        return None
    return None


def _parametrized_device(rule: Rule, ancestors: Sequence[cst.CSTNode], i: int, node: cst.CSTNode) -> bool:
    """Is ``node`` a value that ``pytest.mark.parametrize`` binds to an argument named like a
    device? ``parametrize("device", ["cpu", "cuda"])``, ``parametrize("dtype,device",
    [(torch.half, "cuda")])`` and either inside ``pytest.param("cuda", marks=...)``: each value
    is what the test's ``device`` is, as ``for device in ["cpu", "cuda"]`` binds it.

    ``ancestors[i]`` is the argument ``value_user`` stopped at and ``ancestors[i - 1]`` its call."""
    call, arg = ancestors[i - 1], ancestors[i]
    assert isinstance(call, cst.Call) and isinstance(arg, cst.Arg)
    position: int | None = None  # the value's place in its row, when it is in a row
    if rule.qualname(call.func) == "pytest.param":
        if arg.keyword is not None or arg.star:
            return False  # marks=, id=
        position = positional_args(call).index(arg)
        # pytest.param(...) is itself a row (or the one value) of the parametrize list.
        found = value_user(ancestors[: i - 1], call)
        if found is None:
            return False
        j, _ = found
        if not (j >= 1 and isinstance(ancestors[j], cst.Arg) and isinstance(ancestors[j - 1], cst.Call)):
            return False
        chain = list(ancestors[j + 1 : i - 1])
        call, arg = ancestors[j - 1], ancestors[j]
    else:
        chain = list(ancestors[i + 1 :])
    if rule.qualname(call.func) != "pytest.mark.parametrize" or arg is not arg_by_name(call, "argvalues", 1):
        return False
    names_arg = arg_by_name(call, "argnames", 0)
    names = string_value(names_arg.value) if names_arg is not None else None
    if names is None:
        return False
    argnames = [n.strip() for n in names.split(",") if n.strip()]
    if len(argnames) == 1:
        return is_device_word(argnames[0])
    if position is None:
        # [(torch.half, "cuda"), ...]: the list, a row's Element, the row, the value's Element.
        path = [*chain, node]
        if len(path) < 4 or not isinstance(path[0], (cst.List, cst.Tuple)) or not isinstance(path[2], (cst.Tuple, cst.List)):
            return False
        row, element = path[2], path[3]
        if not isinstance(element, cst.Element) or element not in row.elements:
            return False
        position = row.elements.index(element)
    return position < len(argnames) and is_device_word(argnames[position])


def is_test_data(rule: Rule, node: cst.BaseExpression) -> bool:
    """Is the device string ``node`` data its test writes and asserts back
    (``parse_args(["--model_args", "device=cuda"])`` ... ``assert args.model_args == {"device": "cuda"}``)?
    The decision is ``_shared/round_trip``'s, shared with the residual pass; here only the
    enclosing test function is found (the nearest ``def``) and handed over as code."""
    value = string_value(node)
    held = device_texts(value) if value is not None else frozenset()
    if not held:
        return False
    function = next((a for a in reversed(rule.context.ancestors) if isinstance(a, cst.FunctionDef)), None)
    if function is None or not function.name.value.startswith("test"):
        return False
    return held <= function_round_trip(rule.context.code(function), rule.context.source)


def is_bare_prefix(node: cst.BaseExpression) -> bool:
    """The bare "cuda:" prefix: a device only inside string tests (startswith, replace...)."""
    return isinstance(node, cst.SimpleString) and string_value(node) == _PREFIX


def _arg_use(rule: Rule, call: cst.Call, arg: cst.Arg, above: tuple[cst.CSTNode, ...]) -> Use | None:
    func = call.func
    # device.startswith("cuda"), device.replace("cuda:", ""). The bare "cuda:" prefix is a
    # device prefix whatever the receiver is called (no selector or log text ends in "cuda:"),
    # so ``spec.startswith("cuda:")`` and ``spec[len("cuda:"):]`` change together.
    if isinstance(func, cst.Attribute) and func.attr.value in _STRING_TESTS and arg.keyword is None:
        if positional_args(call)[:1] == [arg] and (is_bare_prefix(arg.value) or says_device(func.value, rule)):
            return Use(UseKind.COMPARISON, call, above)
        return None
    if isinstance(func, cst.Name) and func.value == "len" and is_bare_prefix(arg.value) and len(call.args) == 1:
        return Use(UseKind.COMPARISON, call, above)
    # self.assertEqual(device.type, "cuda"), self.assertIn("cuda", str(x.device)): a TestCase's
    # assertion is the comparison `assert device.type == "cuda"` spelled as a call.
    if _is_test_assertion(func) and arg.keyword is None:
        pair = positional_args(call)[:2]
        if arg in pair and len(pair) == 2:
            other = pair[1] if pair[0] is arg else pair[0]
            if says_device(other.value, rule):
                return Use(UseKind.COMPARISON, call, above)
        return None
    qualified = rule.qualname(func)
    if qualified is not None and qualified.startswith(_AMP_PREFIXES):
        return None
    if arg.keyword is not None:
        kw = arg.keyword.value
        if kw == "map_location":
            return Use(UseKind.PLACEMENT, call, above, what="map_location")
        if kw in _DEVICE_KEYWORDS or (kw.endswith("_device") and kw != "output_device"):
            return Use(UseKind.PLACEMENT, call, above)
        if kw == "device_type" and (qualified is None or not qualified.startswith("torch")):
            # A project's own function with a device_type parameter: the device type derived from a
            # string (`device_type = "cuda" if ... else "cpu"`) is passed on through it.
            return Use(UseKind.PLACEMENT, call, above)
        if qualified is not None and qualified in _DEVICE_PARAMS and _DEVICE_PARAMS[qualified][1] == kw:
            return Use(UseKind.PLACEMENT, call, above)
        # The default and the choices of a --device option change together: a "neuron" default
        # with choices=["cuda", "cpu"] rejects `--device neuron` on the command line.
        if kw in ("default", "choices") and _is_device_option(call):
            return Use(UseKind.PLACEMENT, call, above)
        return None
    positions = positional_args(call)
    if arg not in positions:
        return None
    index = positions.index(arg)
    if _lookup_default(call, qualified, positions, index):
        return Use(UseKind.PLACEMENT, call, above)
    if qualified is None and isinstance(func, cst.Attribute) and func.attr.value == "to":
        return Use(UseKind.PLACEMENT, call, above) if index == 0 else None
    # devices.append("cuda:1"), devices.insert(0, f"cuda:{i}"): an element added to a collection
    # whose name says it holds devices is a device, like the elements of `devices = [...]`.
    if qualified is None and isinstance(func, cst.Attribute) and func.attr.value in _COLLECTION_ADDS:
        if index == _COLLECTION_ADDS[func.attr.value] and says_device(func.value, rule):
            return Use(UseKind.PLACEMENT, call, above)
        return None
    if qualified is not None and qualified in _DEVICE_PARAMS and _DEVICE_PARAMS[qualified][0] == index:
        return Use(UseKind.PLACEMENT, call, above, what=_DEVICE_PARAMS[qualified][1])
    # TorchDevice.set_session_device("cuda:0"): what a setter named for a device sets is one. Left
    # alone, InvokeAI's tests pinned the session to "cuda:0" and then expected the
    # `torch.device("neuron:0")` the port wrote beside it. torch's own setters are the torch.cuda
    # rules' business (their arguments move with the call).
    if index == 0 and not (qualified or "").startswith("torch.") and _DEVICE_SETTER.fullmatch(terminal_name(func) or "") is not None:
        return Use(UseKind.PLACEMENT, call, above)
    if qualified is None and _own_device_parameter(rule, func, index):
        return Use(UseKind.PLACEMENT, call, above)
    return None


def _own_device_parameter(rule: Rule, func: cst.BaseExpression, index: int) -> bool:
    """Does the module's own function take the positional argument at ``index`` as a parameter
    named for a device? mmengine's test moved its tensors with ``instances.to("neuron")`` while
    ``self.check_data_device(out, "cuda:0")`` kept checking them against CUDA (the helper does
    ``v.device == torch.device(device)``): a value moved, its reader left. The callee is a plain
    name bound by a ``def`` at the module's top level (an import resolves elsewhere: the caller
    passes ``qualified is None`` only) or ``self.<method>`` of the enclosing class."""
    if isinstance(func, cst.Name):
        name, body, skip = func.value, rule.context.module.body, 0
    elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        owner = next((a for a in reversed(rule.context.ancestors) if isinstance(a, cst.ClassDef)), None)
        if owner is None or not isinstance(owner.body, cst.IndentedBlock):
            return False
        name, body, skip = func.attr.value, owner.body.body, 1
    else:
        return False
    # The last definition wins, as at run time.
    found = [s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == name]
    if not found:
        return False
    params = [*found[-1].params.posonly_params, *found[-1].params.params]
    if skip and any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in found[-1].decorators):
        skip = 0
    params = params[skip:]
    return index < len(params) and is_device_word(params[index].name.value)


# set_device, set_session_device, set_default_device: a setter named for a device.
_DEVICE_SETTER = re.compile(r"set_(?:\w+_)?device")


# Lookups with a fallback, and the positions of their key and of the value used when the key is
# missing: `getattr(args, "device", "cuda")`, `cfg.get("device", "cuda")`,
# `os.environ.get("TORCH_DEVICE", "cuda")`, `os.getenv("DEVICE", "cuda")`, `kw.pop("device", "cuda")`.
_LOOKUP_METHODS = frozenset({"get", "pop", "setdefault"})
_LOOKUPS = {"getattr": (1, 2), "os.getenv": (0, 1), "os.environ.get": (0, 1)}


def _lookup_default(call: cst.Call, qualified: str | None, positions: list[cst.Arg], index: int) -> bool:
    """Is the argument at ``index`` the fallback of a lookup whose key says device? What the lookup
    returns is then the device (timm's `getattr(args, 'device', 'cuda')`), the fallback included."""
    func = call.func
    if isinstance(func, cst.Name) and func.value == "getattr":
        spots = _LOOKUPS["getattr"]
    elif qualified in _LOOKUPS:
        spots = _LOOKUPS[qualified]
    elif isinstance(func, cst.Attribute) and func.attr.value in _LOOKUP_METHODS:
        spots = (0, 1)
    else:
        return False
    key_at, default_at = spots
    if index != default_at or len(positions) <= key_at:
        return False
    key = string_value(positions[key_at].value)
    return key is not None and is_device_word(key)


# Methods that add one element to a list or set, and the position of that element.
_COLLECTION_ADDS = {"append": 0, "add": 0, "insert": 1}


def _is_test_assertion(func: cst.BaseExpression) -> bool:
    """``self.assertEqual``: a method of the test case itself (a TestCase method cannot be resolved
    to a qualified name through ``self``)."""
    return (
        isinstance(func, cst.Attribute)
        and func.attr.value in _TEST_ASSERTIONS
        and isinstance(func.value, cst.Name)
        and func.value.value == "self"
    )


def _is_device_option(call: cst.Call) -> bool:
    """``parser.add_argument("--device", default=...)`` (any of its option strings)."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "add_argument"):
        return False
    for a in positional_args(call):
        option = string_value(a.value)
        if option is not None and is_device_word(option.lstrip("-").replace("-", "_")):
            return True
    return False


def _dict_use(rule: Rule, element: cst.DictElement, child: cst.CSTNode, above: tuple[cst.CSTNode, ...]) -> Use | None:
    key = string_value(element.key)
    if child is element.value and key is not None and is_device_word(key):
        return Use(UseKind.PLACEMENT, element, above)
    # {"cuda:0": "cuda:1"} as map_location: values are where storages go (a device position);
    # keys are where the checkpoint was *saved* — a CUDA checkpoint stays keyed by "cuda:0".
    if len(above) >= 2 and isinstance(above[-1], cst.Dict):
        arg = above[-2]
        if isinstance(arg, cst.Arg) and len(above) >= 3 and isinstance(above[-3], cst.Call):
            call = above[-3]
            is_map = (arg.keyword is not None and arg.keyword.value == "map_location") or (
                arg.keyword is None
                and rule.qualname(call.func) in ("torch.load", "torch.jit.load")
                and positional_args(call).index(arg) == 1
            )
            if is_map:
                if child is element.value:
                    return Use(UseKind.PLACEMENT, element, above, what="map_location")
                return Use(UseKind.PLACEMENT, element, above, what="map-key")
    return None


def comparison_safety(use: Use, rule: Rule) -> Safety | None:
    """How safe it is to retarget a device test; None: leave it alone entirely.

    A test that selects *data* (``pin = device.type == "cuda"``, ``"cuda" if "cuda" in device
    else "cpu"``, ``t.to(rank) if not t.is_cuda else t``, an ``if`` whose branches only move
    tensors) must test for the new device: SAFE. A test that selects *code* is a guard written
    for CUDA:

    * branches that call only torch (``torch.cuda.synchronize()``, moved by CN2xx) or move data
      → UNSAFE: usually right on Neuron, but it changes which code runs;
    * branches that call anything else (``_FusedOp.apply``, a Triton kernel, flash-attn) →
      DISPLAY_ONLY: the guard protects a CUDA-only kernel whose fallback is what Neuron needs
      (a ``cpp_extension`` plugin, flash-attn); turning it to "neuron" would send Neuron tensors into the kernel.

    A test feeding ``fused=`` (``fused=device.type == "cuda"``, ``use_fused = ...``) is left
    alone: False on Neuron is right, there is no fused Neuron kernel (the ecosystem rules
    report ``fused=``).
    """
    child: cst.CSTNode = use.user
    library_guard = False
    for anc in reversed(use.above):
        if isinstance(anc, cst.BooleanOperation):
            other = anc.right if child is anc.left else anc.left
            library_guard = library_guard or (isinstance(anc.operator, cst.And) and _optional_library_check(other))
            child = anc
            continue
        if isinstance(anc, cst.UnaryOperation):
            child = anc
            continue
        if library_guard and isinstance(anc, (cst.If, cst.While, cst.IfExp)) and child is anc.test:
            # `if flash_attn_func is not None and q.is_cuda:` / `if HAS_TRITON and x.is_cuda:`
            # select a CUDA-only library's code path: False on Neuron picks the fallback.
            return Safety.DISPLAY_ONLY
        if isinstance(anc, cst.Arg) and anc.keyword is not None and "fused" in anc.keyword.value:
            return None
        if isinstance(anc, cst.Assign) and any(
            isinstance(t.target, cst.Name) and "fused" in t.target.value.lower() for t in anc.targets
        ):
            return None
        if isinstance(anc, (cst.If, cst.While)) and child is anc.test:
            return _guard_safety(rule, [anc.body, *([anc.orelse] if anc.orelse is not None else [])])
        if isinstance(anc, cst.IfExp) and child is anc.test:
            if _is_data(anc.body) and _is_data(anc.orelse):
                return Safety.DISPLAY_ONLY if _cuda_named(rule, [anc.body, anc.orelse]) else Safety.SAFE
            return _guard_safety(rule, [anc.body, anc.orelse])
        if isinstance(anc, cst.Tuple) and isinstance(child, cst.Element):
            child = anc  # `..., is_cuda, device = *q.shape, q.is_cuda, q.device`
            continue
        if isinstance(anc, cst.Element):
            child = anc
            continue
        if isinstance(anc, (cst.Assign, cst.AnnAssign)) and _flag_picks_cuda_named(rule, anc, use.above):
            # Whether the CUDA-named value exists on Neuron is for a person to decide.
            return Safety.DISPLAY_ONLY
        return Safety.SAFE
    return Safety.SAFE


class _CudaNamed(cst.CSTVisitor):
    """A value the project named for CUDA (``self.cuda_config``, ``cuda_stream``), not a
    ``torch.cuda`` name (those are ported or reported by their own rules)."""

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.found: str | None = None

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if self.found is None and "cuda" in node.attr.value.lower() and not (self.rule.qualname(node) or "").startswith("torch."):
            self.found = node.attr.value
        return self.found is None and not (self.rule.qualname(node) or "").startswith("torch.")

    def visit_Name(self, node: cst.Name) -> None:
        if self.found is None and "cuda" in node.value.lower() and self.rule.qualname(node) is None:
            self.found = node.value


def _cuda_named(rule: Rule, nodes: list[cst.CSTNode]) -> str | None:
    finder = _CudaNamed(rule)
    for node in nodes:
        visit_syntax(node, finder)
    return finder.found


class _FlagBranches(cst.CSTVisitor):
    """The branches taken when one of ``names`` is true (``cfg_a if is_cuda else cfg_b``)."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.taken: list[cst.CSTNode] = []

    def _tests(self, test: cst.BaseExpression) -> bool:
        return isinstance(test, cst.Name) and test.value in self.names

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if self._tests(node.test):
            self.taken.append(node.body)

    def visit_If(self, node: cst.If) -> None:
        if self._tests(node.test):
            self.taken.append(node.body)


def _flag_picks_cuda_named(rule: Rule, assign: cst.CSTNode, above: Sequence[cst.CSTNode]) -> bool:
    """``is_cuda = q.is_cuda`` ... ``config = self.cuda_config if is_cuda else self.cpu_config``:
    the flag picks a value the project set up for CUDA only (denoising-diffusion-pytorch fills
    ``self.cuda_config`` behind ``torch.cuda.is_available()``), which a Neuron answer would pick
    on Trainium too. Such a test is not a plain data choice."""
    targets = assign.targets if isinstance(assign, cst.Assign) else [assign]
    names: set[str] = set()
    for t in targets:
        target = t.target
        elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else [target]
        for e in elements:
            value = getattr(e, "value", e)
            if isinstance(value, cst.Name):
                names.add(value.value)
    if not names:
        return False
    scope = next((a for a in reversed(above) if isinstance(a, cst.FunctionDef)), None)
    if scope is None:
        return False
    branches = _FlagBranches(names)
    visit_syntax(scope, branches)
    return bool(branches.taken) and _cuda_named(rule, branches.taken) is not None


def _optional_library_check(node: cst.BaseExpression) -> bool:
    """``flash_attn_func is not None``, ``HAS_TRITON``, ``xformers_available``: a test that an
    optional (CUDA-only) library was importable. The device model's package flags count too
    (``HAVE_TRITON``, ``USE_APEX``, ``WITH_CUPY``: true on the CUDA host, false on Trainium, and
    no CUDA fact of their own), so that the rules and the sweep read one flag alike."""
    if _package_flag(node):
        return True
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        target = node.comparisons[0]
        return isinstance(target.operator, cst.IsNot) and isinstance(target.comparator, cst.Name) and target.comparator.value == "None"
    if isinstance(node, (cst.Name, cst.Attribute)):
        word = (node.value if isinstance(node, cst.Name) else node.attr.value).lower()
        return word.startswith("has_") or "available" in word
    return False


def _package_flag(node: cst.BaseExpression) -> bool:
    """Does the device model read ``node`` as a CUDA-only package's presence?"""
    return truth(node) == _PACKAGE_PRESENT and not asks_cuda(node)


_PACKAGE_PRESENT = Truth(True, False)


class _CallKinds(cst.CSTVisitor):
    """Sorts the calls under a guard: data moves, torch calls, anything else."""

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.torch = False
        self.other = False

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _DATA_METHODS:
            return
        qualified = self.rule.qualname(func)
        # `raise ValueError(f"Device should be CUDA, got {device}")`: a branch that only rejects
        # the input is a check, like `assert device.type == "cuda"`, not CUDA-only code.
        if isinstance(func, cst.Name) and qualified is None and func.value in _BUILTIN_EXCEPTIONS:
            return
        # `if device == "cuda" and not torch.cuda.is_available(): pytest.skip(...)`: a skip for a
        # device that is missing, which means the same for the target device.
        if qualified in _SKIPS:
            return
        if qualified is not None and qualified.startswith("torch.") and "cpp_extension" not in qualified:
            self.torch = True
        else:
            self.other = True


_SKIPS = frozenset({"pytest.skip", "pytest.xfail", "unittest.SkipTest", "sys.exit"})
_BUILTIN_EXCEPTIONS = frozenset(
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
)


def _guard_safety(rule: Rule, branches: list[cst.CSTNode]) -> Safety:
    kinds = _CallKinds(rule)
    for branch in branches:
        branch.visit(kinds)
    if kinds.other:
        return Safety.DISPLAY_ONLY
    if kinds.torch:
        return Safety.UNSAFE
    return Safety.SAFE


# Methods that only move or view data: ``t.to(rank) if not t.is_cuda else t`` picks data.
_DATA_METHODS = frozenset({"to", "cuda", "cpu", "pin_memory", "contiguous", "detach", "float", "half", "bfloat16"})


def _is_data(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Call):
        func = node.func
        return isinstance(func, cst.Attribute) and func.attr.value in _DATA_METHODS and _is_data(func.value)
    return isinstance(
        node, (cst.SimpleString, cst.FormattedString, cst.Integer, cst.Float, cst.Name, cst.Attribute, cst.ConcatenatedString)
    )


# -- building the replacement -------------------------------------------------------------------


def _quote_of(token: str) -> tuple[str, str, str]:
    """(prefix, quote, body) of a string token."""
    i = 0
    while token[i] not in "'\"":
        i += 1
    prefix, rest = token[:i], token[i:]
    quote = rest[:3] if rest[:3] in ('"""', "'''") else rest[0]
    return prefix, quote, rest[len(quote) : -len(quote)]


def is_cuda_device_string(node: cst.SimpleString) -> bool:
    """``"cuda"``, ``"cuda:1"``, ``"cuda:%d"``: a string ``retarget_string`` would port."""
    value = string_value(node)
    return value is not None and (value == _PREFIX or _DEVICE_RE.match(value) is not None)


def retarget_string(
    rule: Rule, node: cst.SimpleString, compared: bool = False
) -> tuple[cst.BaseExpression, Imports] | None:
    """``"cuda..."`` → ``"neuron..."``, or the accelerator's type for ``--target accelerator``
    (``compared``: the form for a comparison, see ``compared_type_expr``)."""
    value = string_value(node)
    if value is None or not (value == _PREFIX or _DEVICE_RE.match(value)):
        return None
    rest = value[len("cuda") :]
    prefix, quote, body = _quote_of(node.value)
    if not body.startswith("cuda"):
        return None  # escapes in the literal: leave it alone rather than guess
    if rule.context.settings.target == NEURON:
        return node.with_changes(value=f"{prefix}{quote}neuron{body[4:]}{quote}"), ()
    q = '"' if quote in ('"', '"""') else "'"
    other = "'" if q == '"' else '"'
    # Inside the f-string built below for "cuda:1", the comparison form's literals take the other quote.
    built = compared_type_expr(rule, other if rest else q) if compared else device_type_expr(rule)
    if built is None:
        return None
    type_expr, imports = built
    if not rest:
        return type_expr, imports
    # f"{acc.type}:1" — and "cuda:%d" % i / "cuda:{}".format(i) keep their shape: the f-string
    # is evaluated first and yields the old template (braces doubled so .format still sees them).
    text = rest.replace("{", "{{").replace("}", "}}")
    fstring = cst.FormattedString(
        parts=[cst.FormattedStringExpression(expression=type_expr), cst.FormattedStringText(text)],
        start=f"f{q}",
        end=q,
    )
    return fstring, imports


def retarget_fstring(
    rule: Rule, node: cst.FormattedString, compared: bool = False
) -> tuple[cst.BaseExpression, Imports] | None:
    """``f"cuda:{rank}"`` → ``f"neuron:{rank}"`` (or the accelerator's type); an f-string with
    no placeholder (``f"cuda"``, ``f"cuda:0"``) is a plain device string in f-string clothes."""
    parts = node.parts
    text = fstring_text(node)
    if text is not None:
        if not _PLAIN_DEVICE_RE.match(text):
            return None
        rest = text[len("cuda") :]
        if rule.context.settings.target == NEURON:
            return node.with_changes(parts=[cst.FormattedStringText("neuron" + rest)]), ()
        inner = "'" if '"' in node.start else '"'
        built = compared_type_expr(rule, inner if rest else '"') if compared else device_type_expr(rule)
        if built is None:
            return None
        type_expr, imports = built
        if not rest:
            return type_expr, imports
        return node.with_changes(parts=[cst.FormattedStringExpression(expression=type_expr), cst.FormattedStringText(rest)]), imports
    if not (
        len(parts) == 2
        and isinstance(parts[0], cst.FormattedStringText)
        and parts[0].value == _PREFIX
        and isinstance(parts[1], cst.FormattedStringExpression)
    ):
        return None
    if rule.context.settings.target == NEURON:
        return node.with_changes(parts=[cst.FormattedStringText("neuron:"), parts[1]]), ()
    inner_quote = "'" if '"' in node.start else '"'
    built = compared_type_expr(rule, inner_quote) if compared else device_type_expr(rule)
    if built is None:
        return None
    type_expr, imports = built
    new_parts = [cst.FormattedStringExpression(expression=type_expr), cst.FormattedStringText(":"), parts[1]]
    return node.with_changes(parts=new_parts), imports


def looks_like_cuda_fstring(node: cst.FormattedString) -> bool:
    first = node.parts[0] if node.parts else None
    if isinstance(first, cst.FormattedStringText) and first.value == _PREFIX:
        return True
    text = fstring_text(node)
    return text is not None and _PLAIN_DEVICE_RE.match(text) is not None
