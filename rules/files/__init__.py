"""CN7xx files that are not Python: one sub-package per kind of file, by the tens digit of the code.

``_helpers.TextRule`` is the base of the rules a text-file handler runs.
"""
