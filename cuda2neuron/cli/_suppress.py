"""`cuda2neuron suppress`: accept today's findings with suppression comments (ruff's add-noqa)."""

from __future__ import annotations

from pathlib import Path

import click

from cuda2neuron.core import FileStatus, RunOptions, atomic_write, remove_stale_temps
from cuda2neuron.workspace import add_suppressions, discover, process_files, with_project_facts

from ._common import EXIT_CLEAN, EXIT_ERROR, UsageError, err_console, load_run_config
from ._options import apply_overrides, rule_options

__all__ = ["suppress_command"]

_HELP = """Add `# cuda2neuron: ignore[CODE]` to every line of PATHS that has a finding.

For adopting the pre-commit hook on a large repository in one commit: today's findings are
accepted, new ones fail. Only line ends change (formatting and line endings are kept); running
it again changes nothing. Notebooks, CUDA sources and Dockerfiles are refused with the reason
(use per-file-ignores, or a baseline: `check --write-baseline`). Exit 0 when done, 2 when a file
failed or was refused. Never imports or runs your code.

\b
Examples:
  cuda2neuron suppress .                 comment every current finding
  cuda2neuron suppress --select CN6 src  only the ecosystem rules' findings
  cuda2neuron suppress --diff .          show the comments it would add, write nothing
"""


@click.command("suppress", help=_HELP)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--diff", "show_diff", is_flag=True, help="Print the comments as a diff; write nothing (exit 1 if any).")
@rule_options
def suppress_command(paths, show_diff, **opts):
    opts.pop("unsafe_fixes", None)
    config = apply_overrides(load_run_config(list(paths), opts.pop("config_file")), opts, list(paths))
    found = discover(paths, exclude=config.exclude, exclude_root=config.root)
    errors = [s for s in found.skipped if s.error]
    if errors:
        raise UsageError("; ".join(f"{s.path}: {s.reason}" for s in errors))
    config = with_project_facts(config, found.files)
    kinds = {str(f.path): f.kind for f in found.files}
    results = process_files(found.files, config, RunOptions())
    added = files = 0
    done_lines: dict[str, int] = {}
    bad = False
    changed = []
    for r in results:
        if r.status is FileStatus.FAILED:
            assert r.error is not None
            where = f"{r.path}:{r.error.line}" if r.error.line else r.path
            err_console.say(("error:", "bold red"), f" {where}: {r.error.kind}: {r.error.message}")
            bad = True
            continue
        if not r.findings:
            continue
        try:
            data = Path(r.path).read_bytes()
        except OSError as exc:
            err_console.say(("error:", "bold red"), f" {r.path}: cannot read: {exc.strerror or exc}")
            bad = True
            continue
        done = add_suppressions(data, kinds.get(r.path), r.findings)
        if done.refused:
            err_console.say(("error:", "bold red"), f" {r.path}: not suppressed: {done.refused}")
            bad = True
            continue
        if done.new_bytes is None:
            continue
        changed.append((r.path, data, done.new_bytes))
        done_lines[r.path] = done.lines
        added += done.lines
        files += 1
    if show_diff:
        from ._common import out_console
        from ._render import print_diff
        from cuda2neuron.core import FileResult

        for path, old, new in changed:
            print_diff(out_console, FileResult(path, FileStatus.CHANGED, new_bytes=new, old_bytes=old))
    else:
        cleaned: set[Path] = set()
        for path, old, new in changed:
            target = Path(path)
            if target.parent not in cleaned:
                cleaned.add(target.parent)
                remove_stale_temps(target.parent)
            try:
                if target.read_bytes() != old:
                    raise OSError("changed on disk during the run; not rewritten")
                atomic_write(target, new)
            except OSError as exc:
                # A full or read-only disk costs this file, named, not the run (nor a traceback).
                err_console.say(("error:", "bold red"), f" {path}: cannot write: {exc.strerror or exc}")
                bad = True
                files -= 1
                added -= done_lines[path]
    verb = "would add" if show_diff else "added"
    err_console.say(f"{verb} {added} suppression comment(s) in {files} file(s)")
    if bad:
        return EXIT_ERROR
    return 1 if show_diff and changed else EXIT_CLEAN
