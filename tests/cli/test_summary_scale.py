"""migrate's summary at any size (issue 43): totals, effort, next steps and the top rules and files
lead; each table lists up to SUMMARY_ROWS rows and says where the rest is."""

from __future__ import annotations

import re

from cuda2neuron.cli._render import SUMMARY_ROWS

KERNEL = "import triton\n\n\n@triton.autotune(configs=[])\n@triton.jit\ndef k(x_ptr):\n    pass\n"


def test_a_large_run_leads_with_what_to_do_and_lists_up_to_the_limit(run_cli, tmp_path):
    files = SUMMARY_ROWS + 5
    for i in range(files):
        (tmp_path / "kernels").mkdir(exist_ok=True)
        (tmp_path / "kernels" / f"k{i:02}.py").write_text(KERNEL)
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    code, _, err = run_cli("migrate", "--diff", ".", cwd=tmp_path)
    assert code == 1
    lines = err.splitlines()
    # imports + stacked decorators: 3 findings a file, one kernel (a day) a file
    assert re.search(rf"{3 * files} manual actions", lines[0]), lines[0]
    assert lines[1].startswith(f"Effort: ~{8 * files} h") and f"{files} pieces of work" in lines[1], lines[1]
    assert f"likely {4 * files} h to {16 * files} h" in lines[1]
    assert lines[2].startswith("  most by file: kernels/k00.py (8 h)") and "CN601 triton-kernel" in lines[3]
    first_table = next(i for i, line in enumerate(lines) if line.startswith(("Edits per rule", "Manual actions")))
    head = "\n".join(lines[:first_table])
    assert head.index("Next steps:") < head.index("Findings left by rule: CN601 triton-kernel")
    assert f"Findings left by file: kernels/k00.py 3, kernels/k01.py 3" in head and f"{files - 5} more" in head
    assert first_table < 20
    rows = [line for line in lines if re.match(r"^\s*kernels/k\d\d\.py:\d+", line)]
    assert len(rows) == SUMMARY_ROWS
    assert f"... and {3 * files - SUMMARY_ROWS} more: every one in --report FILE" in err
