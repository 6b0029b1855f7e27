"""One vocabulary for what a person gives vixnb: the command line's options, the Python API's arguments, a notebook's
parameters and the environment's variables are checked by the same rules.

A rule (``Whole``, ``Real``, ``Choice``, ``ListOf``, ``OneOfNames``, ``Past``, ``FolderPath``) checks one value:
``rule(value, name)`` returns it (a whole number as an ``int``, a real as a ``float``) or raises ``Invalid`` naming
``name``, the value and what is allowed.
``Invalid`` is both a ``TypeError`` and a ``ValueError``, so the command line reports it as a usage error (exit 2,
``vixnb.errors``). Each rule says what ``None`` means where it takes it (``none="the profile's"``), so no value is
accepted without a documented meaning.

- the command line: ``option(rule)`` is an argparse ``type`` (argparse names the option: exit 2); ``Distinct`` is
  the action of an option of several identities (a value given twice is refused: a list of identities is a set, as
  ``ListOf(..., distinct=True)``);
- the Python API: ``@checked(seed=SEED, lr=POSITIVE.or_none(...))`` checks arguments before the function runs and
  keeps the rules as ``fn.__checks__`` (the audit test reads them);
- notebooks: ``vixnb.parameters`` checks a notebook's parameters through ``parameter_rule`` (by name);
- the environment: ``env_text``, ``env_flag``, ``env_path``, ``env_number``: a variable set to the empty string
  (or blanks) is the same as unset, everywhere;
- paths: ``existing_path`` and ``writable_file``.
"""
from __future__ import annotations

import argparse
import functools
import inspect
import numbers
import os
import time
from pathlib import Path

from .files import check_writable_file


class Invalid(TypeError, ValueError):
    """A value a parameter does not take; the message names the parameter, the value and what it takes."""


class Rule:
    """A check of one value; subclasses set ``allows`` (what is allowed, in words) and ``_check``."""
    none: str | None = None  # what None means (None: None is refused)

    def or_none(self, meaning):
        """This rule, with None allowed and meaning ``meaning`` (e.g. "the profile's default")."""
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__, none=meaning)
        return twin

    def describe(self):
        return self.allows + (f" (or None: {self.none})" if self.none else "")

    def __call__(self, value, name):
        if value is None:
            if self.none:
                return None
            raise Invalid(f"{name}=None: give {self.describe()}")
        return self._check(value, name)

    def parse(self, text):
        """The value of a command-line string (argparse ``type``, ``option``; an environment variable): read as
        this rule's type, then checked; ``Invalid`` says why, without a name (argparse adds the option's)."""
        return self._check(self._read(text), "")

    def _read(self, text):
        return text

    def refuse(self, value, name, why):
        """Raise ``Invalid``: ``name=value: give <what is allowed>`` (the API's form), or without a name (the
        command line's, which argparse prefixes with the option) ``<why>; give <what is allowed>``."""
        if name:
            raise Invalid(f"{name}={value!r}: give {self.describe()}")
        raise Invalid(f"{why}; give {self.describe()}")

    def __repr__(self):
        return f"<{self.describe()}>"


class Whole(Rule):
    """A whole number (not a bool; 3.0 is 3), within ``least`` and ``most`` where given."""

    def __init__(self, least=None, most=None, *, allows=None):
        self.least, self.most = least, most
        # the lower bound is what a person meets; the upper one is a consumer's range: said after it
        self.allows = allows or ("a whole number" + (f" >= {least}" if least is not None else "")
                                 + ((f" (at most {most})" if least is not None else f" <= {most}")
                                    if most is not None else ""))

    def _read(self, text):
        try:
            return int(text.strip())
        except ValueError:
            self.refuse(text, "", f"{text!r} is not a whole number")

    def _check(self, value, name):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            self.refuse(value, name, f"{value!r} is not a whole number")
        if value != value or value in (float("inf"), float("-inf")) or int(value) != value:
            self.refuse(value, name, f"{value!r} is not a whole number")
        number = int(value)
        if self.least is not None and number < self.least:
            self.refuse(value, name, f"{number} is below {self.least}")
        if self.most is not None and number > self.most:
            self.refuse(value, name, f"{number} is above {self.most}")
        return number


