"""The program pass (python/_flows.py): a value moves with its readers, a message with its guard.

Each case is a port that was right site by site and wrong for the program (issue 38): the table
gives the source, the text the port must keep (the wrong edit not applied) and, for the cases
that may move, the text it must write. Both runs (safe, --unsafe-fixes) keep the program whole.
"""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config
from cuda2neuron.python._flows import KEPT_WITH_GUARD
from cuda2neuron.workspace import fix_source

DEFAULT_AND_ITS_TEST = '''import torch

def load(path, device="cuda"):
    state = torch.load(path, map_location="cpu")
    if device == "cpu":
        return state
    elif device == "cuda":
        torch.cuda.set_sync_debug_mode(1)
        return state
    raise ValueError(device)
'''

FLAG_AND_ITS_BRANCH = '''import torch

class Trainer:
    def step(self, x):
        flag = self.device == "cuda"
        if flag:
            torch.cuda.set_sync_debug_mode(1)
        return x
'''

ATTRIBUTE_AND_ITS_TEST = '''import torch

class Runner:
    def __init__(self):
        self.device = "cuda"

    def step(self, x):
        if self.device == "cuda":
            torch.cuda.set_sync_debug_mode(1)
        return x.to(self.device)
'''

INDEX_AND_ITS_DEVICE_STRING = '''import torch

def place(dev, model):
    gpu = torch.cuda.get_device_capability(dev)[0] if dev.type == "cuda" else 0
    return model.to(f"cuda:{gpu}")
'''

MESSAGE_OF_A_KEPT_GUARD = '''import torch
import triton

@triton.jit
def _k(x_ptr):
    pass

def fused(x):
    if not torch.cuda.is_available():
        raise RuntimeError(f"needs CUDA: torch.cuda.is_available() = {torch.cuda.is_available()}")
    _k[(1,)](x)
    return x
'''

MESSAGE_OF_A_HELD_GUARD = '''import torch

def sync():
    if torch.cuda.is_available():
        print(f"syncing on {torch.cuda.get_device_name()}")
        torch.cuda.set_sync_debug_mode(1)
'''

# Moving together: each site has a safe fix, so all of them move.
DEFAULT_AND_ITS_MOVABLE_TEST = '''import torch

def to_device(x, device="cuda"):
    if device == "cuda":
        x = x.pin_memory()
    return x.to(device)
'''
MESSAGE_OF_A_MOVED_GUARD = '''import torch

def require():
    if not torch.cuda.is_available():
        raise RuntimeError(f"torch.cuda.is_available() = {torch.cuda.is_available()}")
'''
# A plain read passes the value on: it links nothing (a statement that merely mentions the value
# must not hold an unrelated fix on its line).
PLAIN_READ = '''import os
import torch

def pin(spec):
    spec = spec.replace("cuda:", "")
    os.environ["CUDA_VISIBLE_DEVICES"] = spec
    assert torch.cuda.is_available(), f"no device {spec}"
'''

# A device handed to the file's own function that calls a kernel somewhere: it stays CUDA only
# where that function hands the parameter on to the kernel, not where the kernel sits behind a
# fallback that never sees it (a trainer's whole device was kept CUDA by `make_optimizer`).
HELPER_WITH_AN_OPTIONAL_KERNEL = '''import torch
try:
    from apex.optimizers import FusedAdam
except ImportError:
    FusedAdam = None

def make_optimizer(model, device):
    if FusedAdam is not None:
        return FusedAdam(model.parameters())
    return torch.optim.AdamW(model.parameters(), fused=device.type == "cuda")

def main(model):
    device = torch.device("cuda")
    return make_optimizer(model.to(device), device)
'''
HELPER_HANDING_THE_DEVICE_TO_A_KERNEL = '''import torch
import triton

@triton.jit
def _k(x_ptr):
    pass

def launch(x, device):
    _k[(1,)](x.to(device))

def main(x):
    device = torch.device("cuda")
    launch(x, device)
'''

