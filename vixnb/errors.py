"""How an error reaches a person: one line, and an exit code that says what kind of error it was.

The command line (``vixnb.cli.main``) is the one error boundary; a batch job's failure is reported in the same
one-line form (``vixnb.plan.batch``)."""
import contextlib
import signal
import sys
import threading


class StoreError(OSError):
    """The results store cannot be written or read; the message names the path and what to do."""


#: exit codes: an error, a usage error (argparse's too), an interruption (128 + SIGINT)
ERROR, USAGE, INTERRUPTED = 1, 2, 130


#: the values of VIXNB_DEBUG that show tracebacks, and those that do not
DEBUG_ON, DEBUG_OFF = ("1", "true", "yes"), ("", "0", "false", "no")


def debug_flag(environ):
    """Whether ``VIXNB_DEBUG`` in ``environ`` asks for tracebacks (1, true, yes; 0, false, no or empty: not); any
    other value is a ``ValueError`` naming the variable and its values."""
    value = environ.get("VIXNB_DEBUG", "")
    if value.strip().lower() in DEBUG_ON + DEBUG_OFF:
        return value.strip().lower() in DEBUG_ON
    raise ValueError(f"VIXNB_DEBUG={value!r}: use 1, true or yes to show tracebacks, or 0, false, no or empty for none")


def one_line(error):
    """The error's message on one line (a multi-line message's lines joined)."""
    return " ".join(line.strip() for line in str(error).splitlines() if line.strip()) or type(error).__name__


def printable(value):
    """``value`` as text of one line that a terminal prints as it is: each character that is not printable (a
    newline, a carriage return, an escape sequence's ESC) written as its Python escape, so that a file's name can
    never forge a line of a command's output."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(value))


def is_usage_error(error):
    """A bad name or value given by the caller: a ``ValueError`` (a data set or paper file that is wrong raises
    ``DataError`` or ``PaperFileError``, runtime errors)."""
    return isinstance(error, ValueError)


def expected(error):
    """Whether ``error`` is one of the errors the package raises on purpose (its message says what to do)."""
    return isinstance(error, (ValueError, OSError, RuntimeError, ArithmeticError, LookupError))


def report(command, error, *, debug=False, file=None):
    """Print ``error`` as ``vixnb <command>: error: <what>`` (the traceback first with ``debug``; an unexpected
    error says how to see it) and return the exit code: ``USAGE`` for a usage error, else ``ERROR``; an
    interruption prints ``vixnb <command>: <what>`` and returns ``INTERRUPTED``."""
    file = file or sys.stderr
    if debug:
        import traceback  # the command line stays light: its parser imports this module, --debug needs it

        traceback.print_exception(error, file=file)
    if isinstance(error, KeyboardInterrupt):  # Ctrl-C; training says after which epoch and how to resume
        print(f"vixnb {command}: {one_line(error) if str(error) else 'interrupted'}", file=file)
        return INTERRUPTED
    hint = "" if debug or expected(error) else " (an unexpected error: run again with --verbose for the traceback)"
    print(f"vixnb {command}: error: {one_line(error)}{hint}", file=file)
    return USAGE if is_usage_error(error) else ERROR


#: the signals that stop a command as SIGINT (Ctrl-C) does: ``timeout`` and a batch system send SIGTERM, a closed
#: terminal SIGHUP
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextlib.contextmanager
def stopped_by_signals():
    """``STOP_SIGNALS`` raise ``KeyboardInterrupt`` ("stopped by signal SIGTERM") in the main thread while this holds,
    as SIGINT does, so that a command stopped by them ends as Ctrl-C ends it: what it holds is cleaned up on the way
    out, one line says so, and the exit is ``INTERRUPTED`` (``report``); the handlers before are restored after.
    Elsewhere than the main thread nothing is changed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"stopped by signal {signal.Signals(signum).name}")

    before = {signum: signal.signal(signum, interrupt) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


_SAID = set()


def said_clear():
    """Forget what ``say_once`` said: a new process would say it again (the tests' fresh processes)."""
    _SAID.clear()


def say_once(key, message):
    """Print ``message`` on stderr the first time ``key`` is said in this process (a derived file that cannot be used:
    named once, then worked around); later calls say nothing."""
    if key not in _SAID:
        _SAID.add(key)
        print(f"vixnb: {message}", file=sys.stderr)
