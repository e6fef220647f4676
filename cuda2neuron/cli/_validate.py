"""`cuda2neuron validate`: run the original and the port side by side and compare them.

The engine (`cuda2neuron.validate`) returns a frozen `ValidationResult`; this command prints it:
a rich summary on stderr for people, the verdict as one `key=value` line on stdout for pipes and
CI, `--report FILE` (Markdown, JSON or HTML by extension) for machines and reviews. Exit codes: 0 pass (warnings allowed), 1 fail, 2 error (the original
itself fails, the port crashes, timeout, bad arguments, entry not found).

Loaded only when invoked (`_LAZY` in cli/__init__.py), and what needs torch is imported only
once the arguments are known to be good.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cuda2neuron.validate import ValidationResult, Verdict

from ._common import EXIT_ERROR, UsageError, err_console, out_console

__all__ = ["to_rich", "validate_command"]

_HELP = """Prove a port: RUN the original and the ported code side by side and compare them.

\b
WARNING: this command executes your code — both the original and the port, each in its
own subprocess. Only run it on code you trust.

\b
Trees:  ORIGINAL PORT        the pair written by `cuda2neuron migrate --out PORT`
        PATH [--rev REV]     one path in a git repository migrated in place; the original
                             is read from git revision REV (default HEAD) into a temp folder

\b
Modes:  --entry module:callable   build() returns (model, inputs[, optimizer]), a dict with
                                  model/inputs/optimizer, or a training-step function
        --script train.py -- ARGS run the script unmodified, record the first --steps steps
        --nproc N                 distributed: N ranks per run, each run its own rendezvous
                                  (or --script torchrun -- --nproc_per_node=N train.py ARGS)

\b
Examples:
  cuda2neuron validate examples/cnn_cuda /tmp/cnn_neuron --entry validate_entry:build
  cuda2neuron validate src port --script train.py -- --steps 3
  cuda2neuron validate . --rev HEAD~1 --entry validate_entry:build   (after an in-place migrate)

