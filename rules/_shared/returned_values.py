"""A command-line option's device default that comes back through a return to a test that stays.

``parser.add_argument("--device", default="cuda")`` in ``train.py``, then ``device =
init_device(args)``, whose ``return torch.device(args.device)`` is in another module, and ``if
device.type in ("cuda",): scaler = Scaler(...)``. That test guards code, so a safe run leaves it
on "cuda": a "neuron" default moved alone takes its other branch on Trainium, where the original
took this one on the GPU. The project sweep records such options
(``ProjectFacts.returned_options``, ``workspace/_value_results.py``); CN102 asks here before it
moves a default or a choice.
"""

from __future__ import annotations

from cuda2neuron.core import Rule

from .option_readers import option_at

__all__ = ["returned_option"]


def returned_option(rule: Rule) -> tuple[str, bool] | None:
    """Where the test on the device built from the option whose default (or one of whose
    choices) the rule's node is stands, as a phrase, and whether ``--unsafe-fixes`` moves that
    test; None where no such test reads it."""
    facts = rule.context.settings.project
    if not facts.returned_options:
        return None
    dest = option_at(rule)
    found = facts.returned_option(rule.context.path, dest) if dest is not None else None
    if found is None:
        return None
    where, unsafe = found
    return f"the command-line option `{dest}`, whose device is tested at {where}", unsafe
