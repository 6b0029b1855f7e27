"""The validation vocabulary (``vixnb.validate``) and the audits that keep every boundary on it: the command line's
options, the public API's numeric arguments, every notebook's parameters and the environment's variables."""
import argparse
import importlib
import inspect
import json
import numbers

import pytest

from vixnb import validate
from vixnb.cli import main, parser
from vixnb.validate import COUNT, POSITIVE, PROBABILITY, SEED, SEEDS, Choice, Invalid, Real, Whole
from vixnb.runs.spec import RunSpec

#: what the audits call every numeric argument with
BAD_VALUES = (0, -1, 1.5, "abc", None)

#: the public API: every name these modules export (``__all__``), and every public function of those without one
API_MODULES = ("vixnb", "vixnb.models", "vixnb.runs.make", "vixnb.engine.ensemble", "vixnb.data", "vixnb.runs.profiles",
               "vixnb.bench", "vixnb.measure", "vixnb.analysis", "vixnb.book.build", "vixnb.book.execute",
               "vixnb.book.links")


def _actions(p, where=("vixnb",)):
    """Every (command path, action) of an argparse parser and its subcommands."""
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, where + (name,))
        else:
            yield where, action


def _numeric_option_names():
    """The dests of the command line's scalar numeric options: the names a numeric API argument goes by."""
    return {a.dest for _, a in _actions(parser()) if getattr(a.type, "rule", None) is not None and a.nargs is None
            and isinstance(a.type.rule, (Whole, Real))}


# ----- the vocabulary ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("rule, value, message", [
    (SEED, -1, "seed=-1: give a whole number >= 0"), (SEED, 1.5, "seed=1.5: give a whole number >= 0"),
    (SEED, "3", "seed='3': give a whole number >= 0"), (SEED, True, "seed=True: give a whole number >= 0"),
    (SEED, None, "seed=None: give a whole number >= 0"), (SEED, float("nan"), "seed=nan: give a whole number >= 0"),
    (COUNT, 0, "seed=0: give a whole number >= 1"), (POSITIVE, 0, "seed=0: give a number > 0"),
    (POSITIVE, float("inf"), "seed=inf: give a number > 0"),
    (PROBABILITY, 1.5, "seed=1.5: give a number >= 0 and <= 1"),
    (Choice(("a", "b")), "c", "seed='c': give one of 'a', 'b'"),
    (SEEDS, [0, -2], "seed=[0, -2]: element 1, -2, is not a whole number >= 0 (at most 4294967295); give a list of "
                     "at least 1 value, each a whole number >= 0 (at most 4294967295)"),
    (SEEDS, 3, "seed=3: give a list of at least 1 value, each a whole number >= 0"),
    (SEEDS, [], "seed=[]: give a list"),
])
def test_a_rule_refuses_naming_the_argument_the_value_and_what_it_takes(rule, value, message):
    with pytest.raises(Invalid) as e:
        rule(value, "seed")
    assert str(e.value).startswith(message)
    assert isinstance(e.value, TypeError) and isinstance(e.value, ValueError)


def test_a_rule_returns_the_value_as_its_kind():
    assert SEED(3.0, "seed") == 3 and type(SEED(3.0, "seed")) is int
    assert POSITIVE(2, "lr") == 2.0 and type(POSITIVE(2, "lr")) is float
    assert SEEDS((0, 2), "seeds") == [0, 2]
    assert COUNT.or_none("the profile's")(None, "epochs") is None and COUNT.none is None  # or_none is a new rule
    assert validate.option(SEEDS)("0,1") == [0, 1]


def test_empty_environment_variables_are_unset(monkeypatch, tmp_path):
    for value in ("", "   "):
        monkeypatch.setenv("VIXNB_X", value)
        assert validate.env_text("VIXNB_X") is None
        assert validate.env_flag("VIXNB_X") is False and validate.env_flag("VIXNB_X", default=True) is True
        assert validate.env_path("VIXNB_X", default=tmp_path) == tmp_path
        assert validate.env_number("VIXNB_X", POSITIVE, default=4.0) == 4.0
    monkeypatch.setenv("VIXNB_X", "maybe")
    with pytest.raises(Invalid, match=r"VIXNB_X='maybe': use 1, true or yes"):
        validate.env_flag("VIXNB_X")
    monkeypatch.setenv("VIXNB_X", "-3")
    with pytest.raises(Invalid, match=r"VIXNB_X='-3': give a number > 0 \(or unset it for 4.0\)"):
        validate.env_number("VIXNB_X", POSITIVE, default=4.0)


