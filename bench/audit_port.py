"""Audit a port the way a reviewer would: is every CUDA construct left in it pointed at by a finding?

    python bench/audit_port.py PROJECT [--target neuron|accelerator] [--keep DIR]

Migrates PROJECT into a temporary copy (`migrate --out`), checks the copy (`check
--output-format json`: what is left is what the report tells the user to do), then reads every
Python file of the copy and lists each line whose code (not its comments or
docstrings) still holds a CUDA word — `cuda`, `nccl`, `cudnn`, `triton`, `tilelang`, `cutlass`, `helion`,
`_scaled_mm`, `float8`, or a compiled extension the project builds — on which no finding of the
port points. Those are what the specific rules miss: the residual pass (CN902) reports them
as "CUDA reference left — review", so its findings are not counted as pointing anywhere. Prints one summary line (files, edits, manual actions, silent misses) and the misses.

The word list is deliberately wide: a line like `if device == "cuda":` that the tool correctly
leaves alone (the test reads as false on neuron) shows up here too, with its finding if it has
one. Read the list; what is left is either a miss to fix or a line to justify.

What a finding covers, and which words hold no CUDA construct (the project's own names, keys of
its data, labels, ...), is the residual pass's own judgement (`cuda2neuron.kinds._leftover_python`,
documented there and in docs/filekinds.md "The residual pass"): the audit and the product share
one implementation. The audit pools the names of the whole tree; the product reads one file at a
time, with the project's top-level packages.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from cuda2neuron.kinds._code_text import code_text
from cuda2neuron.kinds._leftover_python import (
    AUDIT_WORDS,
    FileExcuses,
    Names,
    ProjectNames,
    code_words,
    excuse,
    parse_names,
    widen,
)

# The audit's words: the residual pass's (CUDA, NCCL, cuDNN, NVIDIA, nvcc) and the kernel languages.
WORDS = AUDIT_WORDS
# Kernel stacks: a file that imports one is reported once, at the import; its kernel bodies,
# which use the stack on every line, count as pointed at when the file has such a finding.
STACKS = ("triton", "tilelang", "cutlass", "helion", "cupy")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cuda2neuron", *args], capture_output=True, text=True)


def classify(port: Path, pointed: dict[str, set[int]], stacks: dict[str, set[str]], kernel_lines: dict[str, set[int]]) -> tuple[list[str], list[str]]:
    """(misses, excused): every code line of the port holding a CUDA word that no finding points
    at, and the ones among them that hold no CUDA construct, each with its reason.

    The excuses are the residual pass's (``cuda2neuron.kinds._leftover_python``), with the names
    of the whole tree pooled: a helper defined in one module and used in another is the
    project's own name."""
    paths = sorted(port.rglob("*.py"))
    # Any folder or module name of the tree can start an absolute import of the project's own
    # code (`src/lightning/...` is imported as `lightning...`).
    project_modules = frozenset(part for p in paths for part in (*p.relative_to(port).parent.parts, p.stem))
    sources = {str(p.relative_to(port)): p.read_bytes() for p in paths}
    parsed = {rel: parse_names(data, project_modules) for rel, data in sources.items()}
    project = ProjectNames.pool(parsed)
    misses: list[str] = []
    excused: list[str] = []
    for rel, names in parsed.items():
        names = names if names is not None else Names()
        lines = widen(names, pointed.get(rel, set()), kernel_lines.get(rel, set()))
        ctx = FileExcuses.of(rel, names, project, lines, stacks.get(rel, set()))
        for line, tokens in code_words(code_text(sources[rel]), WORDS, sources[rel]).items():
            if line in lines:
                continue
            reasons = [excuse(tok, ctx) for tok in tokens]
            words = " ".join(t.string for t in tokens)
            if all(reasons):
                excused.append(f"{rel}:{line}: {'; '.join(reasons)}")
            else:
                misses.append(f"{rel}:{line}: {words}")
    return misses, excused


def audit(project: Path, target: str, keep: Path | None) -> dict:
    if keep is not None:
        return _audit(project, target, keep)
    # The port of a large tree is hundreds of MB: a temporary one goes when the audit ends.
    with tempfile.TemporaryDirectory(prefix="audit-port-") as work:
        return _audit(project, target, Path(work))


def _audit(project: Path, target: str, work: Path) -> dict:
    port = work / project.name
    migrated = _run("migrate", str(project), "--out", str(port), "--target", target, "--report", str(work / "migrate.json"), "-q")
    if migrated.returncode not in (0, 1):
        raise SystemExit(f"migrate failed ({migrated.returncode}): {migrated.stderr[-2000:]}")
    report = json.loads((work / "migrate.json").read_text())
    checked = _run("check", str(port), "--target", target, "--output-format", "json")
    remaining = json.loads(checked.stdout)
    pointed: dict[str, set[int]] = {}
    stacks: dict[str, set[str]] = {}  # file -> kernel stacks a finding names
    kernel_lines: dict[str, set[int]] = {}  # file -> lines of findings that name a kernel stack
    residual = 0
    for f in remaining.get("manual_actions", []) + remaining.get("fixable", []) + remaining.get("edits", []):
        if f["code"] == "CN902":
            # The residual pass points at every line no specific rule covers: the audit measures
            # what the specific rules miss, so its findings point at nothing here.
            residual += 1
            continue
        rel = str(Path(f["path"]).resolve().relative_to(port.resolve()))
        span = range(f["line"], f.get("end_line", f["line"]) + 1)
        pointed.setdefault(rel, set()).update(span)
        text = (f["message"] + " " + f.get("guidance", "")).lower()
        named = {s for s in STACKS if s in text}
        stacks.setdefault(rel, set()).update(named)
        if named:
            kernel_lines.setdefault(rel, set()).update(span)
    misses, excused = classify(port, pointed, stacks, kernel_lines)
    summary = report.get("summary", {})
    return {
        "project": project.name,
        "target": target,
        "files": summary.get("files_scanned"),
        "changed": summary.get("files_changed"),
        "edits": len(report.get("edits", [])),
        "manual": len(report.get("manual_actions", [])),
        "failed": len(report.get("failures", [])),
        "silent_miss_lines": len(misses),
        "residual_findings": residual,
        "misses": misses,
        "excused_lines": len(excused),
        "excused": excused,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("project", type=Path)
    parser.add_argument("--target", default="neuron", choices=("neuron", "accelerator"))
    parser.add_argument("--keep", type=Path, help="write the port and reports here instead of a temp folder")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--excused", action="store_true", help="also list the lines counted as no construct, with the reason")
    args = parser.parse_args()
    result = audit(args.project.resolve(), args.target, args.keep)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"{result['project']} ({result['target']}): {result['files']} files, {result['changed']} changed, "
        f"{result['edits']} edits, {result['manual']} manual actions, {result['failed']} failed, "
        f"{result['silent_miss_lines']} CUDA lines no specific finding points at "
        f"({result['residual_findings']} CN902 findings in all kinds), "
        f"{result['excused_lines']} lines with CUDA words but no construct"
    )
    for miss in result["misses"]:
        print("  " + miss)
    if args.excused:
        print("no construct:")
        for line in result["excused"]:
            print("  " + line)


if __name__ == "__main__":
    main()
