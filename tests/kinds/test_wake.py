"""The prefilter loses nothing: rules' ``wakes`` tests, and the catalog with and without them.

A rule's ``wakes`` is asked before a file is parsed; saying no where the rule would report loses
a finding. The table below holds device-index code in the shapes real training scripts use
(written for this test), each run through the whole catalog twice: as `migrate` runs it, and
with no prefilter at all (every rule on the parsed file). bench/check_prefilter.py does the
same over a real tree.
"""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config, RunOptions
from cuda2neuron.kinds import catalog, rules_for
from cuda2neuron.kinds._code_text import code_text
from cuda2neuron.kinds._python import _awake, process_python_findings
from cuda2neuron.python import fix_module, lint_module, parse_bytes

CN107 = catalog()["CN107"]

# (source, CN107 reports it)
SNIPPETS = [
    pytest.param("x = x.to(0)\n", True, id="literal"),
    pytest.param("x = x.to(\n    0,\n)\n", True, id="literal-on-next-line"),
    pytest.param("x = x.to(  # the first GPU\n    1)\n", True, id="literal-after-comment"),
    pytest.param("x = x.to(0x1)\n", True, id="hex-literal"),
    pytest.param("x = x.to(device=2, non_blocking=True)\n", True, id="device-keyword-literal"),
    pytest.param("x = x.to(non_blocking=True, device=2)\n", True, id="device-keyword-second"),
    pytest.param("x = x.to((3))\n", True, id="parenthesized-literal"),
    pytest.param("def f(x, local_rank):\n    return x.to(local_rank)\n", True, id="hint-parameter"),
    pytest.param("def f(x, opts):\n    return x.to(opts.gpu)\n", True, id="hint-attribute"),
    pytest.param("def f(x, cfg):\n    return x.to(cfg.dist.local_rank)\n", True, id="hint-long-chain"),
    pytest.param("def f(x, get):\n    return x.to(get().local_rank)\n", True, id="hint-attribute-of-call"),
    pytest.param("def f(x, rank):\n    return x.to((rank))\n", True, id="hint-parenthesized"),
    pytest.param("import os\nr = int(os.environ['LOCAL_RANK'])\nx = x.to(r)\n", True, id="name-from-int"),
    pytest.param("import os\nr: int = int(os.environ['R'])\nx = x.to(r)\n", True, id="annotated-name"),
    pytest.param("def f(x, which: int):\n    return x.to(which)\n", True, id="int-parameter"),
    pytest.param("w = 0\nv = w\nx = x.to(v)\n", True, id="name-from-name"),
    pytest.param("a = b = 1\nx = x.to(a)\n", True, id="chained-assignment"),
    pytest.param("n = 2\nx = x.to(n % 2)\n", True, id="arithmetic-on-name"),
    pytest.param("x = x.to(1 + 1)\n", True, id="arithmetic-on-literal"),
    pytest.param(
        "import torch\nimport torch.distributed as dist\nx = x.to(dist.get_rank() % torch.cuda.device_count())\n",
        True,
        id="arithmetic-on-calls",
    ),
    pytest.param("import torch\nx = torch.zeros(2, device=torch.cuda.current_device())\n", True, id="current-device"),
    pytest.param(
        "from torch.cuda import current_device as here\nimport torch\nx = torch.ones(1, device=here())\n",
        True,
        id="current-device-alias",
    ),
    pytest.param("import torch\nx = torch.ones(1,\n    device=7)\n", True, id="device-keyword-next-line"),
    pytest.param(
        "class T:\n    def __init__(self, m):\n        self.idx = 0\n        self.m = m.to(self.idx)\n",
        True,
        id="self-attribute-from-int",
    ),
    pytest.param(
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--which', type=int)\n"
        "args = p.parse_args()\nx = x.to(args.which)\n",
        True,
        id="argparse-int-option",
    ),
    # `type` a whole word and the option's name inside quotes, both read back by hand.
    pytest.param(
        "p.add_argument(dest='which', type=int)\nargs = p.parse_args()\nx = x.to(args.which)\n",
        True,
        id="argparse-int-dest",
    ),
    pytest.param(
        "p.add_argument('--which', subtype=int)\nargs = p.parse_args()\nx = x.to(args.which)\n",
        False,
        id="argparse-longer-type-keyword",
    ),
    pytest.param(
        "p.add_argument('--which-one', type=int)\nargs = p.parse_args()\nx = x.to(args.which)\n",
        False,
        id="argparse-other-option-name",
    ),
    pytest.param("x = x.to(device)\n", False, id="plain-device-name"),
    pytest.param("import torch\nx = x.to(torch.float16)\n", False, id="dtype"),
    pytest.param("def f(x, y):\n    return x.to(y.device)\n", False, id="device-of-other-tensor"),
    pytest.param("def f(x, device=None):\n    return x.to(device)\n", False, id="device-none-default"),
    pytest.param("def f(x, device: str | None = None, n: int = 1):\n    return x.to(device)\n", False, id="int-next-parameter"),
    pytest.param("x = x.to(1.0)\n", False, id="float-literal"),
    pytest.param("# x = x.to(0)\ny = 1\n", False, id="only-in-comment"),
    pytest.param('def f():\n    """x.to(0) moves it."""\n', False, id="only-in-docstring"),
    pytest.param("device = 0 if ok else 1\nx = x.to(dev)\n", False, id="device-assignment-not-a-keyword"),
]


