"""CN74x CUDA sources (``*.cu``, ``*.cuh``).

One rule per module, ``cnNNN_<name>.py``; ``cuda2neuron.rules`` imports them all.
"""
