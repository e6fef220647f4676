"""Device tests that stand in front of CUDA-only kernels, decided from code.

``if x.is_cuda: <triton kernel>`` and ``@skipif(not torch.cuda.is_available())`` on a test of
a Triton kernel look like any device test, but retargeting them to Neuron sends neuron tensors
into a kernel that cannot run there (or runs a kernel test on a machine that cannot run it).
CN103 (``x.device.type == "cuda"``), CN104 (``.is_cuda``) and CN201 (``torch.cuda.is_available()``)
ask ``report_kernel_gate`` first and, when it names a kernel, report instead of rewriting: False on Neuron is then the meaning
to keep. What a kernel is comes from ``kernels.kernel_index`` (imports, decorators, hub
handles, the project sweep, torch's own CUDA-only calls such as ``get_device_capability``, ONNX
Runtime's CUDA provider), never from words in comments or messages.
"""

from __future__ import annotations

import re

import libcst as cst

from collections.abc import Callable

from cuda2neuron.core import Effort, Rule
from cuda2neuron.python import dotted_name, truth, visit_syntax

from .device_returns import returned_guard
from .kernels import KernelIndex, describe_module, jit_cuda_build, kernel_index
from .names import terminal_name
from .selected import after_exit, opened_code, selected_code
from .strings import string_value
from .values import argument_of

__all__ = ["DEVICE_TEST_GUIDANCE", "SETUP_METHODS", "fixture_users", "guarded_kernel", "is_fixture", "handed_to_kernel", "report_kernel_gate"]

DEVICE_TEST_GUIDANCE = (
    "left as is: on Neuron the test is False, so the check fails (or the code takes its other "
    "branch) instead of handing neuron tensors to a kernel that cannot run there. Port the kernel "
    "(NKI, or the plain PyTorch path for neuron tensors), then test for the target device."
)


def report_kernel_gate(
    rule: Rule, node: cst.CSTNode, describe: Callable[[str], str], guidance: str = DEVICE_TEST_GUIDANCE
) -> bool:
    """Report ``node`` when it gates CUDA-only code (``describe`` gets the kernel's description);
    True when it did, and the caller must then leave the test as it is."""
    kernel = guarded_kernel(rule, node)
    if kernel is None:
        return False
    rule.report(node, describe(kernel), guidance=guidance, effort=Effort.MEDIUM, depends=selected_code(rule.context.ancestors, node), needs=opened_code(rule.context.ancestors, node))
    return True


def _enclosing_function(ancestors: list[cst.CSTNode], below: int) -> cst.FunctionDef | None:
    return next((a for a in reversed(ancestors[:below]) if isinstance(a, cst.FunctionDef)), None)


def _enclosing_class(ancestors: list[cst.CSTNode], below: int) -> cst.ClassDef | None:
    """The class whose method holds ``ancestors[below]`` (a method directly in its body)."""
    for j in range(below - 1, 0, -1):
        if isinstance(ancestors[j], cst.FunctionDef):
            block, owner = ancestors[j - 1], ancestors[j - 2] if j >= 2 else None
            return owner if isinstance(block, cst.IndentedBlock) and isinstance(owner, cst.ClassDef) else None
    return None


# Calls that end a test or a program as a raise does: `if not cuda: pytest.skip(...)`.
_STOPS = frozenset({"pytest.skip", "pytest.fail", "pytest.exit", "sys.exit", "unittest.SkipTest"})


def _stops(rule: Rule, small: cst.BaseSmallStatement) -> bool:
    if isinstance(small, cst.Raise):
        return True
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        return rule.qualname(small.value.func) in _STOPS
    return False


def _only_raises(rule: Rule, block: cst.BaseSuite) -> bool:
    body = block.body if isinstance(block, cst.IndentedBlock) else [block]
    return all(isinstance(stmt, cst.SimpleStatementLine) and all(_stops(rule, s) for s in stmt.body) for stmt in body)


def _leaves(block: cst.BaseSuite) -> bool:
    """Does the branch end by leaving the function (``return``, ``raise``)? Then the statements
    after the ``if`` run only when the test went the other way: ``if not eligible(x): return
    None`` guards the kernel launch below it as an ``if eligible(x):`` around it would."""
    if isinstance(block, cst.SimpleStatementSuite):
        small = block.body
    else:
        last = block.body[-1] if block.body else None
        small = last.body if isinstance(last, cst.SimpleStatementLine) else ()
    return bool(small) and isinstance(small[-1], (cst.Return, cst.Raise))


