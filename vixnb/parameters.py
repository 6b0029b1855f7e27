"""A notebook's parameters as plain papermill passes them, checked inside the notebook itself.

``papermill NB OUT -p seed 3`` (a typo of ``seeds``) only warns and runs the defaults; ``-p models vit`` arrives as
the string ``"vit"``. Papermill puts its values in a cell of their own (tagged ``injected-parameters``, its source
starting ``# Parameters``) right after the notebook's ``parameters`` cell, and the kernel keeps every executed
cell's source in its input history (IPython's ``In``). ``check_injected`` reads the two cells from there: a name
the ``parameters`` cell does not declare is refused, naming it; a list parameter given as one value, a
comma-separated string or a JSON/YAML list string becomes a list (``as_list``). Every notebook calls it through
``vixnb.runtime.Runtime.resolve`` (its runtime cell, right after those two cells), so no notebook states it.
"""
import ast
import numbers

import yaml

from .models import list_models
from .data import DATASETS
from .runs.profiles import REHEARSAL, list_profiles
from .validate import COUNT_MAX, NAMED, Choice, Invalid, ListOf, OneOfNames, Real, Whole

#: how papermill's injected cell starts (its translators' ``codify`` with the default comment)
INJECTED_HEAD = "# Parameters"


def as_list(value, name, *, item_type=None):
    """A list parameter as a list: a list or tuple as it is, None as ``[]``, a string holding a JSON or YAML list
    (``'["vit", "vil"]'``) or comma-separated values (``"vit,vil"``, ``"0, 1"``; each read as YAML: ``"1"`` is 1),
    any other single value as a one-element list. ``item_type`` (``int``, ``float``, ``str``): the elements' type; an
    element of another type is a ``ValueError`` naming ``name``."""
    if value is None:
        items = []
    elif isinstance(value, (list, tuple)):
        items = list(value)
    elif isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                items = yaml.safe_load(text)
            except yaml.YAMLError:
                raise ValueError(f"parameter {name!r}: {value!r} is not a list; give -p {name} 'a,b' or "
                                 f"-p {name} '[a, b]'") from None
        else:
            items = [_scalar(part.strip()) for part in text.split(",") if part.strip()]
    else:
        items = [value]
    return [_of_type(item, item_type, name) for item in items]


def _scalar(text):
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return value if isinstance(value, (str, numbers.Number)) and not isinstance(value, bool) else text


def _of_type(item, item_type, name):
    if item_type is None or isinstance(item, item_type) and not isinstance(item, bool):
        return item
    if item_type is str and isinstance(item, numbers.Number):
        return str(item)
    if item_type is float and isinstance(item, numbers.Real) and not isinstance(item, bool):
        return float(item)
    raise ValueError(f"parameter {name!r} takes a list of {item_type.__name__}, got the element {item!r}; e.g. "
                     f"-p {name} '[...]' with {item_type.__name__} elements")


#: a list parameter's element rule, by the parameter's name (``seeds`` -> the rule of ``seed``)
SINGULAR = {"seeds": "seed", "tokens": "tokens"}


def _profiles():
    return [*list_profiles(), *(p + REHEARSAL for p in list_profiles())]


#: the names every command (``vixnb.cli``: each --profile, --dataset) and every notebook takes: a run profile (or its
#: dress rehearsal), a data set
PROFILE = OneOfNames("profile", _profiles)
DATASET = OneOfNames("dataset", lambda: list(DATASETS))
MODEL = OneOfNames("registered model (`vixnb models`)", list_models)
#: every parameter the notebooks declare, once, with what it takes (numbers by the vocabulary's ``NAMED``); the
#: same rule checks it before a kernel starts (``vixnb run``) and inside the notebook (plain papermill:
#: ``check_injected``, from the notebook's runtime cell, its first cell after the parameters)
PARAMETERS = {
    "profile": OneOfNames("profile", _profiles, extra=("auto",)),
    "compute": Choice(("auto", "never", "missing", "always")),
    "dataset": DATASET,
    "models": ListOf(MODEL, distinct=True),  # identities: each once
    "accuracy_models": ListOf(MODEL, distinct=True),
    "seeds": ListOf(NAMED["seed"], distinct=True),  # an empty list: the profile's seeds (a notebook's default)
}


