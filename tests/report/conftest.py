"""Reports built by the real engine from small sources (no CLI), for the renderers' tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda2neuron.core import Config, RunOptions
from cuda2neuron.kinds import kind_of, process_kind
from cuda2neuron.report import RunReport, build_report

# One file of each status: fixable (safe), manual only, clean, and one that fails to parse.
SOURCES = {
    "pkg/train.py": "import torch\nmodel = Net().cuda()\nwith torch.cuda.amp.autocast():\n    pass\n",
    "pkg/ext.py": "import apex\n",
    "pkg/plain.py": "x = 1\n",
    "pkg/broken.py": "x = y.cuda()\ndef (:\n",
}


@pytest.fixture
def make_report(tmp_path: Path, monkeypatch):
    """``make_report(sources, fix=..., command=...)``: the files written under tmp_path (the
    working folder, so paths are relative like a CLI run's) and processed by the engine."""

    def _make(sources: dict[str, str] = SOURCES, *, fix: bool = False, command: str = "check") -> RunReport:
        monkeypatch.chdir(tmp_path)
        config = Config()
        options = RunOptions.from_config(config, fix=fix)
        results = []
        for rel, text in sources.items():
            path = tmp_path / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            results.append(process_kind(kind_of(Path(rel)), rel, text.encode(), config, options))
        return build_report(command, config.settings.target, results)

    return _make
