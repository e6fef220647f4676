"""CN2xx ``torch.cuda.*`` APIs: same-name moves (the data table ``cuda_api.toml``), APIs with no
equivalent, cuDNN/TF32 flags.

One rule per module, ``cnNNN_<name>.py``; ``cuda2neuron.rules`` imports them all.
"""
