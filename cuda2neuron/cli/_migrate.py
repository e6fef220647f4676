"""`cuda2neuron migrate`: rewrite a project in place, as a diff, or into a copy."""

from __future__ import annotations

from pathlib import Path

import click

from cuda2neuron.core import FileStatus, RunOptions
from cuda2neuron.workspace import (
    PORT_MARKER,
    PortError,
    check_out_dir,
    discover,
    with_project_facts,
    write_in_place,
    write_port,
)
from cuda2neuron.report import REPORT_SUFFIXES, ValidationReportError, build_report, load_validation, write_report

from ._common import EXIT_CLEAN, EXIT_FINDINGS, UsageError, err_console, load_run_config, out_console
from ._git import git_state
from ._options import apply_file_overrides, apply_overrides, cache_options, colour_option, file_options, result_cache, rule_options
from ._progress import run_with_progress
from ._render import print_diff, print_summary

__all__ = ["PORT_MARKER", "migrate_command"]

@click.command("migrate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff and write nothing.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), help="Write a migrated copy of the tree here; the source is untouched.")
@click.option("--allow-dirty", is_flag=True, help="Rewrite files that have uncommitted git changes.")
@click.option("--allow-no-vcs", is_flag=True, help="Rewrite in place outside a git work tree (no way back!).")
@click.option("--report", "report_path", type=click.Path(path_type=Path), help="Write the full report: .md, .json, .sarif or .html (one self-contained page).")
@click.option("--validate-report", "validate_report", type=click.Path(path_type=Path, dir_okay=False),
              help="With --report x.html: a JSON report from `validate --report v.json`, shown as the page's verdict table and first divergence.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), help="Worker processes (default: CPU count).")
@click.option("--quiet", "-q", is_flag=True, help="Only errors on stderr.")
@cache_options
@file_options
@colour_option
@rule_options
def migrate_command(paths, show_diff, out_dir, allow_dirty, allow_no_vcs, report_path, validate_report, jobs, quiet, **opts):
    """Port CUDA-specific PyTorch code in PATHS to the neuron device.

    Rewrites in place (git-tracked, clean files only), or with --diff shows the changes, or with
    --out writes a migrated copy. Never imports or runs your code. Exit 0 when every file was
    processed, 1 when a file failed (or, with --diff, when there are changes), 2 on usage or
    configuration errors. Ends with the next steps: review, validate, what is left.

    \b
    Examples:
      cuda2neuron migrate --diff .             show what would change (exit 1 if anything)
      cuda2neuron migrate .                    rewrite in place (a clean git tree)
      cuda2neuron migrate src --out ../port    write a migrated copy, source untouched
      cuda2neuron migrate . --report port.html also write the full report (.md/.json/.sarif/.html)
    """
    if show_diff and out_dir is not None:
        raise UsageError("--diff and --out exclude each other")
    if report_path is not None and report_path.suffix.lower() not in REPORT_SUFFIXES:
        raise UsageError(f"{report_path}: report format is chosen by extension: .md, .json, .sarif or .html")
    validation = _read_validation(validate_report, report_path)
    port_state = None
    if out_dir is not None:
        # Before anything is read or written: a source inside DIR, DIR a file or a link, DIR
        # holding anything but an unchanged port of ours are all refused here.
        try:
            port_state = check_out_dir(out_dir, list(paths))
        except PortError as exc:
            raise UsageError(str(exc)) from None
    config = apply_overrides(load_run_config(list(paths), opts.pop("config_file")), opts, list(paths))
    config = apply_file_overrides(config, opts)
    cache = result_cache(opts)
    found = discover(
        paths,
        exclude=config.exclude,
        exclude_root=config.root,
        # An --out folder inside the source is never read as source (now, nor later: its
        # marker file keeps every later walk out of it).
        extra_pruned=[out_dir] if out_dir is not None else [],
    )
    errors = [s for s in found.skipped if s.error]
    if errors:
        raise UsageError("; ".join(f"{s.path}: {s.reason}" for s in errors))
    config = with_project_facts(config, found.files)
    options = RunOptions.from_config(config, fix=True)
    results = run_with_progress(
        found.files, config, options, jobs=jobs, quiet=quiet, verb="migrating", cache=cache
    )
    changed = [r for r in results if r.status is FileStatus.CHANGED]
    skipped = found.skipped
    if show_diff:
        for r in changed:
            print_diff(out_console, r)
        wrote = "would change"
    elif port_state is not None:
        try:
            not_copied = write_port(results, found.files, port_state, list(paths), config.settings.target)
        except PortError as exc:
            raise UsageError(str(exc)) from None
        skipped = (*skipped, *not_copied)
        wrote = f"changed (written to {out_dir})"
    else:
        _guard_in_place([Path(r.path) for r in changed], allow_dirty, allow_no_vcs)
        results = write_in_place(results)
        wrote = "changed"
    report = build_report("migrate", config.settings.target, results, skipped)
    if report_path is not None:
        rules = None
        if report_path.suffix.lower() == ".sarif":
            from cuda2neuron.kinds import catalog

            rules = catalog()
        try:
            write_report(report, report_path, rules=rules, validation=validation)
        except OSError as exc:
            done = "" if show_diff else " (the migration itself was written)"
            raise UsageError(f"{report_path}: cannot write the report: {exc.strerror or exc}{done}") from None
    if not quiet:
        mode = "diff" if show_diff else "out" if out_dir is not None else "in-place"
        print_summary(
            err_console, report, wrote, mode=mode, paths=[str(p) for p in paths],
            out_dir=None if out_dir is None else str(out_dir),
        )
    if report.failed:
        return EXIT_FINDINGS
    # --diff is a check (ruff, black): printing changes is exit 1, so CI can gate on it.
    return EXIT_FINDINGS if show_diff and changed else EXIT_CLEAN


def _read_validation(path: Path | None, report_path: Path | None) -> dict | None:
    """The validate report for the HTML page, read before anything is rewritten."""
    if path is None:
        return None
    if report_path is None or REPORT_SUFFIXES.get(report_path.suffix.lower()) != "html":
        raise UsageError("--validate-report goes into an HTML report: add --report FILE.html")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the validate report: {exc}") from None
    try:
        return load_validation(text, str(path))
    except ValidationReportError as exc:
        raise UsageError(str(exc)) from None


def _guard_in_place(files: list[Path], allow_dirty: bool, allow_no_vcs: bool) -> None:
    if not files or (allow_dirty and allow_no_vcs):
        return
    state = git_state(files)
    if state.unknown:
        # git failed: nobody can tell whether there is a way back, so the guard fails closed.
        # Only both overrides together (no way back accepted, changes accepted) go past it.
        path, message = state.unknown[0]
        more = f" (and {len(state.unknown) - 1} more file(s))" if len(state.unknown) > 1 else ""
        raise UsageError(
            f"refusing to rewrite {path}{more}: git cannot tell whether it has uncommitted changes: {message}. "
            "Repair the repository, or use --out DIR, --diff, or --allow-dirty --allow-no-vcs."
        )
    if state.outside and not allow_no_vcs:
        raise UsageError(
            f"refusing to rewrite {len(state.outside)} file(s) outside a git work tree "
            f"(e.g. {state.outside[0]}): there would be no way back. Use --out DIR, --diff, "
            "or --allow-no-vcs."
        )
    if state.dirty and not allow_dirty:
        listed = ", ".join(state.dirty[:5]) + (" ..." if len(state.dirty) > 5 else "")
        raise UsageError(
            f"refusing to rewrite files with uncommitted changes (or untracked, or hidden from git status by "
            f"--skip-worktree/--assume-unchanged): {listed}. Commit or stash them, or use --allow-dirty."
        )


