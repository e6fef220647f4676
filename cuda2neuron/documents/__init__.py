"""Parsers of the files that are not Python, as the text rules read them.

Each module turns a file's text into the document its rules read, keeping character offsets
into the original text so that a fix lands on the same bytes: ``shell`` (launch scripts, with a
quote/heredoc scan), ``requirements`` (requirements*.txt and pyproject dependencies),
``plaintext`` (YAML ``key: value`` entries, CUDA sources), ``dockerfile`` (the shell view of
RUN/ENV lines), ``nbjson`` (where each notebook cell's source sits in the JSON) and
``min_torch`` (the oldest torch a project declares). Nothing here imports a rule or libcst.
"""
