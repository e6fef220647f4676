"""CN109: a "cuda" device name no other rule ports or reports: the device family's safety net."""

from __future__ import annotations

import ast
import re

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Settings

from .._shared.consumers import receiving_call
from .._shared.kernels import ONNXRUNTIME_PACKAGES
from .._shared.names import terminal_name
from .._shared.nets import is_text
from .._shared.strings import string_value
from .._shared.values import value_user
from ._helpers import _DEVICE_RE, _STRING_TESTS, is_cuda_device_string, is_test_data, looks_like_cuda_fstring

__all__ = ["CudaDeviceNameLeft"]


_TEST_GUIDANCE = (
    'On Trainium this test is false. If the value is a device or a device type, compare it with '
    '"neuron" (a name that says device, such as `device_type`, lets migrate do it); if it names a '
    "CUDA implementation, backend or option, keep it and make sure the other path runs on Neuron."
)
_KEY_GUIDANCE = (
    'A lookup by the Neuron device misses this entry (expected values per device, a device\'s '
    'settings): if the table is read with the current device, add a "neuron" entry, with values '
    "measured on Neuron or those of the CPU entry."
)
_VALUE_GUIDANCE = (
    'If this value becomes a device (it reaches torch.device, .to() or a device= argument), write '
    '"neuron"; if it names a CUDA implementation or option, keep it and check what Trainium runs '
    "instead."
)


# A quoted "cuda" or "cuda:..." anywhere in the text (a literal, or a part of a concatenation).
_QUOTED_DEVICE = re.compile(r"""["']cuda(?::[^"'\r\n]*)?["']""")


