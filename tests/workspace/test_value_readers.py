"""Values that cross a call and decide in the callee (issue 38): the sweep's ``selections`` and
``device_readers``, and what CN102 / the kernel gates make of them.

lerobot's ``config_cls(device="cuda")`` was moved to "neuron" while the config's
``__post_init__`` hands the field to a device check that a safe run leaves on "cuda" and whose
``else`` raises; torchtitan's ``make_ffn_config(..., tp_gemm_backend="dist_gemm")`` picks a
symmetric-memory class in the callee, and the ``skipUnless(torch.cuda.is_available())`` in front
of the test making that call was ported. The fixture project ``value_flow`` carries both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda2neuron.workspace import discover, project_facts
from workspace_helpers import port_both, write_tree

PROJECT = Path(__file__).resolve().parents[1] / "fixtures" / "projects" / "value_flow"

LIBRARY = "import bitsandbytes as bnb\n\nclass Quant:\n    def forward(self, x):\n        return bnb.matmul_4bit(x, x)\n"
READER = (
    "import torch\n\ndef ready(try_device):\n    if try_device.startswith('cuda'):\n"
    "        return torch.cuda.is_available()\n    elif try_device == 'cpu':\n        return True\n"
    "    else:\n        raise ValueError(try_device)\n"
)
CONFIG = (
    "from dataclasses import dataclass\nfrom .devices import ready\n\n@dataclass\nclass Cfg:\n"
    "    device: str = 'cpu'\n\n    def __post_init__(self):\n        ready(self.device)\n"
)

# (files, selections expected as (function, parameter, literals), functions that select nothing)
SELECTIONS = [
    pytest.param(
        {"pkg/quant.py": LIBRARY, "pkg/make.py": "from .quant import Quant\n\ndef make(kind='plain'):\n    cls = Quant if kind == 'q4' else object\n    return cls()\n"},
        [("pkg.make.make", "kind", ("q4",))], (), id="a-conditional-expression-picks-an-imported-sink",
    ),
    pytest.param(
        {"pkg/quant.py": LIBRARY, "pkg/make.py": "from .quant import Quant\n\ndef make(kind):\n    if kind != 'plain':\n        return Quant()\n    return None\n"},
        [], ("pkg.make.make",), id="an-unequal-test-picks-the-other-side",
    ),
    pytest.param(
        {"pkg/quant.py": LIBRARY, "pkg/make.py": "from .quant import Quant\n\ndef make(kind):\n    if kind == 'plain':\n        return None\n    else:\n        return Quant()\n"},
        # Every literal but "plain" picks it: no literal to look for at the call (left as before).
        [], ("pkg.make.make",), id="an-else-any-other-literal-takes-is-not-told",
    ),
    pytest.param(
        {"pkg/quant.py": LIBRARY, "pkg/make.py": "from .quant import Quant\n\ndef make(kind, *, backend='a'):\n    if backend in ('b', 'c'):\n        return Quant()\n"},
        [("pkg.make.make", "backend", ("b", "c"))], (), id="a-keyword-only-parameter-in-a-tuple",
    ),
    pytest.param(
        {"pkg/quant.py": LIBRARY, "pkg/make.py": "from .quant import Quant\n\nMODE = 'x'\n\ndef make():\n    return Quant() if MODE == 'q4' else None\n"},
        [], ("pkg.make.make",), id="a-module-flag-is-no-parameter",
    ),
]


@pytest.mark.parametrize(("files", "expected", "plain"), SELECTIONS)
def test_the_sweep_records_a_literal_that_picks_a_sink(tmp_path, files, expected, plain):
    facts = project_facts(discover([write_tree(tmp_path / "proj", files)]).files)
    found = {(f, p, lits) for f, p, _, lits, _ in facts.selections}
    for row in expected:
        assert row in found, found
    for name in plain:
        assert not any(f == name for f, _, _ in found), found


# (files, readers expected as (name, parameter, moved by --unsafe-fixes), names that read nothing)
READERS = [
    pytest.param({"pkg/devices.py": READER}, [("pkg.devices.ready", "try_device", True)], (), id="a-raising-chain-around-torch"),
    pytest.param(
        {"pkg/devices.py": READER.replace("try_device", "name")}, [("pkg.devices.ready", "name", False)], (),
        id="a-name-that-says-no-device-stays-in-every-run",
    ),
    pytest.param(
        {"pkg/devices.py": READER.replace("return torch.cuda.is_available()", "return True")}, [], ("pkg.devices.ready",),
        id="plain-answers-move-safely",
    ),
    pytest.param(
        {"pkg/devices.py": READER.replace("raise ValueError(try_device)", "return False")}, [], ("pkg.devices.ready",),
        id="an-else-that-does-not-raise",
    ),
    pytest.param(
        {"pkg/devices.py": READER.replace("try_device == 'cpu'", "try_device in ('cpu', 'neuron')")}, [], ("pkg.devices.ready",),
        id="a-chain-that-knows-neuron",
    ),
    pytest.param(
        {"pkg/devices.py": READER, "pkg/config.py": CONFIG, "pkg/__init__.py": "from .config import Cfg\n",
         "pkg/more.py": "from pkg import Cfg\n\nclass Sub(Cfg):\n    pass\n"},
        [("pkg.config.Cfg", "device", True), ("pkg.Cfg", "device", True), ("pkg.more.Sub", "device", True)], (),
        id="a-field-handed-on-re-exported-and-subclassed",
    ),
    pytest.param(
        {"pkg/devices.py": READER, "run.py": "from pkg.devices import ready\n\ndef load(path, device='cuda'):\n    ready(device)\n"},
        [("run.load", "device", True)], (), id="a-parameter-handed-on",
    ),
    pytest.param(
        {"pkg/devices.py": READER, "run.py": "from pkg.devices import ready\n\ndef load(path, device='cuda'):\n    ready('cpu')\n"},
        [], ("run.load",), id="a-literal-handed-is-no-parameter",
    ),
    # `main(device)` -> `build(device)` -> `check(device)`: the caller defined before its callee,
    # and the last hop in another module, which spells only the middle name.
    pytest.param(
        {"pkg/devices.py": READER, "pkg/build.py": "from .devices import ready\n\ndef build(device):\n    return prepare(device)\n\ndef prepare(device):\n    ready(device)\n",
         "run.py": "from pkg.build import build\n\ndef main(device='cuda'):\n    return build(device)\n"},
        [("pkg.build.prepare", "device", True), ("pkg.build.build", "device", True), ("run.main", "device", True)], (),
        id="a-reader-three-calls-away",
    ),
]


@pytest.mark.parametrize(("files", "expected", "plain"), READERS)
def test_the_sweep_records_a_device_reader_that_stays(tmp_path, files, expected, plain):
    facts = project_facts(discover([write_tree(tmp_path / "proj", files)]).files)
    found = {(name, parameter, unsafe) for name, parameter, _, _, unsafe in facts.device_readers}
    for row in expected:
        assert row in found, found
    for name in plain:
        assert not any(n == name for n, _, _ in found), found


OPTION_READER = (
    "import torch\n\ndef init_device(args):\n    if args.device == 'cuda':\n        torch.cuda.set_device(0)\n"
    "    elif args.device == 'cpu':\n        pass\n    else:\n        raise ValueError(args.device)\n"
)

CALLER = "from pkg.launch import init_device\n\ndef main(args):\n    init_device(args)\n"
METHOD_READER = "class Trainer:\n" + "".join(
    "    " + line + "\n" for line in OPTION_READER.split("\n", 2)[2].replace("init_device(args)", "__init__(self, opt)").replace("args.", "opt.").splitlines()
)

# (files, option readers expected as (calling module, attribute, moved by --unsafe-fixes),
#  (module, attribute) pairs read by none)
OPTIONS = [
    pytest.param({"pkg/launch.py": OPTION_READER, "run.py": CALLER}, [("run", "device", True)], (), id="a-namespace-handed-in"),
    pytest.param(
        {"pkg/launch.py": OPTION_READER, "run.py": CALLER, "sample.py": "def main(args):\n    return args.device\n"},
        [("run", "device", True)], (("sample", "device"),), id="a-module-that-never-calls-it",
    ),
    pytest.param(
        {"pkg/launch.py": METHOD_READER, "run.py": "from pkg.launch import Trainer\n\ndef main(opt):\n    Trainer(opt)\n"},
        [("run", "device", True)], (), id="a-constructor-handed-the-options",
    ),
    pytest.param(
        {"pkg/launch.py": OPTION_READER.replace("torch.cuda.set_device(0)", "fused_init()"), "run.py": CALLER}, [("run", "device", False)], (),
        id="a-branch-that-calls-more-than-torch-stays-in-every-run",
    ),
    pytest.param(
        {"pkg/launch.py": OPTION_READER.replace("args", "model"), "run.py": CALLER.replace("args", "model")}, [], (("run", "device"),),
        id="an-attribute-of-another-object",
    ),
    pytest.param(
        {"pkg/launch.py": OPTION_READER.replace("raise ValueError(args.device)", "return None"), "run.py": CALLER}, [], (("run", "device"),),
        id="an-else-that-does-not-raise",
    ),
]


@pytest.mark.parametrize(("files", "expected", "plain"), OPTIONS)
def test_the_sweep_records_an_option_a_raising_test_reads(tmp_path, files, expected, plain):
    facts = project_facts(discover([write_tree(tmp_path / "proj", files)]).files)
    found = {(module, attribute, unsafe) for module, attribute, _, unsafe in facts.option_readers}
    for row in expected:
        assert row in found, found
    for module, attribute in plain:
        assert not any((m, a) == (module, attribute) for m, a, _ in found), found




@pytest.fixture(scope="module")
def ports() -> dict[bool, dict[str, tuple[str, list]]]:
    return port_both(PROJECT)


# (file, the text in the original, what the safe port has there, what --unsafe-fixes has,
#  text the held finding's message holds)
LINES = [
    pytest.param("checks/config_checks.py", 'config_cls(device="cuda"', '"cuda"', '"neuron"', "flowlib/devices.py:9", id="a-class-handed-in"),
    pytest.param("checks/config_checks.py", 'RunConfig(device="cuda")', '"cuda"', '"neuron"', "flowlib/devices.py:9", id="a-dataclass-field"),
    pytest.param("checks/config_checks.py", 'TunedConfig(device="cuda"', '"cuda"', '"neuron"', "flowlib/devices.py:9", id="a-subclass-through-the-package"),
    pytest.param("checks/config_checks.py", 'def load(path, device="cuda")', '"cuda"', '"neuron"', "flowlib/devices.py:9", id="a-parameter-default"),
    pytest.param("flowlib/devices.py", 'if try_device.startswith("cuda")', '"cuda"', '"neuron"', None, id="the-reader-moves-only-unsafe"),
    pytest.param("checks/config_checks.py", 'mixed_precision_ok(device="cuda")', '"neuron"', '"neuron"', None, id="a-reader-of-plain-answers-moves-with-it"),
    pytest.param("checks/linear_checks.py", 'skipUnless(torch.cuda.is_available(), "the 4-bit', "torch.cuda", "torch.cuda", "flowlib/layers.py:10", id="a-literal-that-picks-the-kernel-keeps-its-skip"),
    pytest.param("checks/linear_checks.py", 'skipUnless(torch.cuda.is_available(), "runs on', "torch.neuron", "torch.neuron", None, id="the-plain-literal-is-ported"),
    # A command-line option read as `args.device` by another module's raising test: its default
    # and its choices move with that test or not at all.
    pytest.param("checks/cli_checks.py", '"--device", default="cuda"', 'default="cuda"', 'default="neuron"', "flowlib/launch.py:8", id="an-option-read-in-another-module"),
    pytest.param("checks/cli_checks.py", '"--device", default="cuda"', 'choices=["cuda"', 'choices=["neuron"', "flowlib/launch.py:8", id="its-choices-go-with-it"),
    # Read in the option's own module (the program pass): the choices go with the default.
    pytest.param("checks/cli_checks.py", '"--eval-device"', 'default="cuda", choices=["cuda"', 'default="neuron", choices=["neuron"', None, id="an-option-read-in-its-module-keeps-its-choices"),
    pytest.param("checks/cli_checks.py", '"--save-device"', 'default="neuron", choices=["neuron"', 'default="neuron", choices=["neuron"', None, id="an-option-nobody-tests-is-ported"),
    pytest.param("flowlib/launch.py", 'if args.device == "cuda"', '"cuda"', '"neuron"', None, id="the-option-reader-moves-only-unsafe"),
    # Three calls from the reader: `run` -> `start` -> `prepare` -> `device_ready`.
    pytest.param("checks/cli_checks.py", 'def run(device="cuda")', '"cuda"', '"neuron"', "flowlib/devices.py:9", id="a-reader-three-calls-away"),
]


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize(("path", "original", "safe", "unsafe_text", "where"), LINES)
def test_a_value_moves_only_with_its_reader(ports, unsafe, path, original, safe, unsafe_text, where):
    source = (PROJECT / path).read_text()
    line = source[: source.index(original)].count("\n") + 1
    text, findings = ports[unsafe][path]
    wanted = unsafe_text if unsafe else safe
    assert wanted in text.splitlines()[line - 1], text.splitlines()[line - 1]
    if where is not None and not (unsafe and wanted != safe):
        held = [f for f in findings if f.span.start_line == line and not f.applied]
        assert held and where in held[0].message, [(f.code, f.span.start_line, f.message) for f in findings]
