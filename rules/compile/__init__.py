"""CN5xx ``torch.compile``: backends, modes and options made for Inductor on CUDA.

One rule per module, ``cnNNN_<name>.py``; ``cuda2neuron.rules`` imports them all.
"""
