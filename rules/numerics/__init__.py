"""CN8xx numerics and processes the device handles differently: float64, complex, fork.

One rule per module, ``cnNNN_<name>.py``; ``cuda2neuron.rules`` imports them all.
"""
