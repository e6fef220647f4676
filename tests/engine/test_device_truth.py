"""The three-valued evaluator of device conditions (python/_device_truth.py): each expression's
value on the original's CUDA host and on Trainium (None: unknown)."""

from __future__ import annotations

import libcst as cst
import pytest

from cuda2neuron.python._device_truth import asks_cuda, truth

BINDINGS = {
    "device": 'torch.device("cuda")',
    "dev": '"cuda:0"',
    "self.device": '"cpu"',
    "use_gpu": "torch.cuda.is_available()",
    "fast": "use_gpu and HAVE_TRITON",
}

# (expression, (CUDA host, Trainium))
CASES = [
    ("torch.cuda.is_available()", (True, False)),
    ("not torch.cuda.is_available()", (False, True)),
    ("th.cuda.device_count()", (True, False)),
    ("torch.neuron.is_available()", (False, True)),
    ("x.is_cuda", (None, False)),
    ("not x.is_cuda", (None, True)),
    ("x.is_neuron", (False, None)),
    ('x.device.type == "cuda"', (None, False)),
    ('x.device.type != "cuda"', (None, True)),
    ('x.device.type == "neuron"', (False, None)),
    ('x.device.type in ("cuda", "mps")', (None, False)),
    ('device.type == "cuda"', (True, True)),
    ('dev == "cuda"', (True, True)),
    ('self.device == "cuda"', (False, False)),
    ('unknown == "cuda"', (None, None)),
    ("HAVE_TRITON", (True, False)),
    ("_has_flash_attn2", (True, False)),
    ("HAS_NUMPY", (None, None)),
    ("x.is_cuda and HAVE_TRITON", (None, False)),
    ("torch.cuda.is_available() or x.is_neuron", (True, None)),
    ("use_gpu", (True, False)),
    ("fast", (True, False)),
    ("not fast", (False, True)),
    ('pytest.mark.skipif(not torch.cuda.is_available(), reason="gpu")', (False, True)),
    ("unittest.skipUnless(torch.cuda.is_available())", (False, True)),
    ("some_call()", (None, None)),
    # a count of devices compared with a number
    ("torch.cuda.device_count() > 0", (True, False)),
    ("torch.cuda.device_count() == 0", (False, True)),
    ("torch.cuda.device_count() < 1", (False, True)),
    ("0 < torch.cuda.device_count()", (True, False)),
    ("torch.cuda.device_count() > 1", (None, False)),
    ("torch.neuron.device_count() >= 1", (False, True)),
    ("(n := torch.cuda.device_count()) == 0", (False, True)),
    # a count compared with a number not spelled: the devices a job needs, one or more
    ("tp * pp > torch.cuda.device_count()", (None, True)),
    ("torch.cuda.device_count() < min_gpus", (None, True)),
    ("torch.cuda.device_count() >= world_size", (None, False)),
    ("(ok := torch.cuda.is_available())", (True, False)),
    # `is True` / `== False`
    ("x.is_cuda is False", (None, True)),
    ("x.is_cuda is not True", (None, True)),
    ("torch.cuda.is_available() == False", (False, True)),
    ("True == torch.cuda.is_available()", (True, False)),
    # containment, prefixes and `torch.device(...)` spelled
    ('"cuda" in str(x.device.type)', (None, False)),
    ('"cuda" not in dev', (False, False)),
    ('dev.startswith("cuda")', (True, True)),
    ('self.device.startswith("cuda")', (False, False)),
    ('args.device.startswith("gpu")', (None, None)),
    ('dev == torch.device("cuda")', (True, True)),
]


@pytest.mark.parametrize(("expression", "expected"), CASES, ids=[c[0] for c in CASES])
def test_both_worlds(expression, expected):
    bindings = {k: cst.parse_expression(v) for k, v in BINDINGS.items()}
    found = truth(cst.parse_expression(expression), bindings)
    assert (found.cuda_host, found.trainium) == expected


@pytest.mark.parametrize(
    ("expression", "asks"),
    [
        ("torch.cuda.is_available()", True),
        ("x.is_cuda", True),
        ('device == "cuda:1"', True),
        ("f(torch.cuda.device_count())", True),
        ('device == "cpu"', False),
        ("torch.neuron.is_available()", False),
    ],
)
def test_asks_cuda(expression, asks):
    assert asks_cuda(cst.parse_expression(expression)) is asks


# (expression, the atom a rule reports as a path of attribute names from the expression,
#  (CUDA host, Trainium)): an atom the model cannot evaluate reads as the reported CUDA fact.
ABOUT = [
    ('args.device.startswith("gpu")', (), (None, False)),
    ('args.device != "gpu"', (), (None, True)),
    ('not f(x.is_cuda)', ("expression",), (None, True)),
    ('f(x.is_cuda) or HAVE_TRITON', ("left",), (True, False)),
    ('f(x.is_cuda) or other', ("left",), (None, None)),
    ('f(x.is_cuda) or other', ("right",), (None, None)),
    # a known atom answers for itself
    ("torch.cuda.device_count() == 0", (), (False, True)),
]


@pytest.mark.parametrize(("expression", "path", "expected"), ABOUT, ids=[f"{c[0]}@{'.'.join(c[1]) or 'all'}" for c in ABOUT])
def test_reported_atom_is_a_cuda_fact(expression, path, expected):
    node = cst.parse_expression(expression)
    chain = [node]
    for attribute in path:
        chain.append(getattr(chain[-1], attribute))
    found = truth(node, about=chain)
    assert (found.cuda_host, found.trainium) == expected
