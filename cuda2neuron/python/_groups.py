"""Linked fixes: findings whose meanings depend on each other move together or not at all.

A rule declares what a report goes together with (``Report.depends``): a device test and the
branch it selects, a read and the writes of one environment variable, a query and the code its
answer picks. Each half is right on its own and wrong without the other:
``if torch.is_autocast_enabled():`` asked about Neuron in front of a branch still written for
``t.device.type == "cuda"`` turns a no-op into the branch's ``raise``; reading
``NEURON_RT_VISIBLE_CORES`` and writing ``CUDA_VISIBLE_DEVICES`` lines below names two
variables. So the reports on a ``depends`` node or inside it and the report itself form one
group (groups that share a report are one group), and every fix of a group takes the weakest
safety among its members: a safe guard beside an unsafe branch becomes unsafe (both move with
``--unsafe-fixes``), and a member without a fix (report-only) makes the whole group report-only.

A report may also *need* code without being needed by it (``Report.needs``): a guard that reaches
its branch through an ``or`` (``if torch.cuda.is_available() or has_xpu:``) opens that branch on
the target once it asks about Neuron, so a branch member that cannot move holds the guard back;
but the branch runs whatever the guard says, so its own fixes do not wait for the guard.

Two kinds of members never hold a group back: an advisory rule's finding (``Rule.advisory``:
float64 precision, a compile option; the code runs on the target as it is) and a safety net's
(``Rule.net``: what it says is too coarse to block a specific rule's fix). Their own fixes inside
a group's code still wait for the group, as code selected by a CUDA test stays CUDA.

Beyond one site (``_flows.py``, asked first): a value goes together with the code that reads it
in its function, and a message with the device test it describes.

Linear in the reports and the depth of their chains: a union-find over the members.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from cuda2neuron.core import Effort, Report, Safety

from ._flows import link_program
from ._walk import visit_syntax

__all__ = ["SAFETY_ORDER", "weakest", "link_groups"]

# Safeties from the most to the least applicable.
SAFETY_ORDER = (Safety.SAFE, Safety.UNSAFE, Safety.DISPLAY_ONLY)


def weakest(safeties: Sequence[Safety]) -> Safety:
    return max(safeties, key=SAFETY_ORDER.index)


def _own(report: Report) -> Safety:
    """What a member alone allows: its fix's safety, or display-only for a report without one."""
    return Safety.DISPLAY_ONLY if report.replacement is None else report.safety


def _passive(report: Report) -> bool:
    """A member that follows its group but never holds it back."""
    return report.rule.advisory or report.rule.net


# What a cluster scheduler calls a GPU: Ray's resource name and its actor option (verl's
# placement groups turn `device_name == "cuda"` into a `"GPU"` bundle; Ray knows Trainium's cores
# as "neuron_cores"). No rule can rename the resource together with the test that selects it.
_GPU_RESOURCE_NAMES = frozenset({"GPU", "num_gpus"})


def _names_cuda(node: cst.CSTNode) -> bool:
    """Is ``node`` a string literal that names CUDA hardware: a CUDA device (``"cuda"``,
    ``"cuda:0"``) or a scheduler's GPU resource (``"GPU"``, ``"num_gpus"``)?"""
    value = node.evaluated_value if isinstance(node, cst.SimpleString) else None
    return isinstance(value, str) and (
        value == "cuda" or value.startswith("cuda:") or value in _GPU_RESOURCE_NAMES)


