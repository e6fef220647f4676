"""CN4xx distributed: process-group backend, DDP arguments, device visibility variables.

One rule per module, ``cnNNN_<name>.py``; ``cuda2neuron.rules`` imports them all.
"""
