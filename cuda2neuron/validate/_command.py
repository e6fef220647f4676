"""The `cuda2neuron validate` click command (registered by the CLI with `cli.add_command`).

Only this module prints: a rich summary on stderr for people, `--report FILE` (Markdown or
JSON by extension) for machines and reviews. Exit codes: 0 pass (warnings allowed), 1 fail,
2 error (the original itself fails, the port crashes, timeout, bad arguments, entry not found).
"""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["validate_command"]

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

The reference run uses real CUDA when present, else a CUDA-on-CPU shim; the port runs on the
emulated neuron device (or real TorchNeuron when installed). Both are compared against a
float64 golden run of the original. Defaults come from [tool.cuda2neuron.validate] in the
project's pyproject.toml.
"""


class _ValidateCommand(click.Command):
    """Splits `-- ARGS` (the script's own arguments) off before click sees them."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            i = args.index("--")
            ctx.meta["cuda2neuron.script_args"] = tuple(args[i + 1:])
            args = args[:i]
        return super().parse_args(ctx, args)


def _parse_tolerances(items: tuple[str, ...]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint="--tolerance")
        try:
            out[name.strip().replace("-", "_")] = float(value)
        except ValueError:
            raise click.BadParameter(f"{value!r} is not a number", param_hint="--tolerance") from None
    return out


@click.command("validate", cls=_ValidateCommand, help=_HELP, short_help="Run original and port side by side and compare (runs your code).")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--entry", metavar="MODULE:CALLABLE", help="Entry mode: a callable in your code (CUDA terms).")
@click.option("--script", metavar="PATH", help="Script mode: a training script, relative to the tree root.")
@click.option("--steps", type=click.IntRange(min=1), help="Optimizer steps to run and compare (default 3).")
@click.option("--rev", metavar="REV", help="With one PATH: the git revision holding the original (default HEAD).")
@click.option("--report", "report_path", type=click.Path(path_type=Path), help="Write a report: .md or .json.")
@click.option("--timeout", type=click.FloatRange(min=1), help="Seconds for all runs together (default 600).")
@click.option("--seed", type=int, help="Seed for random, numpy and torch in every run (default 0).")
@click.option("--tolerance", "tolerances", multiple=True, metavar="NAME=VALUE",
              help="Override a tolerance: pass_factor, warn_factor, floor_<dtype>, residency_fail_share, ...")
@click.option("--no-golden", is_flag=True, help="Skip the float64 golden run; compare port and reference directly.")
@click.option("--port-device", type=click.Choice(["neuron", "cpu"]), default="neuron", hidden=True)
@click.pass_context
def validate_command(ctx: click.Context, paths: tuple[Path, ...], entry: str | None, script: str | None,
                     steps: int | None, rev: str | None, report_path: Path | None, timeout: float | None,
                     seed: int | None, tolerances: tuple[str, ...], no_golden: bool, port_device: str) -> None:
    from rich.console import Console

    from cuda2neuron.core import ConfigError, load_validate_table
    from cuda2neuron.validate._model import Tolerances
    from cuda2neuron.validate._trees import TreeError, resolve_trees

    console = Console(stderr=True)
    script_args: tuple[str, ...] = ctx.meta.get("cuda2neuron.script_args", ())
    if report_path is not None and report_path.suffix.lower() not in (".md", ".json"):
        raise click.BadParameter(f"{report_path}: the report must end in .md or .json", param_hint="--report")
    if not paths:
        raise click.UsageError("give ORIGINAL PORT, or one PATH inside a git repository")
    try:
        trees = resolve_trees(tuple(paths), rev)
    except TreeError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        try:
            config = load_validate_table(trees.port)
        except ConfigError as exc:
            raise click.UsageError(str(exc)) from None
        if entry and script:
            raise click.UsageError("--entry and --script are exclusive")
        if not entry and not script:
            entry, script = config.get("entry"), config.get("script")
            if not script_args:
                script_args = tuple(config.get("args", ()))
            if entry and script:
                raise click.UsageError("[tool.cuda2neuron.validate] sets both entry and script; pick one")
        if not entry and not script:
            raise click.UsageError("give --entry module:callable or --script train.py "
                                   "(or set entry/script in [tool.cuda2neuron.validate])")
        if script_args and not script:
            raise click.UsageError("arguments after -- are for --script only")
        try:
            tol = Tolerances().with_overrides(**{**config.get("tolerances", {}), **_parse_tolerances(tolerances)})
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--tolerance") from None
        from cuda2neuron.validate._report import to_json, to_markdown, to_rich
        from cuda2neuron.validate._runner import ValidateRequest, run_validation

        request = ValidateRequest(
            original=trees.original, port=trees.port, mode="entry" if entry else "script", entry=entry, script=script,
            args=script_args, steps=steps or int(config.get("steps", 3)), timeout=timeout or float(config.get("timeout", 600)),
            seed=seed if seed is not None else int(config.get("seed", 0)), golden=not no_golden,
            port_device=port_device, tolerances=tol, original_label=trees.original_label, port_label=trees.port_label,
        )
        with console.status("running original, golden and port ...", spinner="dots"):
            result = run_validation(request)
    finally:
        trees.cleanup()
    for part in to_rich(result):
        console.print(part)
    if report_path is not None:
        text = to_json(result) if report_path.suffix.lower() == ".json" else to_markdown(result)
        try:
            report_path.write_text(text, encoding="utf-8")
        except OSError as exc:
            console.print(f"[red]cannot write report {report_path}: {exc}[/red]")
            ctx.exit(2)
        console.print(f"report written to {report_path}", style="dim")
    ctx.exit(result.exit_code)


