"""The commands that only read or rewrite source never import torch (a multi-second import)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
from cuda2neuron.cli import main
code = main({args!r})
bad = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
print("TORCH:" + ",".join(bad))
"""


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["check", "{f}"], id="check"),
        pytest.param(["check", "--fix", "{f}"], id="check-fix"),
        pytest.param(["migrate", "--diff", "{f}"], id="migrate-diff"),
        pytest.param(["rules"], id="rules"),
        pytest.param(["suppress", "--diff", "{f}"], id="suppress"),
        pytest.param(["check", "--write-baseline", "{f}.baseline.json", "{f}"], id="check-write-baseline"),
        pytest.param(["--help"], id="help"),
    ],
)
def test_source_commands_do_not_import_torch(tmp_path, args):
    f = tmp_path / "train.py"
    f.write_text("import torch\nmodel = Net().cuda()\n")
    argv = [a.format(f=f) for a in args]
    out = subprocess.run([sys.executable, "-c", PROBE.format(args=argv)], capture_output=True, text=True, check=False)
    assert "TORCH:" in out.stdout, out.stderr
    assert out.stdout.strip().endswith("TORCH:"), out.stdout
