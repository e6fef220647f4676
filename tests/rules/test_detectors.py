"""Each rule's detector on CPython's ``ast`` (``Rule.detect``) says what its libcst visitor says.

The engine skips libcst for a file whose woken rules all have detectors and where no edit can
land (kinds/_python.py's ``_detected``); its findings then come from the detectors, so a
detector that drifts from its visitor changes the tool's output. Each detector is run beside
its visitor on the rule's VALID/INVALID examples and on a table of traps (aliases, shadowing,
non-ASCII text before a span, multi-line calls, parentheses, decorators, f-strings, binding
order): the findings must be equal, field for field. A trap the ``ast`` cannot decide exactly
must make the detector unsure (None), never a guess.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from cuda2neuron.core import Config, Finding, ProjectFacts, Rule, RunOptions, Settings
from cuda2neuron.kinds import catalog
from cuda2neuron.kinds._python import _detected
from cuda2neuron.python import lint_module, parse_bytes

RULES = catalog()
DETECTING = sorted(code for code, rule in RULES.items() if rule.has_detector())


def _both(
    rule: type[Rule], source: str, path: str = "example.py", settings: Settings | None = None
) -> tuple[list[Finding] | None, list[Finding]]:
    settings = settings or Settings()
    data = source.encode("utf-8")
    # What the engine makes of the detector's findings (suppressions, order), as `check` runs.
    detected = _detected(path, data, Config(settings=settings), RunOptions(), (rule,))
    module = parse_bytes(data)
    return detected, lint_module(module, [rule], path, settings, data.decode("utf-8"))


def _examples() -> list:
    cases = []
    for code in DETECTING:
        rule = RULES[code]
        for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID)):
            for i, example in enumerate(examples):
                if isinstance(example, str):
                    cases.append(pytest.param(code, example, "example.py", Settings(), id=f"{code}-{kind}-{i}"))
                else:
                    settings = replace(Settings(target=example.target), **dict(example.options))
                    cases.append(pytest.param(code, example.source, example.path, settings, id=f"{code}-{kind}-{i}"))
    return cases


def test_a_rule_has_a_detector():
    assert "CN801" in DETECTING


# Detectors that leave a finding with a fix to libcst (unsure there): the fix text is libcst's to
# build, and a safe fix is an edit, which libcst writes anyway. Everywhere else they decide.
FIXES_LEFT_TO_LIBCST = frozenset({"CN111", "CN627"})


# Detectors that decide a rule's common uses, fixes included, and leave every use a hold, a group
# or an added import may apply to to libcst (unsure there; DECIDED_CUDA_API / UNSURE_CUDA_API
# hold both sides): CN201 moves `torch.cuda.X` in plain statements only.
HOLDS_LEFT_TO_LIBCST = frozenset({"CN201"})


# Detectors that only prove a file holds no finding (every report of the visitor needs a word or
# an import the detector looks for): unsure wherever the visitor could report, and on its examples.
GATES = frozenset({"CN103", "CN208", "CN501", "CN502", "CN503", "CN504", "CN505", "CN602", "CN604", "CN606", "CN609", "CN611", "CN617", "CN619", "CN620", "CN805"})
# h42d: gates for CN106 (legacy tensor types) and CN107 (integer device ordinals).
GATES = GATES | {"CN106", "CN107"}
# The torch.cuda family's gates (CN203, CN207, CN210, CN212): their rows are GATE_CASES_CUDA_FAMILY.
GATES = GATES | frozenset({"CN203", "CN207", "CN210", "CN212"})


# Detectors that decide the common cases and leave the rest to libcst: the examples each leaves
# (by id), and why. Every other example of theirs is decided, equal to the visitor.
EXAMPLES_LEFT_TO_LIBCST = {
    "CN112": {"invalid-5": "a module that patches torch.cuda: libcst reads its assignments"},
    "CN622": {
        **{f"invalid-{i}": "a short provider name where ONNX Runtime is imported: the receiving call is libcst's" for i in (3, 4)},
        "valid-1": "a short provider name where ONNX Runtime is imported",
    },
    "CN101": {
        "invalid-1": "a raw pointer taken in the module: the kernel gates read libcst",
        **{f"invalid-{i}": "a device argument: its kind is read from options, parameters, guards" for i in (*range(3, 16), 17, 18)},
        "invalid-19": "a map_location lambda",
        "invalid-20": "a forwarding call in a return: the program pass may link it",
        "invalid-21": "the accelerator target's fix",
    },
    # CN109 (h42n): its raw reports on ast, the net filter the engine's (python/_ast_nets.py).
    "CN109": {
        "valid-14": "a file naming ONNX Runtime: the provider's call is resolved by libcst",
        "valid-15": "a test that writes a device and compares it back (is_test_data)",
    },
    # h42c: CN205 decides the neuron target; a statement sharing its line and a report inside an
    # f-string go to libcst.
    "CN205": {
        "invalid-4": "a statement beside another on its line",
        **{f"invalid-{i}": "the accelerator target's messages" for i in (6, 7, 11, 14)},
        "invalid-10": "a read inside an f-string",
    },
    "CN105": {
        "invalid-2": "the from-import the fix leaves unused: libcst removes it",
        **{f"invalid-{i}": "the accelerator target's fix" for i in range(3, 7)},
    },
}
# h42f (CN301, CN302, CN303, CN603, CN605), kept apart to merge cleanly. CN603 is a gate; CN301
# and CN302 decide with their fixes, on the neuron target; CN303 and CN605 decide, CN605
# leaving its SDPA rewrite to libcst.
GATES |= {"CN603"}
EXAMPLES_LEFT_TO_LIBCST["CN301"] = {
    "invalid-1": "arguments made keywords: libcst builds them",
    "invalid-2": "arguments made keywords: libcst builds them",
    "invalid-4": "the from-import the fix leaves unused: libcst removes it",
    "invalid-5": "the from-import the fix leaves unused: libcst removes it",
    "invalid-7": "the accelerator target's fix",
    "invalid-8": "a call with **kwargs",
    "invalid-9": "a reference that is not called",
}
EXAMPLES_LEFT_TO_LIBCST["CN302"] = {
    "invalid-5": "the dtype's `import torch`: libcst adds it",
    "invalid-6": "the accelerator target's fix",
}
EXAMPLES_LEFT_TO_LIBCST["CN605"] = {f"invalid-{i}": "the SDPA rewrite: libcst builds it" for i in (1, 2)}


# Detectors that build fixes but leave some shapes to libcst (unsure there): a literal bound to a
# plain name, an f-string, a parametrization, a file that may hold CUDA-only code. On their
# examples they say what the visitor says or nothing; DECIDED_DEVICE_STRINGS holds the shapes
# they decide.
PARTIAL = frozenset({"CN102"})


@pytest.mark.parametrize(("code", "source", "path", "settings"), _examples())
def test_examples(request, code, source, path, settings):
    detected, linted = _both(RULES[code], source, path, settings)
    example = request.node.callspec.id.removeprefix(f"{code}-")
    if code in PARTIAL or example in EXAMPLES_LEFT_TO_LIBCST.get(code, {}):
        assert detected is None or detected == linted
        return
    if code in GATES:
        assert detected is None or detected == linted == []
        return
    if detected is None and code in FIXES_LEFT_TO_LIBCST:
        assert any(f.fix is not None for f in linted), "unsure where the visitor builds no fix"
        return
    if detected is None and code in HOLDS_LEFT_TO_LIBCST:
        return
    assert detected is not None, "the rule's own example left its detector unsure"
    assert detected == linted


_T = "import torch\n"
# (source, path): every one decided by the detector, with the same findings as the visitor.
DECIDED = [
    pytest.param(_T + "x = x.to(torch.float64)\n", "m.py", id="method-to"),
    pytest.param("import torch as t\nx = t.zeros(3, dtype=t.float64, device=d)\n", "m.py", id="alias-import"),
    pytest.param("from torch import float64 as f64\nx = x.to(f64)\n", "m.py", id="from-import-alias-unreported"),
    pytest.param("from torch import float64, double\nx = x.to(float64)\ny = y.to(double)\n", "m.py", id="from-import-bare"),
    pytest.param(_T + "def f(torch):\n    return x.to(torch.float64)\n", "m.py", id="shadowed-by-parameter"),
    pytest.param(_T + "def f():\n    torch = g()\n    return x.to(torch.float64)\n", "m.py", id="shadowed-by-assignment"),
    pytest.param(_T + "class A:\n    torch = 1\n    def f(self):\n        return x.to(torch.float64)\n", "m.py", id="class-scope-not-enclosing"),
    pytest.param("try:\n    import torch\nexcept ImportError:\n    torch = None\nx = x.to(torch.float64)\n", "m.py", id="try-import-fallback"),
    pytest.param("if c: import torch\nx = x.to(torch.float64)\n", "m.py", id="suite-import-not-prebound"),
    pytest.param("def f():\n    return x.to(torch.float64)\nimport torch\n", "m.py", id="module-import-below"),
    pytest.param("if a:\n    pass\nelif b:\n    import torch\nx = x.to(torch.float64)\n", "m.py", id="elif-import-prebound"),
    pytest.param(_T + 's = "héllo wörld"; x = x.to( (torch.float64) )\n', "m.py", id="non-ascii-before-span"),
    pytest.param(_T + "y = torch.zeros(3, dtype=(  torch . float64  ), device=d)\n", "m.py", id="spaced-parenthesized"),
    pytest.param(_T + "y = x.to((torch.float64))\nz = x.to(((torch.double)))\n", "m.py", id="own-and-call-parentheses"),
    pytest.param(_T + "y = x.to(\n    torch.float64  # why\n)\n", "m.py", id="multi-line-call-comment"),
    pytest.param(_T + "y = x.to(\n    (torch.float64)  # why\n)\n", "m.py", id="multi-line-own-parentheses"),
    pytest.param("z = (w\n   .double ( ))\nq = f(a.double())\nr = (b).double()\n", "m.py", id="double-calls"),
    pytest.param(
        _T + "def f():\n    if a:\n        y = model(a,\n            # why\n\n                  b).to(\n  device).double()\n",
        "m.py",
        id="fix-text-loses-block-indent",
    ),
    pytest.param(_T + "def f():\n    y = x.to((\n        torch.float64\n    ))\n", "m.py", id="fix-text-parentheses-across-lines"),
    pytest.param("x = obj.double(2)\ny = torch.double()\nz = x.cpu().double()\n", "m.py", id="double-not-reported"),
    pytest.param(_T + "dtype = torch.float64\nq = torch.ones(2, dtype=torch.float32, device=dev)\n", "m.py", id="keyword-name-uses-binding"),
    pytest.param(_T + "dtype = torch.float64 if x.to(dtype) else torch.float32\n", "m.py", id="ifexp-test-walked-first"),
    pytest.param(_T + "dtype = x.to(dtype) or torch.float64\n", "m.py", id="bool-op-left-walked-first"),
    pytest.param(_T + "def f(x, double):\n    dtype = torch.float64 if double else torch.float32\n    return x.to(dtype)\n", "m.py", id="binding-in-function"),
    pytest.param(_T + "dtype: torch.dtype = torch.float64\ndef f():\n    return x.to(dtype)\n", "m.py", id="binding-other-scope"),
    pytest.param(_T + "dtype = torch.float64 or torch.float32\ny = x.type(dtype)\n", "m.py", id="binding-bool-op"),
    pytest.param(_T + "@decorate(torch.zeros(1, dtype=torch.float64, device=d))\ndef f():\n    pass\n", "m.py", id="decorator"),
    pytest.param(_T + 'x = torch.tensor(a, dtype=torch.float64).to(device)\ny = torch.tensor(a, dtype=torch.float64).to("cpu")\n', "m.py", id="moved-at-once"),
    pytest.param(_T + 'x = torch.zeros(3, dtype=torch.float64, device=torch.device("cpu"))\n', "m.py", id="cpu-device-call"),
    pytest.param(_T + "x = torch.sum(a.cpu(), dtype=torch.float64)\ny = torch.zeros_like(a, dtype=torch.double)\n", "m.py", id="ops-and-like"),
    pytest.param(_T + "m = AutoModel.from_pretrained(n, torch_dtype=torch.float64)\nk = adjust(torch.float64, x.device)\n", "m.py", id="outside-torch"),
    pytest.param(_T + "x = x.to(*args, dtype=torch.float64)\ny = f(*a, freqs_dtype=torch.float64, *b)\n", "m.py", id="starred-arguments"),
    pytest.param(_T + "x = {torch.float64: 1}\nok = d == torch.double\n", "m.py", id="values-not-reported"),
    pytest.param(_T + "x = x.to(torch.float64)  # cuda2neuron: ignore[CN801]\n", "m.py", id="suppressed"),
    pytest.param(_T + "x = x.to(torch.float64)\n", "tests/test_m.py", id="host-only-test-module"),
    pytest.param(_T + "x = x.to(torch.float64)\nd = 'cuda'\n", "tests/test_m.py", id="test-module-naming-device"),
    pytest.param(_T + "x = x.to(torch.float64)\r\ny = (w\r\n  .double())\r\n", "m.py", id="crlf"),
    pytest.param(_T + "x = x.to(torch.float64)\ry = (w\r  .double())\r", "m.py", id="lone-cr"),
    pytest.param(_T + "def f():\n    global torch\n    torch = 1\n    return x.to(torch.float64)\n", "m.py", id="global"),
    pytest.param(_T + "g = lambda x, dtype=torch.float64: x.to(torch.double)\n", "m.py", id="lambda"),
    pytest.param(_T + "with ctx() as torch:\n    y = x.to(torch.float64)\n", "m.py", id="with-target-shadows-inside-module"),
    pytest.param(_T + "for double in xs:\n    y = x.to(torch.double)\n", "m.py", id="loop-target"),
    pytest.param(_T + "y = [x.to(torch.float64) for torch in mods]\n", "m.py", id="comprehension-binds-nothing"),
    pytest.param(_T + "x = x.to(torch.float64); y = 'ünï'; z = z.to(torch.double)\n", "m.py", id="non-ascii-between"),
    pytest.param(_T + "# coding: utf-8\nx = x.to(torch.float64)\n", "m.py", id="utf8-cookie"),
]


_F = "from torch.fft import rfft\n"
DECIDED_CN802 = [
    pytest.param(_F + "y = rfft(x)\n", "m.py", id="CN802-from-import"),
    pytest.param(_T + "z = torch.view_as_complex(x)\nd = torch.cfloat\ns = torch.stft(x, 4)\n", "m.py", id="CN802-attributes"),
    pytest.param("from torch import view_as_complex as vac\ny = vac(x)\n", "m.py", id="CN802-alias"),
    pytest.param("import torch.fft\ny = torch.fft.rfft(x)\n", "m.py", id="CN802-import-submodule"),
    pytest.param(_F + "g(rfft=1)\n", "m.py", id="CN802-keyword-name-reported"),
    pytest.param(_T + "def f(torch):\n    return torch.fft.fft(x)\n", "m.py", id="CN802-shadowed"),
    pytest.param("import numpy as np\nimport torch\nf = np.fft.rfft(a)\n", "m.py", id="CN802-numpy"),
]


_Q = "from transformers import AutoModelForCausalLM, BitsAndBytesConfig\n"
DECIDED_CN625 = [
    pytest.param(_Q + "m = AutoModelForCausalLM.from_pretrained(\n    'x',\n    load_in_8bit = True,  # why\n)\n", "m.py", id="CN625-spaced-keyword"),
    pytest.param(_Q + "m = load(n, load_in_4bit=(bits == 4), load_in_8bit=0, **kw)\n", "m.py", id="CN625-parenthesized-value"),
    pytest.param(_Q + "m = load(n, load_in_8bit=0x0, load_in_4bit=None)\nk = load(n, load_in_4bit=False)\n", "m.py", id="CN625-zero-written-otherwise"),
    pytest.param(_Q + "c = BitsAndBytesConfig(\n    load_in_4bit=True)\n", "m.py", id="CN625-config-holds-its-shortcut"),
    pytest.param("import transformers as tf\nc = tf.GPTQConfig(bits=4)\nd = my.GPTQConfig()\n", "m.py", id="CN625-alias-and-own-class"),
    pytest.param("def f():\n    from transformers import BitsAndBytesConfig\n    return BitsAndBytesConfig()\n", "m.py", id="CN625-import-in-function"),
]


@pytest.mark.parametrize(("source", "path"), DECIDED_CN625)
def test_traps_decided_cn625(source, path):
    detected, linted = _both(RULES["CN625"], source, path)
    assert detected is not None, "a trap the detector should decide left it unsure"
    assert detected == linted


@pytest.mark.parametrize(("source", "path"), DECIDED)
def test_traps_decided(source, path):
    detected, linted = _both(RULES["CN801"], source, path)
    assert detected is not None, "a trap the detector should decide left it unsure"
    assert detected == linted


@pytest.mark.parametrize(("source", "path"), DECIDED_CN802)
def test_traps_decided_cn802(source, path):
    detected, linted = _both(RULES["CN802"], source, path)
    assert detected is not None, "a trap the detector should decide left it unsure"
    assert detected == linted


# The ast cannot say what libcst would: the detector must not guess.
UNSURE = [
    pytest.param(_T + 'msg = f"{x.to(torch.float64)}"\n', id="inside-f-string"),
    pytest.param(_T + "ｄｔｙｐｅ = torch.float64\nx.to(dtype)\n", id="nfkc-folded-name"),
    pytest.param(_T + "match v:\n    case 1:\n        x = x.to(torch.float64)\n", id="match-statement"),
    pytest.param("# -*- coding: latin-1 -*-\nimport torch\nx = x.to(torch.float64)\n", id="latin-1-cookie"),
    pytest.param(_T + "with (x.double()):\n    pass\n", id="with-parentheses"),
    pytest.param(_T + "def f():\n    y = (x  \\\n        .double())\n", id="backslash-across-lines"),
    pytest.param(_T + 'def f():\n    y = g("""a\n    b""").to(\n        d).double()\n', id="string-across-lines"),
    pytest.param(_T + "y = x.to(  # (\n    (torch.float64))\n", id="comment-above-own-parenthesis"),
]


UNSURE_CN802 = [
    pytest.param("from torch.fft import fft\ndef fft(x):\n    pass\n", id="CN802-def-name"),
    pytest.param(_F + "def f(rfft=None):\n    pass\n", id="CN802-parameter-name"),
    pytest.param("from torch.fft import rfft as rfft\n", id="CN802-as-name"),
    pytest.param(_F + "try:\n    pass\nexcept E as rfft:\n    pass\n", id="CN802-except-name"),
    pytest.param(_F + "def f():\n    global rfft\n", id="CN802-global-name"),
    pytest.param(_F + "import rfft.x\n", id="CN802-import-module-name"),
    pytest.param(_T + 'm = f"{torch.fft.rfft(x)}"\n', id="CN802-inside-f-string"),
]


@pytest.mark.parametrize("source", UNSURE)
def test_traps_unsure(source):
    detected, _ = _both(RULES["CN801"], source)
    assert detected is None


@pytest.mark.parametrize("source", UNSURE_CN802)
def test_traps_unsure_cn802(source):
    detected, linted = _both(RULES["CN802"], source)
    assert detected is None
    assert linted, "the visitor reports the name the detector cannot place"


# CN111 and CN627: decided (the findings equal the visitor's, field for field) ...
_TA = "from transformers import TrainingArguments\n"
DECIDED_NEXT = [
    pytest.param("CN105", "import torch\nwith torch . cuda . device(0), torch.cuda.device(d) as c:\n    pass\n", id="CN105-spaced-and-two-items"),
    pytest.param("CN105", "import torch as t\nwith open('é') as f, t.cuda.device(1):\n    pass\n", id="CN105-alias-non-ascii-before-span"),
    pytest.param("CN105", "import torch\ndef f(torch):\n    with torch.cuda.device(0):\n        pass\n", id="CN105-shadowed-not-reported"),
    pytest.param("CN101", "y = (x.cuda())\nz = f((w.cuda()))\nv = f(u.cuda())\n", id="CN101-parentheses-own-and-call"),
    pytest.param("CN101", "s = 'é'; m = m.cuda(non_blocking=nb)\n", id="CN101-non-ascii-before-span"),
    pytest.param("CN101", "import torch as t\nm = t.cuda()\nn = t.nn.Linear(2, 2).cuda()\n", id="CN101-module-attribute-not-a-method"),
    pytest.param("CN101", "class A:\n    def cuda(self):\n        return self\n\n    async def f(self):\n        def cuda():\n            pass\n", id="CN101-override-name-span"),
    pytest.param("CN101", "def f(m):\n    m.cuda()\n    return m.cuda(*a, **k)\n", id="CN101-statement-and-forwarded"),
    pytest.param("CN101", "m = m.cuda()  # cuda2neuron: ignore[CN101]\n", id="CN101-suppressed"),
    pytest.param("CN101", "@torch.no_grad()\ndef test_add(x):\n    y = x.cuda()\n    if use_cuda:\n        z = y.cuda()\n", id="CN101-test-without-kernels"),
    pytest.param("CN101", "def f(x):\n    y = x.cuda()\n    return y\ndef g(d):\n    return d == 'cuda'\n", id="CN101-cuda-test-in-another-function"),
    pytest.param("CN101", "a, b = x.cuda(), y.cuda()\nc = z.cuda()\nif c.is_cuda:\n    pass\n", id="CN101-module-level-and-tuple-bind-nothing"),
    pytest.param("CN111", "from trl import get_kbit_device_map as gk\nkw = dict(device_map=gk())\n", id="CN111-alias"),
    pytest.param("CN111", "def get_kbit_device_map():\n    pass\nkw = dict(device_map=get_kbit_device_map())\n", id="CN111-own-function"),
    pytest.param("CN111", 's = "é"; max_memory = {"cuda:0": "20GiB"}\n', id="CN111-non-ascii-before-span"),
    pytest.param("CN111", 'm = load("x",\n    max_memory={  # why\n        "cuda:0": "20GiB",\n    },\n)\n', id="CN111-multi-line-call"),
    pytest.param("CN111", '@patch(max_memory={"cuda:0": "1GiB"})\ndef f():\n    pass\n', id="CN111-decorator"),
    pytest.param("CN111", 'max_memory.update(x={"cuda:0": "1GiB"})\nmax_memory = {**base, "cuda:1": "1GiB"}\n', id="CN111-keyword-first-and-spread"),
    pytest.param("CN111", "max_memory = {j: m for i in range(n)}\nmm = {i: m for i in range(n)}\n", id="CN111-comprehension-other-key"),
    pytest.param("CN111", 'm = {"": None}\nn = {"": "cpu"}\no = {"": True}\np = {"" "": x.name}\n', id="CN111-empty-key-no-ordinal"),
    pytest.param("CN111", 'max_memory[(0)] = "8GiB"\nmax_memory[0:1] = v\nmax_memory[i] = v\n', id="CN111-subscripts"),
    pytest.param("CN111", 'def f():\n    def g():\n        return {b"": 0, f"": 0}\n', id="CN111-bytes-and-f-string-keys"),
    pytest.param("CN627", "import deepspeed as ds\nengine = ds.initialize(model=m)\n", id="CN627-alias"),
    pytest.param("CN627", "def f(deepspeed):\n    deepspeed.initialize(model=m)\n", id="CN627-shadowed"),
    pytest.param("CN627", "m = load('x', attn_implementation=\"flash_\" \"attention_2\")\n", id="CN627-concatenated-not-read"),
    pytest.param("CN627", _TA + "s = 'ü'; a = TrainingArguments(output_dir='o', deepspeed='ds.json')\n", id="CN627-non-ascii-before-span"),
    pytest.param("CN627", _TA + "a = TrainingArguments(\n    output_dir='o',\n    deepspeed=(  # why\n        'ds.json'),\n)\n", id="CN627-multi-line-call"),
    pytest.param("CN627", "import ray\n\n@ray.remote(num_gpus=0.5)\ndef f():\n    pass\n", id="CN627-decorator-fraction"),
    pytest.param("CN627", "import ray\n\n@ray.remote(num_gpus=n, resources={})\nclass W:\n    pass\n", id="CN627-computed-count"),
    pytest.param("CN627", "w = Worker.options(num_gpus=2).remote()\nimport ray\n", id="CN627-ray-imported-below"),
    pytest.param("CN627", "import pytest\n\ndef test_x():\n    with pytest.raises(ValueError):\n        TrainingArguments(deepspeed='ds.json')\n", id="CN627-expected-to-raise"),
    pytest.param("CN627", "class T:\n    def test(self):\n        async def f():\n            async with self.assertRaises(E):\n                g(deepspeed='x.json')\n", id="CN627-async-with-assertion"),
    pytest.param("CN627", "GPUS_PER_NODE = 0x8\nNUM_GPUS = 1_0\nif c:\n    GPUS_PER_NODE = 8\nif d: GPUS_PER_NODE = 4\nG = True\n", id="CN627-constants-as-written"),
    pytest.param("CN627", "def f():\n    GPUS_PER_NODE = 8\nclass A:\n    GPUS_PER_NODE = 8\n", id="CN627-constants-not-module-level"),
    pytest.param("CN627", "import argparse\np = argparse.ArgumentParser()\np.add_argument('-d', '--deepspeed', default='ds.json')\n", id="CN627-argparse-default"),
    pytest.param("CN627", "from dataclasses import dataclass, field\n\n@dataclass\nclass A:\n    deepspeed: str = field(default='ds.json')\n", id="CN627-field-default"),
    pytest.param("CN627", "import ray\npg = placement_group([{'G' 'PU': 1}])\n", id="CN627-concatenated-bundle-key"),
    pytest.param("CN627", "import ray.train as rt\ncfg = rt.ScalingConfig(use_gpu=0x0)\nd = ScalingConfig(use_gpu=True)\n", id="CN627-use-gpu-written-otherwise"),
    pytest.param("CN627", "from ray.util import collective as c\nc.init_collective_group(4, 0, Backend.NCCL)\nc.init_collective_group(4, 0, 'gloo')\n", id="CN627-backend-attribute"),
    pytest.param("CN627", "class A(B, deepspeed='ds.json'):\n    pass\ndef f(deepspeed='ds.json'):\n    pass\n", id="CN627-class-keyword-and-parameter"),
    pytest.param("CN627", "cfg = {'deepspeed': 'ds.json', **rest, b'tf32': True}\n", id="CN627-dict-keys"),
    # h42e2 (CN616, a full detector): imports, calls through them, dynamic imports and kernel
    # languages' decorators, whose libcst node spans the `@` (ast has no such node).
    pytest.param("CN616", "import cutlass\n\n@cutlass.cute.kernel\ndef k(x):\n    pass\n", id="CN616-decorator-through-import"),
    pytest.param("CN616", "import tilelang\nx = 'é'\n\nclass A:\n    @  tilelang.jit(out_idx=[1])\n    def k(self, M):\n        pass\n", id="CN616-decorator-call-blanks-after-at"),
    pytest.param("CN616", "def f():\n    ops = __import__('fused_adam_cuda')\n    ops.adam(p)\n", id="CN616-dynamic-in-function"),
    pytest.param("CN616", "import importlib\nops = importlib.import_module('fused_' 'adam_cuda')\nops.adam(p)\n", id="CN616-dynamic-concatenated-name"),
    pytest.param("CN616", "import tensorrt as trt\nlogger = trt.Logger(trt.Logger.WARNING)\nbuilder = trt.Builder(logger)\n", id="CN616-engine-calls-through-alias"),
    pytest.param("CN616", "try:\n    from flash_attn_interface import (\n        flash_attn_func as fa3,\n    )\nexcept ImportError:\n    fa3 = None\n", id="CN616-parenthesized-from-import"),
    pytest.param("CN616", "from torchao.utils import TorchAOBaseTensor\nimport torchao.quantization as q\nq.quantize_(m, cfg)\n", id="CN616-package-without-a-row"),
    pytest.param("CN616", "from torchao import float8\nfloat8.convert_to_float8_training(m)\n", id="CN616-row-through-from-import"),
]


@pytest.mark.parametrize(("code", "source"), DECIDED_NEXT)
def test_traps_decided_next(code, source):
    detected, linted = _both(RULES[code], source)
    assert detected is not None, "a trap the detector should decide left it unsure"
    assert detected == linted


# ... and unsure where the visitor builds a fix, or where ast cannot tell what libcst would see.
UNSURE_NEXT = [
    pytest.param("CN105", "import torch.cuda as tc\nwith tc.device(0):\n    pass\n", id="CN105-fix-adds-import"),
    pytest.param("CN105", "import torch\nwith (torch.cuda.device)(0):\n    pass\n", id="CN105-parenthesized-callee"),
    pytest.param("CN105", "import torch\nif torch.cuda.is_available():\n    raise E(torch.cuda.device(0))\n", id="CN105-message-under-a-guard"),
    pytest.param("CN105", "import torch\ndef f():\n    ctx = torch.cuda.device(0)\n    if torch.cuda.is_available():\n        g(ctx)\n", id="CN105-value-bound-in-a-cuda-module"),
    pytest.param("CN101", "def f(x):\n    y = x.cuda()\n    if y.is_cuda:\n        g()\n", id="CN101-value-read-by-a-cuda-test"),
    pytest.param("CN101", "def f():\n    flag = x.cuda() is None\n", id="CN101-a-flag"),
    pytest.param("CN101", "class A:\n    def f(self, x):\n        self.x = x.cuda()\n    def g(self):\n        return self.x.is_cuda\n", id="CN101-attribute-read-by-another-method"),
    # h42e2 (CN616): a decorator in parentheses, which libcst's Decorator holds.
    pytest.param("CN616", "import tilelang\n\n@(tilelang.jit)\ndef k(M):\n    pass\n", id="CN616-parenthesized-decorator"),
    pytest.param("CN101", 'def f(x):\n    y = x.cuda()\n    s = f"{y} on cuda"\n', id="CN101-f-string-spelling-cuda"),
    pytest.param("CN101", "import torch\nif torch.cuda.is_available():\n    print(x.cuda())\n", id="CN101-message-under-a-guard"),
    pytest.param("CN101", "import triton\nm = m.cuda()\n", id="CN101-kernel-package-imported"),
    pytest.param("CN101", "import torch\ndef test_add():\n    y = x.cuda()\n    torch.cuda.get_device_capability()\n", id="CN101-test-with-a-cuda-only-call"),
    pytest.param("CN101", "def f(x):\n    y = x.cuda()\n    ptrs = [y.data_ptr()]\n", id="CN101-raw-pointer"),
    pytest.param("CN101", "m = m.cuda(\n)\n", id="CN101-written-across-lines"),
    pytest.param("CN101", "m = m.cuda(non_blocking=True,)\n", id="CN101-trailing-comma"),
    pytest.param("CN101", "m = m.cuda(0)\n", id="CN101-device-index"),
    pytest.param("CN111", "def outer():\n    rank = int(x)\n    def inner():\n        return {'': rank}\n", id="CN111-nested-scope-int"),
    pytest.param("CN111", "m = load('x', device_map=(0))\n", id="CN111-parenthesized-ordinal"),
    pytest.param("CN111", "class A(B, device_map={'': 0}):\n    pass\n", id="CN111-class-keyword"),
    pytest.param("CN111", "max_memory['cuda:0',] = '8GiB'\n", id="CN111-one-element-subscript"),
    pytest.param("CN111", "s = f\"{load(max_memory={'cuda:0': '1GiB'})}\"\n", id="CN111-inside-f-string"),
    pytest.param("CN627", "m = load('x', attn_implementation=('flash_attention_2'))\n", id="CN627-ported-string"),
    pytest.param("CN627", _TA + "a = TrainingArguments(output_dir='o', tf32=True)\n", id="CN627-ported-name"),
    pytest.param("CN627", "import ray\n\n@ray.remote(num_gpus=1)\ndef f():\n    pass\n", id="CN627-ray-rewrite"),
    pytest.param("CN627", "import ray\npg = placement_group([{'GPU': 1}])\n", id="CN627-bundle-rewrite"),
    pytest.param("CN627", _TA + "s = f\"{TrainingArguments(deepspeed='ds.json')}\"\n", id="CN627-inside-f-string"),
    pytest.param("CN627", "match v:\n    case 1:\n        GPUS_PER_NODE = 8\nGPUS = 8\n", id="CN627-match-statement"),
]


@pytest.mark.parametrize(("code", "source"), UNSURE_NEXT)
def test_traps_unsure_next(code, source):
    detected, linted = _both(RULES[code], source)
    assert detected is None
    assert linted, "the visitor reports what the detector leaves to it"


# CN602 and CN617 (GATES): decided where no report is possible, with the project's facts.
_LOADERS = Settings(project=ProjectFacts(extension_loaders=frozenset({"pkg.jit.load_ext"})))
_KERNELS = Settings(
    project=ProjectFacts(
        extension_modules=frozenset({"selective_scan_cuda", "pkg._C"}),
        kernel_modules=frozenset({"pkg.ops.layer_norm"}),
        kernel_names=frozenset({"pkg.ops.layer_norm.rms_norm"}),
        own_packages=frozenset({"pkg"}),
    )
)
GATE_CASES = [
    # (code, source, path, settings, decided)
    # CN112: other accelerators named outside any test, a test of CUDA alone; a foreign device
    # behind an escape, a probe through an import alias, a foreign branch that names no CUDA.
    pytest.param("CN112", "import torch\nx = x.cuda()\n", "m.py", Settings(), True, id="CN112-no-foreign-word"),
    pytest.param("CN112", "import torch\nDEVICES = ('cuda', 'mps', 'xpu')\nif torch.cuda.is_available():\n    x = x.cuda()\n", "m.py", Settings(), True, id="CN112-foreign-words-outside-tests"),
    pytest.param("CN602", "from pkg.jit import load_ext\nops = load_ext('ops', ['ops.cpp'])\n", "m.py", _LOADERS, True, id="CN602-loader-given-cpp"),
    pytest.param("CN602", "import json\nd = json.load(f)\nt = open('k.cuda.txt', 'w')\n", "m.py", _LOADERS, True, id="CN602-no-word"),
    # A comment inside the sources names a .cu file: the visitor reads the node's code, comments
    # included, and reports; a gate on the code text (comments blanked) would have decided it.
    pytest.param("CN602", "from pkg.jit import load_ext\nops = load_ext('ops', [  # was 'ops.cu'\n    'ops.cpp'])\n", "m.py", _LOADERS, False, id="CN602-cu-in-comment"),
    pytest.param("CN602", "from torch.utils import cpp_extension as ce\next = ce.load('e', srcs)\n", "m.py", _LOADERS, False, id="CN602-alias-spells-module"),
    pytest.param("CN604", "from .flash_attn import flash_attn_func\ny = flash_attn_func(q, k, v)\n", "pkg/m.py", Settings(), True, id="CN604-relative-import"),
    pytest.param("CN604", "import flash_attn as fa\ny = fa.flash_attn_func(q, k, v)\n", "m.py", Settings(), False, id="CN604-aliased-import"),
    pytest.param("CN606", "HAVE_APEX = False\nfrom mypkg.apex_like import FusedAdam\nopt = FusedAdam(p)\n", "m.py", Settings(), True, id="CN606-name-alike"),
    pytest.param("CN606", "def f():\n    from apex.optimizers import FusedAdam\n    return FusedAdam(p)\n", "m.py", Settings(), False, id="CN606-import-in-function"),
    pytest.param("CN607", "import importlib.util\nok = importlib.util.find_spec('bitsandbytes')\n", "m.py", Settings(), True, id="CN607-probe-by-name"),
    pytest.param("CN609", "import torch.nn.functional as F\ny = F.scaled_dot_product_attention(q, k, v)\nkind = 'flash_attention'\n", "m.py", Settings(), True, id="CN609-plain-sdpa"),
    pytest.param("CN609", "import torch\nop = getattr(torch.ops.aten, '\\x5fscaled_dot_product_cudnn_attention')\n", "m.py", Settings(), False, id="CN609-op-name-escaped"),
    pytest.param("CN609", "from torch.nn.attention import SDPBackend as B\nks = [B.FLASH_ATTENTION]\n", "m.py", Settings(), False, id="CN609-backend-alias"),
    pytest.param("CN616", "from .ops import causal_conv1d_fn\nkernel = 'causal_conv1d'\nimport importlib\nm = importlib.import_module('json')\n", "pkg/m.py", Settings(), True, id="CN616-relative-and-selector"),
    pytest.param("CN617", "import pkg.model\nfrom pkg.ops import other\nimport importlib\nm = importlib.import_module(name)\n", "pkg/m.py", _KERNELS, True, id="CN617-other-modules"),
    pytest.param("CN617", "from . import model\nfrom .ops import *\n", "pkg/sub/m.py", _KERNELS, True, id="CN617-relative-and-star"),
    pytest.param("CN617", "from ..ops import layer_norm\ny = layer_norm.rms_norm(x, w)\n", "pkg/models/block.py", _KERNELS, False, id="CN617-relative-kernel-module"),
    pytest.param("CN617", "def f():\n    ext = __import__('selective_scan_cuda')\n    return ext.fwd(u)\n", "m.py", _KERNELS, False, id="CN617-dynamic-in-function"),
    pytest.param("CN617", "from selective_scan_cuda import fwd as f\ny = f(u)\n", "m.py", _KERNELS, False, id="CN617-from-extension-alias"),
    # CN103: "cuda" placed, printed, tested as a word, in a docstring; compared with a device in
    # each of the shapes find_use follows (a comparison either way, a string test, an assertion).
    pytest.param("CN103", 'import torch\nx.to("cuda")\nprint("cuda")\nif impl == "cuda":\n    pass\n', "m.py", Settings(), True, id="CN103-no-device-compared"),
    pytest.param("CN103", 'def f():\n    """Compare with "cuda"."""\nok = impl in ["ref", "cuda"]\nname.startswith("cuda")\n', "m.py", Settings(), True, id="CN103-words-compared"),
    pytest.param("CN103", 'USE = ("cu" "da")\nx = "cuda" "" == device\nmsg = f"use cuda: {n}"\n', "m.py", Settings(), True, id="CN103-concatenation-parts"),
    pytest.param("CN103", 'same = dev == f"cuda:{rank}"\n', "m.py", Settings(), False, id="CN103-f-string-compared"),
    pytest.param("CN103", 'pin = "cuda" == device\n', "m.py", Settings(), False, id="CN103-literal-on-the-left"),
    pytest.param("CN103", 'ok = str(x.device).startswith(("cuda"))\n', "m.py", Settings(), False, id="CN103-string-test-parenthesized"),
    pytest.param("CN103", 'class T:\n    def test(self):\n        self.assertIn("cuda", str(y.device))\n', "m.py", Settings(), False, id="CN103-test-assertion"),
    pytest.param("CN103", 'gpu = getattr(device, "type", None) in ["cuda", "mps"]\n', "m.py", Settings(), False, id="CN103-membership-in-a-list"),
    pytest.param("CN103", 'ok = f"{x.device.type == \'cuda\'}"\n', "m.py", Settings(), False, id="CN103-inside-f-string"),
    # CN805: the two pieces of its wake test in different chains; the chain through an alias.
    pytest.param("CN805", "import torch\nx = torch.from_numpy(a).to(device)\ny = w[i].float()\n", "m.py", Settings(), True, id="CN805-pieces-apart"),
    pytest.param("CN805", "import torch\ny = np_to_torch(a).to(device)[t].float()\n", "m.py", Settings(), True, id="CN805-not-from-numpy"),
    pytest.param("CN805", "from torch import from_numpy as fn\ny = fn(a).to(device)[t].float()\n", "m.py", Settings(), False, id="CN805-alias"),
    # The compile family: the word without a compile call; a compile call through an alias, the
    # method read from its shape, a bare decorator, a CUDA mode behind an escape, inductor's config.
    pytest.param("CN501", "import torch\nimport regex\np = regex.compile(pat)\nok = is_compiled_module(m) or torch.compiler.is_compiling()\n", "m.py", Settings(), True, id="CN501-no-compile-call"),
    pytest.param("CN502", "import torch\nmodes = ['default']\nok = torch.compiler.is_compiling()\n", "m.py", Settings(), True, id="CN502-no-compile-call"),
    pytest.param("CN503", "import re\nimport torch\nrx = re.compile(pattern)\n", "m.py", Settings(), True, id="CN503-re-compile-resolved"),
    pytest.param("CN501", "from torch import compile as tc\nm = tc(m)\n", "m.py", Settings(), False, id="CN501-alias"),
    pytest.param("CN501", "import torch\n\n@torch.compile\ndef step(x):\n    return x\n", "m.py", Settings(), False, id="CN501-bare-decorator"),
    pytest.param("CN503", "import torch\nmodel.compile(dynamic=True)\n", "m.py", Settings(), False, id="CN503-module-compile"),
    pytest.param("CN504", "import torch\nm = torch.compile(m, backend='neuron')\n", "m.py", Settings(), False, id="CN504-torch-compile"),
    pytest.param("CN502", "cfg = {'mode': 'max\\x2dautotune'}\n", "m.py", Settings(), False, id="CN502-escaped-mode"),
    pytest.param("CN505", "import torch._inductor.config as ic\nic.freezing = True\n", "m.py", Settings(), False, id="CN505-inductor-config"),
    # h42e2 (CN501-CN505): `_inductor` spelled outside inductor's config (diffusers' pipelines
    # and tests) sets nothing: decided. A setting or `patch` through an alias or a from-import is not.
    pytest.param("CN505", "import torch\ntorch._inductor.cudagraph_mark_step_begin()\nwith torch._inductor.utils.fresh_inductor_cache():\n    pass\n", "m.py", Settings(), True, id="CN505-inductor-no-config"),
    pytest.param("CN501", "import torch\n\ndef step(pipe):\n    torch._inductor.cudagraph_mark_step_begin()\n    return is_compiled_module(pipe.unet)\n", "m.py", Settings(), True, id="CN501-inductor-no-compile"),
    pytest.param("CN505", "from torch._inductor import config as inductor_config\nwith inductor_config.patch({'triton.cudagraphs': False}):\n    pass\n", "m.py", Settings(), False, id="CN505-config-patch-through-alias"),
    pytest.param("CN505", "from torch._inductor.config import patch\n\n@patch(max_autotune=True)\ndef f():\n    pass\n", "m.py", Settings(), False, id="CN505-patch-from-import"),
    pytest.param("CN505", "from torch._inductor import config\nconfig.triton.cudagraphs = False\n", "m.py", Settings(), False, id="CN505-config-section-set"),
    # ... a `.compile` no import resolves is nn.Module.compile only with torch.compile's keywords,
    # in a file importing torch and no other framework (diffusers' JAX AOT script, its forwarding
    # `submod.compile(*args, **kwargs)`); a blank inside a dotted import is read as libcst reads it.
    pytest.param("CN501", "import torch\nimport jax\nexe = jax.jit(f).lower(x).compile()\n", "m.py", Settings(), True, id="CN501-jax-lowered-compile"),
    pytest.param("CN501", "import torch\n\ndef each(mods, *args, **kwargs):\n    for m in mods:\n        m.compile(*args, **kwargs)\n", "m.py", Settings(), True, id="CN501-forwarding-star-args"),
    pytest.param("CN501", "import torch\nprog.compile(optimizer='adam')\n", "m.py", Settings(), True, id="CN501-other-keywords"),
    pytest.param("CN501", "import torch\nexe = build(f).compile()\n", "m.py", Settings(), False, id="CN501-chained-module-compile"),
    pytest.param("CN501", "import torch\nimport jax . numpy\nmodel.compile(dynamic=False)\n", "m.py", Settings(), False, id="CN501-blank-dotted-import"),
    # CN611: CUDA in longer words and a profiler without CUDA; a sort key behind an escape, the
    # CUDA profiler through an alias.
    pytest.param("CN611", "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\nmsg = \"CUDA out of memory\"\n", "m.py", Settings(), True, id="CN611-cuda-in-longer-words"),
    pytest.param("CN611", "import torch\nwith torch.profiler.profile() as p:\n    step()\nprint(p.key_averages().table(sort_by='cpu_time_total'))\n", "m.py", Settings(), True, id="CN611-cpu-profiler"),
    pytest.param("CN611", "from torch.profiler import profile\nkey = 'self_cuda\\x5ftime_total'\n", "m.py", Settings(), False, id="CN611-sort-key-escaped"),
    pytest.param("CN611", "from torch.profiler import profile\nkey = ('cuda\\x5fmemory_usage' 'y')\n", "m.py", Settings(), False, id="CN611-escaped-part-of-concatenation"),
    pytest.param("CN611", "from torch.cuda import profiler as nvp\nnvp.start()\n", "m.py", Settings(), False, id="CN611-cuda-profiler-alias"),
    pytest.param("CN611", "for e in events:\n    if e.device_type().name == \"CUDA\":\n        pass\n", "m.py", Settings(), False, id="CN611-event-device-test"),
    # CN619: a float8 attribute of another object, a shadowed torch, the user's own _scaled_mm.
    pytest.param("CN619", "import torch\nif cfg.float8_enabled:\n    w = w.to(cfg.float8_dtype)\n", "m.py", Settings(), True, id="CN619-other-objects-float8"),
    pytest.param("CN619", "import torch\n\ndef f(w, torch):\n    return w.to(torch.float8_e4m3fn)\n", "m.py", Settings(), True, id="CN619-shadowed-torch"),
    pytest.param("CN619", "from ops import _scaled_mm\ny = _scaled_mm(a, b)\nz = x.float8_e5m2\n", "m.py", Settings(), True, id="CN619-own-op-and-field"),
    pytest.param("CN619", "from torch import _scaled_mm as smm\ny = smm(a, b, scale_a=s, scale_b=t)\n", "m.py", Settings(), False, id="CN619-op-through-alias"),
    pytest.param("CN619", "import torch as t\n\ndef q(w):\n    fp8 = t.float8_e5m2\n    return w.to(fp8)\n", "m.py", Settings(), False, id="CN619-dtype-bound-through-alias"),
    pytest.param("CN619", "import torch\nlabel = f'{w.to(torch.float8_e4m3fn).shape}'\n", "m.py", Settings(), False, id="CN619-dtype-in-f-string"),
    # h42e2 (CN619): a float8 dtype held as a value (a table, a default, a name that never
    # reaches the device) decides; a test against some tensor's dtype, or a bound name that
    # later places a tensor, does not (the binding is used after it is made).
    pytest.param("CN619", "import torch\nSUPPORTED = [torch.float8_e4m3fn, torch.float8_e5m2]\nNAMES = {torch.float8_e4m3fn: 'F8'}\n", "m.py", Settings(), True, id="CN619-dtype-table"),
    pytest.param("CN619", "import torch\n\ndef cast(model, storage_dtype=torch.float8_e4m3fn):\n    return model\n", "m.py", Settings(), True, id="CN619-dtype-default"),
    pytest.param("CN619", "import torch\n\ndef pick(fp8):\n    target = torch.float8_e4m3fn\n    return {'dtype': target}\n", "m.py", Settings(), True, id="CN619-bound-never-placed"),
    pytest.param("CN619", "import torch\n\ndef q(w, torch_dtype):\n    ok = torch_dtype == torch.float8_e4m3fn\n    return ok\n", "m.py", Settings(), True, id="CN619-compared-with-a-name"),
    pytest.param("CN619", "import torch\nok = w.dtype in (torch.float8_e4m3fn, torch.float8_e5m2)\n", "m.py", Settings(), False, id="CN619-tensor-dtype-in-tuple"),
    pytest.param("CN619", "import torch\n\ndef q(w):\n    target = torch.float8_e4m3fn\n    w = w.cpu()\n    return w.to(target)\n", "m.py", Settings(), False, id="CN619-bound-then-placed"),
]


@pytest.mark.parametrize(("code", "source", "path", "settings", "decided"), GATE_CASES)
def test_gates(code, source, path, settings, decided):
    detected, linted = _both(RULES[code], source, path, settings)
    if decided:
        assert detected == linted == []
    else:
        assert detected is None
        assert linted, "the visitor reports what the gate leaves to it"


# CN201, CN202, CN211: decided, the findings (CN201's fixes included) equal the visitor's.
DECIDED_CUDA_API = [
    pytest.param("CN201", _T + "torch.cuda.synchronize()\ntorch.cuda.empty_cache()\n", id="CN201-statements"),
    pytest.param("CN201", "import torch as th\n\ndef f():\n    th.cuda.manual_seed_all(0)\n", id="CN201-alias-in-function"),
    pytest.param("CN201", _T + "with torch.cuda.stream(s):\n    pass\nfor i in range(torch.cuda.device_count()):\n    pass\n", id="CN201-with-and-for"),
    pytest.param("CN201", _T + "total += torch.cuda.memory_allocated()\nm: int = torch.cuda.max_memory_allocated(0) // 2**20\n", id="CN201-augmented-annotated"),
    pytest.param("CN201", _T + "print(torch.cuda.get_device_properties(0).total_memory, torch.cuda.Stream)\n", id="CN201-argument-of-builtin"),
    pytest.param("CN201", _T + "torch.cuda.reset_max_memory_allocated()\nlogger.info(torch.cuda.memory_cached(0))\n", id="CN201-deprecated-alias"),
    pytest.param("CN201", _T + "s = 'ü'; (torch . cuda . synchronize)()\n", id="CN201-non-ascii-spaced-parenthesized"),
    pytest.param("CN201", _T + "print(\n    torch.cuda.memory_allocated(),  # why\n)\n", id="CN201-multi-line-call"),
    pytest.param("CN201", _T + "torch.cuda.synchronize()  # cuda2neuron: ignore[CN201]\n", id="CN201-suppressed"),
    pytest.param("CN201", _T + "def f(torch):\n    torch.cuda.synchronize()\nx = mylib.cuda.synchronize\n", id="CN201-shadowed-and-other-module"),
    pytest.param("CN201", _T + "if x: torch.cuda.synchronize(); torch.cuda.empty_cache()\ny[torch.cuda.current_device()]\n", id="CN201-suite-on-header-line-subscript"),
    pytest.param("CN201", _T + "print(*torch.cuda.Stream, **torch.cuda.Event)\ntorch.cuda.current_stream().synchronize()\n", id="CN201-starred-and-method-of-result"),
    pytest.param("CN202", _T + "def f(g: torch.cuda.CUDAGraph = torch.cuda.CUDAGraph()) -> torch.cuda.CUDAGraph:\n    pass\n", id="CN202-annotations-and-default"),
    pytest.param("CN211", _T + "class A(torch.cuda.MemPool, metaclass=torch.cuda.Foo):\n    x: torch.cuda.CudaError\n", id="CN211-class-bases-and-annotation"),
    pytest.param("CN202", "from torch.cuda import get_device_capability as cap\nmajor = cap()[0]\nprint(torch.version.cuda)\nimport torch\n", id="CN202-alias-and-import-below"),
    pytest.param("CN202", "from torch.cuda import mem_get_info\nmem_get_info = None\nwith f() as mem_get_info:\n    pass\nprint(mem_get_info)\n", id="CN202-targets-are-no-uses"),
    pytest.param("CN202", "from torch.cuda import mem_get_info\nfor mem_get_info in xs:\n    del mem_get_info\nf(mem_get_info=1)\n", id="CN202-loop-target-keyword"),
    # No name of the table written (a device string): decided without the walk, which a `match`
    # statement would leave unsure; a submodule bound by an alias still writes every part.
    pytest.param("CN202", _T + "match x:\n    case 1:\n        y = 'cuda'\n", id="CN202-no-table-name-written"),
    pytest.param("CN202", "from torch.cuda import graphs as g\np = g.graph_pool_handle()\nv = __import__('torch').version.cuda\n", id="CN202-parts-written-through-alias"),
    pytest.param("CN211", _T + "mod = torch.cuda\nok = hasattr(torch.cuda, 'utilization')\nfb = getattr(torch, dt, torch.cuda)\n", id="CN211-module-values"),
    pytest.param("CN211", _T + "def f():\n    if hasattr(\n            torch.cuda,  # why\n            'x'):\n        pass\n", id="CN211-lookup-code-across-lines"),
    pytest.param("CN211", _T + "ok = hasattr(torch.cuda, '_private')\nmonkeypatch.setattr(torch.cuda, 'is_available', f)\n", id="CN211-private-lookup-and-patch"),
    pytest.param("CN211", "import torch.cuda as tc\nfrom torch.cuda import utilization as u, memory\nu(); tc.temperature(); memory._record_memory_history()\n", id="CN211-aliases"),
    pytest.param("CN211", _T + "try:\n    torch.cuda.set_per_process_memory_fraction(0.5)\nexcept torch.cuda.CudaError:\n    pass\n", id="CN211-allocator-and-error"),
    pytest.param("CN211", _T + "torch.cuda.synchronize()\nx = torch.cuda.FloatTensor\nwith torch.cuda.device(0):\n    d = torch.cuda.device\n", id="CN211-handled-elsewhere"),
    pytest.param("CN211", "from torch.cuda import utilization\nutilization = None\nprint(utilization)\n", id="CN211-assign-target-no-use"),
]


@pytest.mark.parametrize(("code", "source"), DECIDED_CUDA_API)
def test_traps_decided_cuda_api(code, source):
    detected, linted = _both(RULES[code], source)
    assert detected is not None
    assert detected == linted


# CN201: every use a hold, a group or an added import may apply to goes to libcst.
UNSURE_CUDA_API = [
    # h42c: a test in front of moved calls alone is decided (DECIDED_CUDA_FAMILY); one in front of other code is not.
    pytest.param(_T + "if torch.cuda.is_available():\n    i = torch.cuda.current_device()\n", id="branch-test"),
    pytest.param(_T + "n = torch.cuda.device_count()\n", id="assigned-flag"),
    pytest.param(_T + "def f():\n    return torch.cuda.current_device()\n", id="returned"),
    pytest.param(_T + "assert torch.cuda.device_count() > 1\n", id="asserted"),
    pytest.param(_T + "d = 'cuda' if torch.cuda.is_available() else 'cpu'\n", id="conditional-test"),
    pytest.param(_T + "ok and torch.cuda.synchronize()\n", id="boolean-operand"),
    pytest.param(_T + "@skipif(not torch.cuda.is_available())\ndef test():\n    pass\n", id="decorator"),
    pytest.param(_T + "f = lambda: torch.cuda.synchronize()\n", id="lambda"),
    pytest.param("from torch.cuda import synchronize\nsynchronize()\n", id="bare-name-adds-import"),
    pytest.param("from torch import cuda\ncuda.synchronize()\n", id="from-import-may-be-dropped"),
    pytest.param(_T + "import mergekit\nmergekit.run(torch.cuda.device_count())\n", id="handed-to-library"),
    pytest.param(_T + "torch.cuda.memory_cached += 1\n", id="augmented-target"),
    pytest.param(_T + "print(f'{torch.cuda.memory_allocated()}')\n", id="f-string"),
]


@pytest.mark.parametrize("source", UNSURE_CUDA_API)
def test_traps_unsure_cuda_api(source):
    detected, linted = _both(RULES["CN201"], source)
    assert detected is None
    assert linted, "the visitor reports what the detector leaves to it"


def test_cn201_accelerator_target_left_to_libcst():
    detected, linted = _both(RULES["CN201"], _T + "torch.cuda.synchronize()\n", settings=Settings(target="accelerator"))
    assert detected is None
    assert linted[0].fix is not None


# CN208 and CN620: gates.
GATE_CASES_CUDA_API = [
    pytest.param("CN208", _T + "n = x.patch_size\nmonkey.setattr = 1\n", True, id="CN208-no-patcher"),
    pytest.param("CN208", _T + "y = torch.device('cuda:0')\n", True, id="CN208-no-patch-word"),
    pytest.param("CN208", "from unittest import mock\n\n@mock.patch('os.getcwd', return_value='/tmp')\ndef test(_):\n    monkeypatch.setattr(app, 'DEVICE', 'cpu')\n", True, id="CN208-patches-naming-no-cuda"),
    pytest.param("CN208", "from unittest import mock\nwith mock.patch('torch.\\x63uda.is_available'):\n    pass\n", False, id="CN208-escaped-target"),
    pytest.param("CN208", "import torch\nfrom unittest import mock\nwith mock.patch.object(torch.backends.cudnn, 'enabled'):\n    pass\n", False, id="CN208-object-and-attribute"),
    pytest.param("CN208", "from unittest.mock import patch as fake\n\n@fake('torch.cuda.is_available')\ndef test(_):\n    pass\n", False, id="CN208-aliased-patcher"),
    pytest.param("CN208", "def test(monkeypatch):\n    monkeypatch.setattr('app.device', 'cuda')\n", False, id="CN208-monkeypatch"),
    pytest.param("CN620", "import torch\nt = t.cuda()\nkind = proto.CUDA\n", True, id="CN620-no-caffe2"),
    pytest.param("CN620", "import torch.ops._caffe2 as c2\ny = c2.CopyGPUToCPU(t)\n", False, id="CN620-op-alias"),
]


@pytest.mark.parametrize(("code", "source", "decided"), GATE_CASES_CUDA_API)
def test_gates_cuda_api(code, source, decided):
    detected, linted = _both(RULES[code], source)
    if decided:
        assert detected == linted == []
    else:
        assert detected is None
        assert linted, "the visitor reports what the gate leaves to it"


# h42c: the torch.cuda family's gates (CN203, CN207, CN210, CN212). Decided rows: the visitor
# reports nothing; the others: it reports, and the gate must leave the file to it.
GATE_CASES_CUDA_FAMILY = [
    pytest.param("CN212", _T + "torch.cuda.synchronize()\nimport torch.distributed\n", True, id="CN212-uses-only"),
    pytest.param("CN212", _T + "with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):\n    pass\n", True, id="CN212-sdp-at-home"),
    pytest.param("CN212", "import torch.cuda as tc\nfrom torch.cuda import amp\n", True, id="CN212-alias-and-from"),
    pytest.param("CN212", "def f():\n    import os, torch.cuda.nvtx\n", False, id="CN212-nested-import"),
    pytest.param("CN212", "import torch.backends.cuda as b\nx = b.SDPBackend.MATH\n", False, id="CN212-sdp-through-alias"),
    pytest.param("CN212", "from torch.backends import cuda\nx = cuda.SDPBackend\n", False, id="CN212-sdp-through-cuda-name"),
    pytest.param("CN212", "from torch.backends.cuda import (\n    SDPBackend,\n)\n", False, id="CN212-sdp-from-import-across-lines"),
    pytest.param("CN210", _T + "if 'cuda' in device:\n    x = torch.cuda.max_memory_allocated()\nprint('CUDA is fast')\n", True, id="CN210-device-test-and-message"),
    pytest.param("CN210", "try:\n    f()\nexcept RuntimeError as e:\n    if 'CUDA' in other:\n        raise\n", True, id="CN210-text-of-no-error"),
    pytest.param("CN210", "try:\n    f()\nexcept RuntimeError as e:\n    if 'out of memory' in str(e):\n        pass\n", False, id="CN210-error-text"),
    pytest.param("CN210", "try:\n    f()\nexcept RuntimeError as err:\n    if 'CUBLAS_STATUS' not in err.args[0]:\n        raise\n", False, id="CN210-args-subscript"),
    pytest.param("CN210", "import torch\ntry:\n    f()\nexcept torch.cuda.OutOfMemoryError:\n    pass\n", False, id="CN210-oom-class"),
    pytest.param("CN210", "try:\n    f()\nexcept OSError as e:\n    ok = 'cuDNN error' in e\n", False, id="CN210-caught-name"),
    pytest.param("CN207", _T + "CUDA_OK = torch.cuda.is_available()\nmsg = f'{CUDA_OK}'\n", True, id="CN207-name-only"),
    pytest.param("CN207", "import os\nconf = os.getenv(\n    'PYTORCH_CUDA_ALLOC_CONF')\n", False, id="CN207-read-across-lines"),
    pytest.param("CN207", "import os\nos.environ.update(CUDA_LAUNCH_BLOCKING='1')\n", False, id="CN207-keyword-key"),
    pytest.param("CN207", "from torch.utils import cpp_extension\nnvcc = cpp_extension.CUDA_HOME + '/bin/nvcc'\n", False, id="CN207-toolkit-attribute"),
    pytest.param("CN203", _T + "p = torch.cuda.get_device_properties(0)\nprint(p.name, p.total_memory, p.__class__)\n", True, id="CN203-neuron-fields"),
    pytest.param("CN203", _T + "def f():\n    p = torch.cuda.get_device_properties(0)\n    return p.major\n", False, id="CN203-held-field"),
    pytest.param("CN203", "from torch.cuda import get_device_properties\nn = get_device_properties(0).multi_processor_count\n", False, id="CN203-direct-field"),
]


@pytest.mark.parametrize(("code", "source", "decided"), GATE_CASES_CUDA_FAMILY)
def test_gates_cuda_family(code, source, decided):
    test_gates_cuda_api(code, source, decided)


# h42c: CN205 decided (findings, the unsafe removals included, equal to the visitor's) ...
_CB = "import torch\nfrom torch.backends import cudnn\n"
DECIDED_CUDA_FAMILY = [
    pytest.param("CN205", _CB + "# why\ntorch.backends.cudnn.benchmark = True  # fast\n", id="CN205-comments-around"),
    pytest.param("CN205", _CB + "def f(a):\n    if a.tf32:\n        torch.backends.cuda.matmul.allow_tf32 = (\n            True)\n", id="CN205-indented-across-lines"),
    pytest.param("CN205", _CB + "s = 'é'; t = 1\ncudnn.deterministic = torch.backends.cudnn.benchmark = False\n", id="CN205-non-ascii-two-targets"),
    pytest.param("CN205", _CB + "x, cudnn.benchmark = 1, 2\ncudnn.enabled |= x\nb: bool = cudnn.enabled\ndel cudnn.benchmark\n", id="CN205-tuple-augmented-deleted"),
    pytest.param("CN205", "import torch as th\nth.set_float32_matmul_precision('high')  # tf32\ncfg.backends.cudnn.benchmark = True\n", id="CN205-alias-and-other-object"),
    pytest.param("CN205", _CB + "with cudnn.flags(enabled=False):\n    v = (cudnn.version(), cudnn.is_available())\n", id="CN205-cudnn-calls"),
    pytest.param("CN205", _CB + "def f(torch):\n    torch.backends.cudnn.benchmark = True\nclass A:\n    cudnn.benchmark = False\n", id="CN205-shadowed-and-class-body"),
    # CN201: an availability test in front of moved calls only, in a module with no kernel.
    pytest.param("CN201", _T + "if torch.cuda.is_available():\n    torch.cuda.empty_cache()\n", id="CN201-test-before-moves"),
    pytest.param("CN201", "import torch as th\ndef f(seed):\n    if x:\n        pass\n    elif th.cuda.is_available():\n        th.cuda.manual_seed_all(seed); th.cuda.synchronize(0)\n    else:\n        g()\n", id="CN201-elif-alias-two-on-a-line"),
    pytest.param("CN201", _T + "if (torch.cuda.is_available()):  # why\n    (torch.cuda.empty_cache)()\n", id="CN201-parenthesized-test-and-callee"),
    # A module with a kernel: decided without an else, with numbers for arguments, `torch` bound
    # by its imports alone (a dotted flag assigned through it is no key the moves are reached by).
    pytest.param("CN201", _T + "import torch.utils.checkpoint\nimport bitsandbytes as bnb\ntorch.backends.cuda.matmul.allow_tf32 = True\n"
                 "def f():\n    del pipe\n    if torch.cuda.is_available():\n        torch.cuda.empty_cache()\n", id="CN201-test-in-kernel-module-no-else"),
    # Prose that says "subprocesses" and a dynamic import of a plain module leave the index empty.
    pytest.param("CN201", _T + "import importlib\nhelp = 'Number of subprocesses to use'\nm = importlib.import_module('diffusers')\n"
                 "if torch.cuda.is_available():\n    torch.cuda.manual_seed_all(seed)\n", id="CN201-kernel-free-words-in-prose"),
]


@pytest.mark.parametrize(("code", "source"), DECIDED_CUDA_FAMILY)
def test_traps_decided_cuda_family(code, source):
    detected, linted = _both(RULES[code], source)
    assert detected is not None
    assert detected == linted


# ... and unsure where libcst's statement lines cannot be told from ``ast``'s statements.
UNSURE_CUDA_FAMILY = [
    pytest.param("CN205", _CB + "if a: torch.backends.cudnn.benchmark = True\n", id="CN205-suite-on-header-line"),
    pytest.param("CN205", _CB + "if a: \\\n    torch.backends.cudnn.benchmark = True\n", id="CN205-header-continued-by-backslash"),
    pytest.param("CN205", _CB + "x = 1; torch.backends.cudnn.benchmark = True\n", id="CN205-after-semicolon"),
    pytest.param("CN205", _CB + "torch.backends.cudnn.benchmark = True;\n", id="CN205-trailing-semicolon"),
    pytest.param("CN205", _CB + "del cudnn.benchmark, x\n", id="CN205-del-several"),
    pytest.param("CN205", _CB + "torch.backends.cudnn.benchmark = True\n", id="CN205-accelerator-target"),
    # CN201's availability test: anything the kernel gates or a group could read goes to libcst.
    pytest.param("CN201", _T + "import triton\nif torch.cuda.is_available():\n    torch.cuda.empty_cache()\nelse:\n    pass\n", id="CN201-test-in-kernel-module-with-else"),
    pytest.param("CN201", _T + "import triton\nif torch.cuda.is_available():\n    torch.cuda.manual_seed(seed)\n", id="CN201-test-in-kernel-module-name-argument"),
    pytest.param("CN201", _T + "import triton\ntorch.cuda = shim\nif torch.cuda.is_available():\n    torch.cuda.empty_cache()\n", id="CN201-test-in-kernel-module-torch-rebound"),
    pytest.param("CN201", _T + "import importlib\nm = importlib.import_module('flash_attn')\nif torch.cuda.is_available():\n    torch.cuda.empty_cache()\nelse:\n    pass\n", id="CN201-dynamic-import-of-kernel"),
    pytest.param("CN201", _T + "if torch.cuda.is_available():\n    x = x.to('cuda')\n", id="CN201-test-before-device-literal"),
    pytest.param("CN201", _T + "if torch.cuda.is_available():\n    print(torch.cuda.memory_allocated())\n", id="CN201-test-before-message"),
    pytest.param("CN201", _T + "if torch.cuda.is_available():\n    torch.cuda.set_device(rank)\n", id="CN201-test-before-other-move"),
    pytest.param("CN201", _T + "if torch.cuda.is_available():\n    torch.cuda.manual_seed(seed=s)\n", id="CN201-test-before-keyword"),
    pytest.param("CN201", _T + "if not torch.cuda.is_available():\n    torch.cuda.empty_cache()\n", id="CN201-negated-test"),
    pytest.param("CN201", _T + "if torch.cuda.is_available() and ok:\n    torch.cuda.empty_cache()\n", id="CN201-test-with-and"),
    pytest.param("CN201", _T + "if name.startswith('apex.'):\n    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n", id="CN201-in-named-package-branch"),
    pytest.param("CN201", _T + "def f():\n    n: int = torch.cuda.device_count()\n    if n and 'cuda' in str(d):\n        pass\n", id="CN201-bound-value-read-by-cuda-test"),
]


@pytest.mark.parametrize(("code", "source"), UNSURE_CUDA_FAMILY)
def test_traps_unsure_cuda_family(request, code, source):
    accelerator = request.node.callspec.id.endswith("accelerator-target")
    settings = Settings(target="accelerator") if accelerator else None
    detected, _ = _both(RULES[code], source, settings=settings)
    assert detected is None


# CN102: device literals decided with their fixes (every case fails where CN102 has no detector).
DECIDED_DEVICE_STRINGS = [
    pytest.param('model.to("cuda")\nx.to(\'cuda:1\')\n', "m.py", id="CN102-to-call"),
    pytest.param('s = "é"; model.to("cuda")\n', "m.py", id="CN102-non-ascii-before-span"),
    pytest.param('model.to(("cuda"))\nrun(torch.device(  ("cuda:0")  ))\n', "m.py", id="CN102-own-parentheses"),
    pytest.param('x.to("cuda:%d" % i)\nx.to("cuda:{}".format(i))\nx.to(r"cuda")\n', "m.py", id="CN102-templates-and-prefix"),
    pytest.param('import torch\nrun(torch.device("cuda:" + str(rank)))\n', "m.py", id="CN102-joined-prefix"),
    pytest.param('from safetensors.torch import load_file\nload_file(p, device="cuda")\n', "m.py", id="CN102-library-reads-device"),
    pytest.param('for device in ["cpu", "cuda"]:\n    run(device)\n', "m.py", id="CN102-loop-over-devices"),
    pytest.param('devices.append("cuda:1")\nnames.append("cuda")\n', "m.py", id="CN102-collection-add"),
    pytest.param('import torch\ntorch.load(p, "cuda")\n', "m.py", id="CN102-load-positional"),
    pytest.param('impl = "cuda"\nprint(impl)\nkind = "cuda"\n', "m.py", id="CN102-bound-never-a-device"),
    pytest.param('x.to("\\x63uda")\nx.to("cu" "da")\nx.to("cuda" "")\n', "m.py", id="CN102-escaped-and-split"),
    pytest.param('print(f"moving to cuda {n}")\nlog(f"{n} on cuda")\nx.to(device="cuda")\n', "m.py", id="CN102-f-string-text-only"),
    pytest.param('import torch\nwith torch.autocast("cuda"):\n    pass\nok = x.device.type == "cuda"\n', "m.py", id="CN102-amp-and-comparison"),
    pytest.param('model.to("cuda")  # cuda2neuron: ignore[CN102]\n', "m.py", id="CN102-suppressed"),
    pytest.param('model.to("cuda")\r\nx.to(device="cuda:0")\r\n', "m.py", id="CN102-crlf"),
    pytest.param('def f(m):\n    m.to(\n        "cuda",  # why\n    )\n', "m.py", id="CN102-multi-line-call"),
    pytest.param('xs = [f(d) for d in ("cpu", "cuda:0")]\n', "m.py", id="CN102-comprehension-over-devices"),
    pytest.param('import triton\nimport xformers.ops as xops\nmodel.to("cuda")\nrun(x.to("cuda"))\n\n\ndef f(m):\n    m.to("cuda")\n', "m.py", id="CN102-kernels-elsewhere"),
    pytest.param('def f(m):\n    where = "cuda"\n    m.to(where)\n    m.to(kind=where)\n', "m.py", id="CN102-bound-then-a-device"),
    pytest.param('def f(m, device="cuda"):\n    m.to(device)\n\n\ndevice = "cuda:0"\n', "m.py", id="CN102-default-and-binding-unread"),
    pytest.param('class A:\n    def __init__(self, device="cuda"):\n        self.device = device\n\n    def f(self):\n        return self.device\n', "m.py", id="CN102-kept-on-self-unread"),
]


@pytest.mark.parametrize(("source", "path"), DECIDED_DEVICE_STRINGS)
def test_traps_decided_cn102(source, path):
    detected, linted = _both(RULES["CN102"], source, path)
    assert detected is not None, "a trap the detector should decide left it unsure"
    assert detected == linted


# CN102: where the visitor's answer rides on what the port does not follow, unsure.
UNSURE_DEVICE_STRINGS = [
    pytest.param('import triton\n\n@triton.jit\ndef k(x):\n    pass\n\n\ndef test_k():\n    x = torch.zeros(3, device="cuda")\n    k[(1,)](x)\n', id="CN102-kernel-test"),
    pytest.param('import xformers.ops as xops\ny = xops.memory_efficient_attention(q.to("cuda"), k, v)\n', id="CN102-handed-to-kernel"),
    pytest.param('import torch\nimport xformers.ops as xops\n\ndef f(q):\n    where = torch.device("cuda")\n    return xops.memory_efficient_attention(q.to(where), q, q)\n', id="CN102-handed-by-name"),
    pytest.param('def f(m, device="cuda"):\n    if device == "cuda":\n        torch.cuda.synchronize()\n    m.to(device)\n', id="CN102-default-with-readers"),
    pytest.param('x.to(f"cuda:{rank}")\n', id="CN102-f-string"),
    pytest.param('import torch\ntorch.cuda.get_device_properties("cuda")\n', id="CN102-torch-cuda-call"),
    pytest.param('class A:\n    def __init__(self, device="cuda"):\n        self.device = device\n\n    def f(self):\n        assert self.device == "cuda"\n', id="CN102-kept-on-self-asserted"),
    pytest.param('def f(x, device=None):\n    device = device or "cuda"\n    print(f"on {device}")\n    x.to(device)\n', id="CN102-bound-and-spelled"),
    pytest.param('import torch\nprint(torch.zeros(1, device="cuda"))\n', id="CN102-in-a-message"),
    pytest.param('import torch\nout = torch.empty(8, device="cuda")\nctx.run([out.data_ptr()])\n', id="CN102-raw-pointer"),
]


@pytest.mark.parametrize("source", UNSURE_DEVICE_STRINGS)
def test_traps_unsure_cn102(source):
    detected, linted = _both(RULES["CN102"], source)
    assert detected is None
    assert linted, "the visitor reports what the detector leaves to it"


# CN109 (h42n): the device family's safety net decided on ast, its once-per-unit the engine's
# (python/_ast_nets.py). Each row a trap a naive reading gets wrong.
DECIDED_CN109 = [
    pytest.param('ok = ("cuda")\n', id="parenthesized-literal-shown-with-its-parentheses"),
    pytest.param('if (impl ==\n        "cuda"):\n    run()\n', id="multi-line-test-first-line-shown"),
    pytest.param('if str(v).startswith("cuda"):\n    pass\nok = v.endswith(x, "cuda")\n', id="string-test-first-argument-only"),
    pytest.param('ok = a == "cuda" or b in ("cuda:0", "gpu")\n', id="two-in-one-unit-reported-once"),
    pytest.param('EXPECTED["cuda"] = 1.0\ny = table["cuda", 8]\n', id="subscript-keys"),
    pytest.param('from typing import Literal\nA = Literal["cpu", "cuda"]\nB = typing.Literal["cuda"]\n', id="literal-type-silent"),
    pytest.param('try:\n    run()\nexcept RuntimeError as e:\n    if any(k in str(e).lower() for k in ["oom", "cuda"]):\n        pass\n', id="searched-in-caught-error"),
    pytest.param('try:\n    run()\nexcept RuntimeError as e:\n    ok = any(k in s for k in ["oom", "cuda"])\n', id="searched-in-other-text-reported"),
    pytest.param('ok = [k in str(e) for j in x for k in ["oom", "cuda"]]\n', id="second-loop-not-searched"),
    pytest.param('logger.warning("cuda")\nprint(x, "cuda:0")\nwarnings.warn(f(x, "cuda"))\n', id="output-calls"),
    pytest.param('x = "cu\\x64a"\ny = b"cuda"\nz = """cuda"""\n', id="escapes-bytes-triple-quotes"),
    pytest.param('T = {"cuda": 1, ("neuron", 8): 2}\nU = {("cuda", 8): 1, "cpu": 2}\nV = {**base, "cuda": 1}\n', id="tables-with-and-without-neuron"),
    pytest.param('m = f(map_location={"cuda:0": "cpu"}, other={"cuda": 1})\n', id="map-location-keys-only"),
    pytest.param('versions["cuda"] = torch.version.cuda\nv2["cuda"] = get_cuda_version()\nv3["cuda"] = 12\n', id="version-entries-silent"),
    pytest.param('with patch(a, "cuda"), patch(b, "cuda"):\n    pass\n', id="with-items-are-units"),
    pytest.param('@pytest.mark.parametrize("d", ["cuda"])\n@deco("cuda")\ndef test_f(d="cuda"):\n    return "cuda"\n', id="decorators-signature-body-apart"),
    pytest.param('s = "é"; ok = impl == "cuda"\n', id="non-ascii-before-span"),
    pytest.param('ok = ["out of memory", "cuda"]\nx = ("cuda", "gpu")\n', id="among-prose-words"),
    pytest.param('x = "cuda"  # cuda2neuron: ignore[CN109]\ny = "cuda"\n', id="suppressed"),
    pytest.param('d = f"cuda:{i}"\nx = f"cuda"\ny = f"cuda:{{0}}"\nz = f"cuda:0{i}"\n', id="f-strings-as-libcst-reads-them"),
    pytest.param('ok = where == rf\'cuda:{rank}\'\nprint(f"cuda:{rank}")\n', id="f-string-test-and-output"),
    pytest.param('x = f"{y} on cuda"\nz = "a" "cuda x"\n', id="cuda-in-text-no-device"),
    pytest.param('# onnxruntime is not imported here\nx = "cuda"\n', id="onnxruntime-named-not-imported"),
]


@pytest.mark.parametrize("source", DECIDED_CN109)
def test_traps_decided_cn109(source):
    detected, linted = _both(RULES["CN109"], source)
    assert detected is not None, "a trap the detector should decide left it unsure"
    assert detected == linted


UNSURE_CN109 = [
    pytest.param('x = "cuda" "x"\n', id="implicit-concatenation"),
    pytest.param('x = "x" \'cuda\'\n', id="implicit-concatenation-second-part"),
    pytest.param('d = f"{\'cuda\'}"\n', id="inside-an-f-string-placeholder"),
    pytest.param('d = "a" f"cuda:{i}"\n', id="f-string-in-a-concatenation"),
    pytest.param('d = f"cuda\\x3a0"\n', id="f-string-escapes"),
    pytest.param('from . import onnxruntime\nx = "cuda"\n', id="onnxruntime-imported-relatively"),
    pytest.param('y = x[("cuda", "out of memory")]\n', id="prose-tuple-as-subscript-index"),
    pytest.param('import onnxruntime_genai as og\nconfig.append_provider("cuda")\n', id="onnxruntime-file"),
    pytest.param(
        'import argparse\n\ndef test_parse():\n    p = argparse.ArgumentParser()\n    p.add_argument("--device")\n'
        '    args = p.parse_args(["--device", "cuda"])\n    assert args.device == "cuda"\n',
        id="round-trip-test",
    ),
]


@pytest.mark.parametrize("source", UNSURE_CN109)
def test_traps_unsure_cn109(source):
    detected, _ = _both(RULES["CN109"], source)
    assert detected is None


# CN409 (h42n): the distributed family's net on ast, as CN109.
DECIDED_CN409 = [
    pytest.param('cfg = F(process_group=("nccl"))\nif c == "nccl" or d == "nccl":\n    pass\n', id="parentheses-and-once-per-unit"),
    pytest.param('T = {"nccl": 1, "neuron": 2}\nU = {"gloo": "nccl"}\nV = {"x": {"neuron": 1, "y": "nccl"}}\n', id="tables-by-their-own-entries"),
    pytest.param('logger.info("nccl")\nprint(f("nccl"))\nx = "nc\\x63l"\ny = b"nccl"\n', id="output-escapes-bytes"),
    pytest.param('@backend("nccl")\ndef f(b="nccl"):\n    """nccl"""\n    return "nccl"\n', id="decorator-signature-docstring-body"),
]


@pytest.mark.parametrize("source", DECIDED_CN409)
def test_traps_decided_cn409(source):
    detected, linted = _both(RULES["CN409"], source)
    assert detected is not None, "a trap the detector should decide left it unsure"
    assert detected == linted


@pytest.mark.parametrize(
    "source",
    [
        pytest.param('b = "nccl" "x"\n', id="implicit-concatenation"),
        pytest.param('s = f"{g(\'nccl\')}"\n', id="inside-an-f-string-placeholder"),
    ],
)
def test_traps_unsure_cn409(source):
    detected, _ = _both(RULES["CN409"], source)
    assert detected is None


# CN623 (h42n): the Triton family's net on ast, as CN109.
DECIDED_CN623 = [
    pytest.param('y = conv(x, backend=("triton"))\nz = conv(x, msg="triton", module="Triton")\n', id="keywords-shown-and-skipped"),
    pytest.param('import sys as s\ns.modules["triton"] = None\nok = "TRITON" not in s.modules\nm = types.ModuleType("triton")\n', id="module-keys-through-alias"),
    pytest.param('import subprocess as sp\nsp.run(["pip", "install", "triton"])\nrun(["pip", "install", "triton"])\n', id="command-runner-by-resolved-name"),
    pytest.param('a = impl in ("torch", "triton")\nb = impl in ("triton",)\nc = ["torch", "triton"] == impls\nd = x == ["triton"]\n', id="membership-and-equality"),
    pytest.param('p = cache / "triton"\nq = "triton" / cache\nr = {"triton": 1, "k": "triton"}\n', id="path-parts-and-dict-sides"),
    pytest.param('import importlib.util as u\nh = u.find_spec("triton")\nk = u.find_spec(name="triton")\n', id="package-probe-positional-only"),
    pytest.param('x = "t\\x72iton"\ny = "\\x54RITON"\nz = b"triton"\n', id="escapes-and-bytes"),
    pytest.param('@pytest.mark.parametrize("b", ["triton"])\ndef test(b="triton"):\n    """triton"""\n', id="decorator-and-default"),
]


@pytest.mark.parametrize("source", DECIDED_CN623)
def test_traps_decided_cn623(source):
    detected, linted = _both(RULES["CN623"], source)
    assert detected is not None, "a trap the detector should decide left it unsure"
    assert detected == linted


@pytest.mark.parametrize(
    "source",
    [
        pytest.param('b = "triton" "x"\n', id="implicit-concatenation"),
        pytest.param('y = x["triton", 1]\n', id="tuple-as-subscript-index"),
        pytest.param('s = f"{g(\'triton\')}"\n', id="inside-an-f-string-placeholder"),
    ],
)
def test_traps_unsure_cn623(source):
    detected, _ = _both(RULES["CN623"], source)
    assert detected is None


# -- h42d: CN112 on ast, its fences applied by the engine (python/_ast_fences.py) -------------

_I = "import torch\n"
# CN112 alone: the branches found, and the finding's span (a block from the line after its
# header to the line after its last statement), equal to the visitor's.
DECIDED_FOREIGN = [
    pytest.param(_I + "if dev.type == '\\x6dps':\n    x = x.cuda()\n", id="escaped-device"),
    pytest.param(_I + "from accelerate.utils import is_xpu_available as xa\nif xa():\n    torch.cuda.empty_cache()\n", id="probe-alias"),
    pytest.param(_I + "y = torch.cuda.device_count() if torch.version.hip else 0\n", id="if-expression"),
    pytest.param(_I + "y = 0 if not torch.version.hip else (torch.cuda.device_count() )\n", id="if-expression-else-parenthesized"),
    pytest.param(_I + "if torch.xpu.is_available():  # hdr\n    # lead\n\n    torch.cuda.empty_cache()\n    x = 1\n    # foot\n\nz = 2\n", id="comments-around-block"),
    pytest.param(_I + "if x.device.type != 'mps':\n    pass\nelse:\n    torch.cuda.synchronize()\n", id="else-of-a-negated-test"),
    pytest.param(_I + "if x.device.type != 'mps':\n    pass\nelif torch.cuda.is_available():\n    torch.cuda.empty_cache()\nelse:\n    y = 1\nz = 1\n", id="elif-chain-fenced"),
    pytest.param(_I + "if x.device.type == 'cuda':\n    pass\nelif x.device.type == 'mps':\n    torch.cuda.empty_cache()\nelse:\n    pass\n", id="elif-branch"),
    pytest.param(_I + "if torch.version.hip:\n    x = 1\n    if y:\n        torch.cuda.empty_cache()\nz = 1\n", id="nested-block-last"),
    pytest.param(_I + "if torch.version.hip:\n    @torch.cuda.amp.autocast()\n    def f():\n        pass\n", id="decorated-first-statement"),
    pytest.param(_I + "if a and b and hasattr(torch, 'npu'):\n    x = x.cuda()\n", id="and-chain-of-three"),
    pytest.param(_I + "if a or b or str(d).startswith('xpu'):\n    x = x.cuda()\n", id="or-chain-not-foreign"),
    pytest.param(_I + "if d == 'm' 'ps':\n    x = x.cuda()\n", id="concatenated-string-no-word"),
    pytest.param(_I + "if d == torch.device(type='mps'):\n    x = x.cuda()\n", id="device-by-keyword"),
    pytest.param(_I + "if torch.version.hip:\n    y = 1\nif d.type == 'mps':\n    x = x.cuda()\nif is_npu_available():\n    torch.cuda.synchronize()\n", id="count-of-named-branches"),
    pytest.param(_I + "if d.type == 'mps':\n    x = 1\n", id="quiet-branch-alone"),
    pytest.param(_I + "if torch.version.hip:\n    if d.type == 'mps':\n        x = x.cuda()\n", id="nested-test-skipped"),
    pytest.param(_I + "def f(torch):\n    if torch.version.hip:\n        return x.cuda()\n", id="shadowed-torch-still-spelled"),
]


@pytest.mark.parametrize("source", DECIDED_FOREIGN)
def test_traps_decided_cn112(source):
    detected, linted = _both(RULES["CN112"], source)
    assert detected is not None, "a trap the detector should decide left it unsure"
    assert detected == linted


# Where libcst's span or text of a branch cannot be told from ast, unsure.
UNSURE_FOREIGN = [
    pytest.param(_I + "if torch.version.hip: torch.cuda.synchronize()\n", id="block-on-header-line"),
    pytest.param(_I + "if torch.version.hip:\n    if y:\n        torch.cuda.empty_cache()\n        # inner foot\nz = 1\n", id="comment-below-nested-block"),
    pytest.param(_I + "if d.type == 'mps':  # unlike cuda\n    x = 1\n", id="cuda-word-only-in-header-comment"),
    pytest.param(_I + "s = f\"{torch.cuda.device_count() if torch.version.hip else 0}\"\n", id="branch-in-f-string"),
    pytest.param(_I + "torch.cuda.current_device = torch.xpu.current_device\n", id="patching-module"),
]


@pytest.mark.parametrize("source", UNSURE_FOREIGN)
def test_traps_unsure_cn112(source):
    detected, _ = _both(RULES["CN112"], source)
    assert detected is None


def _engine_both(source: str) -> tuple[list[Finding] | None, list[Finding]]:
    """The engine's findings for every rule the file wakes, read from the detectors (fences
    applied by the engine), beside the libcst walk of the same rules."""
    from cuda2neuron.kinds._code_text import code_text
    from cuda2neuron.kinds._python import _awake, _python_rules

    settings = Settings()
    data = source.encode("utf-8")
    rules = _awake(_python_rules(tuple(RULES.values()), settings), code_text(data), ())
    detected = _detected("m.py", data, Config(settings=settings), RunOptions(), rules)
    return detected, lint_module(parse_bytes(data), rules, "m.py", settings, source)


# The fence on the ast path: the other detectors' findings inside another accelerator's code
# dropped as python/_lint.py drops reports (a quiet fence only speaks where it kept one out).
FENCED = [
    pytest.param(_I + "def f(x):\n    if x.device.type == 'mps':\n        return x.cuda()\n    return x.cuda()\n", id="moved-outside-kept-inside"),
    pytest.param(_I + "def f(x):\n    g(x.cuda() if is_torch_npu_available() else x.cpu())\n    x.cuda()\n", id="if-expression-branches"),
    pytest.param(_I + "def f(x):\n    if x.device.type == 'mps':\n        return x.cuda()  # cuda2neuron: ignore[CN101]\n    return x\n", id="suppressed-inside-still-fenced"),
    pytest.param(_I + "def f(x):\n    if x.device.type == 'xpu':\n        pass\n    return x.cuda()\n", id="quiet-fence-dropped"),
]


@pytest.mark.parametrize("source", FENCED)
def test_fences_on_ast(source):
    detected, linted = _engine_both(source)
    assert detected is not None, "every woken rule should decide this file"
    assert detected == linted


# -- h42d: CN607 decided (imports of bitsandbytes and calls resolved into it) ------------------
DECIDED_BITSANDBYTES = [
    pytest.param("try:\n    import os, bitsandbytes.nn as bnn\nexcept ImportError:\n    bnn = None\n", id="second-alias-in-try"),
    pytest.param("def f():\n    import bitsandbytes as bnb\n    return bnb.nn.Linear8bitLt(4, 4)\n", id="import-in-function"),
    pytest.param("from bitsandbytes.nn import (\n    Linear4bit,\n    Params4bit,\n)\nw = Params4bit(x)\n", id="parenthesized-from-import"),
    pytest.param("import bitsandbytes as bnb\ndef f(bnb):\n    return bnb.optim.Adam8bit(p)\n", id="shadowed-by-parameter"),
    pytest.param("from .bitsandbytes import replace\nreplace(m)\n", id="relative-import-not-the-package"),
    pytest.param("import bitsandbytes.functional as F\ny = F.dequantize_4bit(w, s).to(x.dtype)\n", id="chained-call"),
    pytest.param("import bitsandbytes as bnb\nis_8bit = isinstance(m, bnb.nn.Linear8bitLt)\n", id="reference-not-a-call"),
    pytest.param("import bitsandbytes as bnb; import torch\nbnb.optim.GlobalOptimManager.get_instance().register_module_override(m, 'w', {})\n", id="two-imports-one-line"),
]


@pytest.mark.parametrize("source", DECIDED_BITSANDBYTES)
def test_traps_decided_cn607(source):
    detected, linted = _both(RULES["CN607"], source)
    assert detected is not None, "a trap the detector should decide left it unsure"
    assert detected == linted


UNSURE_BITSANDBYTES = [
    pytest.param("import bitsandbytes as bnb\nmsg = f\"{bnb.cuda_setup.main()}\"\n", id="call-in-f-string"),
]


@pytest.mark.parametrize("source", UNSURE_BITSANDBYTES)
def test_traps_unsure_cn607(source):
    detected, linted = _both(RULES["CN607"], source)
    assert detected is None
    assert linted


# -- h42d: the CN106 and CN622 gates (decided: no finding; else unsure and the visitor reports) --
GATE_CASES_H42D = [
    pytest.param("CN106", "import torch\ndef f(x) -> torch.LongTensor:\n    return x.to(torch.cuda.current_device())\n", True, id="CN106-cpu-type-annotation"),
    pytest.param("CN106", '"""A FloatTensor on cuda."""\nimport torch\ny = torch.cuda.is_available()\n', True, id="CN106-type-word-in-docstring"),
    pytest.param("CN106", "import torch.cuda as tc\nx = tc.FloatTensor(2)\n", False, id="CN106-module-alias"),
    pytest.param("CN106", "import torch\ntorch.set_default_tensor_type('torch\\x2ecuda.HalfTensor')\n", False, id="CN106-escaped-type-string"),
    pytest.param("CN106", "from utils import FloatTensor\nm = (a == b).type(FloatTensor)\n", False, id="CN106-alias-from-project"),
    pytest.param("CN106", "import torch\ns = f\"{'torch.cuda.HalfTensor'}\"\n", False, id="CN106-string-in-f-string"),
    pytest.param("CN106", "import torch\ndef f(x, FloatTensor=torch.cuda.FloatTensor):\n    return x\n", False, id="CN106-parameter-default"),
    pytest.param("CN107", "import torch\ndef f(model, device):\n    return model.to(device)\n", True, id="CN107-parameter-device"),
    pytest.param("CN107", "import torch\nx = torch.zeros(3, device=torch.device('cuda', 0))\ny = x.to(dtype=torch.half)\n", True, id="CN107-device-call-and-dtype-only"),
    pytest.param("CN107", "import torch\nd = 'cuda:0'\nx = x.to(d)\n", True, id="CN107-name-bound-to-a-string"),
    pytest.param("CN107", "x = x.to(0)\n", False, id="CN107-integer"),
    pytest.param("CN107", "from torch.cuda import current_device as cd\nx = x.to(cd())\n", False, id="CN107-aliased-current-device"),
    pytest.param("CN107", "import os\nn = int(os.environ['LOCAL_RANK'])\nd = n\nx = x.to(d)\n", False, id="CN107-int-through-a-second-name"),
    pytest.param("CN107", "def f(x, d: int):\n    return x.to(d)\n", False, id="CN107-int-annotated-parameter"),
    pytest.param("CN107", "parser.add_argument('--dev', type=(int), default=0)\nargs = parser.parse_args()\nx = x.to(args.dev)\n", False, id="CN107-parenthesized-int-option"),
    pytest.param("CN107", "y = model(x, device=self.local_rank)\n", False, id="CN107-hinted-attribute"),
    pytest.param("CN107", "parser.add_argument('--seed', type=int)\nargs = parser.parse_args()\nx = x.to(args.device)\n", True, id="CN107-int-option-of-another-name"),
    pytest.param("CN107", "parser.add_argument('--dev', dest='where', type=int)\nargs = parser.parse_args()\nx = x.to(args.where)\n", False, id="CN107-int-option-by-dest"),
    pytest.param("CN622", "PROVIDERS = ['CPUExecutionProvider']\n", True, id="CN622-cpu-provider"),
    pytest.param("CN622", "from diffusers.utils import is_onnx_available\nok = 'onnxruntime' in mods and device == 'cuda'\n", True, id="CN622-package-named-not-imported"),
    pytest.param("CN622", "p = ['CUDAExecutionProvider' ':0', 'x']\n", False, id="CN622-concatenated-part"),
    pytest.param("CN622", "import onnxruntime_genai as og\nog.Config(p).append_provider('cuda')\n", False, id="CN622-short-name"),
]


@pytest.mark.parametrize(("code", "source", "decided"), GATE_CASES_H42D)
def test_gates_h42d(code, source, decided):
    detected, linted = _both(RULES[code], source)
    if decided:
        assert detected == linted == []
    else:
        assert detected is None
        assert linted, "the visitor reports what the gate leaves to it"


# -- h42d: CN622's full provider names decided on ast --------------------------------------------
DECIDED_ONNX_PROVIDERS = [
    pytest.param('"CUDAExecutionProvider"\n', id="expression-statement-is-a-docstring"),
    pytest.param('s = "é"; providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]\n', id="non-ascii-before"),
    pytest.param('p = ("TensorrtExecutionProvider")\n', id="parenthesized"),
    pytest.param('if "CUDAExecutionProvider" in ort.get_available_providers():\n    pass\n', id="membership-test"),
    pytest.param('p = "CUDA\\x45xecutionProvider"\n', id="escaped-text-no-word"),
    pytest.param('import onnxruntime as ort\nsess = ort.InferenceSession(f, providers=["CUDAExecutionProvider"])\nx = 1\n', id="imported-no-short-name"),
]


@pytest.mark.parametrize("source", DECIDED_ONNX_PROVIDERS)
def test_traps_decided_cn622(source):
    detected, linted = _both(RULES["CN622"], source)
    assert detected is not None, "a trap the detector should decide left it unsure"
    assert detected == linted


UNSURE_ONNX_PROVIDERS = [
    pytest.param('p = f"{x}" "CUDAExecutionProvider"\n', id="f-string-concatenation"),
    pytest.param('import onnxruntime as ort\nd = "cuda"\nsess = ort.InferenceSession(f, providers=["CUDAExecutionProvider"])\n', id="imported-with-a-short-name"),
]


@pytest.mark.parametrize("source", UNSURE_ONNX_PROVIDERS)
def test_traps_unsure_cn622(source):
    detected, linted = _both(RULES["CN622"], source)
    assert detected is None
    assert linted


# h42f: the autocast trio (one shared walk, rules/amp/_detect_ast.py), CN603 and CN605.
_A = "import torch\n"
DECIDED_AMP = [
    pytest.param("CN303", _A + "d = 'cuda'\nwith torch.autocast(device_type=kind, enabled=False):\n    pass\n", id="CN303-keyword"),
    pytest.param("CN303", "import torch as t\nfrom torch.amp import GradScaler as GS\nd = 'cuda:1'\ns = GS(dev)\nc = t.amp.autocast(self.cfg.device)\n", id="CN303-aliases-and-attribute-chain"),
    pytest.param("CN303", _A + "s = 'é'; d = 'cuda'\nc = torch.autocast( kind ,dtype=x)\n", id="CN303-non-ascii-spaced"),
    pytest.param("CN303", _A + "def f():\n    \"\"\"On 'cuda'.\"\"\"\n    'cuda'\n    return torch.autocast(kind)\n", id="CN303-string-statements-skipped"),
    pytest.param("CN303", _A + "x = 1; 'cuda'\nc = torch.autocast(kind)\n", id="CN303-string-after-semicolon-read"),
    pytest.param("CN303", _A + "if a: 'cuda'\nc = torch.autocast(kind)\n", id="CN303-string-in-suite-read"),
    pytest.param("CN303", _A + "m = torch.load(p, map_location={'cuda:0': 'cpu', **extra})\nc = torch.autocast(kind)\n", id="CN303-map-location-key"),
    pytest.param("CN303", _A + "m = torch.load(p, map_location={'cpu': 'cuda:1'})\nc = torch.autocast(kind)\n", id="CN303-map-location-value"),
    pytest.param("CN303", _A + "d = f'cuda:{rank}'\nc = torch.autocast(kind)\n", id="CN303-f-string-device"),
    pytest.param("CN303", _A + "e = 'cuda_graphs'\nn = r'torch.backends.cuda'\nc = torch.autocast(kind)\n", id="CN303-words-no-device"),
    pytest.param("CN303", _A + "d = 'cuda'\nc = torch.autocast(x.device.type)\ns = torch.GradScaler(dev)\n", id="CN303-device-type-and-other-scaler"),
    pytest.param("CN303", _A + "d = 'cuda'\nc = torch.autocast(kind)  # cuda2neuron: ignore[CN303]\n", id="CN303-suppressed"),
    pytest.param("CN303", "def f(torch):\n    d = 'cuda'\n    return torch.autocast(kind)\n", id="CN303-shadowed-torch"),
    pytest.param("CN301", _A + "with torch.autocast(x.device.type):\n    pass\nwith torch.cpu.amp.autocast():\n    pass\n", id="CN301-other-autocasts"),
    pytest.param("CN301", "from mylib import autocast\nwith autocast():\n    pass\nf(autocast)\n", id="CN301-own-autocast"),
    pytest.param("CN301", _A + "import contextlib\nwith torch.no_grad(), torch.cuda.amp.autocast():\n    pass\nx = (torch.cuda.amp.autocast())\nctx = contextlib.nullcontext() if final else torch.cuda.amp.autocast_mode.autocast()\n", id="CN301-items-parentheses-conditional"),
    pytest.param("CN301", "import torch as th\ns = 'é'; c = th . cuda . amp . autocast()\n", id="CN301-alias-spaced-non-ascii"),
    pytest.param("CN302", _A + "with torch.autocast('cpu'), torch.autocast(device_type=d.type):\n    pass\n", id="CN302-other-devices"),
    pytest.param("CN302", "from mylib import autocast\nwith autocast('cuda'):\n    pass\n", id="CN302-own-autocast"),
    pytest.param("CN302", _A + "with torch.autocast(device_type='cu' 'da'), torch.autocast(('cuda')):\n    pass\n", id="CN302-concatenated-and-parenthesized"),
    pytest.param("CN302", "import torch as t\ns = 'é'; c = t.amp.autocast(device_type=\"cuda\", enabled=use_amp, cache_enabled=False)\n", id="CN302-alias-non-ascii-insert-before-next"),
    pytest.param("CN302", _A + "with torch.autocast('cuda', torch.float16), torch.autocast('cuda', dtype=torch.half):\n    pass\n", id="CN302-float16-advice"),
    pytest.param("CN302", _A + "with torch.autocast('cuda', **kw):\n    pass\nctx = torch.autocast(r'''cuda''')\n", id="CN302-double-star-and-prefix"),
    pytest.param("CN302", "from torch import autocast\nimport torch\ndef f(torch):\n    with autocast('cuda'):\n        pass\n", id="CN302-dtype-shadowed"),
    pytest.param("CN302", _A + "@torch.autocast('cuda')\ndef f():\n    pass\nx = 1; y = torch.autocast('cuda')  # cuda2neuron: ignore[CN302]\n", id="CN302-decorator-and-suppressed"),
    pytest.param("CN605", "import xformers\nimport xformers.ops as xops\ny = xops.memory_efficient_attention(q, k, v, op=o)\n", id="CN605-op-keyword-reported"),
    pytest.param("CN605", "from xformers.ops import fmha\nm = fmha.BlockDiagonalMask.from_seqlens(s)\nc = fmha.attn_bias.LowerTriangularMask()\n", id="CN605-mask-calls"),
    pytest.param("CN605", "def f():\n    import xformers.ops as xops\n    s = 'é'; return xops.memory_efficient_attention(*qkv)\nimport os; from xformers import ops\n", id="CN605-in-function-star-non-ascii"),
    pytest.param("CN605", "import xformers\ndef f(xformers):\n    return xformers.ops.memory_efficient_attention(q, k, v)\n", id="CN605-shadowed"),
    pytest.param("CN605", "from . import xformers\nfrom .xformers import ops\ny = ops.memory_efficient_attention(q, k, v)\n", id="CN605-relative-imports"),
    pytest.param("CN605", "import xformers.ops as xops\ny = xops.memory_efficient_attention(q, k, v, attn_bias=bias)\n", id="CN605-tensor-bias"),
]


@pytest.mark.parametrize(("code", "source"), DECIDED_AMP)
def test_traps_decided_amp_and_xformers(code, source):
    detected, linted = _both(RULES[code], source)
    assert detected is not None, "a trap the detector should decide left it unsure"
    assert detected == linted


# ... and unsure where a fix is built or ast cannot tell (the visitor reports there).
UNSURE_AMP = [
    pytest.param("CN301", "from torch.cuda.amp import autocast as ac\nwith ac():\n    pass\n", id="CN301-aliased-callee"),
    pytest.param("CN301", "import functools, torch\nctx = functools.partial(torch.cuda.amp.autocast, enabled=False)\n", id="CN301-reference"),
    pytest.param("CN301", "from torch.cuda import amp\n\n@amp.autocast()\ndef f():\n    pass\n", id="CN301-decorator-through-module"),
    pytest.param("CN301", _A + "with torch.cuda.amp.autocast( ):\n    pass\n", id="CN301-space-inside-parentheses"),
    pytest.param("CN301", "import torch.cuda.amp as A\nwith A.autocast():\n    pass\n", id="CN301-module-alias-import-may-be-dropped"),
    pytest.param("CN301", _A + "def f(x):\n    ctx = torch.cuda.amp.autocast()\n    if torch.cuda.is_available():\n        return ctx\n", id="CN301-bound-in-a-cuda-function"),
    pytest.param("CN302", _A + "with torch.autocast('cuda',enabled=x):\n    pass\n", id="CN302-comma-without-space"),
    pytest.param("CN302", _A + "with torch.autocast('cuda' , enabled=x), torch.autocast('cuda',):\n    pass\n", id="CN302-space-before-and-trailing-comma"),
    pytest.param("CN302", _A + "def f():\n    with torch.autocast(\n        'cuda',  # why\n        enabled=False,\n    ):\n        pass\n", id="CN302-multi-line-comment"),
    pytest.param("CN302", _A + "def f(x):\n    ctx = torch.autocast('cuda')\n    if x.is_cuda:\n        return ctx\n", id="CN302-bound-in-a-cuda-function"),
    pytest.param("CN302", _A + "s = f'{torch.autocast(\"cuda\")}'\n", id="CN302-inside-f-string"),
    pytest.param("CN302", "from torch import autocast as ac\nwith ac('cuda', enabled=False):\n    pass\n", id="CN302-aliased"),
    pytest.param("CN303", _A + "d = 'cuda' 'x'\nc = torch.autocast(kind)\n", id="CN303-concatenated-literal"),
    pytest.param("CN303", _A + "d = 'cuda'\nc = torch.autocast((kind))\n", id="CN303-parenthesized-variable"),
    pytest.param("CN303", _A + "d = 'cuda'\ndef f():\n    return torch.autocast(self\n        .kind)\n", id="CN303-variable-across-lines"),
    pytest.param("CN303", _A + "d = 'cuda'\nm = f'{torch.autocast(kind)}'\n", id="CN303-inside-f-string"),
    pytest.param("CN605", "import xformers.ops as xops\ny = xops.memory_efficient_attention(q, k, v, p=0.1)\n", id="CN605-sdpa-rewrite"),
    pytest.param("CN605", "import xformers.ops as xops\ny = xops.memory_efficient_attention(q, k, v, attn_bias=xops.LowerTriangularMask())\n", id="CN605-causal-rewrite"),
]


@pytest.mark.parametrize(("code", "source"), UNSURE_AMP)
def test_traps_unsure_amp_and_xformers(code, source):
    detected, linted = _both(RULES[code], source)
    assert detected is None
    assert linted, "the visitor reports what the detector leaves to it"


# CN603's gate: decided only where no CUDA-only import binds a name, or no test could be a guard.
GATE_CASES_FAST_PATH = [
    pytest.param("from .ops import triton_kernel\nif x.is_cuda:\n    y = triton_kernel(x)\n", True, id="CN603-relative-import"),
    pytest.param("import triton\n\ndef f(x):\n    if x.device.type == 'cpu':\n        return x\n    return k(x)\n", True, id="CN603-no-cuda-test"),
    pytest.param("from diffusers.utils import is_xformers_available\nif torch.cuda.is_available():\n    pass\n", True, id="CN603-package-word-only"),
    pytest.param("import xformers.ops as xops\ny = xops.memory_efficient_attention(q, k, v) if q.is_cuda else ref(q, k, v)\n", False, id="CN603-conditional-expression"),
    pytest.param("from torch.utils import cpp_extension\n\ndef f(x):\n    if x.device.type == 'cuda:0':\n        return cpp_extension.load(name='e', sources=['e.cu'])(x)\n    return x\n", False, id="CN603-from-import-member"),
    pytest.param("import torch\nfrom torch.neuron import is_available as ok\nimport triton\n\n@triton.jit\ndef _k(p):\n    pass\n\n"
                 "def main(x):\n    if not ok():\n        raise SystemExit('no device')\n    _k[(1,)](x)\n", False, id="CN603-aliased-target-check"),
]


@pytest.mark.parametrize(("source", "decided"), GATE_CASES_FAST_PATH)
def test_gate_fast_path(source, decided):
    detected, linted = _both(RULES["CN603"], source)
    if decided:
        assert detected == linted == []
    else:
        assert detected is None
        assert linted, "the visitor reports what the gate leaves to it"


# CN603's gate reads names: a guard decided where its code meets no CUDA-only name (h42f).
GATE_CASES_FAST_PATH_NAMES = [
    pytest.param("import torch\n\ndef main(args):\n    if args.adam8:\n        import bitsandbytes as bnb\n        opt = bnb.optim.AdamW8bit\n"
                 "    if torch.cuda.is_available():\n        torch.backends.cuda.matmul.allow_tf32 = True\n", True, id="CN603-guard-meets-no-kernel-name"),
    pytest.param("import torch\n\ndef main(args):\n    if not torch.cuda.is_available():\n        return\n    import bitsandbytes as bnb\n    opt = bnb.optim.AdamW8bit\n",
                 False, id="CN603-early-exit-before-kernel"),
    pytest.param("import torch\n\ndef _fast(x):\n    import xformers.ops as xops\n    return xops.memory_efficient_attention(x, x, x)\n\n"
                 "class Block:\n    def f(self, x):\n        return helper(x)\n\ndef helper(x):\n    return _fast(x)\n\n"
                 "def g(x):\n    if x.is_cuda:\n        return Block().f(x)\n    return x\n", False, id="CN603-kernel-through-two-functions"),
    pytest.param("try:\n    import triton\nexcept ImportError:\n    pass\nelse:\n    def _k(x):\n        return triton.cdiv(x, 2)\n\n"
                 "def g(x):\n    if x.is_cuda:\n        return _k(x)\n    return x\n", False, id="CN603-kernel-defined-in-try-else"),
    pytest.param("import torch\nimport bitsandbytes as bnb\n\ndef main(args):\n    if torch.backends.mps.is_available() and args.bf16:\n        raise ValueError('no bf16 on mps')\n"
                 "    opt = bnb.optim.AdamW8bit\n", True, id="CN603-exit-that-asks-no-cuda-question"),
    pytest.param("import torch\nimport xformers.ops as xops\n\ndef f(q):\n    if not torch.cuda.is_available():\n        raise ValueError('needs a GPU')\n    else:\n        return xops.memory_efficient_attention(q, q, q)\n",
                 True, id="CN603-exit-with-else-is-no-early-exit"),
    pytest.param("import triton\n\n@triton.jit\ndef _k(p):\n    pass\n\ndef f(x, ref):\n    if ref or not x.is_cuda:\n        return x + 1\n    _k[(1,)](x)\n    return x\n",
                 False, id="CN603-early-exit-through-or"),
    pytest.param("import torch\nimport triton\n\n@triton.jit\ndef _k(p):\n    pass\n\ndef f(x):\n    if HAS_TRITON and flag and torch.cuda.is_available():\n        _k[(1,)](x)\n    return x\n",
                 False, id="CN603-availability-in-a-long-and"),
]


@pytest.mark.parametrize(("source", "decided"), GATE_CASES_FAST_PATH_NAMES)
def test_gate_fast_path_names(source, decided):
    detected, linted = _both(RULES["CN603"], source)
    if decided:
        assert detected == linted == []
    else:
        assert detected is None
        assert linted, "the visitor reports what the gate leaves to it"
