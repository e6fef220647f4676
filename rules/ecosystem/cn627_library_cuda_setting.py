"""CN627: library settings, calls and resources in Python that choose CUDA without naming it."""

from __future__ import annotations

import ast
import io
import tokenize

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Safety, Settings
from cuda2neuron.python import Unsure

from .._shared.detector import AstDetector
from .._shared.library_settings import (
    ListItem,
    Match,
    gpu_constants,
    library_calls,
    list_settings,
    match_setting,
    may_set_in_python,
    normalize_key,
    ray_resources,
    setting_keys,
    table_markdown,
    with_table,
)
from .._shared.names import call_qualname, terminal_name
from .._shared.strings import make_string, string_value

__all__ = ["LibraryCudaSetting"]

_RAY_GPU_KEYWORD = "num_gpus"
_RAY_GPUS_MESSAGE = f"`{_RAY_GPU_KEYWORD}=` asks Ray for GPUs, which a Trainium node does not have"
_RAY_BUNDLE_MESSAGE = 'the Ray resource "GPU" asks for GPUs, which a Trainium node does not have'
_USE_GPU_MESSAGE = "`use_gpu=` gives each Ray Train worker a GPU, which a Trainium node does not have"
_USE_GPU_GUIDANCE = 'use use_gpu=False with resources_per_worker={"neuron_cores": 1}'
_RAY_GUIDANCE = (
    'Ray schedules AWS Neuron cores as the resource "neuron_cores": ask for resources={"neuron_cores": N}'
)


def _literal(node: cst.BaseExpression) -> str | None:
    """The value a literal writes, as the table compares it (None: computed at run time)."""
    if isinstance(node, cst.SimpleString):
        return string_value(node)
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return node.value
    if isinstance(node, (cst.Integer, cst.Float)):
        return node.value
    if isinstance(node, cst.Dict):
        return "{...}" if node.elements else ""
    return None


