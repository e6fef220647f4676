"""CN1xx device placement: device strings, ``.cuda()``, ``is_cuda``, legacy tensor types, ordinals.

One rule per module, ``cnNNN_<name>.py``; ``cuda2neuron.rules`` imports them all.
"""