class _CudaNames(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found: list[cst.SimpleString] = []

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if _names_cuda(node):
            self.found.append(node)


def _cuda_names(node: cst.CSTNode) -> list[cst.SimpleString]:
    finder = _CudaNames()
    visit_syntax(node, finder)
    return finder.found


def _stranded_names(node: cst.CSTNode, movers: list[Report]) -> list[cst.SimpleString]:
    """The ``"cuda"`` literals in ``node`` that none of ``movers`` (the active reports on or
    under it) sits on or around: nothing will move them with the test that selects them."""
    names = _cuda_names(node)
    if not names:
        return []
    moved = {id(m) for r in movers for m in _cuda_names(r.node)}
    return [n for n in names if id(n) not in moved]


def link_groups(reports: Sequence[Report]) -> None:
    """Give each fix of a group the weakest safety of the group, and record in ``held_by`` the
    members that weakened it. Reports without ``depends`` / ``needs`` and outside every group are
    left as they are. The program pass (``_flows.py``) first links each value to its readers and
    each message to its guard."""
    link_program(reports)
    wanted = {id(n) for r in reports for n in (*r.depends, *r.needs)}
    if not wanted:
        return
    # Which reports sit on (or under) each node some report depends on.
    under: dict[int, list[int]] = {}
    for i, r in enumerate(reports):
        for n in r.ancestors:
            if id(n) in wanted:
                under.setdefault(id(n), []).append(i)
        if id(r.node) in wanted:
            under.setdefault(id(r.node), []).append(i)

    parent = list(range(len(reports)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    linked: set[int] = set()
    # Passive members follow every group whose code holds them.
    follows: dict[int, set[int]] = {}
    # (report, a member it needs): one way, the needed member is not held back in turn.
    needs: list[tuple[int, int]] = []
    for i, r in enumerate(reports):
        if not (r.depends or r.needs):
            continue
        linked.add(i)
        for n in r.depends:
            for j in under.get(id(n), ()):
                if j == i:
                    continue
                if _passive(reports[j]):
                    follows.setdefault(j, set()).add(i)
                    continue
                linked.add(j)
                a, b = find(i), find(j)
                if a != b:
                    parent[a] = b
        for n in r.needs:
            needs += [(i, j) for j in under.get(id(n), ()) if j != i and not _passive(reports[j])]

    members: dict[int, list[int]] = {}
    for i in sorted(linked):
        members.setdefault(find(i), []).append(i)
    # The weakest member of each group, and who it is (the findings a held note names).
    floors: dict[int, Safety] = {}
    blockers: dict[int, list[int]] = {}
    for root, ids in members.items():
        floor = weakest([_own(reports[k]) for k in ids])
        floors[root] = floor
        blockers[root] = [k for k in ids if _own(reports[k]) is floor]

    # A device test whose selected code keeps a bare "cuda" no rule moves (`mem_type = "cuda" if
    # t.is_cuda else "cpu"` handed to a transfer library; `if not buf.is_cuda: return` before a
    # check of UCX's "cuda" transports): asked about Neuron, the port would run that CUDA code,
    # or name CUDA memory, for neuron tensors. The name stays and so does the test; a safety
    # net's finding on the name (which never holds a group otherwise) is the member named.
    stranded: dict[int, list[cst.SimpleString]] = {}
    unnamed: dict[int, str] = {}  # group -> the literal that holds it, where no finding sits on it
    on_node: dict[int, list[int]] = {}
    for j, q in enumerate(reports):
        on_node.setdefault(id(q.node), []).append(j)
    for i, r in enumerate(reports):
        for n in r.depends:
            if id(n) not in stranded:
                stranded[id(n)] = _stranded_names(n, [reports[j] for j in under.get(id(n), ()) if not _passive(reports[j])])
            names = stranded[id(n)]
            if not names:
                continue
            root = find(i)
            floors[root] = Safety.DISPLAY_ONLY
            on = [j for name in names for j in on_node.get(id(name), ()) if j != i]
            if on:
                blockers[root] = on
            else:
                # No finding sits on the name: the members hold each other by nothing but it, and
                # naming each other as holders would be a reference cycle between reports (the
                # parsed tree then outlives the file: tests/engine/test_tree_freed.py).
                blockers[root] = []
                unnamed.setdefault(root, names[0].value)
    for root, name in unnamed.items():
        for k in members[root]:
            if reports[k].replacement is not None:
                reports[k].guidance = (
                    f"{reports[k].guidance} Not applied: the code it selects keeps the literal {name}, which "
                    "names CUDA hardware (a device or a scheduler's GPU resource) and no rule moves: asked "
                    "about Neuron, the port would run that CUDA code (or name CUDA) for neuron tensors. Port "
                    "them together by hand."
                ).strip()

    def allows(j: int) -> Safety:
        return floors[find(j)] if j in linked else _own(reports[j])

    # A group that needs code it opens is no more applicable than that code; to a fixed point,
    # as what one group needs may itself wait for another (each step only weakens a floor).
    changed = bool(needs)
    while changed:
        changed = False
        for i, j in needs:
            g = find(i)
            if find(j) == g:
                continue
            there = allows(j)
            if SAFETY_ORDER.index(there) > SAFETY_ORDER.index(floors[g]):
                floors[g] = there
                blockers[g] = [j]
                changed = True
    for root, ids in members.items():
        for k in ids:
            _lower(reports[k], floors[root], [reports[b] for b in blockers[root] if b != k])
    for j, holders in follows.items():
        roots = {find(i) for i in holders}
        floor = weakest([floors[r] for r in roots])
        held = [reports[b] for r in roots if floors[r] is floor for b in blockers[r] if b != j]
        _lower(reports[j], floor, held)


def _lower(report: Report, floor: Safety, blockers: list[Report]) -> None:
    if report.replacement is None or SAFETY_ORDER.index(floor) <= SAFETY_ORDER.index(report.safety):
        return
    report.safety = floor
    report.held_by = tuple(blockers)
    if report.effort is Effort.NONE:
        report.effort = Effort.LOW  # left for a person (or for --unsafe-fixes) after all
