"""CN72x Jupyter notebooks: what the notebook handler cannot migrate.

One rule per module, ``cnNNN_<name>.py``; ``cuda2neuron.rules`` imports them all.
"""