class Real(Rule):
    """A finite real number (not a bool) within ``least``/``most`` (inclusive) or ``above`` (exclusive)."""

    def __init__(self, least=None, most=None, above=None, *, allows=None):
        self.least, self.most, self.above = least, most, above
        bounds = [f"> {above}" if above is not None else "", f">= {least}" if least is not None else "",
                  f"<= {most}" if most is not None else ""]
        self.allows = allows or ("a number " + " and ".join(b for b in bounds if b) if any(bounds) else "a number")

    def _read(self, text):
        try:
            return float(text.strip())
        except ValueError:
            self.refuse(text, "", f"{text!r} is not a number")

    def _check(self, value, name):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            self.refuse(value, name, f"{value!r} is not a number")
        number = float(value)
        if number != number or number in (float("inf"), float("-inf")):
            self.refuse(value, name, f"{number} is not a finite number")
        if self.above is not None and not number > self.above:
            self.refuse(value, name, f"{number} is not > {self.above}")
        if self.least is not None and number < self.least:
            self.refuse(value, name, f"{number} is below {self.least}")
        if self.most is not None and number > self.most:
            self.refuse(value, name, f"{number} is above {self.most}")
        return number


class Choice(Rule):
    """One of ``values``."""

    def __init__(self, values):
        self.values = tuple(values)
        self.allows = "one of " + ", ".join(map(repr, self.values))

    def _check(self, value, name):
        if not isinstance(value, (str, numbers.Number)) or isinstance(value, bool) or value not in self.values:
            self.refuse(value, name, f"{value!r} is not one of them")
        return value


class ListOf(Rule):
    """A list (or tuple) of values that each pass ``item``, at least ``least`` of them; a single value is refused
    (a list parameter given as one value is ``vixnb.parameters.as_list``'s to turn into a list first). ``distinct``:
    a list of identities (seeds, models, chapters), a set: a value given twice is refused (one run is not three)."""

    def __init__(self, item, least=0, *, distinct=False):
        self.item, self.least, self.distinct = item, least, distinct
        self.allows = f"a list of {'at least ' + str(least) + ' ' if least else ''}value{'' if least == 1 else 's'}, " \
                      f"each {item.allows}{', none given twice' if distinct else ''}"

    def _read(self, text):
        return [self.item._read(part) for part in text.split(",") if part.strip()]

    def _check(self, value, name):
        if not isinstance(value, (list, tuple)):
            self.refuse(value, name, f"{value!r} is not a list")
        if len(value) < self.least:
            self.refuse(list(value), name, f"{len(value)} values")
        out = []
        for i, item in enumerate(value):
            try:
                out.append(self.item(item, f"{name or 'value'}[{i}]"))
            except Invalid:
                raise Invalid(f"{name + '=' if name else ''}{list(value)!r}: element {i}, {item!r}, is not "
                              f"{self.item.allows}; give {self.describe()}") from None
        if self.distinct and (twice := repeated(out)):
            raise Invalid(f"{name + '=' if name else ''}{list(value)!r}: {twice[0]!r} is given twice; give each "
                          "once")
        return out


def repeated(values):
    """The values given more than once in ``values``, in their order."""
    seen, twice = set(), []
    for v in values:
        if v in seen and v not in twice:
            twice.append(v)
        seen.add(v)
    return twice


class OneOf(Rule):
    """A value that one of ``rules`` takes (the first that does)."""

    def __init__(self, *rules):
        self.rules = rules
        self.allows = " or ".join(r.allows for r in rules)

    def _check(self, value, name):
        for rule in self.rules:
            try:
                return rule._check(value, name)
            except Invalid:
                pass
        self.refuse(value, name, f"{value!r} is none of them")


class OneOfNames(Rule):
    """One of the names ``names()`` gives when a value is checked (the registry's models, the profiles, the data
    sets: read then, as a notebook may register a model of its own, and so that the command line's parser imports
    none of their modules); ``extra``: further values it takes ("auto")."""

    def __init__(self, what, names, extra=()):
        self.what, self.names, self.extra = what, names, tuple(extra)
        self.allows = f"a {what}" + (f" or {', '.join(map(repr, self.extra))}" if self.extra else "")

    def describe(self):
        return f"{self.allows}: {', '.join(map(repr, (*self.extra, *self.names())))}"

    def _check(self, value, name):
        if not isinstance(value, str) or (value not in self.extra and value not in self.names()):
            self.refuse(value, name, f"{value!r} is not one")
        return value