class CudaDeviceNameLeft(Rule):
    """
    ## What it does
    Reports every ``"cuda"``, ``"cuda:N"`` or ``f"cuda:{i}"`` in code that no other rule ports
    or reports: a test on a value whose name does not say device
    (``str(value).startswith("cuda")``, ``accelerator in ("cuda", "gpu")``), a table keyed by
    the device (``{("cuda", 8): expected}``), and a device name returned, collected or passed
    where the tool cannot tell it is a device (``return "cuda"`` in ``def name()``,
    ``sampled_from(["cpu", "cuda"])``).

    It is the device family's safety net: CN102 and CN103 port device strings in the positions
    they recognise, and the other rules report the calls they own (``autocast("cuda")``); where
    any of them reports on the same statement, this rule says nothing.

    ## Why is this bad?
    On Trainium the device type is ``"neuron"``: a test against ``"cuda"`` is false, a table
    lookup by the device misses its row, and a ``"cuda"`` that becomes a device fails to
    allocate. Without this rule such a line is in no report, and "nothing reported" would not
    mean "nothing left" — the safe rewrites stay where the tool can prove a device.

    ## Example
    ```python
    if str(value).startswith("cuda"):
        node.copyAttributes(device_node)
    EXPECTED = {("cuda", 8): 0.31, ("cpu", None): 0.30}
    ```
    Both lines are reported with what to check; neither is rewritten.

    ## Fix safety
    Display only: whether the value is a device is what the tool could not tell. Each finding
    says which kind of use it is (a test, a table key, a value) and what to do with each answer.
    Not reported: a device table that already has a ``"neuron"`` entry, the keys of a
    ``map_location`` table (where a checkpoint was saved), the keys of a ``max_memory`` table
    (CN111 reports it), an entry that holds a version (``versions["cuda"] = torch.version.cuda``:
    the CUDA toolkit's, in an environment report), printed or logged values, docstrings,
    a ``"cuda"`` among words to look for in text (``["out of memory", "cuda", ...]``: a
    sibling is prose), and a device a test hands to the code under test and asserts back
    (``make_lm("cuda")`` ... ``assert cfg.appended == ["cuda"]``: the test's data, as CN102 reads it).
    """

    code = "CN109"
    name = "cuda-device-name-left"
    triggers = ("cuda",)
    net = True
    VALID = (
        'def f():\n    """Moves x to "cuda"."""\n',
        'print("cuda kernels are fast")\n',
        'name = "cudagraphs"\n',
        # a type listing the accepted values (litgpt's LLM.distribute)
        'from typing import Literal\n\ndef distribute(accelerator: Literal["cpu", "cuda", "auto"] = "auto"):\n    pass\n',
        # The table the port extended (CN402 adds the "neuron" row): the "cuda" row is for GPUs.
        'BACKENDS = {"cuda": "nccl", "neuron": "neuron", "cpu": "gloo"}\n',
        'x = "neuron:0"\n',
        'print(f"cuda:{rank}")\n',
        'logger.info("running on %s", "cuda")\n',
        'state = torch.load(path, map_location={"cuda:0": "cpu"})\n',
        # CN111 reports accelerate's per-GPU memory plan once, with what to do on Trainium.
        'm = AutoModel.from_pretrained("x", max_memory={"cuda:0": "20GiB"})\n',
        # an environment report: the entry names the CUDA toolkit by its version, not a device's row
        'import torch\nversions = {}\nversions["cuda"] = torch.version.cuda\n',
        'import torch\ninfo = {"torch": torch.__version__, "cuda": str(torch.version.cuda)}\n',
        # words to find in an error message, not devices
        'OOM_MARKERS = ["out of memory", "cuda", "cublas_status_alloc_failed"]\n',
        'retry = any(k in str(err) for k in ("CUDA error", "cuda", "NCCL"))\n',
        # ONNX Runtime GenAI's provider, by the call that receives it (CN622 reports it)
        'import onnxruntime_genai as og\n\ndef f(path):\n    config = og.Config(path)\n    config.append_provider("cuda")\n',
        # A provider name a test hands to the code under test and asserts back (an ONNX Runtime
        # backend's test in lm-evaluation-harness): the test's data.
        'def make_lm(execution_provider, options=None):\n    return LM(execution_provider, options)\n\n\n'
        'def test_named_provider():\n    cfg = FakeConfig()\n    make_lm("cuda", {"device_id": 0}).select(cfg)\n'
        '    assert cfg.appended == ["cuda"]\n    assert cfg.options == [("cuda", "device_id", "0")]\n',
    )
    INVALID = (
        # CLIP patches the device constants of a TorchScript archive that was traced on CUDA.
        Invalid('if str(get(node, "value")).startswith("cuda"):\n    node.copyAttributes(device_node)\n'),
        Invalid('ok = accelerator in ("cuda", "gpu")\n'),
        Invalid('if impl == "cuda":\n    run()\n'),
        Invalid('EXPECTED = {("cuda", 8): 0.31, ("cpu", None): 0.30}\n'),
        Invalid('def name():\n    return "cuda"\n'),
        Invalid('devices = st.sampled_from(["cpu", "cuda"])\n'),
        # Written and compared, but in a function that is not a test: no round trip to excuse.
        Invalid('def check(cfg):\n    make_lm("cuda").select(cfg)\n    assert cfg.appended == ["cuda"]\n'),
        # Handed to the code under test, not to a parser (unsloth's studio tests): a device value.
        Invalid('def test_probe():\n    assert tq.smoke_probe(INT8, "cuda") is False\n    assert (INT8, "cuda") not in tq.CACHE\n'),
        Invalid('same = where == f"cuda:{rank}"\n', target="accelerator"),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """The visitor's reports on ``ast`` (``_cn109_ast``), before the engine's net filter; no
        walk where no string of the file is a CUDA device name (``"cuda"``, ``"cuda:N"``), no
        f-string spells "cuda" and no bytes literal holds it (most files it wakes on say "cuda"
        only in ``torch.cuda`` or ``.cuda()``). A part of an implicit concatenation is a string
        of its own to libcst (``"cuda" "x"``), one value to ``ast``: the text is searched for
        such a quoted part too."""
        if not _may_name_cuda(file):
            return []
        from ._cn109_ast import CudaNameDetector

        return CudaNameDetector(cls, file, _texts).findings()

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if "cuda" in node.value and is_cuda_device_string(node):
            self._check(node)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        if looks_like_cuda_fstring(node):
            self._check(node)

    def _check(self, node: cst.BaseExpression) -> None:
        ancestors = self.context.ancestors
        if is_text(ancestors, node) or _among_words(ancestors, node) or _searched_in_error(ancestors):
            return
        found = value_user(ancestors, node, templates=True)
        kind, user = _use_of(ancestors, found, node)
        if kind is None or is_test_data(self, node) or self._onnxruntime_provider(node):
            return
        message, guidance = _texts(kind, self.context.code(user if kind == "test" else node))
        self.report(node, message, guidance=guidance, effort=Effort.LOW)


    def _onnxruntime_provider(self, node: cst.CSTNode) -> bool:
        """``config.append_provider("cuda")`` of ONNX Runtime GenAI: its provider's name, CN622's."""
        if "onnxruntime" not in self.context.source:
            return False
        callee = receiving_call(self, node)
        return callee is not None and callee.split(".")[0] in ONNXRUNTIME_PACKAGES


def _may_name_cuda(file) -> bool:  # noqa: ANN001 - python.AstFile
    if _QUOTED_DEVICE.search(file.text):
        return True
    for node in ast.walk(file.tree):
        if isinstance(node, ast.JoinedStr):
            if "cuda" in file.segment(node):
                return True
        elif isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, str) and "cuda" in value and _DEVICE_RE.match(value):
                return True
            if isinstance(value, bytes) and b"cuda" in value:
                return True
    return False