def test_every_environment_variable_treats_empty_as_unset(monkeypatch, tmp_path):
    from vixnb.data import data_root
    from vixnb.measure.flops import DEFAULT_CPU_BUDGET_GB, DEFAULT_CPU_BUDGET_GFLOP, cpu_budget
    from vixnb.results.provenance import git_commit
    from vixnb.results.store import default_root

    for variable in ("VIXNB_DATA", "VIXNB_RESULTS", "VIXNB_COMMIT", "VIXNB_CPU_BUDGET_GB", "VIXNB_CPU_BUDGET_GFLOP",
                     "VIXNB_DEBUG"):
        monkeypatch.delenv(variable, raising=False)
    unset = (data_root(), default_root(), git_commit(), cpu_budget())
    for variable in ("VIXNB_DATA", "VIXNB_RESULTS", "VIXNB_COMMIT", "VIXNB_CPU_BUDGET_GB", "VIXNB_CPU_BUDGET_GFLOP"):
        monkeypatch.setenv(variable, "")
    assert (data_root(), default_root(), git_commit(), cpu_budget()) == unset
    assert cpu_budget() == (DEFAULT_CPU_BUDGET_GB, DEFAULT_CPU_BUDGET_GFLOP)
    monkeypatch.setenv("VIXNB_DEBUG", "")
    from vixnb.errors import debug_flag

    assert debug_flag({"VIXNB_DEBUG": ""}) is False  # the empty VIXNB_DEBUG is off, not an error


