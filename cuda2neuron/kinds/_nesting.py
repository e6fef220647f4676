"""Parsing without crashing the process: a nesting guard in front of libcst, and a deep stack.

libcst's native parser recurses once per nesting level on the C stack, with no depth check of
its own: `x = ((((…))))` 1,500 levels deep, or a chain such as `- - - … 1` or `a.b.c…` some
6,000 to 8,000 levels deep, overflows the 8 MB main-thread stack and kills the process with
SIGSEGV — no message, nothing written, and the rest of a run lost with it. CPython rejects all
of these long before (more than 200 nested brackets is "too many nested parentheses"; around
3,000 levels of a chain is a RecursionError or MemoryError of its parser or compiler), so:

* ``nesting_error`` rejects what CPython rejects, before libcst sees it. Asking CPython's
  compiler about every parsed file would cost about 8% of a libcst parse (diffusers: 1.8 s of
  CPU on 580 files), so two cheap tests decide first whether the question is worth asking:
  brackets nested more than 200 deep (the brackets alone, their innermost pairs dropped pass
  after pass — each pass one `bytes.replace` in C) and a logical line of 3,000 bytes or more (a
  chain deep enough to matter without brackets sits on one logical line: a physical line, lines
  joined by backslashes, or the inside of one bracket pair, however many short lines it spans —
  what CPython's tokenizer sees as one line). Only then is the text
  compiled, and only CPython's nesting errors reject the file: any other SyntaxError may be
  newer syntax that libcst reads.
* ``deep_stack`` runs the parse (and the walk, which re-enters native code) on a long-lived
  thread with a 1 GiB stack — address space, not memory: only the pages used are ever touched — so what
  CPython accepts but nests deeply (a one-line `a and b and …` of 30,000 terms) does not
  overflow either; past that, Python's own recursion limit gives a clean RecursionError.
"""

from __future__ import annotations

import contextvars
import os
import re
import threading
import warnings
from collections.abc import Callable
from typing import TypeVar

__all__ = ["MAX_BRACKET_DEPTH", "deep_stack", "nesting_error", "parse_guarded"]

T = TypeVar("T")

# CPython's tokenizer (MAXLEVEL): 200 nested brackets are accepted, the 201st is an error.
MAX_BRACKET_DEPTH = 200
# A line this long may hold a chain deep enough for CPython to refuse (about 3,000 levels at a
# byte or more each): worth compiling to ask.
_LONG_LINE = 3000
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"()[]{}")
_ONE_BRACKET = bytes.maketrans(b"[{]}", b"(())")
_FILLER = bytes.maketrans(bytes(range(256)), bytes(b if b in b"()" else ord("x") for b in bytes.maketrans(b"[{]}", b"(())")))
_INNERMOST = re.compile(rb"\((x*)\)")
# What CPython says when a text nests too deeply (its tokenizer, parser and compiler).
_NESTING_MESSAGES = ("too many nested parentheses", "too many levels of indentation", "too complex",
                     "too many nested", "maximum recursion depth")


def _brackets_deeper_than(data: bytes, limit: int) -> bool:
    brackets = data.translate(_ONE_BRACKET, _NOT_BRACKETS)
    if brackets.count(b"(") <= limit:
        return False
    # Each pass drops every innermost pair: a pair goes in the pass equal to its height, so
    # pairs still standing after ``limit`` passes nest deeper than ``limit``. Brackets inside
    # strings or comments can only make this say yes too often; compiling then decides.
    for _ in range(limit):
        shorter = brackets.replace(b"()", b"")
        if len(shorter) == len(brackets):
            return False
        brackets = shorter
    return b"()" in brackets


def _has_long_line(data: bytes) -> bool:
    """A logical line of ``_LONG_LINE`` bytes or more: a physical one, one continued with
    backslashes, or the inside of one bracket pair spread over many short lines.

    The last is what CPython's tokenizer sees as one line: a chain such as ``(a\n.b\n.c …)`` or
    ``(-\n-\n- … 1)`` with one level per line passed a physical-line test and took more than
    5 GB or 300 s in libcst from a 20-50 KB file (issue 44), where CPython refuses it."""
    if len(data) < _LONG_LINE:
        return False
    if max(map(len, data.replace(b"\\\n", b"").split(b"\n"))) >= _LONG_LINE:
        return True
    # Every byte but brackets as one filler byte; each pass drops every innermost pair (its
    # filler stays, joining the enclosing pair's): the longest filler ever enclosed by one pair
    # is the longest bracketed stretch. At most MAX_BRACKET_DEPTH passes (deeper nesting is the
    # other test), each a C-level regex over the file.
    text = data.translate(_FILLER)
    for _ in range(MAX_BRACKET_DEPTH + 1):
        inner = _INNERMOST.findall(text)
        if not inner:
            return False
        if max(map(len, inner)) >= _LONG_LINE:
            return True
        text = _INNERMOST.sub(rb"\1", text)
    return False


