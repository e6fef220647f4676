"""CN3xx automatic mixed precision: autocast, GradScaler, custom_fwd/bwd.

One rule per module, ``cnNNN_<name>.py``; ``cuda2neuron.rules`` imports them all.
"""