# (source, rule code, does it wake): the other rules with a wake test of their own.
OTHER_WAKES = [
    pytest.param("import torch\nidx = torch.LongTensor([1, 2])\n", "CN106", False, id="cn106-cpu-type"),
    pytest.param("import torch\nx = torch.cuda.FloatTensor(2)\n", "CN106", True, id="cn106-cuda-type"),
    pytest.param("import torch.cuda as tc\nx = tc.HalfTensor(2)\n", "CN106", True, id="cn106-module-alias"),
    pytest.param("from utils import FloatTensor\nm = m.type(FloatTensor)\n", "CN106", True, id="cn106-project-alias"),
    pytest.param("import torch\nx = torch.cuda.synchronize()\n", "CN106", False, id="cn106-cuda-without-types"),
    # The type name's and `compile`'s word boundaries, read back by hand before the word.
    pytest.param("LongTensor = pick()\nx = LongTensor(2)\n", "CN106", True, id="cn106-bare-name-at-file-start"),
    pytest.param("x = MyLongTensor(2)\ny = HalfTensors\n", "CN106", False, id="cn106-inside-longer-names"),
    pytest.param("x = (LongTensor)(2)\n", "CN106", True, id="cn106-bare-name-after-a-bracket"),
    pytest.param("import multiprocessing as mp\np = mp.Process(target=work)\n", "CN803", False, id="cn803-no-device"),
    pytest.param("import numpy as np\na = np.zeros(2, dtype=np.float64)\n", "CN801", False, id="cn801-numpy"),
    pytest.param("import torch\nx = torch.zeros(2, dtype=torch . float64)\n", "CN801", True, id="cn801-torch"),
    pytest.param("import numpy as np, torch as th\nx = th.ones(1, dtype=th.double)\n", "CN801", True, id="cn801-alias"),
    pytest.param("from torch import float64\nx = x.to(float64)\n", "CN801", True, id="cn801-from-torch"),
    pytest.param("y = y.double(\n)\n", "CN801", True, id="cn801-double-call"),
    pytest.param("y = y.double(2)\n", "CN801", False, id="cn801-double-with-argument"),
    pytest.param("import multiprocessing as mp\nmp.set_start_method('fork')\n", "CN803", True, id="cn803-fork"),
    pytest.param(
        "from multiprocessing import get_context as ctx_of\nctx = ctx_of('fork')\n", "CN803", True, id="cn803-alias"
    ),
    pytest.param(
        "import multiprocessing as mp\nx = x.to('neuron')\np = mp.Pool(2)\n", "CN803", True, id="cn803-device-string"
    ),
    pytest.param("import xformers.ops as xops\ny = xops.memory_efficient_attention(q, k, v)\n", "CN605", True, id="cn605-import"),
    pytest.param("import os, \\\n    xformers\nxformers.ops.memory_efficient_attention(q, k, v)\n", "CN605", True, id="cn605-continued-import"),
    pytest.param("from xformers import ops\nops.memory_efficient_attention(q, k, v)\n", "CN605", True, id="cn605-from-import"),
    pytest.param("if ok:\n    import xformers; xformers.ops.memory_efficient_attention(q, k, v)\n", "CN605", True, id="cn605-nested-import"),
    pytest.param("pipe.enable_xformers_memory_efficient_attention()\n", "CN605", False, id="cn605-method-name"),
    pytest.param("from diffusers.utils import is_xformers_available\nok = is_xformers_available()\n", "CN605", False, id="cn605-availability-helper"),
    pytest.param("# import xformers\nbackend = 'xformers'\n", "CN605", False, id="cn605-commented-import"),
    pytest.param("def f(x, image_rotary_emb=None):\n    return x\n", "CN616", False, id="cn616-word-inside-a-name"),
    pytest.param("if attn.fused_projections:\n    attn.fuse_projections()\n", "CN608", False, id="cn608-no-flag-set"),
    pytest.param("def test_fused_qkv(self):\n    assert out_fused == ref\n", "CN608", False, id="cn608-compared-not-set"),
    pytest.param("import torch\nopt = torch.optim.AdamW(ps, fused\n=True)\n", "CN608", True, id="cn608-keyword-across-lines"),
    pytest.param("import torch\nself.Use_Fused = torch.cuda.is_available()\n", "CN608", True, id="cn608-flag-any-case"),
    pytest.param("extra = dict(fused=True)\n", "CN608", True, id="cn608-collected-keyword"),
    pytest.param("USE_FUSED = device.type == 'cuda'\n", "CN608", True, id="cn608-upper-case-flag"),
    pytest.param("import re\np = re.compile(r'\\d+')\nq = re.compile(\n    'x')\n", "CN501", False, id="cn501-regex"),
    pytest.param("from diffusers.utils.torch_utils import is_compiled_module\n", "CN502", False, id="cn502-longer-word"),
    pytest.param("m = maybe_compile(m)\nn = compile_all\n", "CN501", False, id="cn501-word-inside-names"),
    pytest.param("compile = torch.compile\nm = compile(m)\n", "CN501", True, id="cn501-word-at-file-start"),
    pytest.param("import torch as re\nm = re.compile('m', backend='inductor')\n", "CN501", True, id="cn501-torch-named-re"),
    pytest.param("import re\np = re.compile(\n    rf'.*-{i}\\.bin$')\n", "CN501", False, id="cn501-regex-f-string"),
    pytest.param("p.add_argument('--mode', choices=['eager', 'compile'])\n", "CN501", False, id="cn501-word-in-a-string"),
    pytest.param("import torch\nm = torch.compile(m, mode='compile')\n", "CN501", True, id="cn501-call-beside-the-string"),
    pytest.param("import torch\nwith torch.autocast(x.device.type, enabled=False):\n    y = f(x)\n", "CN302", False, id="cn302-device-from-a-tensor"),
    pytest.param("import torch\nwith torch.autocast('cuda'):\n    y = f(x)\n", "CN302", True, id="cn302-cuda-literal"),
    pytest.param("from torch.cuda.amp import autocast\n@autocast()\ndef f(x):\n    return x\n", "CN301", True, id="cn301-legacy-import"),
    pytest.param("import torch\nok = torch.is_autocast_enabled()\n", "CN307", True, id="cn307-without-cuda"),
    pytest.param("import re\nimport torch\nm = torch.compile(m, mode='max-autotune')\n", "CN502", True, id="cn502-beside-a-regex"),
    pytest.param("import torch\nm.compile(dynamic=False)\n", "CN503", True, id="cn503-module-compile"),
    pytest.param("import torch\ntorch._inductor.config.triton.cudagraphs = True\n", "CN505", True, id="cn505-inductor-config"),
    pytest.param("from torch import compile as tc\nm = tc(m)\n", "CN504", True, id="cn504-aliased"),
    pytest.param("import torch\ntorch.cuda.synchronize()\n", "CN616", False, id="cn616-torch-cuda-is-no-package"),
    pytest.param("accelerator = Accelerator()\nmodel = accelerator.prepare(model)\n", "CN108", False, id="cn108-accelerate-object"),
    pytest.param("import lightning as L\nt = L.Trainer(accelerator='gpu')\n", "CN108", True, id="cn108-lightning-alias"),
    pytest.param("from pytorch_lightning import Trainer\nt = Trainer(accelerator='cuda')\n", "CN108", True, id="cn108-from-import"),
    pytest.param("fused_qkv_weight = sd.pop(key)\n", "CN608", False, id="cn608-fused-name-without-cuda"),
    pytest.param("use_fused = 'cuda' in device_type\n", "CN608", True, id="cn608-fused-name-beside-cuda"),
    pytest.param("import torch\nopt = torch.optim.Adam(ps, fused =flag)\n", "CN608", True, id="cn608-keyword-without-cuda"),
    pytest.param("import torch\nx = prompt.complex_human_instruction\n", "CN802", False, id="cn802-word-inside-a-name"),
    pytest.param("ok = is_bitsandbytes_available()\ndeps = {'bitsandbytes': '>=0.43'}\n", "CN607", False, id="cn607-availability-check"),
    pytest.param("import os, bitsandbytes as bnb\nopt = bnb.optim.Adam8bit(ps)\n", "CN607", True, id="cn607-import"),
    pytest.param("repo = 'nvidia/Cosmos-Reason1-7B'\n", "CN613", False, id="cn613-model-id"),
    pytest.param("import subprocess\nsubprocess.run(['nvidia-smi', '-L'])\n", "CN613", True, id="cn613-command"),
    pytest.param("from pynvml import nvmlInit\nnvmlInit()\n", "CN613", True, id="cn613-from-import"),
    pytest.param("kinds = ('float4_', 'float8_')\n", "CN619", False, id="cn619-dtype-name-in-a-string"),
    pytest.param("import torch\nw8 = w.to(torch.\\\n    float8_e4m3fn)\n", "CN619", True, id="cn619-attribute-continued"),
    pytest.param("from torch import _scaled_mm as smm\ny = smm(a, b)\n", "CN619", True, id="cn619-aliased-operator"),
    pytest.param("from torch import nn\nif double_self_attention:\n    pass\n", "CN801", False, id="cn801-word-inside-a-name"),
    pytest.param("from torch import (\n    double,\n)\nx = x.to(double)\n", "CN801", True, id="cn801-from-torch-multi-line"),
    pytest.param("import numpy as np\nspec = np.fft.rfft(x)\n", "CN802", False, id="cn802-numpy-fft"),
    pytest.param("from torch import view_as_complex as vc\ny = vc(x)\n", "CN802", True, id="cn802-alias"),
    pytest.param("import torch\nspec = torch.fft.rfft(x)\n", "CN802", True, id="cn802-torch-fft"),
    pytest.param("from numba import cuda\n\n@cuda.jit\ndef k(a):\n    pass\n", "CN616", True, id="cn616-from-language"),
    pytest.param('pipe = P.from_pretrained(r, device_map="auto")\n', "CN111", False, id="cn111-device-map-string"),
    pytest.param("def load(r, device_map=None):\n    return P.from_pretrained(r, device_map=device_map)\n", "CN111", False,
                 id="cn111-device-map-passed-on"),
    pytest.param("if device_map == 0:\n    pass\n", "CN111", False, id="cn111-device-map-compared"),
    pytest.param("m = A.from_pretrained(r, device_map =\\\n    (0))\n", "CN111", True, id="cn111-integer-parenthesized"),
    pytest.param('m = A.from_pretrained(r, device_map={"x": 1})\n', "CN111", True, id="cn111-dict-map"),
    pytest.param("device_map = {'' # the whole model\n    : rank}\n", "CN111", True, id="cn111-empty-key-comment"),
    pytest.param('device_map = {(r""): int(rank)}\n', "CN111", True, id="cn111-empty-key-parenthesized"),
    pytest.param("from trl import get_kbit_device_map as g\nkw = dict(device_map=g())\n", "CN111", True,
                 id="cn111-kbit-helper"),
    pytest.param("import os, \\\n    selective_scan_cuda\nselective_scan_cuda.fwd(u)\n", "CN616", True, id="cn616-continued-import"),
    pytest.param("def f(x):\n    from causal_conv1d import causal_conv1d_fn as c\n    return c(x)\n", "CN616", True, id="cn616-local-import"),
    pytest.param("import torch\nimage = torch.from_numpy(a).to(device)\n", "CN805", False, id="cn805-moved-not-indexed"),
    pytest.param("import torch\nm = torch.from_numpy(m)[None].float()\n", "CN805", False, id="cn805-indexed-on-host"),
    pytest.param("import torch\nb = (torch.from_numpy(b)\n     .to(d)[t]  # step t\n).float()\n", "CN805", True,
                 id="cn805-chain-over-lines"),
    pytest.param("import torch as th\nb = th.from_numpy(b).to(\n    'cuda')[t] . float()\n", "CN805", True, id="cn805-alias"),
    pytest.param("from x import _is_flash_attention_backend as fa\nif fa(p):\n    pass\n", "CN627", False,
                 id="cn627-word-inside-a-name"),
    pytest.param("use_torch_2_0_or_xformers = isinstance(p, A)\n", "CN627", False, id="cn627-xformers-in-a-name"),
    pytest.param("with_liger_path = 1\nf(attention_backend=backend)\n", "CN627", False, id="cn627-key-without-its-value"),
    pytest.param("class Attention:\n    use_xformers = False\n", "CN627", False, id="cn627-value-inside-a-name"),
    pytest.param("import torch\nuse_xformers = 0\nattention = {'type': ' XFormers '}\nf(attention_type = ' XFormers ')\n", "CN627", True,
                 id="cn627-value-with-blanks"),
    pytest.param("import argparse\np = argparse.ArgumentParser()\np.add_argument('--use-flash_attn', default=True)\n",
                 "CN627", True, id="cn627-flag-default"),
    pytest.param("from transformers import AutoModel as M\nm = M.from_pretrained(r, attn_implementation='flash_'\n    'attention_2')\n",
                 "CN627", True, id="cn627-concatenated-value"),
    pytest.param("use_xformers = 1\ncfg = {'\\x66lash_attn': True}\n", "CN627", True, id="cn627-escaped-key"),
    pytest.param("cfg = dict(Use_flash_attention=1)\n", "CN627", True, id="cn627-key-case"),
    pytest.param("GPUS_PER_NODE = 8\n", "CN627", True, id="cn627-gpu-constant"),
    pytest.param("import ray\n\n@ray.remote(num_gpus=1)\ndef f():\n    pass\n", "CN627", True, id="cn627-ray"),
    # A key matches after any number of `_` of its own (`_attn_implementation` needs its one).
    pytest.param("cfg = dict(__use_flash_attn=1)\n", "CN627", True, id="cn627-key-after-underscores"),
    pytest.param("m.config._attn_implementation = 'flash_attention_2'\n", "CN627", True, id="cn627-underscored-key"),
    # A value stands whole: a `-` may come before it, a letter may not.
    pytest.param("attn_implementation = 'x-flash_attention_2'\n", "CN627", True, id="cn627-value-after-a-dash"),
    pytest.param("attn_implementation = 'xflash_attention_2'\n", "CN627", False, id="cn627-value-after-a-letter"),
    pytest.param("use_flash_attn = x1\n", "CN627", False, id="cn627-one-after-a-letter"),
    pytest.param("import torch\nopt = torch.optim.AdamW(p, fused = True)\n", "CN608", True, id="cn608-keyword"),
    pytest.param("import torch\nopt = make(p, prefused=True)\n", "CN608", False, id="cn608-word-runs-into-the-keyword"),
    pytest.param("import torch\nok = fused == want\n", "CN608", False, id="cn608-compared"),
    pytest.param("m = A.from_pretrained(r, max_memory=budget)\n", "CN111", True, id="cn111-memory-budget"),
]