def nesting_error(data: bytes, path: str) -> tuple[str, int | None] | None:
    """(message, line) when CPython rejects ``data`` for nesting too deeply, else None."""
    if not (_brackets_deeper_than(data, MAX_BRACKET_DEPTH) or _has_long_line(data)):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(data, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        message = str(exc.msg)
        if any(m in message for m in _NESTING_MESSAGES):
            return f"source nests too deeply: CPython rejects it too ({message})", exc.lineno
        return None  # some other error, or newer syntax: libcst decides
    except (RecursionError, MemoryError) as exc:
        # CPython's parser reports its stack overflow as a MemoryError, its compiler as a
        # RecursionError ("maximum recursion depth exceeded during compilation").
        what = str(exc) or "its parser's stack overflows"
        return f"source nests too deeply: CPython rejects it too ({type(exc).__name__}: {what})", None
    except ValueError:
        return None  # NUL bytes and the like: the parser reports them
    return None


# Address space for the parsing thread: libcst uses a few KB of stack per nesting level.
_STACK_SIZES = (1 << 30, 1 << 28)


class _DeepThread:
    """One long-lived thread with a big stack that runs calls handed to it, one at a time.

    Long-lived on purpose: a thread per parse cost 10-20% of libcst's parse time (measured on
    diffusers' CUDA files), because each new stack faults its pages in afresh; this one keeps
    the pages it has touched. One per process: a forked worker starts its own.
    """

    def __init__(self) -> None:
        import queue

        self.pid = os.getpid()
        self.calls: queue.SimpleQueue = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        # threading.stack_size is process-wide: set it, start the thread, set it back.
        for size in _STACK_SIZES:
            try:
                old = threading.stack_size(size)
            except (ValueError, RuntimeError):
                continue
            try:
                thread = threading.Thread(target=self._serve, name="cuda2neuron-parse", daemon=True)
                thread.start()
                self.thread = thread
                break
            except RuntimeError:  # cannot start new thread: no room for this stack
                continue
            finally:
                threading.stack_size(old)

    def _serve(self) -> None:
        while True:
            context, fn, args, box, done = self.calls.get()
            try:
                box.append((True, context.run(fn, *args)))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread as is
                box.append((False, exc))
            finally:
                del context, fn, args
                done.release()

    def call(self, fn: Callable[..., T], args: tuple) -> T:
        box: list = []
        done = threading.Lock()
        done.acquire()
        # Trap: a thread starts with its own context variables; the engine keeps per-call state
        # in them (suppressions switched off while the suppression check re-runs a file).
        self.calls.put((contextvars.copy_context(), fn, args, box, done))
        done.acquire()
        ok, value = box[0]
        if ok:
            return value
        raise value


_deep: _DeepThread | None = None
_deep_lock = threading.Lock()


def deep_stack(fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` on a thread with a large stack; its result, or its exception re-raised.

    Falls back to calling ``fn`` here when no such thread can be made (a small address-space
    limit), or when called from that thread itself: the guard above still keeps out what
    CPython rejects.
    """
    global _deep
    deep = _deep
    if deep is None or deep.pid != os.getpid():
        with _deep_lock:
            if _deep is None or _deep.pid != os.getpid():
                _deep = _DeepThread()
            deep = _deep
    if deep.thread is None or threading.current_thread() is deep.thread:
        return fn(*args)
    return deep.call(fn, args)


def parse_guarded(data: bytes, path: str):  # noqa: ANN201 - a libcst Module (libcst loads lazily)
    """libcst's parse of ``data`` behind the nesting guard, on a deep stack; SourceError on failure."""
    from cuda2neuron.core import SourceError
    from cuda2neuron.python import parse_bytes

    nested = nesting_error(data, path)
    if nested is not None:
        raise SourceError("nesting", nested[0], nested[1])
    return deep_stack(parse_bytes, data)