# A command-line default read in other functions of the file (`args.device`): the default path
# on Trainium would reach `raise ValueError` if the option moved while its held test stayed.
OPTION_AND_ITS_TEST = '''import argparse
import torch

def parse():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    return parser.parse_args()

def setup(args):
    if args.device == "cuda":
        torch.cuda.set_sync_debug_mode(1)
    elif args.device != "cpu":
        raise ValueError(f"Invalid device {args.device}")
    return torch.device(args.device)
'''
OPTION_AND_ITS_MOVABLE_TEST = '''import argparse
import torch

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", dest="dev", default="cuda")
    cli = parser.parse_args()
    run(cli)

def run(cli):
    x = torch.zeros(1)
    if cli.dev == "cuda":
        x = x.pin_memory()
    return x.to(cli.dev)
'''

OPTION_KEPT_ON_SELF = '''import argparse
import torch

class Trainer:
    def __init__(self, args):
        self.device = args.device

    def step(self, x):
        if self.device == "cuda":
            torch.cuda.set_sync_debug_mode(1)
        return x.to(self.device)

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    Trainer(parser.parse_args()).step(torch.zeros(1))
'''

# A flag a function returns, read at module level: `_on_gpu()` retargeted alone makes `ON_GPU`
# true on Trainium, and the import then calls `torch.cuda.get_device_capability` (kept manual).
RETURNED_FLAG_AND_ITS_READER = '''import torch

def _on_gpu():
    return torch.cuda.is_available() and torch.version.hip is None

ON_GPU = _on_gpu()
NEW_ARCH = ON_GPU and torch.cuda.get_device_capability()[0] >= 9
'''
# A flag read by `or` in an assignment, not a test: the right side runs where the flag is true.
FLAG_IN_A_BOOLEAN_VALUE = '''import torch

def fast_path(x):
    on_cuda = x.is_cuda
    fast = (not on_cuda) or torch.cuda.get_device_capability(x.device)[0] >= 8
    return fast
'''
FLAG_IN_A_MOVABLE_BOOLEAN_VALUE = '''import torch

def idle(x):
    on_cuda = x.is_cuda
    return (not on_cuda) or torch.cuda.current_stream().query()
'''

# The subclass's default reaches the base's test through `super().__init__` (by position here).
DEFAULT_HANDED_TO_A_BASE = '''import torch

class Runner:
    def __init__(self, device="cuda"):
        self.device = device

    def step(self, x):
        if self.device == "cuda":
            torch.cuda.set_sync_debug_mode(1)
        return x.to(self.device)

class BatchRunner(Runner):
    def __init__(self, size, device="cuda"):
        super().__init__(device)
        self.size = size
'''

KEPT = [
    pytest.param(RETURNED_FLAG_AND_ITS_READER, "return torch.cuda.is_available()", id="returned-flag-with-held-module-reader"),
    pytest.param(FLAG_IN_A_BOOLEAN_VALUE, "on_cuda = x.is_cuda", id="flag-with-held-operand-in-assignment"),
    pytest.param(OPTION_KEPT_ON_SELF, 'default="cuda"', id="option-default-copied-to-self-with-held-test"),
    pytest.param(OPTION_AND_ITS_TEST, 'default="cuda"', id="option-default-with-held-test-in-another-function"),
    pytest.param(DEFAULT_AND_ITS_TEST, 'device="cuda"', id="default-with-held-test"),
    pytest.param(FLAG_AND_ITS_BRANCH, 'flag = self.device == "cuda"', id="flag-with-held-branch"),
    pytest.param(ATTRIBUTE_AND_ITS_TEST, 'self.device = "cuda"', id="attribute-with-held-test-in-another-method"),
    pytest.param(INDEX_AND_ITS_DEVICE_STRING, 'f"cuda:{gpu}"', id="index-with-its-device-string"),
    pytest.param(MESSAGE_OF_A_KEPT_GUARD, "= {torch.cuda.is_available()}", id="message-of-kernel-guard"),
    pytest.param(MESSAGE_OF_A_HELD_GUARD, "{torch.cuda.get_device_name()}", id="message-of-held-guard"),
    pytest.param(HELPER_HANDING_THE_DEVICE_TO_A_KERNEL, 'device = torch.device("cuda")', id="device-handed-on-to-a-kernel"),
    pytest.param(DEFAULT_HANDED_TO_A_BASE, 'def __init__(self, size, device="cuda")', id="subclass-default-handed-to-a-base-with-held-test"),
]


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize(("source", "kept"), KEPT)
def test_the_wrong_half_is_not_applied(source, kept, unsafe):
    out, _ = fix_source(source, "m.py", Config(unsafe_fixes=unsafe))
    assert kept in out


