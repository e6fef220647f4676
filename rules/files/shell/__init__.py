"""CN70x shell launch scripts (``*.sh``, ``*.bash``, ``!`` / ``%%bash`` notebook lines).

One rule per module, ``cnNNN_<name>.py``; ``cuda2neuron.rules`` imports them all.
"""