class Past(Real):
    """A time in seconds since the epoch, no later than now (a clock counted from the future reads negative; files
    written since then are none)."""

    def __init__(self):
        super().__init__(least=0, allows="seconds since the epoch (e.g. $(date +%s)), not later than now")

    def _check(self, value, name):
        number = super()._check(value, name)
        if number > time.time() + 1:
            self.refuse(value, name, f"{number:.0f} is {number - time.time():.0f} s later than now")
        return number


class FolderPath(Rule):
    """The path of a folder that is there or can be made: no file at it or at a folder above it (checked before
    any work; the text is returned as given)."""
    allows = "the path of a folder (not of a file, nor under one)"

    def _check(self, value, name):
        if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
            self.refuse(value, name, f"{value!r} is not a path")
        path = Path(value).expanduser()
        for place in (path, *path.parents):
            if place.exists() or place.is_symlink():
                if not place.is_dir():
                    where = "a file" if place == path else f"under the file {place}"
                    self.refuse(value, name, f"{path} is {where}")
                break
        return value


FOLDER = FolderPath()  # where a command writes its folder of files (vixnb batch --folder)


#: the ranges of the numbers' consumers: a seed goes to torch's generators (64 bits) plus offsets (the augmentation
#: generator's ``AUGMENT_SEED_OFFSET``, an ensemble's members), and to numpy's (32 bits); a count becomes a tensor
#: size or index, a loop bound, a thread or worker count or a CUDA launch dimension, of which the narrowest take a
#: signed 32-bit integer. Bounded here, a value past them is refused naming its option, not wrapped by a consumer
#: into another run stored under the value asked for
SEED_MAX, COUNT_MAX = 2**32 - 1, 2**31 - 1

#: the vocabulary's common rules
SEED = Whole(least=0, most=SEED_MAX)
COUNT = Whole(least=1, most=COUNT_MAX)          # epochs, steps, batch sizes, iterations: at least one
NON_NEGATIVE = Whole(least=0, most=COUNT_MAX)   # warm-up steps, workers, post-training epochs: 0 is none
POSITIVE = Real(above=0)        # learning rates, seconds, megabytes
PROBABILITY = Real(least=0, most=1)
SEEDS = ListOf(SEED, least=1, distinct=True)

#: the rule of each numeric argument name of the public API (``checked("seed", "batch")``): one meaning per name
NAMED = {
    "seed": SEED, "seeds": SEEDS, "epochs": COUNT, "batch_size": COUNT, "batch": COUNT, "steps": COUNT,
    "warmup": NON_NEGATIVE, "warmup_steps": NON_NEGATIVE, "iters": COUNT, "threads": COUNT, "workers": NON_NEGATIVE,
    "tokens": COUNT, "dim": COUNT, "heads": COUNT, "dim_head": COUNT,
    "jobs": Whole(least=1, most=COUNT_MAX, allows=f"1 or more, at most {COUNT_MAX}"), "post_train_epochs": NON_NEGATIVE,
    "lr": Real(above=0, allows="a learning rate > 0"), "limit_mb": POSITIVE, "max_batch": COUNT, "min_batch": COUNT,
    "max_candidates": COUNT, "cpu_batch": COUNT, "n_steps": COUNT, "ig_steps": COUNT, "window": COUNT,
    "stride": COUNT, "discard_ratio": Real(least=0, most=1, allows="a share from 0 to 1"), "cls_index": NON_NEGATIVE,
    "pinv_iterations": COUNT, "per_class": COUNT, "images": COUNT, "prominence_images": COUNT, "layers": COUNT,
    "classes": COUNT, "train_per_class": COUNT, "val_per_class": COUNT, "optimizer_states": NON_NEGATIVE,
}


class Distinct(argparse.Action):
    """An argparse action for an option of several identities (``nargs``): a value given twice is argparse's usage
    error (exit 2), naming the option, before any work."""

    def __call__(self, parser, namespace, values, option_string=None):
        if twice := repeated(values or []):
            parser.error(f"argument {option_string or self.dest}: {twice[0]!r} is given twice; give each once")
        setattr(namespace, self.dest, values)


def option(rule):
    """``rule`` as an argparse ``type``: a bad value is argparse's usage error (exit 2), naming the option."""
    def parse(text):
        try:
            return rule.parse(text)
        except Invalid as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = rule.allows
    parse.rule = rule
    return parse


