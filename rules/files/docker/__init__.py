"""CN75x Dockerfiles.

One rule per module, ``cnNNN_<name>.py``; ``cuda2neuron.rules`` imports them all.
"""