@pytest.mark.parametrize(("source", "code", "wakes"), OTHER_WAKES)
def test_other_wake_tests(source, code, wakes):
    assert catalog()[code].wakes(code_text(source.encode())) == wakes
    config = Config()
    for fix in (False, True):
        _, filtered = process_python_findings("snippet.py", source.encode(), config, RunOptions(fix=fix))
        assert _key(filtered) == _key(_unfiltered("snippet.py", source.encode(), config, fix))


def _unfiltered(path: str, data: bytes, config: Config, fix: bool):
    rule_types = tuple(r for r in rules_for(config, path) if "python" in r.file_kinds)
    module = parse_bytes(data)
    if not fix:
        return lint_module(module, rule_types, path, config.settings)
    outcome = fix_module(module, rule_types, path, config.settings)
    return outcome.applied + outcome.remaining


def _key(findings):
    return sorted((f.code, f.span, f.message, f.fix, f.applied) for f in findings)


@pytest.mark.parametrize(("source", "reported"), SNIPPETS)
@pytest.mark.parametrize("fix", [False, True], ids=["check", "migrate"])
def test_catalog_finds_the_same_with_and_without_prefilter(source, reported, fix):
    data = source.encode()
    config = Config()
    _, filtered = process_python_findings("snippet.py", data, config, RunOptions(fix=fix))
    everything = _unfiltered("snippet.py", data, config, fix)
    assert _key(filtered) == _key(everything)
    assert any(f.code == "CN107" for f in everything) == reported


