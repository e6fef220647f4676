"""CN77x conda environment files (``environment.yml``).

One rule per module, ``cnNNN_<name>.py``; ``cuda2neuron.rules`` imports them all.
"""