def _texts(kind: str, shown: str) -> tuple[str, str]:
    """The finding's message and guidance for a use of this ``kind``, ``shown`` being the code
    of the literal (or of the test on it)."""
    if kind == "test":
        return f'`{_line(shown)}` tests a value against "cuda" that cuda2neuron cannot tell is a device', _TEST_GUIDANCE
    if kind == "key":
        return f"a table keyed by the CUDA device (`{shown}`)", _KEY_GUIDANCE
    return f"`{shown}` is used as a value that cuda2neuron cannot tell is a device", _VALUE_GUIDANCE


def _among_words(ancestors, node: cst.CSTNode) -> bool:
    """``"cuda"`` in a list of words to look for in text, not of devices: a sibling is prose
    (``["out of memory", "cuda", "cublas_status_alloc_failed"]``, matched against an exception's
    message). Names beside it (``("cpu", "gpu", "cuda", "auto")``, ``["ref", "cuda"]``) may be
    devices or implementations, and stay reported."""
    if len(ancestors) < 2 or not isinstance(ancestors[-1], cst.Element):
        return False
    collection = ancestors[-2]
    if not isinstance(collection, (cst.List, cst.Tuple, cst.Set)):
        return False
    for element in collection.elements:
        if element is ancestors[-1]:
            continue
        value = string_value(element.value)
        if value is not None and " " in value.strip():
            return True
    return False


def _searched_in_error(ancestors) -> bool:
    """``"cuda"`` among words looked for in a caught exception's text: ``any(k in str(e).lower()
    for k in ["oom", "cuda"])`` under ``except ... as e`` (trl's tests skip on such errors)."""
    if len(ancestors) < 4:
        return False
    element, collection, comp_for, comp = ancestors[-1], ancestors[-2], ancestors[-3], ancestors[-4]
    if not (
        isinstance(element, cst.Element) and isinstance(collection, (cst.List, cst.Tuple, cst.Set))
        and isinstance(comp_for, cst.CompFor) and comp_for.iter is collection
        and isinstance(comp, (cst.GeneratorExp, cst.ListComp, cst.SetComp))
    ):
        return False
    test, target = comp.elt, comp_for.target
    if not (
        isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.In)
        and isinstance(test.left, cst.Name) and isinstance(target, cst.Name) and test.left.value == target.value
    ):
        return False
    caught = {
        h.name.name.value for h in ancestors
        if isinstance(h, cst.ExceptHandler) and h.name is not None and isinstance(h.name.name, cst.Name)
    }
    return bool(caught & _names_in(test.comparisons[0].comparator))


def _names_in(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.Name):
            found.add(n.value)
        stack.extend(n.children)
    return found


def _line(code: str) -> str:
    first = code.strip().splitlines()[0] if code.strip() else code
    return first if len(first) <= 80 else first[:77] + "..."


