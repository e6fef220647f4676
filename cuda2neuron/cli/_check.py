"""`cuda2neuron check`: findings only, linter exit codes, optional --fix (pre-commit's hooks)."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import click

from cuda2neuron.core import FileStatus, RunOptions, printable
from cuda2neuron.kinds import catalog, kind_of, process_kind
from cuda2neuron.workspace import (
    Baseline,
    BaselineError,
    apply_baseline,
    discover,
    with_project_facts,
    write_baseline,
    write_in_place,
)
from cuda2neuron.report import OUTPUT_FORMATS, build_report, render

from ._colour import colour_allowed, coloured_findings
from ._common import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, UsageError, err_console, load_run_config, out_console
from ._console import Console
from ._options import apply_file_overrides, apply_overrides, cache_options, colour_option, file_options, result_cache, rule_options
from ._render import settings_text
from ._progress import run_with_progress
from ._render import print_diff, print_finding, print_statistics

__all__ = ["check_command"]

_HELP = """Report CUDA-isms in PATHS ('-' reads stdin); with --fix, rewrite what is safe to.

Exit 0 when clean (or --fix fixed everything), 1 when findings remain (or --diff printed
changes), 2 on usage, configuration or internal errors, or a file that failed (ruff's codes).
With no PATHS the current folder is checked (ruff); under pre-commit (its hooks, or PRE_COMMIT=1)
no PATHS means no files to check. Never imports or runs your code.

\b
Examples:
  cuda2neuron check .                          findings, one a line
  cuda2neuron check --fix .                    apply safe fixes, list what is left
  cuda2neuron check --diff .                   show the fixes as a diff, write nothing
  cuda2neuron check --statistics .             findings per rule
  cuda2neuron check --select CN1,CN301 src     only these rules (unknown codes are errors)
  cuda2neuron check --write-baseline .cuda2neuron-baseline.json .
  cuda2neuron check --baseline .cuda2neuron-baseline.json .   only new findings fail
  cuda2neuron check --output-format sarif --output-file c2n.sarif .
"""


@click.command("check", help=_HELP)
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path, allow_dash=True))
@click.option("--fix", is_flag=True, help="Apply safe fixes in place (and unsafe ones with --unsafe-fixes).")
@click.option("--diff", "show_diff", is_flag=True, help="Print the fixes --fix would apply as a diff; write nothing (exit 1 if any).")
@click.option("--show-fixes", is_flag=True, help="With --fix, list the findings it fixed; without, show each fixable finding's fix.")
@click.option("--statistics", is_flag=True, help="Print how many findings each rule has, instead of the findings.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain (2 still means an error).")
@click.option("--exit-non-zero-on-fix", is_flag=True, help="With --fix, exit 1 when a file was changed, even if nothing remains (ruff).")
# Our pre-commit hooks pass it (.pre-commit-hooks.yaml): their PATHS are pre-commit's file list,
# and an empty list means nothing to check, never the whole folder.
@click.option("--from-pre-commit", is_flag=True, hidden=True)
@click.option(
    "--output-format",
    type=click.Choice(OUTPUT_FORMATS),
    default="text",
    show_default=True,
    help="How findings are written: text/full (with the source), concise, json, json-lines, sarif, "
    "github, gitlab, junit, html (docs/output-formats.md).",
)
@click.option("--output-file", "-o", type=click.Path(path_type=Path, dir_okay=False), help="Write the findings (in --output-format) to this file instead of stdout.")
@click.option("--quiet", "-q", is_flag=True, help="Print the findings only: no summary, no progress.")
@click.option("--baseline", "baseline_path", type=click.Path(path_type=Path, dir_okay=False), help="Leave out the findings this baseline file lists (written by --write-baseline): only new ones fail.")
@click.option("--write-baseline", "write_baseline_path", type=click.Path(path_type=Path, dir_okay=False), help="Record every current finding in this baseline file and exit 0.")
@click.option("--stdin-filename", help="File name to report for source read from stdin ('-').")
@click.option("--jobs", "-j", type=click.IntRange(min=1), help="Worker processes (default: CPU count).")
@click.option("--show-settings", is_flag=True, help="Print the settings this run would use (and where they come from), and exit.")
@click.option("--show-files", is_flag=True, help="Print the files this run would check, one a line, and exit.")
@cache_options
@file_options
@colour_option
@rule_options
def check_command(
    paths, fix, show_diff, show_fixes, statistics, exit_zero, exit_non_zero_on_fix, from_pre_commit, output_format,
    output_file, quiet, baseline_path, write_baseline_path, stdin_filename, jobs, show_settings, show_files, **opts,
):
    if fix and show_diff:
        raise UsageError("--fix and --diff exclude each other (--diff writes nothing)")
    if baseline_path is not None and write_baseline_path is not None:
        raise UsageError("--baseline and --write-baseline exclude each other")
    # pre-commit runs a hook with no files only where a user's config forces it (always_run):
    # that is nothing to check, not the whole repository. Elsewhere no PATHS is "." (ruff).
    nothing_given = not paths and bool(from_pre_commit or os.environ.get("PRE_COMMIT"))
    if not paths and not nothing_given:
        paths = (Path("."),)
    named = [p for p in paths if str(p) != "-"]
    config = apply_overrides(load_run_config(named, opts.pop("config_file")), opts, named)
    config = apply_file_overrides(config, opts)
    cache = result_cache(opts)
    if show_settings:
        out_console.file.write(settings_text(config))
        return EXIT_CLEAN
    baseline = None
    if baseline_path is not None:
        try:
            baseline = Baseline.load(baseline_path)
        except BaselineError as exc:
            raise UsageError(str(exc)) from None
    if nothing_given:
        if not quiet:
            err_console.say("no files to check")
        return EXIT_CLEAN
    if any(str(p) == "-" for p in paths):
        if len(paths) > 1:
            raise UsageError("'-' (stdin) cannot be combined with other paths")
        return _check_stdin(config, fix, output_format, stdin_filename or "<stdin>.py")
    found = discover(paths, exclude=config.exclude, exclude_root=config.root)
    errors = [s for s in found.skipped if s.error]
    if errors:
        raise UsageError("; ".join(f"{s.path}: {s.reason}" for s in errors))
    if show_files:
        out_console.file.write("".join(f"{printable(str(f.path))}\n" for f in sorted(found.files, key=lambda f: str(f.path))))
        return EXIT_CLEAN
    config = with_project_facts(config, found.files)
    options = RunOptions.from_config(config, fix=fix or show_diff)
    results = run_with_progress(
        found.files, config, options, jobs=jobs, quiet=quiet or output_format not in _PEOPLE, verb="checking",
        cache=cache,
    )
    if write_baseline_path is not None:
        n = write_baseline(results, write_baseline_path)
        if not quiet:
            err_console.say(f"wrote {n} finding(s) to the baseline {write_baseline_path}")
        failed = [r for r in results if r.status is FileStatus.FAILED]
        for r in failed:
            _say_failure(r)
        return EXIT_ERROR if failed else EXIT_CLEAN
    if show_diff:
        changed = [r for r in results if r.status is FileStatus.CHANGED]
        for r in changed:
            print_diff(out_console, r)
        if not quiet:
            err_console.say(f"{len(changed)} file(s) would be changed by --fix" + ("" if config.unsafe_fixes else " (more with --unsafe-fixes)" if _unsafe_left(results) else ""))
        return EXIT_FINDINGS if changed else EXIT_CLEAN
    if fix:
        results = write_in_place(results)
    hidden = 0
    if baseline is not None:
        results, hidden = apply_baseline(results, baseline)
    report = build_report("check", config.settings.target, results, found.skipped)
    with _output(output_file) as out:
        _emit(report, output_format, out, unsafe=config.unsafe_fixes, show_fixes=show_fixes, statistics=statistics)
    if output_format in _PEOPLE and not quiet:
        err_console.say(_closing_line(report, fixed=fix, unsafe=config.unsafe_fixes, hidden=hidden))
    if report.failed:
        return EXIT_ERROR
    if exit_zero:
        return EXIT_CLEAN
    if report.remaining:
        return EXIT_FINDINGS
    # Everything fixed is clean (ruff); --exit-non-zero-on-fix makes a change itself fail.
    if exit_non_zero_on_fix and any(r.status is FileStatus.CHANGED for r in results):
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _unsafe_left(results) -> bool:
    from cuda2neuron.core import Safety

    return any(
        not f.applied and f.fix is not None and f.fix.safety is Safety.UNSAFE for r in results for f in r.findings
    )


@contextlib.contextmanager
def _output(path: Path | None):
    if path is None:
        yield out_console
        return
    try:
        fh = open(path, "w", encoding="utf-8", newline="\n")
    except OSError as exc:
        raise UsageError(f"{path}: cannot write the output file: {exc.strerror or exc}") from None
    with fh:
        yield Console(file=fh, soft_wrap=True)


def _closing_line(report, *, fixed: bool, unsafe: bool, hidden: int) -> str:
    """ruff's closing line: what is left, and what the flags would still do about it."""
    left = len(report.remaining)
    # "in M file(s)" counts the files that hold them; the files looked at are said apart.
    holding = len({f.path for f in report.remaining})
    where = f"in {holding} file(s) ({report.scanned} checked)"
    parts = [f"{left} finding(s) {where}"]
    if fixed:
        parts[0] = f"fixed {len(report.edits)}, {left} remaining {where}"
    safe, more = len(report.fixable), len(report.unsafe_fixable)
    if unsafe:
        safe, more = safe + more, 0
    if safe:
        parts.append(f"{safe} fixable with --fix" + (f" ({more} more with --unsafe-fixes)" if more else ""))
    elif more:
        parts.append(f"{more} fixable with --fix --unsafe-fixes")
    if report.manual:
        parts.append(f"{len(report.manual)} need a person")
    if hidden:
        parts.append(f"{hidden} known in the baseline, not shown")
    return "; ".join(parts)


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
            if not f.applied:
                print_finding(err_console, f, unsafe=config.unsafe_fixes)
    else:
        _emit(report, output_format, out_console, unsafe=config.unsafe_fixes, sources={name: data})
    if result.error is not None:
        return EXIT_ERROR
    remaining = [f for f in result.findings if not f.applied]
    return EXIT_FINDINGS if remaining or (not fix and result.findings) else EXIT_CLEAN


def _say_failure(r) -> None:
    assert r.error is not None
    where = f"{r.path}:{r.error.line}" if r.error.line else r.path
    err_console.say(("error:", "bold red"), f" {where}: {r.error.kind}: {r.error.message}")


# The formats for people: a closing line and failures on stderr go with them.
_PEOPLE = ("text", "full", "concise")


def _emit(
    report, output_format: str, out: Console, *, unsafe: bool, show_fixes: bool = False, statistics: bool = False,
    sources=None,
) -> None:
    if output_format in _PEOPLE and statistics:
        print_statistics(out, report)
    else:
        rules = catalog() if output_format == "sarif" else None
        text = render(report, output_format, unsafe_fixes=unsafe, sources=sources, rules=rules, show_fixes=show_fixes)
        if output_format in _PEOPLE:
            text = printable(text)  # a file name or a source line may hold ESC: never sent raw
        if output_format in _PEOPLE and text and colour_allowed(out):
            out.rich.print(coloured_findings(text), end="", soft_wrap=True)
        else:
            out.file.write(text)
        out.file.flush()  # the findings before the closing line on stderr, on a terminal too
    if output_format in _PEOPLE:
        for r in report.failed:
            _say_failure(r)
