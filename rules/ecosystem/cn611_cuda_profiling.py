"""CN611: CUDA profiling (``ProfilerActivity.CUDA``, ``torch.cuda.profiler``, ``use_cuda=``)."""

from __future__ import annotations

import ast

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Safety, Settings

from .._shared.args import arg_by_name, remove_arg
from .._shared.detector import AstDetector
from .._shared.names import call_qualname
from .._shared.packages import in_package
from .._shared.strings import make_string, string_value

__all__ = ["CudaProfiling"]

_ACTIVITY = frozenset(
    {
        "torch.profiler.ProfilerActivity",
        "torch.autograd.ProfilerActivity",
        "torch.autograd.profiler.ProfilerActivity",
        "torch._C._profiler.ProfilerActivity",
    }
)
_PROFILER_PACKAGES = ("torch.profiler", "torch.autograd.profiler")
_GUIDANCE = (
    "CUDA profiling records nothing on Trainium. Profile with ProfilerActivity.CPU (operator "
    "timings of the host side) and use the Neuron profiler for device timelines."
)
_COLUMN_GUIDANCE = (
    "Use the CPU column `{cpu}` for host-side operator time, or `device_time_total` (torch >= 2.4; "
    "zero too without a device profiler) and the Neuron profiler for device timelines."
)
_SORT_KEYS = {
    "cuda_time_total": "cpu_time_total",
    "self_cuda_time_total": "self_cpu_time_total",
    "cuda_time": "cpu_time",
    "cuda_memory_usage": "cpu_memory_usage",
    "self_cuda_memory_usage": "self_cpu_memory_usage",
}

# What the file's text must spell for the visitor to report, outside a string's escapes: the
# event test's literal as written (``visit_SimpleString`` compares ``node.value``), the profiler
# columns and the legacy option (as attributes, keywords or plain literals), the activity enum
# (every name that resolves to it is bound by an import or written through a module).
_GATE_TEXT = ('"CUDA"', "'CUDA'", "cuda_time", "cuda_memory", "use_cuda", "ProfilerActivity")
# The same words a literal may hold once its escapes are read ("cuda\x5ftime_total"): CPython's
# constant joins a concatenation's parts, so it holds each part's value as a substring.
_GATE_VALUES = ("cuda_time", "cuda_memory", "use_cuda")