def _target_name(node: cst.BaseExpression) -> str | None:
    """``attn_implementation`` for ``attn_implementation`` / ``args.attn_implementation``."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def _positive_number(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Integer):
        return int(node.value.replace("_", ""), 0) > 0
    if isinstance(node, cst.Float):
        return float(node.value) > 0
    return True  # computed: the count is not known to be zero


# A tokenizer loads no weights: a model's loading keyword handed to its from_pretrained
# (diffusers' conversion scripts: `CLIPTokenizer.from_pretrained(name, device_map="auto")`) is
# ignored there, so it sets nothing.
_TOKENIZER_SUFFIXES = ("Tokenizer", "TokenizerFast")


def _tokenizer_loader(receiver: str | None) -> bool:
    """``receiver`` (the name before ``.from_pretrained``) is a tokenizer class."""
    return receiver is not None and receiver.endswith(_TOKENIZER_SUFFIXES)


# unittest's assertions that expect an exception from the block they open.
_RAISES_ASSERTIONS = frozenset({"assertRaises", "assertRaisesRegex"})


class LibraryCudaSetting(Rule):
    """
    ## What it does
    Reports, and rewrites where the library documents a twin, what chooses CUDA inside a
    library without saying "cuda" (the table ``rules/_shared/library_settings.toml``):

    * settings written as a call's keyword, a dict key, a field default or an assignment
      (``attn_implementation="flash_attention_2"`` becomes ``"sdpa"``, ``tf32=True`` becomes
      ``False``; ``deepspeed="ds.json"``, ``dynamo_backend="inductor"``,
      ``gpus_per_node=8`` for a job launcher and ``gpu="A100"`` for a serverless platform are
      reported);
    * library calls that set up CUDA or NCCL inside (``deepspeed.initialize``,
      ``deepspeed.init_distributed``, a ``ray.util.collective`` group on NCCL);
    * Ray's GPU resources: ``num_gpus=N`` of ``@ray.remote`` and ``.options`` becomes
      ``resources={"neuron_cores": N}``, a placement-group bundle's ``"GPU"`` key becomes
      ``"neuron_cores"``, and ``ScalingConfig(use_gpu=True)`` is reported;
    * module constants that hard-code a GPU count (``GPUS_PER_NODE = 8``);
    * the items of a keyword's string that is a ``key=value,key=value`` list
      (``model_args="pretrained=gpt2,parallelize=True"``, an ``add_argument`` default): the rows
      read in command lines and in such lists (CN709), reported.

    ## Why is this bad?
    The program never names CUDA, yet the library loads a CUDA-only package (flash_attn,
    DeepSpeed's CUDA accelerator), raises without a CUDA GPU (``TrainingArguments(tf32=True)``)
    or waits for GPUs that a Trainium node does not have (Ray schedules its NeuronCores as
    ``neuron_cores``, never as ``GPU``).

    ## Example
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="flash_attention_2")

    @ray.remote(num_gpus=1)
    class Worker: ...
    ```
    becomes
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="sdpa")

    @ray.remote(resources={"neuron_cores": 1})
    class Worker: ...
    ```

    ## Fix safety
    Safe where the table has a port (SDPA computes the same attention; TF32 has no effect on
    Neuron) and for Ray's resource name (one NeuronCore per GPU asked for; a fractional or
    computed count, or a call that already passes ``resources=``, is reported). The other rows
    are reported with what to do. With ``--target accelerator`` nothing is rewritten.
    """

    code = "CN627"
    name = "library-cuda-setting"
    fixes = frozenset({Safety.SAFE})
    triggers = (
        "flash_attn", "flash_attention", "xformers", "tf32", "deepspeed", "dynamo_backend", "compile_backend",
        "liger", "gpus", "GPUS", "gpu=", "use_gpu", "enable_gpu", "varlen_attn", '"GPU"', "'GPU'", "collective_group", "bnb.",
        "WeightTransferConfig", "device_map", "attn_impl", "ffn_type",
        # items of `key=value,...` strings that only command lines and such lists carry; `optim`
        # with its `=` (the bare word is in every `optimizer` of every training script)
        "load_in_", "parallelize", "quantization_bit", "optim=",
    )
    # Keys are compared by normalize_key (`--Use-Flash-Attn` is use_flash_attn): so are these words.
    triggers_as_keys = True
    VALID = (
        "from transformers import AutoModel\nm = AutoModel.from_pretrained('x', attn_implementation='sdpa')\n",
        # a test that expects the setting to be refused (trl's test_config_rejects_liger)
        "import pytest\n\ndef test_rejects(tmp_path):\n    with pytest.raises(ValueError, match='liger'):\n"
        "        DistillConfig(output_dir=tmp_path, use_liger_kernel=True)\n",
        "from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='o', tf32=False)\n",
        "import ray\n\n@ray.remote(num_cpus=2)\ndef f():\n    pass\n",
        "import ray\n\n@ray.remote(num_gpus=0)\ndef f():\n    pass\n",
        "stats = {'GPU': 1}\n",  # not a Ray file: a dict of the project's own
        "CHOICES = ['eager', 'sdpa', 'flash_attention_2']\n",
        "def f(gpus_per_node=8):\n    pass\n",
        "from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='o', deepspeed=None)\n",
        # a memory plan beside "auto": integer keys are the current accelerator's cores (measured)
        "from transformers import AutoModel\nm = AutoModel.from_pretrained('x', device_map='auto', max_memory={0: '20GiB'})\n",
        "kwargs = {'device_map': 'balanced', 'max_memory': budget}\n",
        "from transformers import AutoModel\nm = AutoModel.from_pretrained('x', device_map='neuron')\n",
        # what a test expects a helper to return (unsloth's studio export tests): not a setting made
        "def test_kwargs():\n    assert build_kwargs() == {'device_map': 'balanced', 'attn_implementation': 'flash_attention_2'}\n",
        # a tokenizer loads no weights: the keyword is ignored there
        "from transformers import AutoTokenizer\ntok = AutoTokenizer.from_pretrained('x', device_map='auto')\n",
        # a help text that shows a list, a list that turns the switch off
        "parser.add_argument('--model_args', help='e.g. pretrained=gpt2,parallelize=True')\n",
        "results = simple_evaluate(model='hf', model_args='pretrained=gpt2,parallelize=False')\n",
    )
    INVALID = (
        Invalid(
            "from transformers import AutoModelForCausalLM\nm = AutoModelForCausalLM.from_pretrained('x', attn_implementation=\"flash_attention_2\")\n",
            "from transformers import AutoModelForCausalLM\nm = AutoModelForCausalLM.from_pretrained('x', attn_implementation=\"sdpa\")\n",
        ),
        Invalid(
            "from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='o', bf16=True, tf32=True)\n",
            "from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='o', bf16=True, tf32=False)\n",
        ),
        Invalid("config = {'attn_implementation': 'flash_attention_2'}\n", "config = {'attn_implementation': 'sdpa'}\n"),
        # xtuner's Python-dict configs
        Invalid("use_varlen_attn = True\nmodel = dict(type='SupervisedFinetune', use_varlen_attn=use_varlen_attn)\n"),
        # Kaggle's kernel metadata, written by a CI launcher (unsloth's kaggle_t4_ci/launch.py)
        Invalid('meta = {"kernel_type": "notebook", "enable_gpu": "true", "machine_shape": shape}\n'),
        Invalid(
            "from dataclasses import dataclass, field\n\n@dataclass\nclass Args:\n    attn_implementation: str = field(default='flash_attention_2')\n",
            "from dataclasses import dataclass, field\n\n@dataclass\nclass Args:\n    attn_implementation: str = field(default='sdpa')\n",
        ),
        Invalid("from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='o', deepspeed='ds_z3.json')\n"),
        Invalid("import deepspeed\nengine, opt, _, _ = deepspeed.initialize(model=model, config=cfg)\n"),
        Invalid("import deepspeed\ndeepspeed.init_distributed()\n"),
        Invalid(
            "import ray\n\n@ray.remote(num_gpus=1)\nclass Worker:\n    pass\n",
            "import ray\n\n@ray.remote(resources={\"neuron_cores\": 1})\nclass Worker:\n    pass\n",
        ),
        Invalid(
            "import ray\nw = Worker.options(num_gpus=2).remote()\n",
            "import ray\nw = Worker.options(resources={\"neuron_cores\": 2}).remote()\n",
        ),
        Invalid("import ray\nw = Worker.options(num_gpus=0.5).remote()\n"),
        Invalid(
            "from ray.util.placement_group import placement_group\npg = placement_group([{'GPU': 1, 'CPU': 4}] * 8)\n",
            "from ray.util.placement_group import placement_group\npg = placement_group([{'neuron_cores': 1, 'CPU': 4}] * 8)\n",
        ),
        Invalid("from ray.train import ScalingConfig\ncfg = ScalingConfig(num_workers=4, use_gpu=True)\n"),
        Invalid("from ray.util import collective\ncollective.init_collective_group(4, 0, backend='nccl', group_name='g')\n"),
        Invalid("import submitit\nex = submitit.AutoExecutor(folder='logs')\nex.update_parameters(gpus_per_node=8, nodes=2)\n"),
        Invalid("import modal\napp = modal.App()\n\n@app.function(gpu='A100')\ndef train():\n    pass\n"),
        Invalid("GPUS_PER_NODE = 8\n"),
        # accelerate counts no Neuron device: the model loads on the CPU (measured)
        Invalid("from transformers import AutoModelForCausalLM\nm = AutoModelForCausalLM.from_pretrained('x', device_map='auto')\n"),
        Invalid("kwargs = {'device_map': 'balanced_low_0', 'torch_dtype': dtype}\n"),
        # a key=value list handed on to lm-evaluation-harness (its regression script's default)
        Invalid("parser.add_argument('--model_args', default='use_accelerate=True,load_in_8bit=True')\n"),
        Invalid("results = simple_evaluate(model='hf', model_args='pretrained=gpt2,parallelize=True')\n"),
        # llm-foundry's MPT config in Python
        Invalid("attn_config = {'attn_impl': 'flash', 'alibi': True}\n"),
        Invalid(
            "from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='o', tf32=True)\n",
            target="accelerator",
        ),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        # Its words sit in many names it never reads (diffusers' `_is_flash_attention_backend`,
        # `use_torch_2_0_or_xformers`: 108 files parsed for this rule alone, none reported):
        # a report needs a setting's key and value, a GPU constant, or Ray / DeepSpeed.
        return may_set_in_python(code)

    def __init__(self, context) -> None:  # noqa: ANN001 - the engine's RuleContext
        super().__init__(context)
        self._ray = False

    # -- where Ray is imported ------------------------------------------------------------------
    def visit_Import(self, node: cst.Import) -> None:
        if any(_root(a.name) == "ray" for a in node.names):
            self._ray = True

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is not None and not node.relative and _root(node.module) == "ray":
            self._ray = True

    # -- settings -------------------------------------------------------------------------------
    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is None:
            return
        key = node.keyword.value
        self._listed(node.value)
        if key == "default":
            self._default(node)
            return
        if normalize_key(key) in setting_keys("python") and not self._in_signature() and not self._tokenizer_call():
            self._setting(key, node.value, node)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        key = string_value(node.key)
        if key is None:
            return
        if key == ray_resources().gpu and self._ray:
            self._ray_bundle(node)
        elif normalize_key(key) in setting_keys("python"):
            self._setting(key, node.value, node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        name = _target_name(node.target)
        if name is not None and node.value is not None and normalize_key(name) in setting_keys("python"):
            self._setting(name, node.value, node)

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1:
            return
        name = _target_name(node.targets[0].target)
        if name is None:
            return
        if normalize_key(name) in setting_keys("python"):
            self._setting(name, node.value, node)
        elif isinstance(node.targets[0].target, cst.Name) and self._module_level():
            self._constant(name, node)

    def _default(self, arg: cst.Arg) -> None:
        """``field(default=...)`` assigned to a setting, ``add_argument("--setting", default=...)``."""
        ancestors = self.context.ancestors
        call = ancestors[-1] if ancestors else None
        if not isinstance(call, cst.Call):
            return
        name = None
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_argument":
            flags = [string_value(a.value) for a in call.args if a.keyword is None]
            name = next((f.lstrip("-") for f in flags if f and f.startswith("--")), None)
        elif len(ancestors) >= 2 and isinstance(ancestors[-2], cst.AnnAssign):
            name = _target_name(ancestors[-2].target)
        if name is not None and normalize_key(name) in setting_keys("python"):
            self._setting(name, arg.value, arg)

    def _setting(self, key: str, value: cst.BaseExpression, holder: cst.CSTNode) -> None:
        """Report ``value``, the literal ``holder`` (the node being visited) gives the setting ``key``."""
        written = _literal(value)
        if written is None or self._expected_to_raise() or any(isinstance(a, cst.Assert) for a in self.context.ancestors):
            # an assert's value is what the test expects code to return, not a setting it makes
            return
        found = match_setting(key, written, "python")
        if found is None or found.setting.planned(self._beside(holder)):
            return
        message = f"`{key}={written}` {found.what}"
        replacement = self._port(value, found)
        if replacement is not None and self.context.settings.target == "neuron":
            self.report(
                value, message, replacement=replacement, description=f"write {found.port!r}",
                ancestors=(*self.context.ancestors, holder),
            )
            return
        self.report(value, message, guidance=_setting_guidance(found), effort=Effort.LOW, ancestors=(*self.context.ancestors, holder))

    def _listed(self, value: cst.BaseExpression) -> None:
        """A keyword's string that is a ``key=value,key=value`` list handed on to a command line
        or a loader (lm-evaluation-harness's ``add_argument("--model_args",
        default="use_accelerate=True,load_in_8bit=True")``, ``simple_evaluate(model_args=...)``):
        its items are settings (``list_settings``); reported, the string is the user's to edit."""
        if not isinstance(value, cst.SimpleString) or "=" not in value.value:
            return
        text = string_value(value)
        if text is None or any(isinstance(a, cst.Assert) for a in self.context.ancestors):
            return
        for item in list_settings(text, whole=True):
            self.report(
                value, f"`{text[item.start:item.end]}` in a `key=value` list {item.match.what}",
                guidance=_listed_guidance(item), effort=Effort.LOW,
            )

    def _tokenizer_call(self) -> bool:
        call = self.context.ancestors[-1] if self.context.ancestors else None
        func = call.func if isinstance(call, cst.Call) else None
        return (
            isinstance(func, cst.Attribute) and func.attr.value == "from_pretrained"
            and _tokenizer_loader(terminal_name(func.value))
        )

    def _beside(self, holder: cst.CSTNode) -> frozenset[str]:
        """The other keys of the call or dict ``holder`` (a keyword or an element) is written in."""
        parent = self.context.ancestors[-1] if self.context.ancestors else None
        if isinstance(holder, cst.Arg) and isinstance(parent, cst.Call):
            return frozenset(normalize_key(a.keyword.value) for a in parent.args if a.keyword is not None and a is not holder)
        if isinstance(holder, cst.DictElement) and isinstance(parent, cst.Dict):
            keys = (string_value(e.key) for e in parent.elements if isinstance(e, cst.DictElement) and e is not holder)
            return frozenset(normalize_key(k) for k in keys if k is not None)
        return frozenset()

    def _expected_to_raise(self) -> bool:
        """Inside ``with pytest.raises(...)`` / ``self.assertRaises(...)``: the test expects the
        library to refuse the setting (trl's ``test_config_rejects_liger``), so it never runs."""
        for anc in self.context.ancestors:
            if not isinstance(anc, cst.With):
                continue
            for item in anc.items:
                call = item.item
                if isinstance(call, cst.Call) and (
                    call_qualname(self, call) == "pytest.raises" or terminal_name(call.func) in _RAISES_ASSERTIONS
                ):
                    return True
        return False

    @staticmethod
    def _port(value: cst.BaseExpression, found: Match) -> cst.BaseExpression | None:
        if not found.port or not found.same_update:
            return None
        if isinstance(value, cst.SimpleString):
            return make_string(found.port, value)
        if isinstance(value, cst.Name) and found.port in ("true", "false"):
            return cst.Name(found.port.capitalize())
        return None

    def _in_signature(self) -> bool:
        """A call's keyword, not a parameter default (``def f(gpus_per_node=8)`` asks for nothing)."""
        ancestors = self.context.ancestors
        return not ancestors or not isinstance(ancestors[-1], cst.Call)

    def _module_level(self) -> bool:
        return len(self.context.ancestors) <= 2

    # -- calls ----------------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        last = terminal_name(node.func)
        if last in ("remote", "options") and self._ray:
            self._ray_gpus(node, last)
            return
        if last == "ScalingConfig":
            self._scaling_config(node)
            return
        rows = library_calls()
        if last is None or not any(name.endswith("." + last) for name in rows):
            return
        qualified = call_qualname(self, node)
        row = rows.get(qualified or "")
        if row is None:
            return
        if row.backend:
            backend = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "backend"), None)
            if backend is None and len(node.args) > 2 and node.args[2].keyword is None:
                backend = node.args[2].value
            if backend is None or (string_value(backend) or "").lower() != row.backend and not (
                isinstance(backend, cst.Attribute) and backend.attr.value.lower() == row.backend
            ):
                return
        self.report(node, f"`{qualified}` {row.what}", guidance=row.guidance, effort=Effort.MEDIUM)

    def _ray_gpus(self, call: cst.Call, last: str) -> None:
        if last == "remote" and call_qualname(self, call) != "ray.remote":
            return
        arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == _RAY_GPU_KEYWORD), None)
        if arg is None or not _positive_number(arg.value):
            return
        message = _RAY_GPUS_MESSAGE
        has_resources = any(a.keyword is not None and a.keyword.value == "resources" for a in call.args)
        if isinstance(arg.value, cst.Integer) and not has_resources and self.context.settings.target == "neuron":
            resources = cst.Dict([cst.DictElement(make_string(ray_resources().neuron), arg.value)])
            self.report(
                arg, message,
                replacement=arg.with_changes(keyword=cst.Name("resources"), value=resources),
                description='ask for Ray\'s "neuron_cores" resource', ancestors=(*self.context.ancestors, call),
            )
            return
        self.report(arg, message, guidance=_RAY_GUIDANCE, effort=Effort.LOW, ancestors=(*self.context.ancestors, call))

    def _ray_bundle(self, element: cst.DictElement) -> None:
        message = _RAY_BUNDLE_MESSAGE
        if self.context.settings.target == "neuron" and isinstance(element.key, cst.SimpleString):
            self.report(
                element.key, message, replacement=make_string(ray_resources().neuron, element.key),
                description='ask for Ray\'s "neuron_cores" resource', ancestors=(*self.context.ancestors, element),
            )
            return
        self.report(
            element.key, message, guidance=_RAY_GUIDANCE, effort=Effort.LOW, ancestors=(*self.context.ancestors, element),
        )

    def _scaling_config(self, call: cst.Call) -> None:
        qualified = call_qualname(self, call) or ""
        if not qualified.startswith("ray."):
            return
        arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == "use_gpu"), None)
        if arg is None or _literal(arg.value) in ("False", "None", "0"):
            return
        self.report(
            arg, _USE_GPU_MESSAGE, guidance=_USE_GPU_GUIDANCE, effort=Effort.LOW, ancestors=(*self.context.ancestors, call),
        )

    def _constant(self, name: str, node: cst.Assign) -> None:
        names, what, guidance, _source = gpu_constants()
        if name in names and isinstance(node.value, cst.Integer) and _positive_number(node.value):
            self.report(
                node.value, f"`{name} = {node.value.value}` {what}", guidance=guidance, effort=Effort.LOW,
                ancestors=(*self.context.ancestors, node),
            )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        return _Detector(cls, file, settings).findings()


