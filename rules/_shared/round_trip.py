"""Device strings a test writes and then asserts back: test data, not a device.

lm-evaluation-harness's CLI tests build arguments with a device, parse them, and assert the
parsed value is that device::

    args = parser.parse_args(["run", "--model_args", "pretrained=gpt2,device=cuda"])
    assert args.model_args == {"pretrained": "gpt2", "device": "cuda"}

    ns = Namespace(device="cuda:1")
    assert EvaluatorConfig.from_cli(ns).device == "cuda:1"

The string round-trips through a parser or a constructor and is compared with itself: porting
one side breaks the test, porting both does nothing for Trainium (no tensor ever goes there).
A device text is such *test data* in a test function (``def test...``) when that function

* hands it to a parser (argparse's ``Namespace``, a parser's ``parse_args``), a serializer or
  a file it writes (the whole string, or the value of a ``key=value`` / ``key: value`` item
  inside a string), or to its module's own function whose parameter names an execution
  provider (``_make_ep_lm("cuda")``: ONNX Runtime's word), and
* compares it back in an assertion (``assert x == ...``, ``self.assertEqual(x, ...)``) against
  something that is not read off a torch device (not ``t.device.type``, not ``str(t.device)``),
* and never hands it to torch (``torch.zeros(3, device="cuda")``, ``x.to("cuda")``), nor asks
  ``torch.cuda`` anything (``if torch.cuda.is_available():``, a ``skipif`` on it): a test that
  sends a tensor to ``"cuda"``, or needs a CUDA device to run, is a device test, and stays
  reported.

One decision, on CPython's ``ast`` (no parser of ours), for every rule that reports device
strings: CN102 and CN103 (libcst, through ``cst_round_trip``), CN109's safety net, and the
residual pass CN902 and its detectors (``round_trip_strings``, positions in the module).
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache

from .ast_names import ast_dotted

__all__ = [
    "Params", "Qualify", "device_texts", "function_round_trip", "module_params", "module_qualifier", "round_trip_strings",
    "round_trip_texts",
]

# A dotted name as written in the module -> its qualified name (None: not an import's).
Qualify = Callable[[str], "str | None"]

_DEVICE = re.compile(r"cuda(?::\d+)?")
_PORTED = re.compile(r"\bneuron\b")
# `key=value` items of a `--model_args`-style list, and `key: value` lines of a YAML text.
_ITEM = re.compile(r"(?:^|[\s,;])[\w.-]+\s*(?:=|:[ \t]+)\s*['\"]?(cuda(?::\d+)?)['\"]?(?=$|[\s,;])", re.MULTILINE)
# unittest's assertions: the arguments are compared, not handed on.
_ASSERTIONS = re.compile(r"assert[A-Z]\w*|assert_\w+")
# Methods that put a tensor or a module on a device (the receiver cannot be resolved).
_PLACEMENTS = frozenset({"to", "cuda", "type"})
# What is read off a torch device: comparing against it is a device test.
_DEVICE_READS = frozenset({"type", "index"})
_LITERALS = (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set)


def device_texts(value: str) -> frozenset[str]:
    """The CUDA device texts a string holds: the whole string (``"cuda:1"``), or the values of
    its ``key=value`` / ``key: value`` items (``"pretrained=gpt2,device=cuda"``)."""
    if _DEVICE.fullmatch(value):
        return frozenset({value})
    if "cuda" not in value:
        return frozenset()
    return frozenset(match.group(1) for match in _ITEM.finditer(value))


def module_qualifier(tree: ast.Module) -> Qualify:
    """Qualify the dotted names of ``tree`` through its imports (``th.zeros`` -> ``torch.zeros``)."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    bound[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def qualify(dotted: str) -> str | None:
        head, _, rest = dotted.partition(".")
        found = bound.get(head)
        if found is None:
            return None
        return f"{found}.{rest}" if rest else found

    return qualify


def _strings(node: ast.AST) -> Iterator[ast.Constant]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub


def _texts(nodes: Iterator[ast.Constant], ported: bool = False) -> set[str]:
    """Device texts of ``nodes``; with ``ported``, ``"neuron:1"`` read as the ``"cuda:1"`` it was."""
    if not ported:
        return {text for node in nodes for text in device_texts(node.value)}
    return {text for node in nodes for text in device_texts(_PORTED.sub("cuda", node.value))}