def parameter_rule(name, default):
    """The rule (``vixnb.validate``) of notebook parameter ``name`` whose declared default is ``default``: the
    vocabulary's rule of that name (``NAMED``), else one by the default's type; a list parameter's elements by the
    rule of its singular (``seeds``: whole numbers >= 0; an empty list is the notebook's default); None where the
    parameter takes no number."""
    if name in PARAMETERS:
        rule = PARAMETERS[name]
        return rule.or_none("the notebook's default") if default is None and rule.none is None else rule
    if isinstance(default, (list, tuple)):
        item_type = type(default[0]) if default else None
        item = NAMED.get(SINGULAR.get(name, name)) if name in SINGULAR else \
            (Whole(most=COUNT_MAX) if item_type is int else Real() if item_type is float else None)
        return ListOf(item) if item is not None else None
    if name in NAMED:
        return NAMED[name].or_none("the notebook's default") if default is None else NAMED[name]
    if isinstance(default, numbers.Number) and not isinstance(default, bool):
        return Whole(most=COUNT_MAX) if isinstance(default, int) else Real()
    return None


def check_parameter(name, value, default):
    """``value`` of notebook parameter ``name`` (declared default ``default``) checked by its rule
    (``parameter_rule``; a list parameter's value made a list first, ``as_list``), or ``Invalid`` naming the
    parameter, the value and what it takes."""
    if isinstance(default, (list, tuple)):
        value = as_list(value, name)
    rule = parameter_rule(name, default)
    if rule is None:
        return value
    try:
        return rule(value, name)
    except Invalid as e:
        raise Invalid(f"notebook parameter {e}") from None


def declared(source):
    """``{name: default}`` of a ``parameters`` cell's source: every name it assigns, its default read as a Python
    literal (None where it is not one)."""
    out = {}
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) else []
        for target in targets:
            if isinstance(target, ast.Name):
                try:
                    out[target.id] = ast.literal_eval(node.value) if node.value is not None else None
                except ValueError:
                    out[target.id] = None
    return out


def injected_cells(history):
    """``(parameters cell source, injected cell source)`` from a kernel's input history (``In``: the sources of
    the cells run so far, in order), or None where papermill injected nothing (a notebook run by hand)."""
    at = next((i for i in range(len(history) - 1, -1, -1)
               if isinstance(history[i], str) and history[i].lstrip().startswith(INJECTED_HEAD)), None)
    if at is None or at == 0 or not isinstance(history[at - 1], str):
        return None
    return history[at - 1], history[at]


def check_injected(namespace):
    """Check the parameters papermill injected into a notebook whose globals are ``namespace`` (they hold the
    kernel's ``In``; nothing is checked without it): a name the ``parameters`` cell does not declare is a
    ``ValueError`` naming it and the declared ones; a list parameter is turned into a list in ``namespace``
    (``as_list``, the elements of the default's type)."""
    history = namespace.get("In")
    found = injected_cells(history) if isinstance(history, list) else None
    if found is None:
        return
    try:
        names, given = declared(found[0]), declared(found[1])
    except SyntaxError:
        return
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ValueError(f"notebook parameter(s) {', '.join(map(repr, unknown))} given (papermill -p/-y) but not "
                         f"declared in the notebook's parameters cell; its parameters: {', '.join(names) or 'none'}; "
                         "check the spelling")
    for name in given:
        default = names[name]
        if isinstance(default, (list, tuple)) and name in namespace:
            item_type = type(default[0]) if default and not isinstance(default[0], bool) else None
            namespace[name] = as_list(namespace[name], name, item_type=item_type)
        if name in namespace:  # a number within what the parameter takes (seeds >= 0, ...)
            namespace[name] = check_parameter(name, namespace[name], default)