# ----- the Python API ---------------------------------------------------------------------------------------

def checked(*names, **rules):
    """Decorate a function so that the named arguments are checked by their rules before it runs (``Invalid``
    names the argument); the rules stay readable as ``fn.__checks__``. ``names``: arguments whose rule is the
    vocabulary's (``NAMED``); ``rules``: others, by name. An argument whose default is None takes None too (its
    documented default)."""
    def decorate(fn):
        signature = inspect.signature(fn)
        given = {**{name: NAMED[name] for name in names}, **rules}
        rules.clear()
        for name, rule in given.items():
            default = signature.parameters[name].default if name in signature.parameters else None
            if isinstance(default, (list, tuple)) and not isinstance(rule, ListOf):  # tokens=(256, 1024): a list
                rule = ListOf(rule, least=1)
            rules[name] = rule.or_none("its default") if default is None and rule.none is None else rule
        unknown = set(rules) - set(signature.parameters)
        if unknown:
            raise TypeError(f"checked: {fn.__qualname__} has no parameter(s) {', '.join(sorted(unknown))}")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            bound = signature.bind_partial(*args, **kwargs)
            for name, rule in rules.items():
                if name in bound.arguments:
                    bound.arguments[name] = rule(bound.arguments[name], name)
            return fn(*bound.args, **bound.kwargs)

        wrapper.__checks__ = dict(rules)
        return wrapper
    return decorate


def check(value, name, rule):
    """``rule(value, name)``: one argument checked where a decorator does not fit."""
    return rule(value, name)


# ----- paths ------------------------------------------------------------------------------------------------

def existing_path(path, name, *, expect="file", fix=""):
    """``path`` as a ``Path`` where it exists and is what ``expect`` says (``file`` or ``folder``), else ``Invalid``."""
    if path is None or (isinstance(path, str) and not path.strip()):
        raise Invalid(f"{name}={path!r}: give a {expect} path")
    p = Path(path).expanduser()
    exists = p.is_file() if expect == "file" else p.is_dir()
    if not exists:
        what = "no such " + expect if not p.exists() else f"not a {expect}"
        raise Invalid(f"{name} {p}: {what}{'; ' + fix if fix else ''}")
    return p


def writable_file(path, name):
    """``path`` as a ``Path`` where a file could be written there now (before any work), else ``Invalid``."""
    try:
        check_writable_file(path, name)
    except ValueError as e:
        raise Invalid(str(e)) from None
    return Path(path)


# ----- the environment --------------------------------------------------------------------------------------

def env_text(variable, environ=None):
    """The value of ``variable``, or None where it is unset, empty or blank (the same thing, everywhere)."""
    value = (os.environ if environ is None else environ).get(variable)
    return value if value is not None and value.strip() else None


FLAG_ON, FLAG_OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def env_flag(variable, environ=None, *, default=False):
    """Whether ``variable`` is on (1, true, yes, on), off (0, false, no, off), or ``default`` where unset or empty;
    any other value is ``Invalid`` naming it."""
    value = env_text(variable, environ)
    if value is None:
        return default
    if value.strip().lower() in FLAG_ON + FLAG_OFF:
        return value.strip().lower() in FLAG_ON
    raise Invalid(f"{variable}={value!r}: use 1, true or yes for on, 0, false, no or empty for off")


def env_path(variable, environ=None, *, default=None, folder=False):
    """``variable`` as a ``Path`` (``~`` expanded), or ``default`` where unset or empty; with ``folder``, a path
    that exists and is not a folder is ``Invalid`` naming the variable."""
    value = env_text(variable, environ)
    if value is None:
        return default
    path = Path(value).expanduser()
    if folder and path.exists() and not path.is_dir():
        raise Invalid(f"{variable}={value!r}: not a folder; point it at a folder (or unset it for the default)")
    return path


def env_number(variable, rule, environ=None, *, default=None):
    """``variable`` checked by ``rule`` (its value read as text), or ``default`` where unset or empty."""
    value = env_text(variable, environ)
    if value is None:
        return default
    try:
        return rule.parse(value)
    except Invalid:
        raise Invalid(f"{variable}={value!r}: give {rule.allows} (or unset it for {default})") from None
