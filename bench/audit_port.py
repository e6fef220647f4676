"""Audit a port the way a reviewer would: is every CUDA construct left in it pointed at by a finding?

    python bench/audit_port.py PROJECT [--target neuron|accelerator] [--keep DIR]

Migrates PROJECT into a temporary copy (`migrate --out`), checks the copy (`check
--output-format json`: what is left is what the report tells the user to do), then reads every
Python file of the copy with `tokenize` and lists each line whose code (not its comments or
docstrings) still holds a CUDA word — `cuda`, `nccl`, `cudnn`, `triton`, `tilelang`, `cutlass`,
`_scaled_mm`, `float8`, or a compiled extension the project builds — on which no finding of the
port points. Those are silent misses: the port would stop on Trainium while the report said
nothing. Prints one summary line (files, edits, manual actions, silent misses) and the misses.

The word list is deliberately wide: a line like `if device == "cuda":` that the tool correctly
leaves alone (the test reads as false on neuron) shows up here too, with its finding if it has
one. Read the list; what is left is either a miss to fix or a line to justify.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path

WORDS = re.compile(r"cuda|nccl|cudnn|triton|tilelang|cutlass|_scaled_mm|float8|\bcupy\b", re.IGNORECASE)
# Kernel stacks: a file that imports one is reported once, at the import; its kernel bodies,
# which use the stack on every line, count as pointed at when the file has such a finding.
STACKS = ("triton", "tilelang", "cutlass", "cupy")
# Words that mention CUDA without depending on it.
HARMLESS = re.compile(r"cuda2neuron|neuron", re.IGNORECASE)


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cuda2neuron", *args], capture_output=True, text=True)


def _code_lines(path: Path) -> dict[int, str]:
    """Line -> the code tokens of that line that hold a CUDA word (comments and docstrings out)."""
    out: dict[int, str] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8", errors="replace")).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return out
    prev = None
    for tok in tokens:
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            if tok.type != tokenize.COMMENT:
                prev = tok
            continue
        # A string standing alone as a statement is a docstring.
        docstring = tok.type == tokenize.STRING and (prev is None or prev.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL))
        prev = tok
        # A string with spaces is prose (a log or error message), not a device name or a module.
        if docstring or (tok.type == tokenize.STRING and " " in tok.string.strip("'\"")):
            continue
        text = tok.string
        if WORDS.search(text) and not HARMLESS.fullmatch(text):
            out.setdefault(tok.start[0], "")
            out[tok.start[0]] += text + " "
    return out


def audit(project: Path, target: str, keep: Path | None) -> dict:
    work = keep or Path(tempfile.mkdtemp(prefix="audit-port-"))
    port = work / project.name
    migrated = _run("migrate", str(project), "--out", str(port), "--target", target, "--report", str(work / "migrate.json"), "-q")
    if migrated.returncode not in (0, 1):
        raise SystemExit(f"migrate failed ({migrated.returncode}): {migrated.stderr[-2000:]}")
    report = json.loads((work / "migrate.json").read_text())
    checked = _run("check", str(port), "--target", target, "--output-format", "json")
    remaining = json.loads(checked.stdout)
    pointed: dict[str, set[int]] = {}
    stacks: dict[str, set[str]] = {}  # file -> kernel stacks a finding names
    for f in remaining.get("manual_actions", []) + remaining.get("fixable", []) + remaining.get("edits", []):
        rel = str(Path(f["path"]).resolve().relative_to(port.resolve()))
        pointed.setdefault(rel, set()).update(range(f["line"], f.get("end_line", f["line"]) + 1))
        text = (f["message"] + " " + f.get("guidance", "")).lower()
        stacks.setdefault(rel, set()).update(s for s in STACKS if s in text)
    misses = []
    for path in sorted(port.rglob("*.py")):
        rel = str(path.relative_to(port))
        for line, words in _code_lines(path).items():
            if line in pointed.get(rel, set()):
                continue
            lowered = words.lower()
            if any(s in lowered for s in stacks.get(rel, ())) and not re.search(r"cuda|nccl|cudnn", lowered):
                continue
            misses.append(f"{rel}:{line}: {words.strip()}")
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
        "misses": misses,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("project", type=Path)
    parser.add_argument("--target", default="neuron", choices=("neuron", "accelerator"))
    parser.add_argument("--keep", type=Path, help="write the port and reports here instead of a temp folder")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    result = audit(args.project.resolve(), args.target, args.keep)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"{result['project']} ({result['target']}): {result['files']} files, {result['changed']} changed, "
        f"{result['edits']} edits, {result['manual']} manual actions, {result['failed']} failed, "
        f"{result['silent_miss_lines']} CUDA lines no finding points at"
    )
    for miss in result["misses"]:
        print("  " + miss)


if __name__ == "__main__":
    main()
