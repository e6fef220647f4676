"""CN623: a "triton" backend name no other rule reports: the Triton family's safety net."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Settings

from .._shared.names import call_qualname
from .._shared.nets import is_text
from .._shared.packages import probed_package
from .._shared.strings import string_value

__all__ = ["TritonBackendName"]

_NAMES = frozenset({"triton", "Triton", "TRITON"})
# Keywords whose string is a message for the person reading a failure (unsloth's MoE tests:
# `check_grads(ref, triton_impl, msg="triton")` labels which side differed), not a selector.
_MESSAGE_KEYWORDS = frozenset({"msg", "message", "err_msg"})
# Keywords whose string names a module or package (`warnings.filterwarnings(module="triton")`).
_MODULE_KEYWORDS = frozenset({"module", "package"})
# Calls that run a command: a list handed to them is an argument vector (`pip uninstall -y
# triton`), whose words name packages and flags, not the implementation a library call takes.
_COMMAND_RUNNERS = frozenset({
    "subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output", "subprocess.Popen",
})
_MESSAGE = '`"triton"` selects a Triton implementation'
_GUIDANCE = (
    "Triton does not run on Trainium: on the Trainium path pick the implementation written in "
    "PyTorch (often named \"torch\", \"naive\" or \"ref\"), or skip the case there "
    "(`pytest.mark.skipif`); an NKI kernel is the port of a Triton one."
)


class TritonBackendName(Rule):
    """
    ## What it does
    Reports the string ``"triton"`` where code uses it as a value and no other rule reports
    the statement: the backend of a kernel library's op (``conv(x, backend="triton")``), a test
    parametrized over implementations (``parametrize("backend", ["triton"])``), a test against
    the chosen implementation (``if impl == "triton":``). A membership test over several option
    names (``attn_impl in ("torch", "triton")``, ``kernel not in ("plugin", "triton")``) is not
    reported: it groups the names a branch or a validation accepts and picks none of them, so it
    launches nothing; the default or the comparison that does pick ``"triton"`` is reported.

    It is the Triton family's safety net: CN601 reports Triton kernels and their imports,
    CN617 the project's kernel modules; where either reports the statement, this rule says
    nothing.

    ## Why is this bad?
    The name picks a Triton implementation, which cannot run on Trainium; without a finding the
    port runs into it with nothing in the report.

    ## Example
    ```python
    @pytest.mark.parametrize("backend", ["triton"])
    def test_conv(backend):
        y = causal_conv1d(x, w, backend=backend)
    ```
    is reported: run the PyTorch implementation on Trainium, or skip the case there.

    ## Fix safety
    Display only: which implementation replaces it is the project's choice.
    """

    code = "CN623"
    name = "triton-backend-name"
    triggers = ("triton", "Triton", "TRITON")
    net = True
    VALID = (
        'print("triton")\n',
        'def f():\n    "triton"\n',
        'name = "tritonv2"\n',  # another word
        'log.info("using %s", "triton")\n',
        # a package probe: the string names the package (litgpt's constants.py)
        'from lightning_utilities.core.imports import RequirementCache\n_TRITON_AVAILABLE = RequirementCache("triton")\n',
        'import importlib.util\nhas_triton = importlib.util.find_spec("triton") is not None\n',
        'import pytest\ntriton = pytest.importorskip("triton")\n',
        # a failure message naming the side that differed (unsloth's MoE tests)
        'check_grads(ref, fused, msg="triton")\n',
        # a key of sys.modules names the package: a test hiding or stubbing it (unsloth's tests)
        'import sys\n\ndef test(monkeypatch):\n    monkeypatch.setitem(sys.modules, "triton", None)\n',
        'import sys\nsys.modules["triton"] = None\n',
        'import sys\nfrom unittest import mock\n\nwith mock.patch.dict(sys.modules, {"triton": None}):\n    pass\n',
        'import sys\nhas_triton = "triton" in sys.modules\n',
        'import sys, types\n\ndef test(monkeypatch):\n    monkeypatch.setitem(sys.modules, "triton", types.ModuleType("triton"))\n',
        # names of packages, not a choice of implementation (unsloth's installer, worker and tests)
        'import subprocess, sys\nsubprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "triton"])\n',
        '_RUNTIME_DEPS = ("einops", "packaging", "triton")\n',
        'fingerprint = {"torch": torch_version(), "triton": triton_version()}\n',
        'for key in ("torch", "triton"):\n    assert key in fingerprint\n',
        'import os\nos.environ["TRITON_CACHE_DIR"] = str(cache_root / "triton")\n',
        'import warnings\nwarnings.filterwarnings("ignore", module="triton")\n',
        # a membership test over option names picks none of them (InternVL's copied MPT attention:
        # the bias is built for either; the default `attn_impl="triton"` is what picks Triton)
        'if kernel not in ("plugin", "triton"):\n    raise ValueError(kernel)\n',
        'def attn_bias_shape(attn_impl):\n    if attn_impl in ["torch", "triton"]:\n        return (1, 1)\n',
        # the packages a log record comes from (open_clip's logger filter)
        'import logging\n\ndef quiet(logger):\n    if logger.name.startswith(("torch", "triton")):\n        logger.setLevel(logging.WARNING)\n',
    )
    INVALID = (
        Invalid('import pytest\n\n@pytest.mark.parametrize("backend", ["triton"])\ndef test(backend):\n    pass\n'),
        Invalid('y = conv(x, w, backend="triton")\n'),
        Invalid('if impl == "triton":\n    run()\n', target="accelerator"),
        # the comparison that picks Triton and then runs its kernel, and the default that picks it
        Invalid('if attn_impl == "flash":\n    fn = flash_fn\nelif attn_impl == "triton":\n    fn = triton_fn\n', target="accelerator"),
        Invalid('def attention(q, attn_impl: str = "triton"):\n    pass\n'),
        # one name tested with `in` is an equality; alternatives of one choice a call takes
        Invalid('if impl in ("triton",):\n    run_triton()\n'),
        Invalid('run_all(x, backends=["torch", "triton"])\n'),
        Invalid('impls = {"backend": "triton"}\n'),
    )

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if "riton" not in node.value and "RITON" not in node.value:
            return
        if string_value(node) not in _NAMES:
            return
        if is_text(self.context.ancestors, node) or probed_package(self, self.context.ancestors, node):
            return
        parent = next((a for a in reversed(self.context.ancestors) if a is not node), None)
        if isinstance(parent, cst.Arg) and parent.keyword is not None and (
            parent.keyword.value in _MESSAGE_KEYWORDS or parent.keyword.value in _MODULE_KEYWORDS
        ):
            return
        if self._module_key() or self._names_an_entry(node):
            return
        self.report(node, _MESSAGE, guidance=_GUIDANCE, effort=Effort.LOW)

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """The visitor's reports on ``ast`` (``_triton_name_ast``), before the engine's net filter."""
        if "riton" not in file.text and "RITON" not in file.text:
            return []  # the visitor's first test, on the raw text of each literal
        from ._triton_name_ast import TritonNameDetector

        texts = (_NAMES, _MESSAGE_KEYWORDS | _MODULE_KEYWORDS, _COMMAND_RUNNERS, _MESSAGE, _GUIDANCE, _OWN_NAMES)
        return TritonNameDetector(cls, file, texts).findings()

    def _names_an_entry(self, node: cst.SimpleString) -> bool:
        """Whether the string names an entry of data rather than the value of a choice: a dict's
        key (`{"triton": _triton_version()}`, a version fingerprint), a path's part
        (`cache / "triton"`), or an item of a list, tuple or set that no choice reads: a choice
        of implementations is a call's argument (`parametrize("backend", ["torch", "triton"])`,
        `choices=[...]`) or what `in` tests a value against (`impl in ("plugin", "triton")`);
        a dependency tuple (`("einops", "packaging", "triton")`), a loop over a fingerprint's
        keys and a command's argument vector (`pip uninstall -y triton`) name packages.
        Checked on unsloth's CN623 findings, where each of these was a package's name."""
        above = [a for a in self.context.ancestors if a is not node]
        if not above:
            return False
        parent = above[-1]
        if isinstance(parent, cst.DictElement):
            return parent.key is node
        if isinstance(parent, cst.BinaryOperation):
            return isinstance(parent.operator, cst.Divide)
        if not isinstance(parent, cst.Element) or len(above) < 2:
            return False
        collection = above[-2]
        if not isinstance(collection, (cst.List, cst.Tuple, cst.Set)):
            return False
        reader = above[-3] if len(above) >= 3 else None
        if isinstance(reader, cst.Arg) and len(above) >= 4 and isinstance(above[-4], cst.Call):
            func = above[-4].func
            if (
                isinstance(func, cst.Attribute) and func.attr.value in ("startswith", "endswith")
                and isinstance(func.value, cst.Attribute) and func.value.attr.value in _OWN_NAMES
            ):
                return True  # `logger.name.startswith(("torch", "triton"))`: the packages a log comes from
            return call_qualname(self, above[-4]) in _COMMAND_RUNNERS
        if isinstance(reader, cst.ComparisonTarget):
            # `impl in ("torch", "triton")` groups the names a branch accepts and picks none
            # (InternVL's MPT attention); `impl in ("triton",)` is an equality and picks it.
            return not isinstance(reader.operator, (cst.In, cst.NotIn)) or len(collection.elements) > 1
        return True

    def _module_key(self) -> bool:
        """Whether the string is a key of ``sys.modules`` (``monkeypatch.setitem(sys.modules,
        "triton", None)``, ``sys.modules["triton"] = None``, ``patch.dict(sys.modules, {...})``,
        ``"triton" in sys.modules``, and the stub ``types.ModuleType("triton")``): it names the package a test hides or stubs, which picks no
        implementation (hiding Triton is the world Trainium runs in). The nearest subscript, call
        or comparison above the string decides."""
        modules = "sys.modules"
        for above in reversed(self.context.ancestors):
            if isinstance(above, cst.Subscript):
                return self.context.qualname(above.value) == modules
            if isinstance(above, cst.Call):
                if isinstance(above.func, cst.Attribute) and self.context.qualname(above.func.value) == modules:
                    return True  # sys.modules.pop("triton", None)
                if self.context.qualname(above.func) == "types.ModuleType":
                    return True  # the stub module put there: types.ModuleType("triton")
                return bool(above.args) and self.context.qualname(above.args[0].value) == modules
            if isinstance(above, cst.Comparison):
                return any(
                    isinstance(c.operator, (cst.In, cst.NotIn)) and self.context.qualname(c.comparator) == modules
                    for c in above.comparisons
                )
        return False


# Attributes that hold an object's own dotted name (a logger's, a module's, a function's): the
# prefixes looked for in one (`logger.name.startswith(("torch", "triton"))`, open_clip's log
# filter) name the packages it comes from, not an implementation.
_OWN_NAMES = frozenset({"name", "__name__", "__module__", "__qualname__"})