MOVED = [
    pytest.param(OPTION_AND_ITS_MOVABLE_TEST, ['default="neuron"', 'cli.dev == "neuron"'], id="option-default-with-movable-test"),
    pytest.param(DEFAULT_AND_ITS_MOVABLE_TEST, ['device="neuron"', 'device == "neuron"'], id="default-with-movable-test"),
    pytest.param(MESSAGE_OF_A_MOVED_GUARD, ["if not torch.neuron.is_available()", "{torch.neuron.is_available()}"], id="message-of-moved-guard"),
    pytest.param(PLAIN_READ, ['replace("neuron:", "")', "assert torch.neuron.is_available()"], id="plain-read-links-nothing"),
    pytest.param(HELPER_WITH_AN_OPTIONAL_KERNEL, ['device = torch.device("neuron")'], id="device-beside-an-optional-kernel"),
    pytest.param(FLAG_IN_A_MOVABLE_BOOLEAN_VALUE, ["on_cuda = x.is_neuron", "torch.neuron.current_stream()"], id="flag-with-movable-operand-in-return"),
]


@pytest.mark.parametrize(("source", "written"), MOVED)
def test_linked_sites_that_can_move_move_together(source, written):
    out, _ = fix_source(source, "m.py", Config())
    for text in written:
        assert text in out


# The user keeps the guard CUDA on purpose (a suppression): no finding is left on the test to
# link with, and the message keeps CUDA too, saying why.
MESSAGE_OF_A_SUPPRESSED_GUARD = """import torch

def require():
    if not torch.cuda.is_available():  # cuda2neuron: ignore[CN201]
        raise RuntimeError(f"torch.cuda.is_available() = {torch.cuda.is_available()}")
"""


def test_a_message_keeps_cuda_with_a_guard_kept_on_purpose():
    out, findings = fix_source(MESSAGE_OF_A_SUPPRESSED_GUARD, "m.py", Config(unsafe_fixes=True))
    assert "= {torch.cuda.is_available()}" in out
    message = [f for f in findings if f.line == 5]
    assert message and KEPT_WITH_GUARD in message[0].guidance


@pytest.mark.parametrize(
    ("source", "line", "holder"),
    [
        pytest.param(DEFAULT_AND_ITS_TEST, 3, "CN211 at line 8", id="default-names-the-cuda-call"),
        pytest.param(OPTION_AND_ITS_TEST, 6, "CN211 at line 11", id="option-default-names-the-cuda-call"),
        pytest.param(FLAG_AND_ITS_BRANCH, 5, "CN211 at line 7", id="flag-names-the-cuda-call"),
        pytest.param(MESSAGE_OF_A_KEPT_GUARD, 10, "CN201 at line 9", id="message-names-its-guard"),
        pytest.param(RETURNED_FLAG_AND_ITS_READER, 4, "CN202 at line 7", id="returned-flag-names-the-cuda-call"),
        pytest.param(FLAG_IN_A_BOOLEAN_VALUE, 4, "CN202 at line 5", id="boolean-value-names-the-cuda-call"),
    ],
)
def test_a_held_site_names_what_holds_it(source, line, holder):
    _, findings = fix_source(source, "m.py", Config())
    held = [f for f in findings if f.line == line]
    assert held and holder in held[0].guidance