@pytest.mark.parametrize(("source", "reported"), SNIPPETS)
def test_cn107_wakes_where_it_reports_and_sleeps_on_plain_devices(source, reported):
    # Every reported shape must wake the rule; the shapes it never reports should not (that is
    # what saves the parse of most files of a model library).
    assert CN107.wakes(code_text(source.encode())) == reported


def _python_invalid_examples():
    for code, rule in catalog().items():
        if "python" not in rule.file_kinds:
            continue
        for i, ex in enumerate(rule.INVALID):
            source = ex if isinstance(ex, str) else ex.source
            if isinstance(ex, str) or ex.path.endswith(".py"):
                yield pytest.param(rule, source, id=f"{code}-invalid-{i}")


@pytest.mark.parametrize(("rule", "source"), list(_python_invalid_examples()))
def test_every_rule_wakes_on_its_invalid_examples(rule, source):
    assert rule.wakes(code_text(source.encode()))


# ``Rule.reports_names``: a rule that reports only references to its qualified names wakes where
# one of their last parts is a whole word of the code, and finds the same as with no prefilter.
NAMED = [
    pytest.param("import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(m)\n", "CN411", False,
                 id="cn411-distributed-data-parallel"),
    pytest.param("import torch\nfrom apex.parallel import DataParallelWrapper as W\nm = W(m).cuda()\n", "CN411", False,
                 id="cn411-longer-name"),
    pytest.param("import torch.nn as tnn\nm = tnn.DataParallel(\n    m)\n", "CN411", True, id="cn411-alias"),
    pytest.param("from torch.nn.parallel import data_parallel as dp\nout = dp(m, x)\n", "CN411", True,
                 id="cn411-aliased-import"),
    pytest.param("import torch.nn.parallel.data_parallel\nout = torch.nn.parallel.data_parallel.data_parallel(m, x)\n",
                 "CN411", True, id="cn411-module-path"),
    pytest.param("import torch.distributed as dist\ndef setup():\n    dist.init_process_group('nccl')\n", "CN404", False,
                 id="cn404-init-without-set-device"),
    pytest.param("import torch\nfrom torch.cuda import set_device as pin\nimport torch.distributed as dist\n"
                 "def setup(r):\n    pin(r)\n    dist.init_process_group('nccl')\n", "CN404", True, id="cn404-aliased-set-device"),
]


@pytest.mark.parametrize(("source", "code", "awake"), NAMED)
def test_reports_names_gate(source, code, awake):
    rule = catalog()[code]
    assert (rule in _awake((rule,), code_text(source.encode()), ())) == awake
    config = Config()
    for fix in (False, True):
        _, filtered = process_python_findings("snippet.py", source.encode(), config, RunOptions(fix=fix))
        assert _key(filtered) == _key(_unfiltered("snippet.py", source.encode(), config, fix))


def _named_invalid_examples():
    for param in _python_invalid_examples():
        rule, source = param.values
        if rule.reports_names:
            yield param


@pytest.mark.parametrize(("rule", "source"), list(_named_invalid_examples()))
def test_reports_names_gate_wakes_on_the_invalid_examples(rule, source):
    assert rule in _awake((rule,), code_text(source.encode()), ())