The reference run uses real CUDA when present, else a CUDA-on-CPU shim; the port runs on the
emulated neuron device (or real TorchNeuron when installed). Both are compared against a
float64 golden run of the original. An original under fp16/bf16 autocast is also run, with the
port, once more with autocast off: "logic PASS · precision PASS" judges the code and the
precision policy apart. The verdict goes to stdout as one line; the summary to stderr. Defaults come from [tool.cuda2neuron.validate] in the
project's pyproject.toml.
"""

# Shown while the runs go; the runner's progress replaces it.
_STARTING = "running original, golden and port ..."


class _ValidateCommand(click.Command):
    """Splits `-- ARGS` (the script's own arguments) off before click sees them."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            i = args.index("--")
            ctx.meta["cuda2neuron.script_args"] = tuple(args[i + 1:])
            args = args[:i]
        return super().parse_args(ctx, args)


def _require_torch() -> None:
    """validate runs the code with torch: without the [validate] extra it is a setup error (exit
    2, one line saying what to install), never a traceback with exit 1, which means "the port
    fails" to CI."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        from cuda2neuron.backend import INSTALL_HINT

        raise UsageError(f"`cuda2neuron validate` runs your code with torch, which is not installed here; "
                         f"install it: {INSTALL_HINT}")


def _say_line(line: str) -> None:
    err_console.say(f"cuda2neuron validate: {line}", soft_wrap=True)
    err_console.file.flush()


def _on_terminal(status: Any) -> Any:
    """The spinner shows what runs now; a build's first and last lines stay in the scrollback,
    so a terminal keeps the record a log would (what was built, the estimate, the time)."""

    from cuda2neuron.backend._build import BUILD_ENDS, BUILD_STARTS

    def update(line: str) -> None:
        if line.startswith((BUILD_STARTS, BUILD_ENDS)):
            status.console.print(f"cuda2neuron validate: {line}", highlight=False, markup=False, soft_wrap=True)
        status.update(line)

    return update


def _bad_value(option: str, message: str) -> UsageError:
    # The wording of click's BadParameter, so these read like the errors click makes itself.
    return UsageError(f"Invalid value for '{option}': {message}")


def _parse_tolerances(items: tuple[str, ...]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise _bad_value("--tolerance", f"expected NAME=VALUE, got {item!r}")
        try:
            out[name.strip().replace("-", "_")] = float(value)
        except ValueError:
            raise _bad_value("--tolerance", f"{value!r} is not a number") from None
    return out


def _terminate_as_interrupt() -> None:
    """SIGTERM (a CI job cancelled, ``timeout``, ``kill``) ends validate as Ctrl-C does: its
    runs are killed and its temp folders removed on the way out. Python's default for SIGTERM
    ends the process on the spot, and every run's temp folder stayed behind."""
    import signal
    import threading

    def interrupt(_signum, _frame):  # noqa: ANN001
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


@click.command("validate", cls=_ValidateCommand, help=_HELP, short_help="Run original and port side by side and compare (runs your code).")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--entry", metavar="MODULE:CALLABLE", help="Entry mode: a callable in your code (CUDA terms).")
@click.option("--script", metavar="PATH", help="Script mode: a training script, relative to the tree root.")
@click.option("--steps", type=click.IntRange(min=1), help="Optimizer steps to run and compare (default 3).")
@click.option("--rev", metavar="REV", help="With one PATH: the git revision holding the original (default HEAD).")
@click.option("--report", "report_path", type=click.Path(path_type=Path), help="Write a report: .md, .json or .html (one self-contained page).")
@click.option("--timeout", type=click.FloatRange(min=1), help="Seconds for all runs together (default 600).")
@click.option("--seed", type=int, help="Seed for random, numpy and torch in every run (default 0).")
@click.option("--tolerance", "tolerances", multiple=True, metavar="NAME=VALUE",
              help="Override a tolerance: pass_factor, warn_factor, floor_<dtype>, residency_fail_share, ...")
@click.option("--nproc", type=click.IntRange(min=1), metavar="N",
              help="Distributed: run each side as N ranks, launched like torchrun --nproc_per_node=N "
                   "(the original on gloo, the port on the neuron process group).")
@click.option("--no-golden", is_flag=True, help="Skip the float64 golden run; compare port and reference directly.")
@click.option("--no-logic", is_flag=True, default=None,
              help="Skip the logic pair (original and port once more with autocast off) that an fp16/bf16 "
                   "autocast original gets.")
@click.option("--logic-steps", type=click.IntRange(min=1), metavar="N",
              help="Optimizer steps the logic pair takes and compares (default 2; steps the original's "
                   "GradScaler skipped do not count).")
@click.option("--fail-on", type=click.Choice(["fail", "warn"]), default=None,
              help="Least severe verdict that exits 1: fail (default) or warn (for CI).")
@click.option("--port-device", type=click.Choice(["neuron", "cpu"]), default="neuron", hidden=True)
@click.pass_context
def validate_command(ctx: click.Context, paths: tuple[Path, ...], entry: str | None, script: str | None,
                     steps: int | None, rev: str | None, report_path: Path | None, timeout: float | None,
                     seed: int | None, tolerances: tuple[str, ...], no_golden: bool, fail_on: str | None,
                     port_device: str, nproc: int | None, no_logic: bool | None,
                     logic_steps: int | None) -> None:
    from cuda2neuron.core import ConfigError, load_validate_table
    from cuda2neuron.validate._request import RequestError, build_request
    from cuda2neuron.validate._trees import TreeError, resolve_trees

    _require_torch()
    script_args: tuple[str, ...] = ctx.meta.get("cuda2neuron.script_args", ())
    if report_path is not None and report_path.suffix.lower() not in (".md", ".json", ".html"):
        raise _bad_value("--report", f"{report_path}: the report must end in .md, .json or .html")
    overrides = _parse_tolerances(tolerances)
    if not paths:
        raise UsageError("give ORIGINAL PORT, or one PATH inside a git repository")
    try:
        trees = resolve_trees(tuple(paths), rev)
    except TreeError as exc:
        raise UsageError(str(exc)) from None
    try:
        try:
            table = load_validate_table(trees.port)
            request = build_request(
                trees, table, entry=entry, script=script, args=script_args, steps=steps, timeout=timeout, seed=seed,
                tolerances=overrides, golden=not no_golden, port_device=port_device, nproc=nproc, fail_on=fail_on,
                logic=False if no_logic else None, logic_steps=logic_steps,
            )
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        except RequestError as exc:
            raise (_bad_value(exc.option, str(exc)) if exc.option else UsageError(str(exc))) from None
        for note in trees.notes:
            err_console.say((f"note: {note}", "dim"), soft_wrap=True)
        # Imports torch (for the comparisons): only now that the arguments are known to be good.
        from cuda2neuron.validate import run_validation

        _terminate_as_interrupt()
        if err_console.is_terminal:
            with err_console.rich.status(_STARTING, spinner="dots") as status:
                result = run_validation(request, on_progress=_on_terminal(status))
        else:
            # A pipe (CI logs, pre-commit): no spinner to update, so every step is a line of
            # its own; an emulator build (1-2.5 min cold) says how far it is every few seconds
            # instead of leaving the log silent.
            result = run_validation(request, on_progress=_say_line)
    finally:
        trees.cleanup()
    for part in to_rich(result):
        err_console.print(part)
    from cuda2neuron.validate._report import verdict_line

    # The verdict for pipes and CI, on stdout (people's summary above is on stderr).
    out_console.say(verdict_line(result))
    if report_path is not None:
        from cuda2neuron.validate._report import to_json, to_markdown

        suffix = report_path.suffix.lower()
        if suffix == ".html":
            # The page reads the same data the JSON report holds (migrate's HTML report takes it
            # from the file), so the two can never disagree.
            from cuda2neuron.report import load_validation, to_html

            text = to_html(None, load_validation(to_json(result), str(report_path)))
        else:
            text = to_json(result) if suffix == ".json" else to_markdown(result)
        try:
            report_path.write_text(text, encoding="utf-8")
        except OSError as exc:
            err_console.say(("error:", "bold red"), f" {report_path}: cannot write the report: {exc.strerror or exc}")
            ctx.exit(EXIT_ERROR)
        err_console.say((f"report written to {report_path}", "dim"))
    # ctx.exit, not a return value: click's standalone mode (CliRunner, the console script)
    # ignores what a command returns.
    ctx.exit(result.exit_code)


# -- the summary people read ------------------------------------------------------------------

_STYLE = {Verdict.PASS: "bold green", Verdict.WARN: "bold yellow", Verdict.FAIL: "bold red", Verdict.ERROR: "bold red"}


_SHORT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64"}


def _short(dtype: str) -> str:
    return _SHORT.get(dtype, dtype)


def _hand_edits_rich(text: Any, edits: Any, indent: str) -> None:
    if not edits:
        return
    text.append(f"{indent}port lines migrate did not write (edited by hand after migrate):\n")
    for h in edits:
        text.append(f"{indent}  {h.kind:7s} ", style="bold magenta")
        text.append(f"{h.path}:{h.line}  {h.text}\n")


def to_rich(result: ValidationResult) -> list[Any]:
    """Renderables for a rich Console (stderr)."""
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    from cuda2neuron.validate._report import format_locations, format_value, headline, not_passing, residency_line

    parts: list[Any] = []
    head = Text()
    head.append(f"{result.verdict.value}", style=_STYLE[result.verdict])
    for i, (check, verdict) in enumerate(result.checks().items()):
        head.append(f"{' ·' if i else ' '} {check} ")
        head.append(verdict.value, style=_STYLE[verdict])
    head.append(f"  {result.mode} `{result.target}`\n")
    head.append(headline(result).split("  —  ")[-1])
    lines = [head, Text(f"original  {result.original}", style="dim"), Text(f"port      {result.port}", style="dim")]
    for run in result.runs:
        lines.append(Text(f"{run.role:9s} {run.device}  ({run.records} records, {run.seconds:.1f} s)", style="dim"))
    for note in result.notes:
        lines.append(Text(f"note: {note}", style="yellow"))
    parts.append(Panel(Text("\n").join(lines), title="cuda2neuron validate", expand=False))
    for f in result.failures:
        body = Text(f.message + ("\n\n" + f.traceback.rstrip() if f.traceback else ""))
        title = f"port defect: {f.role} raised at {f.location}" if f.kind == "defect" else f"error: {f.role} — {f.kind}"
        parts.append(Panel(body, title=title, border_style="red", expand=False))
    d = result.divergence
    if d is not None:
        t = Text()
        t.append(f"{d.key}", style="bold")
        t.append(f" ({d.kind}, step {d.step}): {d.reason}\n")
        if d.module_path:
            t.append(f"module {d.module_path} ({d.module_class or '?'})\n")
        if d.class_file:
            t.append(f"source {d.class_file}" + (f":{d.class_lines[0]}-{d.class_lines[1]}" if d.class_lines else "") + "\n")
        t.append(f"migrate edits in {d.findings_scope}:\n" if d.findings else f"no migrate edits in {d.findings_scope}\n")
        for e in d.findings:
            t.append(f"  {e.code} ", style="bold cyan")
            t.append(f"{e.path}:{e.line}:{e.col} {e.name} — {e.message}\n")
        _hand_edits_rich(t, d.hand_edits, "")
        parts.append(Panel(t, title="first divergence", border_style="red", expand=False))
    rows, more = not_passing(result)
    if rows:
        split = bool(result.checks())
        table = Table(title="tensors that did not pass", show_lines=False)
        table.add_column("verdict", no_wrap=True)
        if split:
            table.add_column("check", no_wrap=True)
        # Folded, never cut: two tensors must not read as one ("s0/grad/0:transformer.h.0.attn…").
        # The reason states the error and its bound: no separate "max abs" column, so that the
        # table still fits an 80-column CI log.
        table.add_column("tensor", overflow="fold", ratio=3, min_width=14)
        table.add_column("dtype")
        table.add_column("cos→golden")
        table.add_column("reason", overflow="fold", ratio=4, min_width=14)
        for c in rows:
            cells = [Text(c.verdict.value, style=_STYLE[c.verdict]), *([c.check] if split else []), c.key,
                     f"{_short(c.dtype_ref)}→{_short(c.dtype_port) if c.dtype_port else '-'}",
                     format_value(c.port_cosine), c.reason]
            table.add_row(*cells)
        if more:
            table.caption = f"… {more} more not shown — every one is in --report FILE.json / .md / .html"
        parts.append(table)
    a = result.audit
    if a is not None:
        if not a.available:
            parts.append(Text(f"residency: {a.note}", style="dim"))
        else:
            t = Text()
            t.append(f"residency {a.verdict.value}", style=_STYLE[a.verdict])
            t.append(f": {residency_line(a)}\n")
            for r in a.reasons:
                t.append(f"  {r}\n")
            for r in a.expected_host_work:
                t.append(f"  expected host work: {r}\n", style="dim")
            for op in a.fallback_ops:
                t.append(f"  would run on the host on Trainium: {op.op} x{op.count} at {format_locations(op.locations)}\n")
            for label, ops in (("float64", a.float64_op_details), ("complex", a.complex_op_details)):
                for op in ops[:10]:
                    t.append(f"  {label} on the device: {op.op} x{op.count} at {format_locations(op.locations)}\n",
                             style="dim")
            for op in a.cpu_op_details[:10]:
                t.append(f"  CPU {op.op} x{op.count} ({op.elements} el) at {format_locations(op.locations)}\n", style="dim")
            _hand_edits_rich(t, a.hand_edits, "  ")
            parts.append(t)
    return parts