def _use_of(ancestors, found, node: cst.CSTNode) -> tuple[str | None, cst.CSTNode]:
    """("test" | "key" | "value", the node that uses the literal): how its statement uses it;
    (None, node) to stay silent."""
    if found is None:
        return "value", node
    i, child = found
    anc = ancestors[i]
    if isinstance(anc, cst.Comparison):
        return "test", anc
    if isinstance(anc, cst.ComparisonTarget):
        return "test", ancestors[i - 1]
    if isinstance(anc, cst.Arg) and i >= 1 and isinstance(ancestors[i - 1], cst.Call):
        call = ancestors[i - 1]
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in _STRING_TESTS and call.args[0] is anc:
            return "test", call
        return "value", node
    if isinstance(anc, cst.DictElement) and child is anc.key:
        dict_node = ancestors[i - 1] if i >= 1 else None
        if isinstance(dict_node, cst.Dict) and any(
            isinstance(e, cst.DictElement) and _names_neuron(e.key) for e in dict_node.elements
        ):
            return None, node  # the port extended this table
        holder = ancestors[i - 2] if i >= 2 else None
        if isinstance(holder, cst.Arg) and holder.keyword is not None and holder.keyword.value == "map_location":
            return None, node  # where a checkpoint was saved: right to keep (CN102 ports the values)
        if _max_memory(holder):
            return None, node  # accelerate's per-GPU memory plan: CN111 says what to do instead
        if _reads_version(anc.value):
            return None, node  # `{"cuda": torch.version.cuda}`: a versions report names the toolkit
        return "key", node
    if isinstance(anc, (cst.Index, cst.SubscriptElement)):
        subscript = next((a for a in reversed(ancestors[max(0, i - 2):i]) if isinstance(a, cst.Subscript)), None)
        if subscript is not None and terminal_name(subscript.value) == "Literal":
            # `accelerator: Literal["cpu", "cuda", "auto"]` (litgpt's LLM.distribute): a type that
            # lists accepted values selects none; the value passed is what CN102 & co. read.
            return None, node
        target = ancestors[i - 3] if i >= 4 and subscript is ancestors[i - 2] else None
        if isinstance(target, cst.AssignTarget) and isinstance(ancestors[i - 4], cst.Assign) and _reads_version(ancestors[i - 4].value):
            # `versions["cuda"] = torch.version.cuda`: an environment report's entry for the CUDA
            # toolkit (its version), not a device's row (h39u3 found it in a bug-report script).
            return None, node
        return "key", node
    return "value", node


def _reads_version(value: cst.BaseExpression) -> bool:
    """Does ``value`` read a version (``torch.version.cuda``, ``cudnn.version()``,
    ``str(get_cuda_version())``): some part of its dotted name, or its callee's, says "version"?"""
    if isinstance(value, cst.Call):
        if isinstance(value.func, cst.Name) and value.func.value == "str" and len(value.args) == 1 and value.args[0].keyword is None and not value.args[0].star:
            return _reads_version(value.args[0].value)
        value = value.func
    parts: list[str] = []
    while isinstance(value, cst.Attribute):
        parts.append(value.attr.value)
        value = value.value
    if isinstance(value, cst.Name):
        parts.append(value.value)
    return any("version" in p.lower() for p in parts)


def _max_memory(holder: cst.CSTNode | None) -> bool:
    """``max_memory={"cuda:0": ...}`` or ``max_memory = {"cuda:0": ...}``: a table CN111 reports, where a
    "neuron" entry (this rule's advice) would not help: accelerate plans memory for CUDA devices only."""
    if isinstance(holder, cst.Arg):
        return holder.keyword is not None and holder.keyword.value == "max_memory"
    if isinstance(holder, cst.Assign):
        return any(isinstance(t.target, cst.Name) and t.target.value.endswith("max_memory") for t in holder.targets)
    return False


def _names_neuron(key: cst.BaseExpression) -> bool:
    if isinstance(key, cst.SimpleString):
        value = string_value(key)
        return value is not None and value.startswith("neuron")
    if isinstance(key, cst.Tuple):
        return any(isinstance(e.value, cst.SimpleString) and _names_neuron(e.value) for e in key.elements)
    return False
