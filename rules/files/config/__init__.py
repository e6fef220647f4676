"""CN73x structured configs (YAML, JSON, TOML, INI): devices, backends, environments, GPU requests.

One rule per module, ``cnNNN_<name>.py``; ``cuda2neuron.rules`` imports them all.
"""