def _answers_no(block: cst.BaseSuite) -> bool:
    """Does the branch only ``return False`` (or ``None``)?"""
    body = block.body if isinstance(block, cst.IndentedBlock) else [block]
    if len(body) != 1:
        return False
    line = body[0]
    small = line.body if isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else ()
    if len(small) != 1 or not isinstance(small[0], cst.Return):
        return False
    value = small[0].value
    return isinstance(value, cst.Name) and value.value in ("False", "None")


def _after(block: cst.CSTNode | None, statement: cst.CSTNode) -> list[cst.CSTNode]:
    """The statements that follow ``statement`` in ``block`` (its enclosing block)."""
    body = block.body if isinstance(block, (cst.IndentedBlock, cst.Module)) else ()
    return list(body[body.index(statement) + 1 :]) if statement in body else []


# A test class's per-test setup: what it guards (a skip in it) is every test of the class.
SETUP_METHODS = frozenset({"setUp", "setUpClass", "setup_method", "setup_class", "setup"})


_FIXTURES = frozenset({"pytest.fixture"})


def is_fixture(rule: Rule, func: cst.FunctionDef) -> bool:
    """Is ``func`` a pytest fixture (``@pytest.fixture``, ``@pytest.fixture(scope=...)``)?"""
    for d in func.decorators:
        target = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        if rule.qualname(target) in _FIXTURES:
            return True
    return False


class _ParameterUsers(cst.CSTVisitor):
    def __init__(self, name: str) -> None:
        self.name = name
        self.users: list[cst.FunctionDef] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        params = (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params)
        if any(p.name.value == self.name for p in params):
            self.users.append(node)


def fixture_users(module: cst.Module, fixture: cst.FunctionDef) -> list[cst.FunctionDef]:
    """The functions of ``module`` that take ``fixture`` by its name (pytest's injection)."""
    users = _ParameterUsers(fixture.name.value)
    visit_syntax(module, users)
    return [u for u in users.users if u is not fixture]