def _is_assertion(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return _ASSERTIONS.fullmatch(name) is not None


def _to_torch(call: ast.Call, qualify: Qualify) -> bool:
    func = call.func
    dotted = ast_dotted(func)
    qualified = qualify(dotted) if dotted is not None else None
    if qualified is not None and qualified.split(".")[0] == "torch":
        return True
    return isinstance(func, ast.Attribute) and func.attr in _PLACEMENTS


def _asks_cuda(call: ast.Call, qualify: Qualify) -> bool:
    """A call of ``torch.cuda`` (``torch.cuda.is_available()``, ``device_count()``), or of the
    ``torch.neuron`` the port moved it to (the answer holds across the fixed point)."""
    dotted = ast_dotted(call.func)
    qualified = qualify(dotted) if dotted is not None else None
    return qualified is not None and qualified.startswith(("torch.cuda.", "torch.neuron."))


def _reads_device(node: ast.expr) -> bool:
    """``t.device.type``, ``str(t.device)``, ``t.get_device()``: a value read off torch, not data
    the test built (a Name, an attribute or item of a parsed config)."""
    if isinstance(node, ast.Attribute):
        return node.attr in _DEVICE_READS
    return isinstance(node, ast.Call)


def _root(node: ast.expr) -> str | None:
    """The name a compared value hangs off (``args`` of ``args.model_args["device"]``,
    ``Config`` of ``Config.from_cli(ns).device``)."""
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


_Compared = dict[str, set[str | None]]  # device text -> the roots of what it is compared with


def _add(found: _Compared, side: ast.expr, other: ast.expr) -> None:
    for text in _texts(_strings(side)):
        found.setdefault(text, set()).add(_root(other))


def _compared(test: ast.expr, found: _Compared) -> None:
    """The literals an assertion compares with something not read off a device, by device text."""
    for sub in ast.walk(test):
        if isinstance(sub, ast.Compare) and len(sub.ops) == 1:
            left, right = sub.left, sub.comparators[0]
            for side, other in ((left, right), (right, left)):
                if isinstance(side, _LITERALS) and not _reads_device(other):
                    _add(found, side, other)


def _assertion_call(call: ast.Call, found: _Compared) -> None:
    values = list(call.args)
    for i, value in enumerate(values):
        others = values[:i] + values[i + 1 :]
        if isinstance(value, _LITERALS) and others and not any(_reads_device(o) for o in others):
            for other in others:
                _add(found, value, other)


def _names(node: ast.AST) -> set[str]:
    return {sub.id for sub in ast.walk(node) if isinstance(sub, ast.Name)}


# What takes a text to parse or to store, by qualified name: argparse's Namespace and parsers,
# the serializers of config files. A call of the code under test is none: unsloth's studio
# tests hand "cuda" to the functions they test (`_smoke_probe(TQ_INT8, "cuda")`) and fake CUDA
# runtimes, which the project counts as device code.
_PARSERS = ("argparse.",)
_SERIALIZERS = frozenset({"json.dump", "json.dumps", "yaml.dump", "yaml.safe_dump", "toml.dump", "toml.dumps", "tomli_w.dump"})
_PARSE_METHODS = frozenset({"parse_args", "parse_known_args", "parse_intermixed_args"})
# A text written to a file the code under test then reads (`tmp_path / "c.yaml"`: no resolvable receiver).
_FILE_WRITES = frozenset({"write_text", "write"})

Params = Mapping[str, tuple[str, ...]]  # a module's functions -> their parameter names, in order


def module_params(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """The parameters of the functions ``tree`` defines at its top level."""
    return {
        node.name: tuple(a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs))
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def _bound_calls(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.Call]:
    """Names ``function`` binds once, to a call (``parser = argparse.ArgumentParser()``)."""
    seen: dict[str, list[ast.expr]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            seen.setdefault(node.targets[0].id, []).append(node.value)
    return {name: values[0] for name, values in seen.items() if len(values) == 1 and isinstance(values[0], ast.Call)}


def _written(call: ast.Call, qualify: Qualify, bound: dict[str, ast.Call], params: Params) -> set[str]:
    """Device texts ``call`` takes to parse or to store: a parser's or a serializer's argument,
    a file's text, or an argument of the module's own function whose parameter names an ONNX
    Runtime execution provider (lm-evaluation-harness's ``_make_ep_lm("cuda")``: another
    runtime's device word, by the parameter that receives it)."""
    func = call.func
    dotted = ast_dotted(func)
    qualified = qualify(dotted) if dotted is not None else None
    takes = qualified is not None and (qualified.startswith(_PARSERS) or qualified in _SERIALIZERS)
    if isinstance(func, ast.Attribute):
        receiver = bound.get(func.value.id) if isinstance(func.value, ast.Name) else None
        made_by = ast_dotted(receiver.func) if receiver is not None else None
        made = qualify(made_by) if made_by is not None else None
        if func.attr in _PARSE_METHODS and made is not None and made.startswith(_PARSERS):
            takes = True
        if func.attr in _FILE_WRITES:
            takes = True
    arguments = [*call.args, *(k.value for k in call.keywords)]
    if takes:
        return {t for a in arguments for t in _texts(_strings(a))}
    if isinstance(func, ast.Name) and func.id in params:
        names = params[func.id]
        found: set[str] = set()
        for i, a in enumerate(call.args):
            if i < len(names) and "provider" in names[i]:
                found |= _texts(_strings(a))
        for k in call.keywords:
            if k.arg is not None and "provider" in k.arg:
                found |= _texts(_strings(k.value))
        return found
    return set()


def round_trip_texts(
    function: ast.FunctionDef | ast.AsyncFunctionDef, qualify: Qualify, params: Params | None = None
) -> frozenset[str]:
    """The device texts ``function`` (a test) hands to a parser, a serializer or a file it
    writes (``_written``) and compares back in an assertion, and neither it nor the value
    compared (``args`` of ``args.device``) reaches torch (``x.to(args.device)``). Empty for a
    function not named ``test...``."""
    if not function.name.startswith("test"):
        return frozenset()
    params = params or {}
    bound = _bound_calls(function)
    written: set[str] = set()
    compared: _Compared = {}
    to_torch: set[str] = set()
    torch_names: set[str] = set()  # names handed to torch: a parsed device placing a tensor
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and _asks_cuda(node, qualify):
            # `if torch.cuda.is_available():` around it, a skipif on the test: the test needs a
            # CUDA device, so the device it writes is one (lerobot's override test hands "cuda:0"
            # to a step that allocates on it), not data.
            return frozenset()
        if isinstance(node, ast.Assert):
            _compared(node.test, compared)
        elif isinstance(node, ast.Call):
            if _is_assertion(node):
                _assertion_call(node, compared)
                continue
            arguments = [*node.args, *(k.value for k in node.keywords)]
            if _to_torch(node, qualify):
                # A device already ported counts as its CUDA self: the answer must not change
                # once the torch side is rewritten (the engine re-checks the file after each fix).
                to_torch |= {t for a in arguments for t in _texts(_strings(a), ported=True)}
                torch_names |= {n for a in arguments for n in _names(a)}
                if isinstance(node.func, ast.Attribute):
                    torch_names |= _names(node.func.value)  # `model.to(...)`: the model is torch's
            else:
                written |= _written(node, qualify, bound, params)
    return frozenset(
        text for text, roots in compared.items()
        if text in written and text not in to_torch and None not in roots and not roots & torch_names
    )


def round_trip_strings(
    function: ast.FunctionDef | ast.AsyncFunctionDef, qualify: Qualify, params: Params | None = None
) -> frozenset[tuple[int, int]]:
    """(line, column) of the string literals of ``function`` whose every device text is test data
    (``round_trip_texts``): the positions ``ast`` gives, in the module the function was parsed in."""
    texts = round_trip_texts(function, qualify, params)
    if not texts:
        return frozenset()
    return frozenset(
        (node.lineno, node.col_offset)
        for node in _strings(function)
        if (held := device_texts(node.value)) and held <= texts
    )


@lru_cache(maxsize=8)
def _module_facts(source: str) -> tuple[Qualify, Params]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return (lambda dotted: None), {}
    return module_qualifier(tree), module_params(tree)


@lru_cache(maxsize=64)
def function_round_trip(code: str, source: str) -> frozenset[str]:
    """``round_trip_texts`` of one function given as its source text (a libcst node's code), its
    names qualified through the imports of the module ``source``."""
    try:
        tree = ast.parse(textwrap.dedent(code))
    except (SyntaxError, ValueError):
        return frozenset()
    function = next((n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)), None)
    return frozenset() if function is None else round_trip_texts(function, *_module_facts(source))
