"""Notebooks: code cells migrated, everything else byte-identical, magics kept, typed errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda2neuron.core import Config, FileStatus, RunOptions, Settings
from cuda2neuron.kinds import process_bytes
from cuda2neuron.workspace import SourceFailure, fix_source, lint_source
from cuda2neuron.kinds import _notebook
from cuda2neuron.documents.nbjson import locate_cells

PROJECT = Path(__file__).parents[1] / "fixtures" / "projects" / "kernels_ecosystem"
# Exact outputs below pin the catalog to CN101 (the engine's exemplar) and this family, so that
# other rule families landing do not change them; whole-catalog runs are checked by invariants
# in test_kernels_ecosystem.py.
OWN = Config(select=("CN101", "CN7"))


def nb(*cells, indent=1, ensure_ascii=False, sort_keys=True, as_string=False, language="python") -> str:
    doc = {
        "cells": [
            {"cell_type": "code", "execution_count": 1, "id": f"id{i}", "metadata": {},
             "outputs": [{"name": "stdout", "output_type": "stream", "text": ["cuda:0\n"]}],
             "source": src if as_string else src.splitlines(keepends=True)}
            if not src.startswith("# md") else
            {"cell_type": "markdown", "id": f"id{i}", "metadata": {}, "source": src.splitlines(keepends=True)}
            for i, src in enumerate(cells)
        ],
        "metadata": {"kernelspec": {"language": language, "name": "k"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(doc, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys) + "\n"


def sources(text: str) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(text)["cells"]]


def changed_lines(old: str, new: str) -> list[tuple[str, str]]:
    a, b = old.splitlines(), new.splitlines()
    assert len(a) == len(b), "a same-length rewrite must not add or drop file lines"
    return [(x, y) for x, y in zip(a, b) if x != y]


# -- byte preservation ------------------------------------------------------------------------


def test_notebook_without_cuda_is_byte_identical():
    text = nb("%matplotlib inline\nimport numpy as np", "# md\nCUDA notes", "!ls\nx = np.ones(3)")
    result = process_bytes("a.ipynb", text.encode(), Config(), RunOptions(fix=True))
    assert result.status is FileStatus.UNCHANGED and result.findings == ()


def test_fixture_notebook_changes_only_code_cell_source_lines():
    old = (PROJECT / "explore.ipynb").read_text(encoding="utf-8")
    new, _ = fix_source(old, "explore.ipynb", OWN)
    diff = changed_lines(old, new)
    assert diff == [
        ('    "model = FastMLPNet(cfg).cuda().eval()\\n",', '    "model = FastMLPNet(cfg).to(\\"neuron\\").eval()\\n",'),
        ('    "x = torch.randn(8, 16, cfg.dim).cuda()\\n",', '    "x = torch.randn(8, 16, cfg.dim).to(\\"neuron\\")\\n",'),
    ]
    # Outputs still say cuda: they are a record of the old run, not code.
    assert json.loads(new)["cells"][6]["outputs"] == json.loads(old)["cells"][6]["outputs"]
    assert fix_source(new, "explore.ipynb", OWN)[0] == new


@pytest.mark.parametrize(
    ("indent", "ensure_ascii", "sort_keys"),
    [
        pytest.param(1, False, True, id="jupyter-style"),
        pytest.param(2, False, False, id="two-space-insertion-order"),
        pytest.param(4, True, True, id="ascii-escaped"),
        pytest.param(None, False, True, id="one-line"),
    ],
)
def test_serialisation_style_is_kept(indent, ensure_ascii, sort_keys):
    old = nb("# résumé\nx = torch.zeros(2).cuda()\ny = 1", indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)
    new, _ = fix_source(old, "a.ipynb", OWN)
    expected = old.replace("torch.zeros(2).cuda()", 'torch.zeros(2).to(\\"neuron\\")')
    assert new == expected


def test_source_as_one_string():
    old = nb("import torch\nx = torch.zeros(2).cuda()", as_string=True)
    new, _ = fix_source(old, "a.ipynb", OWN)
    assert sources(new) == ['import torch\nx = torch.zeros(2).to("neuron")']
    assert new == old.replace(".cuda()", '.to(\\"neuron\\")')


def test_bom_is_kept():
    old = b"\xef\xbb\xbf" + nb("x.cuda()").encode()
    new, _ = fix_source(old, "a.ipynb", OWN)
    assert new.startswith(b"\xef\xbb\xbf") and b'x.to(\\"neuron\\")' in new


# -- IPython syntax -------------------------------------------------------------------------------


def test_magics_and_shell_lines_are_preserved():
    old = nb(
        "%matplotlib inline\nimport torch",
        "%%time\nx = torch.randn(3, device='cuda')\ntorch.zeros(1).cuda()",
        "files = !ls\n!nvidia-smi -L\nfor i in range(2):\n    !echo {i}\n    y = torch.ones(1).cuda()\ntorch.cuda?",
        "%%html\n<b>cuda</b>",
    )
    new, findings = fix_source(old, "a.ipynb", OWN)
    assert sources(new) == [
        "%matplotlib inline\nimport torch",
        "%%time\nx = torch.randn(3, device='cuda')\ntorch.zeros(1).to(\"neuron\")",
        "files = !ls\n!nvidia-smi -L\nfor i in range(2):\n    !echo {i}\n    y = torch.ones(1).to(\"neuron\")\ntorch.cuda?",
        "%%html\n<b>cuda</b>",
    ]
    by_code = {(f.code, f.message.split(":")[0]) for f in findings}
    assert ("CN702", "cell 3, line 2") in by_code
    assert ("CN722", "cell 4, line 1") in by_code
    assert fix_source(new, "a.ipynb", OWN)[0] == new


def test_imports_go_to_the_first_code_cell_after_its_magics():
    # An index that may be None or an int is written as torch.device("neuron", index): the one
    # rewrite that needs `import torch`.
    put = "def put(y, gpu: int | None = None):\n    return y.cuda(gpu)"
    old = nb("# md\ntitle", "%load_ext autoreload\nimport numpy as np", put)
    new, _ = fix_source(old, "a.ipynb", OWN)
    assert sources(new) == [
        "# md\ntitle",
        "%load_ext autoreload\nimport numpy as np\nimport torch",
        put.replace("y.cuda(gpu)", 'y.to(torch.device("neuron", gpu))'),
    ]


def test_names_imported_in_an_earlier_cell_resolve():
    # `th` is bound in cell 1 only; the accelerator target spells through the user's alias.
    old = nb("import torch as th", "m.cuda()")
    new, _ = fix_source(old, "a.ipynb", Config(select=("CN101", "CN7"), settings=Settings(target="accelerator")))
    assert sources(new) == ["import torch as th", "m.to(th.accelerator.current_accelerator() or th.get_default_device())"]


def test_shell_cells_and_env_magic_use_the_shell_rules():
    old = nb(
        "%%bash\nexport CUDA_VISIBLE_DEVICES=0,1\npython t.py",
        "!torchrun --nproc_per_node=gpu t.py",
        "%env CUDA_VISIBLE_DEVICES=3",
    )
    new, findings = fix_source(old, "a.ipynb", OWN)
    assert sources(new) == [
        "%%bash\nexport NEURON_RT_VISIBLE_CORES=0-1\npython t.py",
        "!torchrun --nproc_per_node=gpu t.py",
        "%env NEURON_RT_VISIBLE_CORES=3",
    ]
    assert {f.code for f in findings} == {"CN701", "CN703"}


def test_a_broken_cell_is_reported_and_the_others_migrated():
    old = nb("import torch", "pip install apex\nx.cuda()", "y = torch.zeros(1).cuda()")
    new, findings = fix_source(old, "a.ipynb", OWN)
    assert sources(new) == ["import torch", "pip install apex\nx.cuda()", 'y = torch.zeros(1).to("neuron")']
    (bad,) = [f for f in findings if f.code == "CN721"]
    assert bad.message.startswith("cell 2, line ")  # the line is what libcst reports


def test_finding_lines_point_into_the_notebook_file():
    text = (PROJECT / "explore.ipynb").read_text(encoding="utf-8")
    lines = text.splitlines()
    findings = lint_source(text, "explore.ipynb", OWN)
    assert findings, "the fixture notebook has CUDA code"
    for f in findings:
        cell_line = f.message.split(":")[0]
        assert cell_line.startswith("cell "), f.message
        if f.code == "CN101":
            assert ".cuda()" in lines[f.line - 1]
        if f.code == "CN702":
            assert "!nvidia-smi" in lines[f.line - 1]


def _at(text: str, f) -> str:
    """The notebook file's text from the finding's line and column on (that line only)."""
    return text.splitlines()[f.span.start_line - 1][f.span.start_col :]


@pytest.mark.parametrize(
    ("ensure_ascii", "as_string"),
    [
        pytest.param(False, False, id="array-of-lines"),
        pytest.param(True, False, id="escaped-non-ascii"),
        pytest.param(False, True, id="one-string"),
        pytest.param(True, True, id="one-escaped-string"),
    ],
)
def test_finding_columns_are_columns_of_the_notebook_file(ensure_ascii, as_string):
    # Escapes before the code (a tab, a quote, an "é" written \u00e9, an emoji as a surrogate
    # pair) take more characters of the file than of the cell: the column counts the file's.
    cell = 'import torch\nlabel = "\tcafé \\"🚀\\""; m = net.cuda()\ntorch.cuda.synchronize()'
    text = nb(cell, ensure_ascii=ensure_ascii, as_string=as_string)
    findings = lint_source(text, "a.ipynb", Config(select=("CN101", "CN201")))
    assert sorted(f.code for f in findings) == ["CN101", "CN201"]
    for f in findings:
        expected = {"CN101": "net.cuda()", "CN201": "torch.cuda.synchronize"}[f.code]
        assert _at(text, f).startswith(expected), (f.code, _at(text, f))
        assert f.span.end_line == f.span.start_line
        assert text.splitlines()[f.span.end_line - 1][: f.span.end_col].endswith(expected)


def test_notebook_findings_of_a_fix_run_point_at_the_cells_as_read():
    # An import added above (cell 1) and a line the fix removes move the lines of the output;
    # every finding still points at its own code in the notebook as read.
    cells = ("import os", "import torch\ntorch.backends.cudnn.benchmark = True\nx = torch.cuda.get_device_capability()")
    text = nb(*cells)
    _, findings = fix_source(text, "a.ipynb", Config(unsafe_fixes=True))
    found = {f.code: _at(text, f) for f in findings}
    assert found["CN205"].startswith("torch.backends.cudnn.benchmark")
    assert found["CN202"].startswith("torch.cuda.get_device_capability")


def _with_metadata(text: str, **metadata) -> str:
    doc = json.loads(text)
    doc["metadata"].update(metadata)
    return json.dumps(doc, indent=1) + "\n"


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        pytest.param({"accelerator": "GPU", "colab": {"gpuType": "A100"}}, ['"accelerator": "GPU"'], id="colab-gpu"),
        pytest.param({"kaggle": {"accelerator": "gpu", "isGpuEnabled": True}}, ['"accelerator": "gpu"'], id="kaggle-said-twice-reported-once"),
        pytest.param({"kaggle": {"isGpuEnabled": True}}, ['"isGpuEnabled": true'], id="kaggle-gpu-enabled"),
        pytest.param(
            {"accelerator": "GPU", "kaggle": {"accelerator": "nvidiaTeslaT4"}},
            ['"accelerator": "GPU"', '"accelerator": "nvidiaTeslaT4"'], id="colab-and-kaggle",
        ),
        pytest.param({"accelerator": "TPU", "kaggle": {"accelerator": "none", "isGpuEnabled": False}}, [], id="no-gpu"),
    ],
)
def test_a_gpu_runtime_in_the_metadata_is_reported_on_the_line_of_its_key(metadata, expected):
    # The cell holds the same key as code: only the notebook's own metadata asks for a runtime.
    text = _with_metadata(nb('import torch\ncfg = {"accelerator": "GPU"}'), **metadata)
    findings = lint_source(text, "a.ipynb", Config(select=("CN723",)))
    assert [_at(text, f).rstrip(",") for f in findings] == expected
    assert all(f.span.end_line == f.span.start_line for f in findings)


def test_non_python_kernel_is_skipped():
    old = nb("x <- cuda()", language="R")
    assert lint_source(old, "a.ipynb", OWN) == ()


# -- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        pytest.param('{"cells": [', "not valid notebook JSON", id="truncated-json"),
        pytest.param("[1, 2]", "top level is not a JSON object", id="json-array"),
        pytest.param('{"nbformat": 3, "worksheets": []}', "nbformat 3", id="nbformat-3"),
        pytest.param('{"nbformat": 4, "metadata": {}}', 'no top-level "cells"', id="no-cells"),
        pytest.param('{"cells": [{"cell_type": "code", "source": 3}]}', "neither a string nor a list", id="bad-source"),
    ],
)
def test_bad_notebooks_are_typed_errors(text, needle):
    with pytest.raises(SourceFailure) as err:
        lint_source(text, "broken.ipynb", OWN)
    assert err.value.error.kind == "parse" and needle in err.value.error.message


def test_invalid_json_error_has_a_location():
    result = process_bytes("broken.ipynb", b'{\n "cells": [\n  {,\n', Config(), RunOptions())
    assert result.status is FileStatus.FAILED and result.error.line == 3


def test_a_lost_magic_line_fails_the_notebook_instead_of_writing_it(monkeypatch):
    real = _notebook.process_python_findings

    def dropping(path, data, config, fix):
        new, findings = real(path, data, config, fix)
        return new.replace(b"__c2n_magic_0__\n", b""), findings

    monkeypatch.setattr(_notebook, "process_python_findings", dropping)
    result = process_bytes("a.ipynb", nb("!ls\nx.cuda()").encode(), Config(), RunOptions(fix=True))
    assert result.status is FileStatus.FAILED and result.error.kind == "internal"
    assert result.new_bytes is None


def test_locate_cells_spans_match_the_decoded_source():
    text = nb("a = 1\nb = 2", "# md\nhello", "c")
    located = locate_cells(text)
    assert [c.cell_type for c in located.cells] == ["code", "markdown", "code"]
    for cell in located.cells:
        assert json.loads(text[cell.start : cell.end]) == list(cell.lines)


def test_pip_magic_and_shell_installs_are_reported():
    findings = lint_source(nb("%pip install -q flash-attn einops\n!pip install bitsandbytes"), "a.ipynb", OWN)
    assert [(f.code, f.message.split(":")[0]) for f in findings] == [
        ("CN713", "cell 1, line 1"),
        ("CN713", "cell 1, line 2"),
    ]


def test_crlf_notebook_json_keeps_crlf():
    old = nb("import torch\nx = torch.zeros(1).cuda()").replace("\n", "\r\n")
    new, _ = fix_source(old, "a.ipynb", OWN)
    assert new == old.replace(".cuda()", '.to(\\"neuron\\")')


def test_suppression_comment_inside_a_cell():
    old = nb("import torch", "x = torch.zeros(1).cuda()  # cuda2neuron: ignore[CN101]\ny = z.cuda()")
    new, _ = fix_source(old, "a.ipynb", OWN)
    assert sources(new)[1] == 'x = torch.zeros(1).cuda()  # cuda2neuron: ignore[CN101]\ny = z.to("neuron")'


def test_shell_line_continuations_stay_one_command():
    old = nb("! CUDA_VISIBLE_DEVICES=0,1 python prep.py \\\n      --split train \\\n      --out data\nx = torch.zeros(1).cuda()")
    new, findings = fix_source(old, "a.ipynb", OWN)
    assert sources(new) == [
        '! NEURON_RT_VISIBLE_CORES=0-1 python prep.py \\\n      --split train \\\n      --out data\nx = torch.zeros(1).to("neuron")'
    ]
    assert {f.code for f in findings} == {"CN101", "CN701"}
