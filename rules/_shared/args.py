"""Call arguments: find one by parameter name or position, build, add, remove or rename one."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

__all__ = ["add_kwarg", "arg_by_name", "as_keywords", "keyword_arg", "option_dest", "positional_args", "remove_arg", "rename_kwarg"]

_NO_SPACE = cst.SimpleWhitespace("")
_ONE_SPACE = cst.SimpleWhitespace(" ")


def positional_args(call: cst.Call | Sequence[cst.Arg]) -> list[cst.Arg]:
    args = call.args if isinstance(call, cst.Call) else call
    return [a for a in args if a.keyword is None and not a.star]


def arg_by_name(call: cst.Call | Sequence[cst.Arg], keyword: str, position: int | None = None) -> cst.Arg | None:
    """The argument bound to parameter ``keyword``: passed by keyword, or at ``position``.

    ``call`` is a call or its argument list (one being rebuilt, say). Without ``position`` only
    the keyword counts.
    """
    args = call.args if isinstance(call, cst.Call) else call
    for a in args:
        if a.keyword is not None and a.keyword.value == keyword:
            return a
    if position is not None:
        pos = positional_args(args)
        if any(a.star for a in args[: position + 1]):
            return None  # *args makes positions unknowable
        if position < len(pos):
            return pos[position]
    return None


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    """``name=value``: libcst's default ``AssignEqual`` renders ``k = v``; PEP 8 writes ``k=v``."""
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=_NO_SPACE, whitespace_after=_NO_SPACE),
    )


def add_kwarg(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """``call`` with ``name=value`` appended, keeping a multi-line call's layout."""
    args = list(call.args)
    new = keyword_arg(name, value)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        # A trailing comma (usually a multi-line call): the new argument takes it over and the
        # previous last argument gets the separator its neighbours use.
        new = new.with_changes(comma=last.comma)
        sep = args[-2].comma if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma) else None
        args[-1] = last.with_changes(comma=sep or cst.Comma(whitespace_after=_ONE_SPACE))
    else:
        # `f(\n    a, b=c\n)`: the line break before `)` is the last argument's; it moves to the
        # new one, which joins the others' layout (one per line, or all on one line).
        sep = args[-2].comma if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma) else None
        new = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
        args[-1] = last.with_changes(
            comma=sep or cst.Comma(whitespace_after=_ONE_SPACE), whitespace_after_arg=cst.SimpleWhitespace("")
        )
    return call.with_changes(args=[*args, new])


def remove_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """``call`` without ``arg``; the comma layout of what stays is kept."""
    args = list(call.args)
    index = next(i for i, a in enumerate(args) if a is arg)
    del args[index]
    if args and index == len(args):
        # The removed argument was the last one: its comma (trailing or none) moves up, so
        # `f(a, b=1)` becomes `f(a)` and not `f(a, )`.
        args[-1] = args[-1].with_changes(comma=arg.comma)
    return call.with_changes(args=args)


def rename_kwarg(arg: cst.Arg, name: str) -> cst.Arg:
    return arg.with_changes(keyword=cst.Name(name))


def as_keywords(call: cst.Call, params: tuple[str, ...]) -> list[cst.Arg] | None:
    """The call's arguments with positional ones turned into keywords named by ``params``.

    None when that is impossible (``*args``/``**kwargs`` or more positionals than parameters):
    the meaning of positions then cannot be read from the source.
    """
    out: list[cst.Arg] = []
    position = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            if position >= len(params):
                return None
            # Keep the argument's own comma: comments after it live in the comma's whitespace.
            out.append(keyword_arg(params[position], arg.value).with_changes(comma=arg.comma))
            position += 1
        else:
            out.append(arg)
    return out


def option_dest(call: cst.Call) -> str | None:
    """The attribute ``parser.add_argument(...)`` stores its value in: ``dest=``, else its first
    long option (else its first name) with dashes as underscores; None for any other call."""
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_argument"):
        return None
    dest = arg_by_name(call, "dest")
    if dest is not None:
        value = dest.value.evaluated_value if isinstance(dest.value, cst.SimpleString) else None
        return value if isinstance(value, str) and value.isidentifier() else None
    names = [a.value.evaluated_value for a in positional_args(call) if isinstance(a.value, cst.SimpleString)]
    names = [n for n in names if isinstance(n, str)]
    chosen = next((n for n in names if n.startswith("--")), names[0] if names else None)
    name = chosen.lstrip("-").replace("-", "_") if chosen else None
    return name if name and name.isidentifier() else None