def test_results_store_variable_pointing_at_a_file_is_named(monkeypatch, tmp_path, capsys):
    """A variable of the environment given wrong is a usage error (exit 2), as every other value a person gives
    (issue 57, class 9: it exited 1)."""
    file = tmp_path / "results.txt"
    file.write_text("not a folder")
    monkeypatch.setenv("VIXNB_RESULTS", str(file))
    assert main(["plan", "--profile", "budget"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"vixnb plan: error: VIXNB_RESULTS={file} is a file, not a folder; point VIXNB_RESULTS at the "
                   "results store's folder (or unset it for results/ of the checkout)")
    assert file.read_text() == "not a folder"


# ----- the command line ---------------------------------------------------------------------------------------

def test_no_command_line_option_takes_a_bare_int_or_float():
    bare = [f"{' '.join(where)} {'/'.join(a.option_strings) or a.dest}" for where, a in _actions(parser())
            if a.type in (int, float)]
    assert bare == []
    numeric = [a for _, a in _actions(parser()) if isinstance(a.default, numbers.Number) and
               not isinstance(a.default, bool) and not isinstance(a, argparse._StoreTrueAction)]
    assert numeric and all(getattr(a.type, "rule", None) is not None for a in numeric), \
        [a.dest for a in numeric if getattr(a.type, "rule", None) is None]


@pytest.mark.parametrize("args, message", [
    (["bench", "mixers", "--batch", "0"], "argument --batch: 0 is below 1; give a whole number >= 1"),
    (["bench", "mixers", "--tokens", "abc"],
     "argument --tokens: 'abc' is not a whole number; give a whole number >= 1"),
    (["bench", "mixers", "--threads", "-1"], "argument --threads: -1 is below 1"),
    (["bench", "mixers", "--warmup", "1.5"], "argument --warmup: '1.5' is not a whole number"),
    (["bench", "train", "--steps", "0"], "argument --steps: 0 is below 1"),
    (["bench", "train", "--workers", "-1"], "argument --workers: -1 is below 0"),
    (["batch", "--pack-since", "abc"], "argument --pack-since: 'abc' is not a number"),
    (["batch", "--pack-limit-mb", "0"], "argument --pack-limit-mb: 0.0 is not > 0"),
    (["train", "vit", "--seed", "-1"], "argument --seed: -1 is below 0"),
])
def test_a_bad_number_on_the_command_line_is_a_usage_error(args, message, capsys, isolated_results):
    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not isolated_results.exists()  # nothing ran, nothing was written


# ----- the Python API -----------------------------------------------------------------------------------------

def _api_functions():
    """Every public function of ``API_MODULES`` (its ``__all__``, else its public functions), once each."""
    seen = {}
    for name in API_MODULES:
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        items = ([getattr(module, n) for n in exported] if exported else
                 [f for n, f in vars(module).items() if not n.startswith("_") and f.__class__.__name__ == "function"
                  and f.__module__ == name])
        for fn in items:
            if inspect.isfunction(fn):
                seen.setdefault(fn, f"{name}.{fn.__name__}")
    return seen


def _numeric_parameters(fn, option_names):
    """The parameters of ``fn`` that take a number: a numeric default, or the name of a numeric CLI option."""
    return [p.name for p in inspect.signature(fn).parameters.values()
            if (isinstance(p.default, numbers.Number) and not isinstance(p.default, bool)) or p.name in option_names]


def test_every_numeric_argument_of_the_public_api_is_checked():
    """Each numeric argument of every public function, called with 0, -1, 1.5, "abc" and None: refused before the
    function runs (``Invalid``, naming the argument and the value), or a value its rule documents."""
    option_names = _numeric_option_names()
    audited, unchecked = 0, []
    for fn, where in _api_functions().items():
        for name in _numeric_parameters(fn, option_names):
            rule = getattr(fn, "__checks__", {}).get(name)
            if rule is None:
                unchecked.append(f"{where}({name})")
                continue
            for value in BAD_VALUES:
                try:
                    rule(value, name)
                except Invalid:  # refused: the function itself refuses it, before doing anything
                    with pytest.raises(Invalid) as e:
                        fn(**{name: value})
                    assert str(e.value).startswith(f"{name}={value!r}: give {rule.allows}"), (where, str(e.value))
                else:  # taken: a documented meaning (None only where the rule says what it means)
                    assert value is not None or rule.none, (where, name)
                audited += 1
    assert unchecked == []
    assert audited > 100


def test_the_api_refuses_what_the_cli_refuses():
    from vixnb.runs import make as runs
    from vixnb.data import load_split

    with pytest.raises(ValueError, match=r"^seed=1.5: give a whole number >= 0"):
        runs.run(RunSpec.of("vit", seed=1.5))  # it would have been stored as seed 1
    with pytest.raises(ValueError, match=r"^seed=-1: give a whole number >= 0"):
        load_split("synthetic", "test", seed=-1)
    assert load_split("synthetic", "test", seed=2.0, size=4)[1].shape == (4,)  # 2.0 is the whole number 2


# ----- notebooks ------------------------------------------------------------------------------------------------

def _parameters_cells():
    """``{notebook stem: {name: default}}`` of every notebook's ``parameters`` cell."""
    from pathlib import Path

    from vixnb.parameters import declared

    out = {}
    for path in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        cell = next(c for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
        out[path.stem] = declared("".join(cell["source"]))
    return out


def test_every_numeric_notebook_parameter_is_checked():
    """Each numeric parameter of every notebook (a number, or a list of numbers), given 0, -1, 1.5, "abc" and None
    as papermill would pass them: refused naming the parameter, or a value its rule documents."""
    from vixnb.parameters import check_parameter, parameter_rule

    audited = 0
    for stem, names in _parameters_cells().items():
        for name, default in names.items():
            rule = parameter_rule(name, default)
            numeric = isinstance(default, numbers.Number) or name in validate.NAMED or (
                isinstance(default, list) and any(isinstance(v, numbers.Number) for v in default))
            if not numeric:
                continue
            assert rule is not None, (stem, name)
            for value in BAD_VALUES:
                try:
                    taken = check_parameter(name, value, default)
                except Invalid as e:
                    assert str(e).startswith(f"notebook parameter {name}="), (stem, str(e))
                    continue
                if value is None:  # None: the notebook's default, an empty list or said by the rule
                    assert taken == [] or rule.none, (stem, name)
                else:
                    assert taken in (value, [value]), (stem, name, value, taken)
                    assert isinstance(value, int) and value >= 0, (stem, name, value)  # only 0 is a number taken
                audited += 1
    assert audited >= 5


def test_a_negative_seed_given_to_a_notebook_is_refused():
    from vixnb.parameters import check_injected

    source = "profile = 'auto'\nseeds = [0]\ncompute = 'auto'\n"
    namespace = {"In": ["", source, "# Parameters\nseeds = '0,-2'\n"], "seeds": "0,-2"}
    with pytest.raises(ValueError, match=r"^notebook parameter seeds=\[0, -2\]: element 1, -2, is not a whole number "
                                         r">= 0"):
        check_injected(namespace)
    namespace = {"In": ["", source, "# Parameters\nseeds = '1, 2'\n"], "seeds": "1, 2"}
    check_injected(namespace)
    assert namespace["seeds"] == [1, 2]


def test_every_whole_number_is_bounded_by_its_consumers_range():
    """Issue 48, class 3 (whole numbers in their consumer's range): every whole-number rule of the vocabulary, the
    command line's and a notebook's has an upper bound, and a value past it is refused naming the option, the
    argument or the parameter, on the command line, in the API and in a notebook's parameters (a value a consumer
    wraps would be another run, stored under the value asked for)."""
    from vixnb.runs import make as runs
    from vixnb.cli import main
    from vixnb.parameters import parameter_rule
    from vixnb.validate import COUNT_MAX, NAMED, SEED_MAX, ListOf, Whole

    for name, rule in NAMED.items():
        rule = rule.item if isinstance(rule, ListOf) else rule
        if isinstance(rule, Whole):
            assert rule.most is not None, name
    assert parameter_rule("depth", 2).most == COUNT_MAX and parameter_rule("seeds", [0]).item.most == SEED_MAX
    with pytest.raises(SystemExit) as stop:
        main(["train", "vit", "--seed", str(SEED_MAX + 1)])
    assert stop.value.code == 2
    with pytest.raises(SystemExit):
        main(["train", "vit", "--epochs", str(COUNT_MAX + 1)])
    with pytest.raises(ValueError, match=rf"^seed={SEED_MAX + 1}: give a whole number >= 0 \(at most {SEED_MAX}\)"):
        runs.run(RunSpec.of("vit", seed=SEED_MAX + 1))
    with pytest.raises(ValueError, match=r"^seeds=.*element 0"):
        parameter_rule("seeds", [0])([SEED_MAX + 1], "seeds")


# ----- issue 57, class 5: lists of identities are sets ----------------------------------------------------------

@pytest.mark.parametrize("argv, says", [
    (["run", "vix_table1", "-p", "seeds", "[0, 0, 0]"], "notebook parameter seeds=[0, 0, 0]: 0 is given twice"),
    (["run", "vix_table1", "-p", "models", "[fnet, fnet]"], "'fnet' is given twice"),
    (["run", "efficiency", "-p", "accuracy_models", "vit,vit"], "'vit' is given twice"),
])
def test_a_seed_or_model_given_twice_to_a_notebook_exits_2_before_any_kernel(argv, says, capsys, monkeypatch):
    """Class 5: -p seeds '[0, 0, 0]' showed "3/3 seeds" and "± 0.00", one run passed off as three; -p models
    '[fnet, fnet]' failed inside the kernel. A list of identities is a set: a repeat is refused, naming the
    parameter, before a kernel starts."""
    import papermill

    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: pytest.fail("a kernel started"))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "give each once" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv", [["measure", "vit", "vit"], ["batch", "--only", "vit", "fnet", "vit", "--dry-run"],
                                  ["batch", "--chapter", "linattn", "linattn", "--dry-run"],
                                  ["bench", "mixers", "--mixers", "nystrom", "nystrom"],
                                  ["papers", "check", "vix", "vix"], ["bench", "fill", "--models", "vit", "vit"]])
