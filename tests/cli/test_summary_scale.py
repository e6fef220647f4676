"""migrate's summary at any size (issue 43): totals, effort, next steps and the top rules and files
lead; each table lists up to SUMMARY_ROWS rows and says where the rest is."""

from __future__ import annotations

import re

from cuda2neuron.cli._render import SUMMARY_ROWS

KERNEL = "\n\n@triton.autotune(configs=[])\n@triton.jit\ndef k{i}(x_ptr):\n    pass\n"
MODULE = "import triton\n" + "".join(KERNEL.format(i=i) for i in range(3))  # 7 findings, 3 kernels


def test_a_large_run_leads_with_what_to_do_and_lists_up_to_the_limit(run_cli, tmp_path):
    files = 6  # one more than the summary names
    for i in range(files):
        (tmp_path / "kernels").mkdir(exist_ok=True)
        (tmp_path / "kernels" / f"k{i:02}.py").write_text(MODULE)
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(2).cuda()\n")
    code, _, err = run_cli("migrate", "--diff", ".", cwd=tmp_path)
    assert code == 1
    lines = err.splitlines()
    # an import and two stacked decorators a kernel: 7 findings a file, three kernels (a day each) a file
    assert 7 * files > SUMMARY_ROWS and re.search(rf"{7 * files} manual actions", lines[0]), lines[0]
    hours = 24 * files
    assert lines[1].startswith(f"Effort: ~{hours} h") and f"{3 * files} pieces of work" in lines[1], lines[1]
    assert f"likely {hours // 2} h to {hours * 2} h" in lines[1]
    assert lines[2].startswith("  most by file: kernels/k00.py (24 h)") and "CN601 triton-kernel" in lines[3]
    first_table = next(i for i, line in enumerate(lines) if line.startswith(("Edits per rule", "Manual actions")))
    head = "\n".join(lines[:first_table])
    assert head.index("Next steps:") < head.index("Findings left by rule: CN601 triton-kernel")
    assert "Findings left by file: kernels/k00.py 7, kernels/k01.py 7" in head and f"{files - 5} more" in head
    assert first_table < 20
    rows = [line for line in lines if re.match(r"^\s*kernels/k\d\d\.py:\d+", line)]
    assert len(rows) == SUMMARY_ROWS
    assert f"... and {7 * files - SUMMARY_ROWS} more: every one in --report FILE" in err
