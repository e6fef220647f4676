"""CN71x dependencies: requirements files, ``pyproject.toml`` dependency lists, ``pip install`` lines.

One rule per module, ``cnNNN_<name>.py``; ``cuda2neuron.rules`` imports them all.
"""
