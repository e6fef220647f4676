from __future__ import annotations


def pytest_addoption(parser):
    parser.addoption(
        "--update-fixtures",
        action="store_true",
        default=False,
        help="rewrite expected fixture outputs (*.out.py, *.findings.txt) from the current engine; "
        "review the diff like code",
    )