class _CallersOf(cst.CSTVisitor):
    """The functions of a module that call one of ``names`` (``_require_cuda()`` in a test), and
    the classes whose setup method calls one (``def setup_method(self): _require_cuda()``: the
    helper skips every test of the class)."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.stack: list[cst.FunctionDef | cst.ClassDef] = []
        self.callers: list[cst.FunctionDef | cst.ClassDef] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.stack.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.stack.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.stack.append(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.stack.pop()

    def visit_Call(self, node: cst.Call) -> None:
        if not (isinstance(node.func, cst.Name) and node.func.value in self.names and self.stack):
            return
        caller = self.stack[-1]
        if isinstance(caller, cst.FunctionDef) and caller.name.value in SETUP_METHODS and len(self.stack) > 1 and isinstance(self.stack[-2], cst.ClassDef):
            caller = self.stack[-2]
        if isinstance(caller, cst.FunctionDef | cst.ClassDef) and caller not in self.callers:
            self.callers.append(caller)


def guarded_kernel(rule: Rule, node: cst.CSTNode) -> str | None:
    """What CUDA-only code this device test (``x.is_cuda``, ``torch.cuda.is_available()``) guards.

    * ``assert x.is_cuda`` / ``if not x.is_cuda: raise``: the input check of the function it is
      in; that function calls a kernel (or, for a method, another method of its class does: a
      kernel backend's ``if not q.is_cuda: return False, "CUDA-only"`` verifier). ``pytest.skip(...)`` / ``sys.exit(...)`` stop as a raise
      does; in a skip helper (``def _require_cuda(): ...``) the functions that call the helper
      are what it guards.
    * ``@skipUnless(torch.cuda.is_available())`` on a test function or a test class: the test
      (any method of the class) calls one.
    * ``if x.is_cuda: <kernel>`` / ``<kernel> if x.is_cuda else ref``: a branch calls one.
    * ``use_kernel = x.is_cuda and ...``: the flag later picks a branch that calls one; so does
      ``def use_kernel(x): return x.is_cuda``, through its calls in the module's tests, and a skip
      marker kept in a variable (``cuda_only = skipif(...)``) that decorates a test calling one;
      at module level in a project with kernels (the sweep's facts), the tests it marks in other
      modules may call one.
    * ``torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8``: the rest of
      the test's own expression calls one.

    A kernel is a call the file's kernel index knows (``rules/_shared/kernels.py``): a Triton /
    TileLang / CuTe launch, a CUDA-only package, the project's compiled extensions and kernel
    modules (the project sweep), a hub kernel, torch's CUDA calls with no Neuron twin that raise
    without a CUDA device, ONNX Runtime's CUDA provider named as a string, or a function of the
    file that calls one.
    """
    ancestors = rule.context.ancestors
    i = _gate_position(ancestors, node)
    if i is None:
        return None
    anc = ancestors[i]
    if isinstance(anc, cst.Return):
        # `def is_cuda_available(): return torch.cuda.is_available()`, tested in another module
        # in front of CUDA code the port leaves (the project sweep's `device_returns`).
        held = returned_guard(rule, ancestors, i)
        if held is not None:
            return held
    named = _named_package_branch(rule, ancestors, i)
    if named is not None:
        return named
    if isinstance(anc, cst.If):
        # A build script's `if torch.cuda.is_available() and CUDA_HOME: extension = CUDAExtension`
        # (detectron2): the branch decides whether CUDA code is compiled, not where tensors go.
        chosen = _cuda_build_chosen(rule, [anc.body, *([anc.orelse] if anc.orelse is not None else [])])
        if chosen is not None:
            return chosen
    if isinstance(anc, cst.IfExp):
        # yolov5's `check_requirements(f"tensorflow{'' if torch.cuda.is_available() else '-cpu'}")`:
        # the test picks a package's GPU build over its CPU build.
        chosen = _gpu_build_chosen(ancestors, i)
        if chosen is not None:
            return chosen
    # Only now the file's kernel index: most device tests sit in plain statements, and the index
    # visits the whole module.
    index = kernel_index(rule)
    if not index:
        return _shared_skip_marker(rule, ancestors, i) or _class_predicate(rule, index, ancestors, i)
    # `torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8`: CUDA-only code
    # in the same expression as the test runs once the test says Neuron.
    beside = _gate_expression(anc)
    found = index.first_call([beside]) if beside is not None else None
    if found is not None:
        return found
    if isinstance(anc, cst.Decorator):
        # `@pytest.mark.skipif(not torch.cuda.is_available())` on a test that runs a kernel, or
        # `@unittest.skipUnless(torch.cuda.is_available())` on a TestCase whose methods do.
        func = ancestors[i - 1] if i > 0 else None
        return index.first_call([func.body]) if isinstance(func, (cst.FunctionDef, cst.ClassDef)) else None
    if isinstance(anc, cst.Assert):
        func = _enclosing_function(ancestors, i)
        found = index.first_call([func.body]) if func is not None else None
        if found is None and func is not None and func.name.value == "__init__":
            # A constructor's precondition (`assert torch.cuda.is_available(), "TRTLLM server
            # should run on GPU node"` in verl's TensorRT-LLM server): the class's other methods
            # run the CUDA-only code it admits.
            owner = _enclosing_class(ancestors, i)
            found = index.first_call([owner.body]) if owner is not None else None
        return found
    if isinstance(anc, (cst.If, cst.While)):
        found = index.first_call([anc.body, *([anc.orelse] if anc.orelse is not None else [])])
        if found is None and isinstance(anc, cst.If) and isinstance(anc.orelse, cst.Else) and _only_raises(rule, anc.orelse.body):
            # `if x.is_cuda: ... else: raise RuntimeError("No GPU found")` is `if not x.is_cuda:
            # raise` spelled the other way round: what the function does needs CUDA (ColossalAI's
            # bitsandbytes quantizer ends `elif torch.cuda.is_available(): model.to(...)`, its
            # `replace_with_bnb_layers` call above; retargeted, Trainium got a bitsandbytes model
            # instead of the stop).
            func = _enclosing_function(ancestors, i)
            found = index.first_call([func.body]) if func is not None else None
        if found is not None or not _exits_on_trainium(ancestors[: i + 1]):
            # `if x.is_cuda: raise NotImplementedError` leaves on the GPU only: what follows it
            # is the other machines' path, which the test does not keep off Trainium.
            return found
        if isinstance(anc, cst.If) and _leaves(anc.body) and i > 0:
            found = index.first_call(after_exit(ancestors, i))
        if found is None and _only_raises(rule, anc.body):
            func = _enclosing_function(ancestors, i)
            found = index.first_call([func.body]) if func is not None else None
            if found is None and func is not None:
                # A skip helper (`def _require_cuda(): if not ...: pytest.skip()`): the tests
                # that call it are what it guards.
                callers = _CallersOf({func.name.value})
                visit_syntax(rule.context.module, callers)
                found = index.first_call([c.body for c in callers.callers if c is not func])
            if found is None and func is not None and is_fixture(rule, func):
                # `@pytest.fixture def device(): if not cuda: pytest.skip(...)`: the tests that
                # ask for the fixture by name are what its skip guards.
                found = index.first_call([t.body for t in fixture_users(rule.context.module, func)])
        if found is None and isinstance(anc, cst.If) and (_leaves(anc.body) or _only_raises(rule, anc.body)):
            # A kernel backend's input check (`if not q.is_cuda: return False, "CUDA-only"` in
            # a verifier method): the other methods of its class launch the kernel.
            owner = _enclosing_class(ancestors, i)
            found = index.first_call([owner.body]) if owner is not None else None
        if found is None and isinstance(anc, cst.If) and _answers_no(anc.body):
            # A predicate's early "no" (`def _should_use_custom_op(x): ... if x.device.type !=
            # "cuda": return False`): its callers' branches are what it gates.
            func = _enclosing_function(ancestors, i)
            found = _flag_gates(index, rule.context.module, {func.name.value}) if func is not None else None
        return found
    if isinstance(anc, cst.IfExp):
        # `sim_device="cuda:0" if torch.cuda.is_available() else "cpu"` handed to Isaac Gym: the
        # value it picks goes into CUDA-only code.
        found = index.first_call([anc.body, anc.orelse]) or _handed(index, ancestors[:i], anc)
        if found is None and i > 0 and isinstance(ancestors[i - 1], cst.Assign) and ancestors[i - 1].value is anc:
            # `backend = "triton" if torch.cuda.is_available() else "torch"`, then `if backend ==
            # "triton": <kernel>`: the value picks the branch, as a flag does.
            found = _assigned_flag_gates(rule, index, ancestors, i - 1)
        return found
    if isinstance(anc, cst.Assign):
        return (
            _assigned_flag_gates(rule, index, ancestors, i)
            or _shared_skip_marker(rule, ancestors, i)
            or _class_predicate(rule, index, ancestors, i)
        )
    # `def use_kernel(x): return x.is_cuda and ...`: the helper's callers are the gates.
    func = _enclosing_function(ancestors, i)
    found = _flag_gates(index, rule.context.module, {func.name.value}) if func is not None else None
    return found or _class_predicate(rule, index, ancestors, i)


def _class_predicate(rule: Rule, index: KernelIndex, ancestors: list[cst.CSTNode], i: int) -> str | None:
    """The CUDA-only code of a class whose method answers, with the device test at
    ``ancestors[i]``, whether the class can run (``return torch.cuda.is_available()``, or a flag
    bound to it and returned). ColossalAI's kernel loader asks each extension's
    ``is_available()`` from another module and builds the first that says yes: retargeted, the
    CUDA extension's (``build_jit`` compiles with ``extra_cuda_cflags``) and the flash-attn
    extension's answered yes on Trainium, whose loader then built or imported CUDA-only code.
    None where the test is not what a method of a class returns, or the class runs no kernel."""
    func = _enclosing_function(ancestors, i)
    owner = _enclosing_class(ancestors, i)
    anc = ancestors[i]
    value = anc.value if isinstance(anc, (cst.Assign, cst.Return)) else None
    if func is None or owner is None or value is None:
        return None
    answer = truth(value)
    if answer.cuda_host is None and answer.trainium is None:
        # Not a yes/no about the device (`return torch.cuda.current_device()` in an
        # accelerator adapter): the method wraps an API, it does not answer for the class.
        return None
    if isinstance(anc, cst.Assign):
        names = {t.target.value for t in anc.targets if isinstance(t.target, cst.Name)}
        returns = _Returned(names)
        visit_syntax(func.body, returns)
        if not returns.found:
            return None
    elif not isinstance(anc, cst.Return):
        return None
    others = [s for s in owner.body.body if s is not func] if isinstance(owner.body, cst.IndentedBlock) else []
    if not others:
        return None
    kernels = _KernelCall(index)
    for method in others:
        visit_syntax(method, kernels)
    return kernels.found or _builds_cuda(rule, others)


class _KernelCall(cst.CSTVisitor):
    """The first kernel, CUDA-only package or extension a class's methods call, leaving out
    torch's own CUDA-only calls: an accelerator adapter wraps `torch.cuda.get_device_capability`
    in one method and `torch.cuda.is_available` in another, and its availability answer is
    then the one a port must move (the adapter is what runs on the new device)."""

    def __init__(self, index: KernelIndex) -> None:
        self.index = index
        self.found: str | None = None

    def visit_Call(self, node: cst.Call) -> bool:
        func = node.func.value if isinstance(node.func, cst.Subscript) else node.func
        dotted = dotted_name(func) or ""
        if self.found is None and not dotted.startswith("torch."):
            self.found = self.index.call_target(node)
        return self.found is None


def _builds_cuda(rule: Rule, methods: list[cst.CSTNode]) -> str | None:
    """The CUDA extension build among ``methods``: ``CUDAExtension(...)``, or a run-time
    ``load(...)`` / ``load_inline(...)`` given CUDA sources or flags. An extension class imports
    its builder inside the method that uses it (ColossalAI's ``from torch.utils.cpp_extension
    import CUDA_HOME, load`` in ``build_jit``), out of reach of the test's own scope: each
    method's imports are read with it."""
    for method in methods:
        calls = _CallsAndImports()
        visit_syntax(method, calls)
        for call in calls.calls:
            dotted = dotted_name(call.func) or ""
            head, _, rest = dotted.partition(".")
            qualified = f"{calls.imports[head]}.{rest}".rstrip(".") if head in calls.imports else rule.qualname(call.func)
            if qualified in _CUDA_BUILDERS or (qualified is not None and jit_cuda_build(call, qualified)):
                return f"the CUDA extension build (`{qualified.rpartition('.')[2]}`)"
    return None


class _CallsAndImports(cst.CSTVisitor):
    def __init__(self) -> None:
        self.calls: list[cst.Call] = []
        self.imports: dict[str, str] = {}

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = dotted_name(node.module) if node.module is not None and not node.relative else None
        if module is None or isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            bound = alias.asname.name if alias.asname is not None else alias.name
            if isinstance(bound, cst.Name) and isinstance(alias.name, cst.Name):
                self.imports[bound.value] = f"{module}.{alias.name.value}"


class _Returned(cst.CSTVisitor):
    """Whether a function returns one of ``names`` as it is (``return cuda_available``)."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.found = False

    def visit_Return(self, node: cst.Return) -> None:
        if isinstance(node.value, cst.Name) and node.value.value in self.names:
            self.found = True


def _named_package_branch(rule: Rule, ancestors: list[cst.CSTNode], i: int) -> str | None:
    """The CUDA-only package whose branch the test at ``ancestors[i]`` sits in, where that
    branch is chosen by the package's module path spelled as a string: timm's optimizer factory
    loads its optimizer class by name (``_import_class("apex.optimizers.FusedAdam")``) under
    ``if opt_class.startswith('apex.'): assert torch.cuda.is_available(), 'CUDA required ...'``.
    No import names the package, so the kernel index cannot see it; retargeted, the assert
    admits Trainium into apex, and the clear "CUDA required" stop becomes an ImportError or a
    kernel launch. Only a dotted spelling counts (``'apex.'``, ``'bitsandbytes.optim.Adam'``):
    a bare ``"triton"`` is as often a backend's or a key's name. Within the enclosing function."""
    facts = rule.context.settings.project
    for k in range(i - 1, 0, -1):
        anc = ancestors[k]
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        if not isinstance(anc, cst.If) or ancestors[k + 1] is not anc.body:
            continue
        for text in _dotted_literals(anc.test):
            module = text.rstrip(".")
            if facts.own_module(module):
                continue
            found = describe_module(module, facts)
            if found is not None:
                return f"{found}, which the branch for {text!r} loads by name"
    return None


def _dotted_literals(test: cst.BaseExpression) -> list[str]:
    """The string literals of a test that spell a module path (``'apex.'``, ``'a.b.C'``)."""
    finder = _Literals()
    visit_syntax(test, finder)
    return [t for t in finder.found if "." in t and all(p.isidentifier() for p in t.rstrip(".").split("."))]


class _Literals(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found: list[str] = []

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if isinstance(value, str):
            self.found.append(value)


def _exits_on_trainium(ancestors: list[cst.CSTNode]) -> bool:
    """May the branch of the test at ``ancestors[-1]`` run on Trainium, as the device model
    answers (``truth``)? ``if not x.is_cuda: raise`` / ``if torch.cuda.device_count() < n:
    pytest.skip()`` does: its early exit keeps the CUDA-only code after it (in the function, its
    class, the tests that call a skip helper) off Trainium; ``if x.is_cuda: raise`` does not.
    Unknown counts as may: the model is asked without pinning the reported atom (``about``),
    whose reading as a CUDA fact would turn Megatron's ``if tp * pp > torch.cuda.device_count():
    pytest.skip()`` around before the count was taught."""
    return truth(ancestors[-1].test).trainium is not False


def _assigned_flag_gates(rule: Rule, index: KernelIndex, ancestors: list[cst.CSTNode], i: int) -> str | None:
    """The kernel a branch calls whose test reads the names ``ancestors[i]`` (an assignment)
    binds: plain names in their function (or the module), ``self.use_kernel`` in its class."""
    anc = ancestors[i]
    names = {t.target.value for t in anc.targets if isinstance(t.target, cst.Name)}
    found = None
    if names:
        scope = _enclosing_function(ancestors, i) or rule.context.module
        found = _flag_gates(index, scope, names)
    attributes = {f"self.{t.target.attr.value}" for t in anc.targets if _self_attribute(t.target)}
    if found is None and attributes:
        # `self.use_kernel = torch.cuda.is_available() and HAVE_TRITON` in `__init__`, read by
        # `forward`'s `if self.use_kernel:`.
        owner = _enclosing_class(ancestors, i)
        found = _flag_gates(index, owner, attributes) if owner is not None else None
    return found


def _self_attribute(target: cst.BaseExpression) -> bool:
    return isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"


def handed_to_kernel(rule: Rule, node: cst.CSTNode) -> str | None:
    """What CUDA-only code a value is handed to as an argument (through a conditional, a boolean
    or a collection): ``isaacgymenvs.make(sim_device="cuda:0")`` names a device of the
    simulator's, ``trt_context.execute(..., device="cuda")`` one of TensorRT's. Such a device
    stays CUDA: the callee cannot take a neuron one. Followed through ``torch.device(...)`` and
    ``.to(...)`` (``bnb.functional.quantize_4bit(w.to(torch.device("cuda")))``) and through a
    function's local name (``quant_device = torch.device("cuda")``, read further down)."""
    index = kernel_index(rule)
    if not index:
        return None
    ancestors = rule.context.ancestors
    return _handed(index, ancestors, node) or _handed_by_name(rule, index, ancestors, node)


# Calls that pass a device on to what they build: `torch.device("cuda")`, `w.to(device)`.
_CONVERSIONS = frozenset({"device", "to"})


def _handed(
    index: KernelIndex, ancestors: list[cst.CSTNode] | tuple[cst.CSTNode, ...], node: cst.CSTNode, hops: int = 3
) -> str | None:
    found = argument_of(ancestors, node)
    if found is None:
        return None
    j, _, call = found
    target = index.call_target(call)
    if target is None and hops and terminal_name(call.func) in _CONVERSIONS:
        return _handed(index, ancestors[: j - 1], call, hops - 1)
    return target


def _handed_by_name(
    rule: Rule, index: KernelIndex, ancestors: list[cst.CSTNode] | tuple[cst.CSTNode, ...], node: cst.CSTNode
) -> str | None:
    """The kernel a function's local name is handed to, where ``node`` is (inside) its value."""
    child: cst.CSTNode = node
    for i in range(len(ancestors) - 1, -1, -1):
        anc = ancestors[i]
        if isinstance(anc, cst.Assign):
            if child is not anc.value:
                return None
            func = _enclosing_function(list(ancestors), i)
            if func is None:
                return None
            handed = _handed_names(rule, index, func)
            names = [t.target.value for t in anc.targets if isinstance(t.target, cst.Name)]
            return next((handed[n] for n in names if n in handed), None)
        if isinstance(anc, (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.Lambda)):
            return None
        child = anc
    return None


def _handed_names(rule: Rule, index: KernelIndex, func: cst.FunctionDef, depth: int = 3) -> dict[str, str]:
    """Each name ``func`` hands to CUDA-only code as an argument, and that code: one fast walk
    per function, kept for the pass (several device values of one function ask the same)."""
    memo = rule.context.__dict__.setdefault("_handed_names", {})
    key = (id(rule.context.module), id(func))
    if key not in memo:
        memo[key] = {}  # a recursive function asks for itself while it is walked: nothing yet
        calls = _KernelArguments(rule, index, depth)
        visit_syntax(func.body, calls)
        memo[key] = calls.handed
    return memo[key]


class _KernelArguments(cst.CSTVisitor):
    """The names in the arguments of the kernel calls of a function (through conditionals,
    boolean operators, collections, ``torch.device(...)`` and ``.to(...)``)."""

    def __init__(self, rule: Rule, index: KernelIndex, depth: int) -> None:
        self.rule = rule
        self.index = index
        self.depth = depth
        self.handed: dict[str, str] = {}

    def visit_Call(self, node: cst.Call) -> None:
        target = self.index.call_target(node)
        if target is None:
            return
        callee = self.index.own_callee(node)
        # The file's own function is CUDA-only because its body calls a kernel somewhere, often
        # behind a fallback (`if FusedAdam is not None: return FusedAdam(...)`, then torch's
        # AdamW): an argument is handed to CUDA-only code only where the parameter it binds is
        # handed on there. Without that, `make_optimizer(model, args, device)` kept a trainer's
        # whole device on CUDA.
        onward = _parameters_handed_on(self.rule, self.index, callee, self.depth) if callee else None
        for i, arg in enumerate(node.args):
            if onward is not None and _bound_parameter(callee, node, i) not in onward:
                continue
            for name in _passed_names(arg.value, 3):
                self.handed.setdefault(name, target)


def _parameters_handed_on(rule: Rule, index: KernelIndex, callee: cst.FunctionDef, depth: int) -> set[str]:
    """The parameters of ``callee`` that its body hands to CUDA-only code (none past ``depth``)."""
    return set(_handed_names(rule, index, callee, depth - 1)) if depth > 0 else set()


def _bound_parameter(callee: cst.FunctionDef, call: cst.Call, i: int) -> str | None:
    """The name of the parameter the ``i``-th argument of ``call`` binds in ``callee``."""
    arg = call.args[i]
    if arg.keyword is not None:
        return arg.keyword.value
    if arg.star:
        return None
    params = list(callee.params.posonly_params) + list(callee.params.params)
    # `self.f(x)`: the first parameter is the instance the call is made on.
    if isinstance(call.func, cst.Attribute) and params and params[0].name.value in ("self", "cls"):
        params = params[1:]
    positional = sum(1 for a in call.args[:i] if a.keyword is None and not a.star)
    return params[positional].name.value if positional < len(params) else None


def _passed_names(node: cst.BaseExpression, hops: int) -> list[str]:
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, cst.IfExp):
        return _passed_names(node.body, hops) + _passed_names(node.orelse, hops)
    if isinstance(node, cst.BooleanOperation):
        return _passed_names(node.left, hops) + _passed_names(node.right, hops)
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        return [n for e in node.elements for n in _passed_names(e.value, hops)]
    if isinstance(node, cst.Call) and hops and terminal_name(node.func) in _CONVERSIONS:
        inner = [n for a in node.args for n in _passed_names(a.value, hops - 1)]
        if isinstance(node.func, cst.Attribute) and terminal_name(node.func) == "to":
            inner += _passed_names(node.func.value, hops - 1)  # `x.to(...)`: x is handed on too
        return inner
    return []


_SKIP_MARKERS = frozenset({"skipif", "skipIf", "skipUnless"})


def _shared_skip_marker(rule: Rule, ancestors: list[cst.CSTNode], i: int) -> str | None:
    """``cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), ...)`` at module level
    (xformers' tests/utils.py), in a project that has CUDA-only kernels: the tests it marks live
    in other modules, which this file cannot see, and may launch them. Retargeted, the marker
    would run those tests on Neuron; kept, they skip there (reported)."""
    anc = ancestors[i]
    if not isinstance(anc, cst.Assign) or any(isinstance(a, (cst.FunctionDef, cst.ClassDef)) for a in ancestors[:i]):
        return None
    value = anc.value
    if not (isinstance(value, cst.Call) and terminal_name(value.func) in _SKIP_MARKERS):
        return None
    facts = rule.context.settings.project
    # Named by the library's own modules first: a kernel test module says less about the project.
    kernels = sorted(facts.extension_modules | facts.kernel_modules, key=lambda k: ("test" in k, k))
    if not kernels:
        return None
    shown = ", ".join(f"`{k}`" for k in kernels[:2]) + (", ..." if len(kernels) > 2 else "")
    return f"the tests this shared skip marker marks in other modules, in a project with CUDA-only kernels ({shown})"


# The builder that compiles .cu sources: a branch naming it chooses the CUDA build.
_CUDA_BUILDERS = frozenset({"torch.utils.cpp_extension.CUDAExtension"})


class _Names(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found: list[cst.Name | cst.Attribute] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.found.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self.found.append(node)
        return False


def _cuda_build_chosen(rule: Rule, blocks: list[cst.CSTNode]) -> str | None:
    """``the CUDA extension build (CUDAExtension)`` when a branch names the CUDA builder."""
    names = _Names()
    for block in blocks:
        visit_syntax(block, names)
    for name in names.found:
        if rule.qualname(name) in _CUDA_BUILDERS:
            return "the CUDA extension build (`CUDAExtension`)"
    return None


# A package's CPU build, by the suffix of its distribution name (`tensorflow-cpu`, `faiss-cpu`).
_CPU_BUILD_SUFFIXES = ("-cpu",)
_REQUIREMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _gpu_build_chosen(ancestors: list[cst.CSTNode], i: int) -> str | None:
    """What a device test's conditional expression (``ancestors[i]``) installs on the CUDA side,
    when its other side installs that package's CPU build: ``f"tensorflow{'' if cuda else
    '-cpu'}<=2.15.1"`` (yolov5's TensorFlow export), ``"faiss" if cuda else "faiss-cpu"``. The
    original installs the CPU build on any host without CUDA; Trainium has no GPU for that
    package either, so the port must go on asking about CUDA and install the CPU build there.
    The branches are string literals, spelled alone or as the one expression of an f-string."""
    choice = ancestors[i]
    if not isinstance(choice, cst.IfExp):
        return None
    parts: tuple[str, str] = ("", "")
    holder = ancestors[i - 2] if i >= 2 and isinstance(ancestors[i - 1], cst.FormattedStringExpression) else None
    if isinstance(holder, cst.FormattedString):
        texts = [p.value if isinstance(p, cst.FormattedStringText) else None for p in holder.parts]
        at = holder.parts.index(ancestors[i - 1])
        if any(t is None for j, t in enumerate(texts) if j != at):
            return None  # another expression: the requirement is not spelled by the source
        parts = ("".join(texts[:at]), "".join(texts[at + 1 :]))  # type: ignore[arg-type]
    sides = [_spelled_requirements(branch, parts) for branch in (choice.body, choice.orelse)]
    if not all(sides):
        return None
    for gpu, cpu in (sides, sides[::-1]):
        for name, text in gpu.items():
            if any(f"{name}{suffix}" in cpu for suffix in _CPU_BUILD_SUFFIXES):
                return f"`{text}`, the GPU build of a package whose CPU build the other branch installs (Trainium has no GPU for it)"
    return None


def _spelled_requirements(branch: cst.BaseExpression, parts: tuple[str, str]) -> dict[str, str]:
    """Normalized distribution name -> requirement, for each string literal ``branch`` may give
    (nested conditional expressions included), joined with the f-string's text around it; empty
    when one of them is no literal."""
    leaves = [branch]
    found: dict[str, str] = {}
    while leaves:
        leaf = leaves.pop()
        if isinstance(leaf, cst.IfExp):
            leaves += [leaf.body, leaf.orelse]
            continue
        value = string_value(leaf)
        if value is None:
            return {}
        text = f"{parts[0]}{value}{parts[1]}".strip()
        name = _REQUIREMENT_NAME.match(text)
        if name is None:
            return {}
        found[re.sub(r"[-_.]+", "-", name.group()).lower()] = text
    return found


def _gate_expression(anc: cst.CSTNode) -> cst.CSTNode | None:
    """The whole expression a device test decides in: a branch's test, an assert's, the value of
    a flag or of a return (a decorator's call is its test's own business)."""
    if isinstance(anc, (cst.If, cst.While, cst.IfExp, cst.Assert)):
        return anc.test
    if isinstance(anc, (cst.Assign, cst.Return)):
        return anc.value
    return None


def _gate_position(ancestors: list[cst.CSTNode], node: cst.CSTNode) -> int | None:
    """Where the test decides something: the index of its decorator, assert, branch test,
    flag assignment or return among ``ancestors``; None inside any other statement."""
    child: cst.CSTNode = node
    for i in range(len(ancestors) - 1, -1, -1):
        anc = ancestors[i]
        if isinstance(anc, (cst.Decorator, cst.Assert, cst.Assign, cst.Return)):
            return i
        if isinstance(anc, (cst.If, cst.While, cst.IfExp)) and child is anc.test:
            return i
        if isinstance(anc, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return None
        child = anc
    return None


class _FlagUses(cst.CSTVisitor):
    """Branches whose test reads one of ``names``: ``if use_kernel:``, ``a if use_kernel else b``."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.branches: list[cst.CSTNode] = []

    def _reads(self, test: cst.BaseExpression) -> bool:
        finder = _NameFinder(self.names)
        visit_syntax(test, finder)
        return finder.found

    def visit_If(self, node: cst.If) -> None:
        if self._reads(node.test):
            self.branches += [node.body, *([node.orelse] if node.orelse is not None else [])]

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        # `if not use_kernel(x): return None` then the launch: what follows the early exit is
        # the branch the test picks.
        for stmt in node.body:
            if isinstance(stmt, cst.If) and _leaves(stmt.body) and self._reads(stmt.test):
                self.branches += _after(node, stmt)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if self._reads(node.test):
            self.branches += [node.body, node.orelse]

    # `cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), ...)`, then `@cuda_only` on
    # a test (xformers' tests/utils.py): the marker gates what the decorated test runs.
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if any(self._reads(d.decorator) for d in node.decorators):
            self.branches.append(node.body)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if any(self._reads(d.decorator) for d in node.decorators):
            self.branches.append(node.body)


class _NameFinder(cst.CSTVisitor):
    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.found = False

    def visit_Name(self, node: cst.Name) -> None:
        self.found = self.found or node.value in self.names

    def visit_Attribute(self, node: cst.Attribute) -> None:
        # `self.use_kernel`: an attribute flag, named as the class's methods read it.
        if isinstance(node.value, cst.Name) and node.value.value == "self":
            self.found = self.found or f"self.{node.attr.value}" in self.names


def _flag_gates(index: KernelIndex, scope: cst.CSTNode, names: set[str]) -> str | None:
    uses = _FlagUses(names)
    visit_syntax(scope, uses)
    if not uses.branches:
        return None
    # `sync_fn = _handle_cuda_ipc if self.use_cuda_ipc else _broadcast` picks a function that
    # is called later: the branch names CUDA-only code without calling it there.
    picked = (index.target(b) for b in uses.branches if isinstance(b, (cst.Name, cst.Attribute)))
    return index.first_call(uses.branches) or next((t for t in picked if t is not None), None)
