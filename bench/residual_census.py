"""Count what becomes of every line of a repository that names CUDA, by file kind.

    python bench/residual_census.py REPO [--jobs 2] [--target neuron|accelerator] [--list CODE]

Runs `migrate` in memory over REPO (nothing is written) and, for every file a kind reads, takes
the lines whose code — not comments, docstrings or prose — names CUDA, NCCL, cuDNN, NVIDIA or
nvcc (what the residual pass CN902 looks at). Per kind it prints:

  found      such lines in the original tree
  rewritten  of them, lines a fix rewrote
  left       such lines in the port
    specific   ... that a specific rule's finding covers (with guidance)
    residual   ... that only the residual pass reports (CN902)
    excused    ... whose words are provably no CUDA construct (the project's names, keys, labels)

and the findings: all of them, CN902's, and CN902's share. The promise is that `left` =
`specific` + `residual` + `excused`, with `residual` a small share: every line still naming CUDA is
rewritten or reported. `--list CN902` lists the residual lines (any code lists its findings).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections import Counter, defaultdict
from pathlib import Path

from cuda2neuron.core import Config, FileStatus, RunOptions
from cuda2neuron.kinds._residual import RESIDUAL, RESIDUAL_KINDS, _notebook_hits, _python_hits, _text_hits
from cuda2neuron.workspace import discover, process_files, with_project_facts


def _hits(kind: str, path: str, data: bytes) -> set[int]:
    if kind == "python":
        return set(_python_hits(data, set())[0])
    if kind == "notebook":
        return set(_notebook_hits(data.decode("utf-8", "surrogateescape"), set()))
    return set(_text_hits(kind, path, data.decode("utf-8", "surrogateescape")))


def _changed(old: bytes, new: bytes) -> set[int]:
    """Lines of ``old`` that the rewrite replaced or removed."""
    out: set[int] = set()
    for tag, i1, i2, _j1, _j2 in difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False).get_opcodes():
        if tag != "equal":
            out.update(range(i1 + 1, i2 + 1))
    return out


def census(repo: Path, jobs: int, target: str) -> tuple[dict[str, Counter], list, int]:
    found = discover([repo])
    files = [f for f in found.files if f.kind in RESIDUAL_KINDS]
    config = with_project_facts(Config(), files)
    config = config.with_overrides(target=target) if target != "neuron" else config
    results = process_files(files, config, RunOptions(fix=True), jobs=jobs)
    rows: dict[str, Counter] = defaultdict(Counter)
    findings = []
    failed = 0
    for source, result in zip(files, results):
        if result.status is FileStatus.FAILED:
            failed += 1
            continue
        kind = source.kind
        data = source.path.read_bytes()
        final = result.new_bytes if result.new_bytes is not None else data
        before = _hits(kind, str(source.path), data)
        row = rows[kind]
        row["files"] += 1
        row["found"] += len(before)
        if result.new_bytes is not None:
            row["rewritten"] += len(before & _changed(data, final))
        after = _hits(kind, str(source.path), final)
        specific: set[int] = set()
        residual: set[int] = set()
        for f in result.findings:
            findings.append(f)
            row["findings"] += 1
            if f.code == RESIDUAL[0]:
                row["cn902"] += 1
                residual.add(f.span.start_line)
            elif not f.applied:
                specific.update(range(f.span.start_line, f.span.end_line + 1))
        row["left"] += len(after)
        row["specific"] += len(after & specific)
        row["residual"] += len(after & residual - specific)
        row["excused"] += len(after - specific - residual)
    return rows, findings, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo", type=Path)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--target", default="neuron", choices=("neuron", "accelerator"))
    parser.add_argument("--list", metavar="CODE", help="list the findings of this rule code")
    args = parser.parse_args()
    rows, findings, failed = census(args.repo.resolve(), args.jobs, args.target)
    columns = ("files", "found", "rewritten", "left", "specific", "residual", "excused", "findings", "cn902")
    print(f"{args.repo.name} ({args.target}), {failed} failed")
    print(f"{'kind':<13}" + "".join(f"{c:>10}" for c in columns))
    total: Counter = Counter()
    for kind in sorted(rows):
        total.update(rows[kind])
        print(f"{kind:<13}" + "".join(f"{rows[kind][c]:>10}" for c in columns))
    print(f"{'total':<13}" + "".join(f"{total[c]:>10}" for c in columns))
    share = total["cn902"] / total["findings"] if total["findings"] else 0.0
    print(f"CN902 share of all findings: {share:.1%}")
    if args.list:
        for f in findings:
            if f.code == args.list:
                print(f"  {f.path}:{f.span.start_line}: {f.message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
