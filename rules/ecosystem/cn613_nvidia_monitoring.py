"""CN613: NVIDIA monitoring (pynvml / nvidia_smi modules, ``nvidia-smi`` subprocesses)."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid

from .._shared.names import call_qualname
from .._shared.packages import PackageRule, imports_any, in_package

__all__ = ["NvidiaMonitoring"]

_GUIDANCE = (
    "NVML and nvidia-smi exist only with NVIDIA drivers. On Trainium use the Neuron tools: "
    "`neuron-ls` lists devices and cores, `neuron-top` / `neuron-monitor` report utilisation and "
    "memory; in Python, torch.neuron.device_count() and torch.neuron.memory_allocated()."
)
_MODULES = ("pynvml", "nvidia_smi", "py3nvml", "gpustat", "GPUtil", "nvitop")
# Calls whose string arguments are a command line.
_RUNNERS = frozenset(
    {
        "subprocess.run",
        "subprocess.call",
        "subprocess.check_call",
        "subprocess.check_output",
        "subprocess.Popen",
        "subprocess.getoutput",
        "subprocess.getstatusoutput",
        "os.system",
        "os.popen",
        "shutil.which",
    }
)


class NvidiaMonitoring(PackageRule):
    """
    ## What it does
    Reports NVML bindings (``pynvml``, ``nvidia_smi``, ``py3nvml``, ``gpustat``, ``GPUtil``,
    ``nvitop``) and ``subprocess``/``os.system``/``shutil.which`` calls that run ``nvidia-smi``.

    ## Why is this bad?
    They query NVIDIA drivers, which a Trainium host does not have: the import fails or the
    command is not found, often inside a logging helper nobody reads until it crashes.

    ## Example
    ```python
    out = subprocess.check_output(["nvidia-smi", "--query-gpu=memory.used", "--format=csv"])
    ```

    ## Fix safety
    No fix: the Neuron tools print different things (``neuron-ls``, ``neuron-monitor`` JSON), so
    the parsing around the call has to change too.
    """

    code = "CN613"
    name = "nvidia-monitoring"
    packages = _MODULES
    triggers = ("nvml", "nvidia", "gpustat", "GPUtil", "nvitop")
    VALID = (
        "import subprocess\nsubprocess.run(['neuron-ls'])\n",
        "print('install nvidia-smi to see GPUs')\n",  # log text
    )
    INVALID = (
        Invalid("import pynvml\n"),
        Invalid("import pynvml\npynvml.nvmlInit()\n"),
        Invalid("import subprocess\nsubprocess.run(['nvidia-smi', '-L'], check=True)\n"),
        Invalid("import os\nos.system('nvidia-smi')\n"),
        Invalid("import shutil\nhave = shutil.which('nvidia-smi') is not None\n"),
        Invalid("from subprocess import check_output as co\nout = co('nvidia-smi -L', shell=True)\n"),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        # A report is an import of a monitoring package, a name resolved through one, or a
        # command line whose code spells nvidia-smi (model ids such as "nvidia/Cosmos-..." and
        # license links hold the word and report nothing).
        return b"nvidia-smi" in code or imports_any(code, cls.packages)

    def report_import(self, node: cst.Import | cst.ImportFrom) -> None:
        self._report(node, "NVML monitoring needs NVIDIA drivers")

    def visit_Call(self, node: cst.Call) -> None:
        qualified = call_qualname(self, node)
        if qualified is None:
            return
        if in_package(qualified, self.packages):
            self._report(node, f"`{qualified}` queries NVIDIA drivers")
        elif qualified in _RUNNERS and node.args and "nvidia-smi" in self.context.code(node.args[0].value):
            self._report(node, "runs `nvidia-smi`, which does not exist on Trainium")

    def _report(self, node: cst.CSTNode, message: str) -> None:
        self.report(node, message, guidance=_GUIDANCE, effort=Effort.LOW)
