"""A command-line option's device default whose reader in another module stays as it is.

``parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])`` in ``train.py``,
read by ``init_device(args)`` in another module: ``if args.device == "cuda":
torch.cuda.set_device(...) elif args.device == "cpu": ... else: raise ValueError``. That test
guards torch code, so a safe run leaves it (CN103 unsafe): a "neuron" default alone raises at
start-up, and "neuron" choices alone reject the "cuda" default the test still wants. The
project sweep records the options such tests read (``ProjectFacts.option_readers``,
``workspace/_value_args.py``); CN102 asks here before it moves a default or a choice (in one
module the program pass links them already: ``python/_flows.py``).
"""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Rule

from .args import option_dest

__all__ = ["option_at", "option_reader"]


def option_reader(rule: Rule, node: cst.CSTNode) -> tuple[str, bool] | None:
    """Where the device test that reads the option ``node`` is the default or one of the
    choices of stands, as a phrase, and whether ``--unsafe-fixes`` moves that test; None where
    ``node`` is neither or no such test reads the option."""
    facts = rule.context.settings.project
    if not facts.option_readers:
        return None
    dest = option_at(rule)
    found = facts.option_reader(rule.context.path, dest) if dest is not None else None
    if found is None:
        return None
    where, unsafe = found
    return f"the command-line option `{dest}`, read by the device test at {where}", unsafe


def option_at(rule: Rule) -> str | None:
    """The attribute of the command-line option whose ``default=`` or one of whose ``choices=``
    the rule's node is (``add_argument("--device", default="cuda")``: ``device``); None
    elsewhere."""
    ancestors = rule.context.ancestors
    # `default="cuda"`: Arg, Call above; `choices=["cuda", ...]`: Element, List, Arg, Call.
    for depth in (1, 3):
        if len(ancestors) <= depth:
            return None
        arg, call = ancestors[-depth], ancestors[-depth - 1]
        if not (isinstance(arg, cst.Arg) and isinstance(call, cst.Call) and arg.keyword is not None):
            continue
        keyword = arg.keyword.value
        if (keyword, depth) not in (("default", 1), ("choices", 3)):
            return None
        if depth == 3 and not (isinstance(ancestors[-1], cst.Element) and isinstance(ancestors[-2], (cst.List, cst.Tuple, cst.Set))):
            return None
        return option_dest(call)
    return None
