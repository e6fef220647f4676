"""Helpers shared by several rule families (a helper one family uses lives in its ``_helpers.py``).

* ``args``: finding, adding, removing and renaming call arguments.
* ``strings``: reading and writing string literals.
* ``names``: resolving callees and imports, telling uses of a name from bindings.
* ``values``: following a value up the tree to the node that uses it.
* ``packages``: ``PackageRule``, the base of the rules about one CUDA-only package.
* ``target``: how each ``--target`` spells a device.
* ``visible_devices``: ``CUDA_VISIBLE_DEVICES`` values as ``NEURON_RT_VISIBLE_CORES`` values.
"""