def _setting_guidance(found: Match) -> str:
    return found.setting.guidance or (f"on Trainium write {found.port!r}" if found.port else "")


def _listed_guidance(item: ListItem) -> str:
    port = item.match.port
    return item.match.setting.guidance or (f"on Trainium write `{item.key}={port}` in the list" if port else "")


def _root(node: cst.BaseExpression) -> str | None:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def _one_string(file, node: ast.Constant) -> bool:  # noqa: ANN001 - python.AstFile
    """Is the str literal ``node`` one token (libcst's ``SimpleString``), not an implicit
    concatenation (``"flash_" "attention_2"``: a ``ConcatenatedString``, which ``_literal`` does
    not read), though ``ast`` folds both into one ``Constant``?"""
    start, end = file.bounds(node)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("(" + file.text[start:end] + ")").readline))
    except (tokenize.TokenError, SyntaxError):
        raise Unsure("a string literal tokenize cannot read alone") from None
    return sum(t.type == tokenize.STRING for t in tokens) == 1


def _ast_terminal(node: ast.expr) -> str | None:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None


def _ast_target_name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _ast_str(node: ast.expr | None) -> str | None:
    """``string_value``: a str literal, implicit concatenations included."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _ast_positive_number(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value > 0
    return True  # computed (True / 1j / a name are no Integer or Float in libcst either)


class _Detector(AstDetector):
    """The visitor above on CPython's ``ast`` (``python/_ast_walk.py``), for files the engine does
    not parse with libcst. A report the visitor gives a fix (the table's port, Ray's resource
    name) makes it unsure: the fix text is libcst's to build, and a safe fix is an edit, which
    libcst writes anyway. A call's arguments and a dict's elements (libcst's ``Arg`` and
    ``DictElement`` visits) are read when their call or dict is visited: they depend only on the
    ancestors and on whether Ray was imported, which no argument changes."""

    def __init__(self, rule: type, file, settings: Settings) -> None:  # noqa: ANN001 - python.AstFile
        super().__init__(rule, file)
        self.settings = settings
        self._ray = False

    def findings(self) -> list[Finding] | None:
        reports = self.reports()
        if reports is None:
            return None
        return [self.finding(node, message, guidance, effort) for node, message, guidance, effort, _ in reports]

    def _report(self, node: object, message: str, guidance: str, effort: Effort) -> None:
        self._reports.append((node, message, guidance, effort, tuple(self.ctx.ancestors)))

    def _text(self, node: ast.AST) -> str:
        start, end = self.file.bounds(node)
        return self.file.text[start:end]

    def _literal(self, node: ast.expr) -> str | None:
        """``_literal``: the source text of a number, as libcst keeps it (``0x10``, ``1_000``)."""
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, str):
                return value if _one_string(self.file, node) else None
            if value is True or value is False or value is None:
                return str(value)
            if type(value) in (int, float):
                return self._text(node)
            return None
        if isinstance(node, ast.Dict):
            return "{...}" if node.keys else ""
        return None

    # -- where Ray is imported
    def visit_Import(self, node: ast.Import) -> None:
        if any(a.name.split(".")[0] == "ray" for a in node.names):
            self._ray = True

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module is not None and not node.level and node.module.split(".")[0] == "ray":
            self._ray = True

    # -- settings
    def _arg(self, call: ast.Call, arg) -> None:  # noqa: ANN001 - python.ArgNode
        key = arg.keyword
        if key is None:
            return
        self._listed(arg.value)
        if key == "default":
            self._default(call, arg)
            return
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "from_pretrained" and _tokenizer_loader(_ast_terminal(func.value)):
            return
        if normalize_key(key) in setting_keys("python"):
            beside = frozenset(normalize_key(a.keyword) for a in self.ctx.args(call) if a.keyword is not None and a is not arg)
            self._setting(key, arg.value, beside)

    def visit_Dict(self, node: ast.Dict) -> None:
        for key_node, value in zip(node.keys, node.values):
            key = _ast_str(key_node)
            if key is None:
                continue
            if key == ray_resources().gpu and self._ray:
                self._ray_bundle(key_node)
            elif normalize_key(key) in setting_keys("python"):
                others = (_ast_str(k) for k in node.keys if k is not key_node)
                self._setting(key, value, frozenset(normalize_key(k) for k in others if k is not None))

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        name = _ast_target_name(node.target)
        if name is not None and node.value is not None and normalize_key(name) in setting_keys("python"):
            self._setting(name, node.value)

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) != 1:
            return
        target = node.targets[0]
        name = _ast_target_name(target)
        if name is None:
            return
        if normalize_key(name) in setting_keys("python"):
            self._setting(name, node.value)
        elif isinstance(target, ast.Name) and len(self.ctx.ancestors) == 1:
            # libcst's module level: [Module, SimpleStatementLine], which ast has no node for.
            self._constant(name, node)

    def _default(self, call: ast.Call, arg) -> None:  # noqa: ANN001 - python.ArgNode
        name = None
        if isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument":
            flags = [_ast_str(a.value) for a in self.ctx.args(call) if a.keyword is None]
            name = next((f.lstrip("-") for f in flags if f and f.startswith("--")), None)
        elif isinstance(self.ctx.parent, ast.AnnAssign):
            name = _ast_target_name(self.ctx.parent.target)
        if name is not None and normalize_key(name) in setting_keys("python"):
            self._setting(name, arg.value)

    def _listed(self, value: ast.expr) -> None:
        """The visitor's ``_listed``: a ``SimpleString`` there is one string token here."""
        text = _ast_str(value)
        if text is None or "=" not in text or any(isinstance(a, ast.Assert) for a in self.ctx.ancestors):
            return
        items = list_settings(text, whole=True)
        if items and not _one_string(self.file, value):
            return
        for item in items:
            self._report(value, f"`{text[item.start:item.end]}` in a `key=value` list {item.match.what}", _listed_guidance(item), Effort.LOW)

    def _setting(self, key: str, value: ast.expr, beside: frozenset[str] = frozenset()) -> None:
        written = self._literal(value)
        if written is None or self._expected_to_raise() or any(isinstance(a, ast.Assert) for a in self.ctx.ancestors):
            return
        found = match_setting(key, written, "python")
        if found is None or found.setting.planned(beside):
            return
        if self._ported(value, found) and self.settings.target == "neuron":
            raise Unsure("a setting the table ports: the visitor builds its fix")
        self._report(value, f"`{key}={written}` {found.what}", _setting_guidance(found), Effort.LOW)

    @staticmethod
    def _ported(value: ast.expr, found: Match) -> bool:
        """Would ``_port`` build a replacement (a str literal, or ``True`` / ``False`` / ``None``
        written as a name, for a ``true`` / ``false`` port)?"""
        if not found.port or not found.same_update or not isinstance(value, ast.Constant):
            return False
        if isinstance(value.value, str):
            return True  # a concatenation never gets here: _literal read it as None
        # `is`, not `in`: 1 == True, 0.0 == False.
        return (value.value is True or value.value is False or value.value is None) and found.port in ("true", "false")

    def _expected_to_raise(self) -> bool:
        for anc in self.ctx.ancestors:
            if not isinstance(anc, (ast.With, ast.AsyncWith)):
                continue
            for item in anc.items:
                call = item.context_expr
                if isinstance(call, ast.Call) and (
                    self.ctx.call_qualname(call) == "pytest.raises" or _ast_terminal(call.func) in _RAISES_ASSERTIONS
                ):
                    return True
        return False

    # -- calls
    def visit_Call(self, node: ast.Call) -> None:
        self._call(node)
        for arg in self.ctx.args(node):
            self._arg(node, arg)

    def _call(self, node: ast.Call) -> None:
        last = _ast_terminal(node.func)
        if last in ("remote", "options") and self._ray:
            self._ray_gpus(node, last)
            return
        if last == "ScalingConfig":
            self._scaling_config(node)
            return
        rows = library_calls()
        if last is None or not any(name.endswith("." + last) for name in rows):
            return
        qualified = self.ctx.call_qualname(node)
        row = rows.get(qualified or "")
        if row is None:
            return
        args = self.ctx.args(node)
        if row.backend:
            backend = next((a.value for a in args if a.keyword == "backend"), None)
            if backend is None and len(args) > 2 and args[2].keyword is None:
                backend = args[2].value
            if backend is None or (_ast_str(backend) or "").lower() != row.backend and not (
                isinstance(backend, ast.Attribute) and backend.attr.lower() == row.backend
            ):
                return
        self._report(node, f"`{qualified}` {row.what}", row.guidance, Effort.MEDIUM)

    def _ray_gpus(self, call: ast.Call, last: str) -> None:
        if last == "remote" and self.ctx.call_qualname(call) != "ray.remote":
            return
        args = self.ctx.args(call)
        arg = next((a for a in args if a.keyword == _RAY_GPU_KEYWORD), None)
        if arg is None or not _ast_positive_number(arg.value):
            return
        has_resources = any(a.keyword == "resources" for a in args)
        integer = isinstance(arg.value, ast.Constant) and type(arg.value.value) is int
        if integer and not has_resources and self.settings.target == "neuron":
            raise Unsure("num_gpus= the visitor rewrites: it builds the fix")
        self._report(arg.source, _RAY_GPUS_MESSAGE, _RAY_GUIDANCE, Effort.LOW)

    def _ray_bundle(self, key: ast.Constant) -> None:
        if self.settings.target == "neuron" and _one_string(self.file, key):
            raise Unsure('a Ray "GPU" bundle key the visitor rewrites: it builds the fix')
        self._report(key, _RAY_BUNDLE_MESSAGE, _RAY_GUIDANCE, Effort.LOW)

    def _scaling_config(self, call: ast.Call) -> None:
        qualified = self.ctx.call_qualname(call) or ""
        if not qualified.startswith("ray."):
            return
        arg = next((a for a in self.ctx.args(call) if a.keyword == "use_gpu"), None)
        if arg is None or self._literal(arg.value) in ("False", "None", "0"):
            return
        self._report(arg.source, _USE_GPU_MESSAGE, _USE_GPU_GUIDANCE, Effort.LOW)

    def _constant(self, name: str, node: ast.Assign) -> None:
        names, what, guidance, _source = gpu_constants()
        value = node.value
        if name in names and isinstance(value, ast.Constant) and type(value.value) is int and value.value > 0:
            self._report(value, f"`{name} = {self._text(value)}` {what}", guidance, Effort.LOW)


# The table's rows and their sources belong to the rule's documentation (docs/rules.md, `cuda2neuron rules`).
LibraryCudaSetting.__doc__ = with_table(LibraryCudaSetting.__doc__ or "", "python")
LibraryCudaSetting.reference = table_markdown("python")
