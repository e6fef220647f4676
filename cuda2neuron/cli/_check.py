"""`cuda2neuron check`: findings only, linter exit codes, optional --fix (pre-commit's hooks)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cuda2neuron.core import FileStatus, RunOptions
from cuda2neuron.kinds import catalog, kind_of, process_kind
from cuda2neuron.workspace import ResultCache, discover, with_project_facts, write_in_place
from cuda2neuron.report import build_report, to_json, to_sarif

from ._common import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, UsageError, err_console, load_run_config, out_console
from ._options import apply_overrides, rule_options
from ._progress import run_with_progress
from ._render import print_finding

__all__ = ["check_command"]


@click.command("check")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path, allow_dash=True))
@click.option("--fix", is_flag=True, help="Apply safe fixes in place (and unsafe ones with --unsafe-fixes).")
@click.option("--output-format", type=click.Choice(["text", "json", "sarif"]), default="text", show_default=True)
@click.option("--stdin-filename", help="File name to report for source read from stdin ('-').")
@click.option("--jobs", "-j", type=click.IntRange(min=1), help="Worker processes (default: CPU count).")
@click.option("--no-cache", is_flag=True, help="Process every file again instead of reusing results for unchanged files.")
@rule_options
def check_command(paths, fix, output_format, stdin_filename, jobs, no_cache, **opts):
    """Report CUDA-isms in PATHS ('-' reads stdin).

    Exit 0 when clean, 1 when something was found (or fixed), 2 on usage, configuration or
    internal errors. With no PATHS nothing is checked (pre-commit may call it with no files).
    Never imports or runs your code.
    """
    config = apply_overrides(
        load_run_config([p for p in paths if str(p) != "-"], opts.pop("config_file")),
        opts,
        [p for p in paths if str(p) != "-"],
    )
    if not paths:
        err_console.say("no files to check")
        return EXIT_CLEAN
    if any(str(p) == "-" for p in paths):
        if len(paths) > 1:
            raise UsageError("'-' (stdin) cannot be combined with other paths")
        return _check_stdin(config, fix, output_format, stdin_filename or "<stdin>.py")
    found = discover(paths, exclude=config.exclude)
    errors = [s for s in found.skipped if s.error]
    if errors:
        raise UsageError("; ".join(f"{s.path}: {s.reason}" for s in errors))
    config = with_project_facts(config, found.files)
    options = RunOptions.from_config(config, fix=fix)
    results = run_with_progress(
        found.files, config, options, jobs=jobs, quiet=output_format != "text", verb="checking",
        cache=None if no_cache else ResultCache(),
    )
    if fix:
        results = write_in_place(results)
    report = build_report("check", config.settings.target, results, found.skipped)
    _emit(report, output_format)
    if report.failed:
        return EXIT_ERROR
    if any(r.findings for r in results) or any(r.status is FileStatus.CHANGED for r in results):
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _check_stdin(config, fix: bool, output_format: str, name: str) -> int:
    data = sys.stdin.buffer.read()
    kind = kind_of(Path(name))
    if kind is None:
        raise UsageError(f"{name}: not a file kind cuda2neuron handles; pass --stdin-filename x.py")
    result = process_kind(kind, name, data, config, RunOptions.from_config(config, fix=fix))
    report = build_report("check", config.settings.target, [result])
    if fix:
        # With --fix the fixed source is the output (editor integrations); findings go to stderr.
        sys.stdout.buffer.write(result.new_bytes if result.new_bytes is not None else data)
        sys.stdout.flush()
        for f in result.findings:
            print_finding(err_console, f)
    else:
        _emit(report, output_format)
    if result.error is not None:
        return EXIT_ERROR
    remaining = [f for f in result.findings if not f.applied]
    return EXIT_FINDINGS if remaining or (not fix and result.findings) else EXIT_CLEAN


def _emit(report, output_format: str) -> None:
    if output_format == "json":
        out_console.file.write(to_json(report))
        return
    if output_format == "sarif":
        out_console.file.write(to_sarif(report, catalog()))
        return
    for r in report.results:
        for f in r.findings:
            print_finding(out_console, f)
    for r in report.failed:
        assert r.error is not None
        where = f"{r.path}:{r.error.line}" if r.error.line else r.path
        err_console.say(("error", "red"), f" {where}: {r.error.kind}: {r.error.message}")
    fixed = len(report.edits)
    left = len(report.manual)
    err_console.say(f"{left} finding(s)" + (f", {fixed} fixed" if fixed else "") + f" in {report.scanned} file(s)")