def test_a_name_given_twice_on_the_command_line_is_a_usage_error_naming_the_option(argv, capsys):
    """Class 5: models, records, chapters, mixers and papers given twice are refused (exit 2) naming the option."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and "is given twice; give each once" in capsys.readouterr().err


def test_the_api_takes_a_list_of_seeds_as_a_set():
    with pytest.raises(Invalid, match=r"seeds=\[1, 2, 1\]: 1 is given twice; give each once"):
        SEEDS([1, 2, 1], "seeds")
    from vixnb.book.build import build_book

    with pytest.raises(ValueError, match="is given twice"):
        build_book("smoke", notebooks=["vix_table1", "vix_table1"], book_root="/nonexistent-book-root")


# ----- issue 57, class 6: one vocabulary for every command's arguments -----------------------------------------

def test_every_command_refuses_an_unknown_profile_by_one_rule(capsys):
    """Class 6: `vixnb probe --profile budgte --check` exited 0 ("0 of 0 current"): a CI gate on it checked nothing.
    Every command's --profile (and every --dataset) is the vocabulary's one rule: exit 2, naming the valid ones."""
    profiled = sorted(" ".join(where[1:]) for where, a in _actions(parser()) if "--profile" in a.option_strings)
    assert profiled == ["batch", "book", "plan", "probe", "run", "train"]
    for argv in (["probe", "--profile", "budgte", "--check"], ["plan", "--profile", "budgte"],
                 ["train", "vit", "--profile", "budgte"], ["batch", "--profile", "budgte"],
                 ["run", "vix_table1", "--profile", "budgte"], ["book", "--profile", "budgte"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        assert "argument --profile: 'budgte' is not one; give a profile: 'budget', 'paper', 'smoke'" in \
            capsys.readouterr().err
    from vixnb.cli import commands

    assert all(a.type is commands.profile_name for _, a in _actions(parser()) if "--profile" in a.option_strings)
    assert all(a.type is commands.dataset_name for _, a in _actions(parser()) if "--dataset" in a.option_strings)
    with pytest.raises(SystemExit):
        main(["models", "--dataset", "cifar11"])
    assert "argument --dataset: 'cifar11' is not one; give a dataset: 'cifar10'" in capsys.readouterr().err
