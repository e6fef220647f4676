"""Helpers of the structured-config rules (CN73x): one document model for YAML, JSON, TOML, INI."""

from __future__ import annotations

from dataclasses import dataclass

from cuda2neuron.core import Effort, TextReport

__all__ = ["CONFIG_EXAMPLE", "CONFIG_KINDS", "EnvEntry", "env_entries", "report_value", "splice"]


# The path the examples use: config kinds are matched by path.
CONFIG_EXAMPLE = "config/train.yaml"
# Every structured-config kind the CN73x rules read (YAML, JSON, TOML, INI).
CONFIG_KINDS = frozenset({"config", "json", "toml", "ini"})


def splice(scalar, new_value: str) -> str | None:
    """The text that writes ``new_value`` in place of ``scalar`` in its own quoting, or None when
    the scalar is not written literally (escapes, a tag, a block scalar): then it is reported."""
    if not scalar.literal or scalar.quote not in ('"', "'", ""):
        return None
    return f"{scalar.quote}{new_value}{scalar.quote}"


def report_value(entry, message: str, settings, neuron_value: str, description: str, accelerator_guidance: str) -> TextReport:
    """The value rewritten on the neuron target; reported with guidance on the accelerator target
    (and where the value is not written literally)."""
    replacement = splice(entry, neuron_value)
    if settings.target == "neuron" and replacement is not None:
        return TextReport(entry.start, entry.end, message, replacement=replacement, description=description)
    guidance = accelerator_guidance if settings.target != "neuron" else f"write `{neuron_value}` there"
    return TextReport(entry.start, entry.end, message, guidance=guidance, effort=Effort.LOW)


@dataclass(frozen=True)
class EnvEntry:
    """An environment variable a config sets: its name as written (``name_start``..``name_end``,
    quotes included) and its value (None when the value is not a scalar)."""

    name: str
    name_start: int
    name_end: int
    name_quote: str
    value: object | None  # a documents.structured.Scalar


def env_entries(doc) -> list[EnvEntry]:  # noqa: ANN001 - a documents.structured.ConfigDocument
    """Variables set in an environment mapping (GitHub Actions / GitLab / compose ``env:``,
    ``environment:``, ``variables:``) or a Kubernetes ``env:`` list of ``{name, value}``."""
    from cuda2neuron.documents.structured import is_env_key

    raw = doc.raw
    out: list[EnvEntry] = []
    for s in doc.scalars:
        path = s.path
        if len(path) >= 2 and isinstance(path[-1], str) and is_env_key(path[-2]) and s.key_start >= 0:
            written = raw[s.key_start:s.key_end]
            quote = written[0] if written[:1] in ("'", '"') else ""
            out.append(EnvEntry(s.key, s.key_start, s.key_end, quote, s))
        elif len(path) >= 3 and path[-1] == "name" and isinstance(path[-2], int) and is_env_key(path[-3]):
            value = doc.at(s.document, (*path[:-1], "value"))
            out.append(EnvEntry(s.value, s.start, s.end, s.quote, value))
    return out
