"""``python -m cuda2neuron``.

Trap: ``-m`` puts the working folder first on ``sys.path``, and the working folder is usually the
project being checked: its ``click.py``, ``rich.py`` or ``pathspec.py`` would be imported in place
of ours — running the project's code, which `check`/`migrate`/`suppress` promise never to do. It
is dropped before anything else is imported (this package is already found; its submodules are
found through it). A ``cuda2neuron.py`` in the working folder is beyond reach: Python runs it
instead of this package before any line of ours — use the ``cuda2neuron`` command or
``python -P -m cuda2neuron`` there (docs/robustness.md).
"""

import os
import sys


def _drop_working_folder() -> None:
    if getattr(sys.flags, "safe_path", False) or not sys.path:
        return
    first = sys.path[0]
    try:
        if first == "" or os.path.samefile(first, os.getcwd()):
            del sys.path[0]
    except OSError:
        pass


_drop_working_folder()

from cuda2neuron.cli import main  # noqa: E402 - after the path is safe

sys.exit(main())
