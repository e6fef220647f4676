"""A function that starts another program on the GPU its ``CUDA_VISIBLE_DEVICES`` names.

audiocraft's FAD metric counts the GPUs with ``torch.cuda.device_count()`` and, with two or
more, runs two TensorFlow embedding processes side by side, each given one GPU through
``env["CUDA_VISIBLE_DEVICES"] = str(gpu_index)`` and ``subprocess.Popen(cmd, env=...)``. The
count there asks how many CUDA GPUs the *other program* may use: TorchNeuron's count is no
answer to that (TensorFlow runs on no NeuronCore), and moved to ``torch.neuron.device_count()``
it sends Trainium down the parallel path the original never took there. So such a function is
CUDA-only code for the kernel gates (``kernels.kernel_index``): a device test in front of it
keeps CUDA's meaning, and a finding names it.
"""

from __future__ import annotations

import libcst as cst

from cuda2neuron.python import dotted_name, visit_syntax

from .strings import string_value

__all__ = ["launches_on_gpu"]

_LAUNCHERS = frozenset({"Popen", "run", "call", "check_call", "check_output"})
_VARIABLE = "CUDA_VISIBLE_DEVICES"


def launches_on_gpu(func: cst.FunctionDef, imports: dict[str, str]) -> bool:
    """Whether ``func`` stores a ``CUDA_VISIBLE_DEVICES`` value in an environment (a subscript
    or a dict literal's key) and starts a ``subprocess`` with an ``env=``; ``imports``: the
    file's local names -> dotted names."""
    finder = _Finder(imports)
    visit_syntax(func.body, finder)
    return finder.stores and finder.launches


class _Finder(cst.CSTVisitor):
    def __init__(self, imports: dict[str, str]) -> None:
        self.imports = imports
        self.stores = False
        self.launches = False

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            key = node.slice[0].slice.value
            self.stores = self.stores or (isinstance(key, cst.SimpleString) and string_value(key) == _VARIABLE)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        self.stores = self.stores or (isinstance(node.key, cst.SimpleString) and string_value(node.key) == _VARIABLE)

    def visit_Call(self, node: cst.Call) -> None:
        dotted = dotted_name(node.func)
        if dotted is None or not any(a.keyword is not None and a.keyword.value == "env" for a in node.args):
            return
        head, _, rest = dotted.partition(".")
        qualified = f"{self.imports.get(head, head)}.{rest}".rstrip(".")
        module, _, name = qualified.rpartition(".")
        self.launches = self.launches or (module == "subprocess" and name in _LAUNCHERS)
