"""CN6xx the CUDA-only ecosystem: Triton, CUDA extensions, apex, flash-attn, xformers, ...

One rule per module, ``cnNNN_<name>.py``; ``cuda2neuron.rules`` imports them all.
"""
