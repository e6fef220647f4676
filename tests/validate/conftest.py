from __future__ import annotations

from pathlib import Path

import pytest

from validate_helpers import PROJECTS


@pytest.fixture(scope="session")
def mlp() -> Path:
    return PROJECTS / "mlp"
