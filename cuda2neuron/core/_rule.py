"""The rule base class: one self-describing unit per rule (Fixit/ruff style).

A rule declares its code, kebab-case name, docs (fixed sections), trigger words and examples,
and implements libcst visitor methods that *report* findings. Rules never mutate the tree: the
engine decides which fixes to apply and loops to a fixed point. A malformed rule fails at import.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ._model import Effort, Finding, Safety
from ._triggers import admit

if TYPE_CHECKING:
    # Annotations only: defining rules must not cost the parser's import (the rules import it).
    import libcst as cst

    from ._settings import Settings

__all__ = ["Invalid", "Report", "Rule", "RuleDefinitionError", "Valid", "example_fix_safeties", "registered_rules"]

_CODE_RE = re.compile(r"^CN\d{3}$")
_DOTTED_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
REQUIRED_SECTIONS = ("## What it does", "## Why is this bad?", "## Example", "## Fix safety")

_REGISTRY: dict[str, type[Rule]] = {}


class RuleDefinitionError(TypeError):
    """A rule class is malformed (raised at import, so a broken catalog never ships)."""


@dataclass(frozen=True)
class Valid:
    """Source the rule must not report."""

    source: str
    target: str = "neuron"
    options: tuple[tuple[str, str], ...] = ()
    # File name the example is checked as; its suffix picks the file kind (launch.sh, ...).
    path: str = "example.py"


@dataclass(frozen=True)
class Invalid:
    """Source the rule must report; ``expected`` is the output after fixing (None: report only).

    ``unsafe`` marks examples whose fix is applied only with unsafe fixes enabled.
    ``options`` are Settings overrides, e.g. (("amp_dtype", "float16"),).
    """

    source: str
    expected: str | None = None
    unsafe: bool = False
    target: str = "neuron"
    options: tuple[tuple[str, str], ...] = ()
    path: str = "example.py"


@dataclass
class Report:
    """What a rule hands the engine: a node, a message and an optional replacement node."""

    rule: Rule
    node: cst.CSTNode
    message: str
    replacement: cst.CSTNode | cst.RemovalSentinel | None
    safety: Safety
    guidance: str
    effort: Effort
    # Imports the replacement needs: (module, name-or-None) as for AddImportsVisitor.
    imports: tuple[tuple[str, str | None], ...] = ()
    # Imports the replacement may leave unused: (module, name-or-None); removed only if unused.
    unused_imports: tuple[tuple[str, str | None], ...] = ()
    description: str = ""
    # The reported node's ancestors, root first: where to rebuild, and what overlaps.
    ancestors: tuple[cst.CSTNode, ...] = ()
    # The code this report's fix goes together with: a device test's whole test expression and
    # the branch it selects, the other reads and writes of one environment variable. The
    # findings on these nodes or inside them and this one are one group: the engine applies its
    # fixes all together, at the weakest safety among them, or none of them, and a finding
    # without a fix holds the whole group back (python/_groups.py). A test left "cuda" and the
    # code it selects stay one CUDA path, never half moved, whichever side cannot move.
    depends: tuple[cst.CSTNode, ...] = ()
    # Code this report's fix needs without being needed by it: a guard that reaches its branch
    # through an ``or`` opens the branch on the target once it asks about Neuron, so a finding
    # there that cannot move holds the guard back; the branch, reached either way, moves alone.
    needs: tuple[cst.CSTNode, ...] = ()
    # Code no other rule may touch or report in: another accelerator's branch, a module that
    # adapts torch.cuda to it (CN112). The engine drops every other report on these nodes or
    # inside them, so the one mechanism keeps the whole catalog out, not a test in each rule.
    fences: tuple[cst.CSTNode, ...] = ()
    # A fencing report that speaks only where its fence kept something out: its fences hold off
    # the rules that port code (not the advisory ones), and the engine drops the report itself
    # when no such rule reported inside them. ``torch.get_autocast_gpu_dtype()`` in a MUSA branch
    # spells no CUDA word, yet CN307 would move it: the fence must stand there all the same.
    quiet: bool = False
    # Set by the engine: the findings of this report's group that kept its fix from being
    # applied (their lines are named in the finding's guidance).
    held_by: tuple[Report, ...] = ()


class Rule:
    """Base class of every rule. Subclasses are registered when defined."""

    code: ClassVar[str]
    name: ClassVar[str]
    # Words whose absence from a file proves the rule cannot fire there (files without any
    # trigger word of the selected rules are never parsed); ``wakes`` may look closer.
    triggers: ClassVar[tuple[str, ...]]
    VALID: ClassVar[Sequence[str | Valid]] = ()
    INVALID: ClassVar[Sequence[str | Invalid]] = ()
    # Targets this rule applies to; the same rule serves both unless it says otherwise.
    targets: ClassVar[frozenset[str]] = frozenset({"neuron", "accelerator"})
    # File kinds the rule reads. "python" rules are libcst visitors run by the engine's
    # dispatcher; other kinds (e.g. "shell", "requirements") are run by their file handler.
    file_kinds: ClassVar[frozenset[str]] = frozenset({"python"})
    # Abstract helpers (mix-ins) set this to skip registration.
    abstract: ClassVar[bool] = False
    # Fully qualified names this rule can write into code (beyond its examples); a test checks
    # each exists in the emulated backend or in torch itself.
    emits: ClassVar[tuple[str, ...]] = ()
    # The kinds of fix this rule can offer: empty for a rule that only reports. Declared, not
    # inferred from examples (a display-only fix has no expected output); a test checks that
    # every example's fix is one of these.
    fixes: ClassVar[frozenset[Safety]] = frozenset()
    # The project sweep's names (``ProjectFacts.words``: the last name of each compiled
    # extension, kernel module and extension loader) count as this rule's trigger words too: a
    # file whose only CUDA-only code is ``from .ops import layer_norm`` holds no word of its own.
    project_triggers: ClassVar[bool] = False
    # Qualified names the rule needs: it reports only in a file that holds a reference resolving
    # to one of them (``RuleContext.qualname``, through the file's imports; CN411 reports such
    # calls, CN404 needs a set_device call). Such a reference spells the name's last part as a
    # whole word in the code, at the use (``nn.DataParallel``) or in the import (``from
    # torch.nn import DataParallel as DP``), so the Python kind wakes the rule only where one of
    # those words is: a trigger word inside a longer name (``DistributedDataParallel``) no
    # longer costs the file a parse. Empty: no such promise; its trigger words wake it as before.
    reports_names: ClassVar[tuple[str, ...]] = ()
    # The rule reads its words as setting keys, compared as ``normalize_key`` compares them (case
    # ignored, ``-`` read as ``_``: the flag ``--Use-Flash-Attn`` is the key ``use_flash_attn``),
    # so its trigger words are matched the same way (``core.key_folded``) in the prefilter and the
    # wake. Matched as written, ``flash_attn`` let the file whose only setting is spelled
    # ``--Use-Flash-Attn`` go unparsed: the rule reported it only with the prefilter off.
    triggers_as_keys: ClassVar[bool] = False
    # A safety net (CN109, CN409, CN623): the engine keeps its first report of each unit (a
    # statement, one item of a `with`, a decorator: python/_lint.py's net_unit) and only where no
    # other rule's report is on the same node, one of its ancestors, or elsewhere in that unit, so
    # that what the specific rules leave unsaid is said once and what they say is not said twice.
    net: ClassVar[bool] = False
    # What this rule reports runs on the target as it is, only differently (numerics, speed,
    # a hint about a value): a finding of it left unfixed keeps no code on CUDA, so it never
    # holds back a group of linked fixes (``Report.depends``); its own fix inside a group's
    # code still waits for the group.
    advisory: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("abstract", False):
            # Test rules are abstract (kept out of the catalog) yet run through the engine: the
            # coarse prefilter must let their words through.
            triggers = cls.__dict__.get("triggers")
            if isinstance(triggers, tuple) and all(isinstance(t, str) and t for t in triggers):
                admit(cls.file_kinds, triggers)
            return
        _validate(cls)
        if cls.code in _REGISTRY and _REGISTRY[cls.code].__qualname__ != cls.__qualname__:
            raise RuleDefinitionError(
                f"{cls.__module__}.{cls.__qualname__}: code {cls.code} is already used by "
                f"{_REGISTRY[cls.code].__module__}.{_REGISTRY[cls.code].__qualname__}"
            )
        for other in _REGISTRY.values():
            if other.name == cls.name and other.code != cls.code:
                raise RuleDefinitionError(f"rule name {cls.name!r} is used by {other.code} and {cls.code}")
        _REGISTRY[cls.code] = cls
        # A rule from outside the catalog may use words the coarse prefilter does not know.
        admit(cls.file_kinds, cls.triggers)

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        """Can the rule fire on a file whose code is ``code``? Asked before the file is parsed.

        ``code`` is the file's bytes with comments and docstrings blanked (offsets kept), and
        one of the rule's trigger words (or a project word) occurs in it. The default says yes. A rule
        whose words also sit in many files it never reports on (``.to(``, ``device``) looks
        closer here, e.g. with a regular expression around the word; it must never say no
        where the rule would report: tests run the catalog with and without this test and
        compare the findings (bench/check_prefilter.py does the same on a real tree).
        """
        return True

    @classmethod
    def applies(cls, settings: Settings) -> bool:
        """Can the rule fire at all under ``settings``? Asked once per file before it is parsed.

        The default says yes. A rule that reads only what the project sweep found (its
        extension and kernel modules) says no where the sweep found none: it is then never
        instantiated. Like ``wakes``, it must never say no where the rule would report.
        """
        return True

    @classmethod
    def detect(cls, file: Any, settings: Settings) -> list[Finding] | None:
        """The rule's findings in ``file`` read from CPython's ``ast``, or None: no detector here,
        or one that cannot tell (the file is then parsed by libcst and the rule's visitor runs).

        ``file`` is the python layer's ``AstFile`` (``python/_ast_walk.py``; core names no type of
        that layer). A rule that overrides this promises the findings its libcst visitor makes on
        the file as read, byte for byte: code, message, span, fix (replacement text, safety,
        description), guidance, effort; suppression comments are the engine's. The engine uses
        them instead of a libcst parse where every rule woken in a file has a detector and none
        of their fixes may be applied in the run (a file no edit can touch): most trigger files
        end so. Where ``ast`` and libcst could differ (names, parentheses, positions), the
        detector returns None: it never guesses. A detector may decide only some files: a gate
        returns [] where it proves the visitor reports nothing (no word or import any report
        needs) and None elsewhere; one that does not build fix text returns None where the
        visitor would attach a fix. tests/rules/test_detectors.py holds each detector to its
        visitor on the rule's examples and on a table of traps.
        """
        return None

    @classmethod
    def has_detector(cls) -> bool:
        """Does the rule read files through ``detect`` too (does it override it)?"""
        return cls.detect.__func__ is not Rule.detect.__func__  # type: ignore[attr-defined]

    # ``context`` is the python layer's ``cuda2neuron.python.RuleContext`` (the walk builds it);
    # core sits below that layer and names no type of it, not even for an annotation.
    def __init__(self, context: Any) -> None:
        self.context = context
        self.reports: list[Report] = []

    # -- documentation ------------------------------------------------------------------------
    @classmethod
    def docs(cls) -> str:
        return textwrap.dedent(cls.__doc__ or "").strip()

    @classmethod
    def summary(cls) -> str:
        """First sentence of 'What it does'."""
        doc = cls.docs()
        body = " ".join(doc.split("## What it does", 1)[1].split("##", 1)[0].split())
        # A sentence ends at a period followed by a space: `.cuda()` has dots inside.
        match = re.match(r"(.+?\.)(\s|$)", body)
        return match.group(1) if match else body

    # -- reporting ------------------------------------------------------------------------------
    def report(
        self,
        node: cst.CSTNode,
        message: str,
        *,
        replacement: cst.CSTNode | cst.RemovalSentinel | None = None,
        safety: Safety = Safety.SAFE,
        guidance: str = "",
        effort: Effort | None = None,
        imports: Sequence[tuple[str, str | None]] = (),
        unused_imports: Sequence[tuple[str, str | None]] = (),
        description: str = "",
        ancestors: Sequence[cst.CSTNode] | None = None,
        depends: Sequence[cst.CSTNode] = (),
        needs: Sequence[cst.CSTNode] = (),
        fences: Sequence[cst.CSTNode] = (),
        quiet: bool = False,
    ) -> None:
        """Record a finding about ``node``.

        ``ancestors`` (root first) is the chain above ``node``; it defaults to the chain above the
        node being visited. A report about one of that node's ancestors (``os.environ[K] = v``
        reported from ``K``: pass ``context.chain_above(stmt)``), or one made later (a literal
        confirmed at the end of the module), must pass its own chain: the engine rebuilds along
        it and orders overlapping fixes by it (outer first). ``depends``: the code whose findings go
        together with this one (a device test's branch, the other sites of one variable; see
        ``Report.depends``); ``needs``: code whose findings hold this one back, one way
        (``Report.needs``); ``fences``: code no other rule's report may reach (``Report.fences``),
        ``quiet``: a fence kept only where it kept a porting rule out (``Report.quiet``).
        """
        if effort is None:
            effort = Effort.NONE if replacement is not None and safety is Safety.SAFE else Effort.LOW
        self.reports.append(
            Report(
                rule=self,
                node=node,
                message=message,
                replacement=replacement,
                safety=safety,
                guidance=guidance,
                effort=effort,
                imports=tuple(imports),
                unused_imports=tuple(unused_imports),
                description=description,
                ancestors=tuple(self.context.ancestors if ancestors is None else ancestors),
                depends=tuple(depends),
                needs=tuple(needs),
                fences=tuple(fences),
                quiet=quiet,
            )
        )

    # -- name helpers (delegate to the context so scope tracking lives in one place) -----------
    def qualname(self, node: cst.BaseExpression) -> str | None:
        return self.context.qualname(node)

    def spell(self, qualified: str) -> tuple[cst.BaseExpression, tuple[tuple[str, str | None], ...]] | None:
        return self.context.spell(qualified)


def _validate(cls: type[Rule]) -> None:
    where = f"{cls.__module__}.{cls.__qualname__}"
    code = cls.__dict__.get("code")
    if not isinstance(code, str) or not _CODE_RE.match(code):
        raise RuleDefinitionError(f"{where}: code must look like CN123, got {code!r}")
    name = cls.__dict__.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise RuleDefinitionError(f"{where}: name must be kebab-case, got {name!r}")
    doc = textwrap.dedent(cls.__doc__ or "")
    missing = [s for s in REQUIRED_SECTIONS if s not in doc]
    if missing:
        raise RuleDefinitionError(f"{where}: docstring lacks sections {missing}")
    triggers = cls.__dict__.get("triggers")
    if not triggers or not all(isinstance(t, str) and t for t in triggers):
        raise RuleDefinitionError(f"{where}: triggers must be a non-empty tuple of words")
    names = cls.__dict__.get("reports_names", ())
    if not isinstance(names, tuple) or not all(isinstance(n, str) and _DOTTED_RE.match(n) for n in names):
        raise RuleDefinitionError(f"{where}: reports_names must be a tuple of dotted names, got {names!r}")
    if not cls.__dict__.get("INVALID"):
        raise RuleDefinitionError(f"{where}: needs at least one INVALID example")
    if not cls.__dict__.get("VALID"):
        raise RuleDefinitionError(f"{where}: needs at least one VALID example")
    fixes = cls.fixes
    if not isinstance(fixes, frozenset) or not all(isinstance(f, Safety) for f in fixes):
        raise RuleDefinitionError(f"{where}: fixes must be a frozenset of Safety values")
    shown = example_fix_safeties(cls)
    if not shown <= fixes:
        missing = ", ".join(sorted(s.value for s in shown - fixes))
        raise RuleDefinitionError(f"{where}: examples apply {missing} fixes that `fixes` does not declare")


def registered_rules() -> dict[str, type[Rule]]:
    """Every rule registered so far, by code (``cuda2neuron.kinds.catalog`` loads the catalog)."""
    return dict(sorted(_REGISTRY.items()))


def example_fix_safeties(rule: type[Rule]) -> frozenset[Safety]:
    """The fix safeties the rule's INVALID examples show being written."""
    return frozenset(
        Safety.UNSAFE if getattr(ex, "unsafe", False) else Safety.SAFE
        for ex in rule.INVALID
        if getattr(ex, "expected", None) is not None
    )
