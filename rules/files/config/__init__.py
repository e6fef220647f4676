"""CN73x YAML training configs.

One rule per module, ``cnNNN_<name>.py``; ``cuda2neuron.rules`` imports them all.
"""