class CudaProfiling(Rule):
    """
    ## What it does
    In ``activities=[...]`` of ``torch.profiler.profile``, removes ``ProfilerActivity.CUDA``
    (or turns it into ``ProfilerActivity.CPU`` when it is the only one); turns
    ``sort_by="cuda_time_total"``-style keys into their CPU twins; reports
    ``torch.cuda.profiler.*``, ``use_cuda=True`` and ``ProfilerActivity.CUDA`` elsewhere
    (``activities.append(ProfilerActivity.CUDA)``, ``ProfilerActivity.CUDA in activities``), and
    in a module that uses torch's profiler, the legacy ``"use_cuda"`` option read from or
    written into a profiler keyword dict (``profiler_kwargs.get("use_cuda", False)``), the CUDA
    columns of profiler events (``event.cuda_time_total``) and a CUDA sort key kept for later
    (``sort_by = "self_cuda_time_total"``); anywhere, a profiler event's device type compared with
    ``"CUDA"`` (``e.device_type().name == "CUDA"``).

    ## Why is this bad?
    The CUDA activity is collected through CUPTI, which does not exist on a Trainium host: the
    profiler warns and the trace has no device events; ``cuda_time_total`` columns are zero.

    ## Example
    ```python
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
    print(prof.key_averages().table(sort_by="cuda_time_total"))
    ```
    becomes
    ```python
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    print(prof.key_averages().table(sort_by="cpu_time_total"))
    ```

    ## Fix safety
    Safe for ``--target neuron``: only what the profiler records changes, never what the program
    computes. ``ProfilerActivity.CUDA`` outside an ``activities=[...]`` argument (appended to a
    list built elsewhere, a membership test) and ``"use_cuda"`` keys are reported only: which
    list reaches the profiler, and what a test for the CUDA activity decides, is the code's
    business. ``--target accelerator`` only reports.
    """

    code = "CN611"
    name = "cuda-profiling"
    fixes = frozenset({Safety.SAFE})
    triggers = ("CUDA", "cuda_time", "cuda_memory", "use_cuda", "profiler")
    emits = ("torch.profiler.ProfilerActivity.CPU",)
    VALID = (
        "from torch.profiler import ProfilerActivity, profile\n"
        "with profile(activities=[ProfilerActivity.CPU]):\n    pass\n",
        "USE_CUDA = True\n",
        # A project's own "use_cuda" setting, in a module that does not profile.
        "use = cfg.get('use_cuda', False)\n",
        # Not a profiling module: a project's own field of the same name.
        "total = timer.cuda_time_total\n",
        "ok = cfg.device_type.name == 'CUDA'\n",  # a field, in a module that does not profile
        "ok = backend.name == 'CUDA'\n",
    )
    INVALID = (
        Invalid(
            "from torch.profiler import ProfilerActivity, profile\n"
            "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):\n    pass\n",
            "from torch.profiler import ProfilerActivity, profile\n"
            "with profile(activities=[ProfilerActivity.CPU]):\n    pass\n",
        ),
        Invalid(
            "import torch\nwith torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):\n    pass\n",
            "import torch\nwith torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):\n    pass\n",
        ),
        Invalid(
            "print(prof.key_averages().table(sort_by='self_cuda_time_total', row_limit=10))\n",
            "print(prof.key_averages().table(sort_by='self_cpu_time_total', row_limit=10))\n",
        ),
        Invalid(
            "import torch\nwith torch.autograd.profiler.profile(use_cuda=True) as p:\n    pass\n",
            "import torch\nwith torch.autograd.profiler.profile() as p:\n    pass\n",
        ),
        Invalid("import torch\ntorch.cuda.profiler.start()\n"),
        # The activity list built elsewhere, and a test for the CUDA activity: reported.
        Invalid("from torch.profiler import ProfilerActivity\nacts.append(ProfilerActivity.CUDA)\n"),
        Invalid("from torch.profiler import ProfilerActivity\nif ProfilerActivity.CUDA in acts:\n    pass\n"),
        # The legacy option in a dict forwarded to the profiler.
        Invalid("from torch.profiler import profile\nif kwargs.get('use_cuda', False):\n    pass\n"),
        # fla's benchmarks: the CUDA columns read from the averages, and a sort key kept for later.
        Invalid(
            "from torch.profiler import profile\nfor event in prof.key_averages():\n"
            "    if event.cuda_time_total > 0:\n        stats.append(event.key)\n"
        ),
        Invalid("from torch.profiler import profile\nsort_by = 'self_cuda_time_total' if on_gpu else 'self_cpu_time_total'\n"),
        Invalid(
            "import torch\nwith torch.profiler.profile() as prof:\n    step()\n"
            "slow = [e for e in prof.key_averages() if e.cuda_time_total > 1000]\n"
        ),
        Invalid(
            "from torch.profiler import ProfilerActivity, profile\n"
            "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):\n    pass\n",
            target="accelerator",
        ),
        # xformers' trace analysis keeps the CUDA kernels of kineto events.
        Invalid("for e in events:\n    if e.device_type().name != 'CUDA':\n        continue\n"),
        Invalid("import torch.profiler\ncuda_events = [e for e in events if e.device_type.name == 'CUDA']\n"),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """A gate: no finding where the text spells none of ``_GATE_TEXT``, no string's value
        holds one of ``_GATE_VALUES`` and no call resolves into ``torch.cuda.profiler``; unsure
        elsewhere (libcst runs). Most files CN611 wakes on name ``CUDA_VISIBLE_DEVICES`` or a
        "CUDA" in a longer string."""
        text = file.text
        if any(word in text for word in _GATE_TEXT):
            return None
        if "\\" in text:
            for node in ast.walk(file.tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
                    value = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
                    if any(word in value for word in _GATE_VALUES):
                        return None
        if "profiler" in text and _Gate(cls, file).reports() is None:
            return None
        return []

    def __init__(self, context) -> None:
        super().__init__(context)
        # Set by an import of torch's profiler, or a use of `torch.profiler` (read in source order):
        # only then is a "use_cuda" key a profiler option (elsewhere it is usually the program's
        # own device switch), and `.cuda_time_total` a profiler event's column.
        self._profiles = False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is not None and not node.relative:
            module = cst.Module([]).code_for_node(node.module)
            if in_package(module, _PROFILER_PACKAGES) or (
                module in ("torch", "torch.autograd")
                and not isinstance(node.names, cst.ImportStar)
                and any(getattr(a.name, "value", None) == "profiler" for a in node.names)
            ):
                self._profiles = True

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            if in_package(cst.Module([]).code_for_node(alias.name), _PROFILER_PACKAGES):
                self._profiles = True

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if node.value in ('"CUDA"', "'CUDA'"):
            self._event_device_test(node)
            return
        if not self._profiles or "cuda" not in node.value:
            return
        value = string_value(node)
        if value in _SORT_KEYS:
            # `sort_by = "self_cuda_time_total"` kept for later: sort_by= itself is fixed in visit_Arg.
            parent = self.context.parent
            if not (isinstance(parent, cst.Arg) and parent.keyword is not None and parent.keyword.value == "sort_by"):
                self.report(
                    node,
                    f'`"{value}"` names a profiler column of CUDA time, which is zero on Trainium',
                    guidance=_COLUMN_GUIDANCE.format(cpu=_SORT_KEYS[value]),
                    effort=Effort.LOW,
                )
            return
        if value != "use_cuda":
            return
        anc = self.context.ancestors
        parent = anc[-1] if anc else None
        grand = anc[-2] if len(anc) >= 2 else None
        key = (
            # kw.get("use_cuda", ...) / kw.pop(...) / kw.setdefault(...)
            (
                isinstance(parent, cst.Arg)
                and isinstance(grand, cst.Call)
                and grand.args
                and grand.args[0] is parent
                and isinstance(grand.func, cst.Attribute)
                and grand.func.attr.value in ("get", "pop", "setdefault")
            )
            or isinstance(parent, (cst.Index, cst.DictElement))  # kw["use_cuda"], {"use_cuda": x}
            or (isinstance(parent, cst.Comparison) and parent.left is node)  # "use_cuda" in kw
        )
        if key:
            self.report(
                node,
                '`"use_cuda"` is the legacy profiler option that profiles CUDA kernels, absent on Trainium',
                guidance=_GUIDANCE + " Drop the option (torch >= 2.4 deprecates it for activities=).",
                effort=Effort.LOW,
            )

    def _event_device_test(self, node: cst.SimpleString) -> None:
        """``e.device_type().name == "CUDA"``: a profiler event's device, which is never CUDA on
        Trainium (xformers' trace analysis keeps only CUDA kernels: it then counts nothing)."""
        anc = self.context.ancestors
        parent = anc[-1] if anc else None
        if isinstance(parent, cst.ComparisonTarget) and len(anc) >= 2 and isinstance(anc[-2], cst.Comparison):
            other = anc[-2].left
        elif isinstance(parent, cst.Comparison) and parent.left is node and len(parent.comparisons) == 1:
            other = parent.comparisons[0].comparator
        else:
            return
        if not (isinstance(other, cst.Attribute) and other.attr.value == "name"):
            return
        device_type = other.value
        called = isinstance(device_type, cst.Call) and isinstance(device_type.func, cst.Attribute) and device_type.func.attr.value == "device_type"
        field = isinstance(device_type, cst.Attribute) and device_type.attr.value == "device_type" and self._profiles
        if called or field:
            self.report(
                node,
                "a profiler event's device type tested for CUDA: no event is a CUDA one on Trainium",
                guidance="Kernel events on Trainium come from the Neuron profiler, not torch's; on the host "
                "trace keep CPU events (`DeviceType.CPU`) or read the Neuron profile for device timelines.",
                effort=Effort.LOW,
            )

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "profiler" and not self._profiles:
            self._profiles = self.qualname(node) in _PROFILER_PACKAGES
            return
        if node.attr.value in _SORT_KEYS:
            # fla's benchmarks: `event.cuda_time_total` of prof.key_averages() is zero on Trainium.
            if self._profiles:
                self.report(
                    node,
                    f"`.{node.attr.value}` reads a profiler event's CUDA time, which is zero on Trainium",
                    guidance=_COLUMN_GUIDANCE.format(cpu=_SORT_KEYS[node.attr.value]),
                    effort=Effort.LOW,
                )
            return
        if node.attr.value != "CUDA" or not self._is_cuda_activity(node):
            return
        anc = self.context.ancestors
        # Inside activities=[...]: the argument's fix handles it.
        if (
            len(anc) >= 3
            and isinstance(anc[-1], cst.Element)
            and isinstance(anc[-2], (cst.List, cst.Tuple, cst.Set))
            and isinstance(anc[-3], cst.Arg)
            and anc[-3].keyword is not None
            and anc[-3].keyword.value == "activities"
        ):
            return
        self.report(
            node,
            "ProfilerActivity.CUDA records nothing on Trainium",
            guidance=_GUIDANCE + " Drop it where the activity list is built; a test for it reads a CUDA profiler setting.",
            effort=Effort.LOW,
        )

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is None:
            return
        key = node.keyword.value
        # Findings are made on the visited Arg (the engine rebuilds along the visited node's
        # ancestors); the replacement is the same argument with a new value.
        if key == "activities" and isinstance(node.value, (cst.List, cst.Tuple, cst.Set)):
            self._activities(node, node.value)
        elif key == "sort_by":
            value = string_value(node.value)
            if value in _SORT_KEYS:
                self._fix(
                    node,
                    f'sort_by="{value}" sorts by CUDA time, which is zero on Trainium',
                    node.with_changes(value=make_string(_SORT_KEYS[value], like=node.value)),
                )

    def _is_cuda_activity(self, node: cst.BaseExpression) -> bool:
        return (
            isinstance(node, cst.Attribute)
            and node.attr.value == "CUDA"
            and self.qualname(node.value) in _ACTIVITY
        )

    def _activities(self, arg: cst.Arg, seq: cst.List | cst.Tuple | cst.Set) -> None:
        cuda = [el for el in seq.elements if self._is_cuda_activity(el.value)]
        if not cuda:
            return
        others = [el for el in seq.elements if el not in cuda]
        message = "ProfilerActivity.CUDA records nothing on Trainium"
        if not others:
            first = cuda[0]
            attr = first.value
            assert isinstance(attr, cst.Attribute)
            cpu = first.with_changes(value=attr.with_changes(attr=cst.Name("CPU")))
            elements = [cpu if el is first else el for el in seq.elements]
        else:
            elements = list(others)
            elements[-1] = elements[-1].with_changes(comma=seq.elements[-1].comma)
        self._fix(arg, message, arg.with_changes(value=seq.with_changes(elements=elements)))

    def visit_Call(self, node: cst.Call) -> None:
        use_cuda = arg_by_name(node, "use_cuda")
        if use_cuda is not None and in_package(call_qualname(self, node), ("torch.autograd.profiler", "torch.profiler")):
            self._fix(node, "`use_cuda=` profiles CUDA kernels, absent on Trainium", remove_arg(node, use_cuda))
            return
        qualified = call_qualname(self, node)
        if in_package(qualified, ("torch.cuda.profiler",)):
            self.report(
                node,
                f"`{qualified}` drives the CUDA profiler (nsys/nvprof)",
                guidance="Use torch.profiler.profile(activities=[ProfilerActivity.CPU]) around the "
                "region, and the Neuron profiler for device timelines.",
                effort=Effort.LOW,
            )

    def _fix(self, node: cst.CSTNode, message: str, replacement: cst.CSTNode) -> None:
        if self.context.settings.target != "neuron":
            self.report(node, message, guidance=_GUIDANCE, effort=Effort.LOW)
            return
        self.report(
            node,
            message,
            replacement=replacement,
            safety=Safety.SAFE,
            guidance=_GUIDANCE,
            description="profile the CPU side",
        )


class _Gate(AstDetector):
    """``visit_Call``'s report of ``torch.cuda.profiler`` on CPython's ``ast`` (names resolved
    as libcst's scopes resolve them): unsure at the first such call."""

    def visit_Call(self, node: ast.Call) -> None:
        if in_package(self.ctx.call_qualname(node), ("torch.cuda.profiler",)):
            from cuda2neuron.python import Unsure

            raise Unsure("a call of torch.cuda.profiler")
