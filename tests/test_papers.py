"""Paper files (vixnb/papers/<key>.yaml): read on first use, checked against their schema, with errors that name
the file (``paper_dir``, in conftest.py, makes ``papers`` read a copy that a test may change)."""
from pathlib import Path

import re

import pytest
import yaml

from vixnb import models, papers
from vixnb.papers import schema


def edited(paper_dir, key, old, new):
    """Replace ``old`` (once in the file) by ``new`` in the copy of ``key``'s paper file; the next read sees it."""
    path = paper_dir / f"{key}.yaml"
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")
    papers.load.cache_clear()
    return key


def refused(key):
    """The one-line message with which reading paper ``key`` is refused."""
    with pytest.raises(papers.PaperFileError) as e:
        papers.load(key)
    assert "\n" not in str(e.value)
    return str(e.value)


def test_every_document_key_is_unique_and_the_vix_file_has_its_tables():
    assert len(set(papers.DOCUMENTS.values())) == len(papers.DOCUMENTS)
    assert {"vix", "favor"} <= set(papers.list_papers())
    assert papers.table_models("vix", "table1")[:3] == ["vit", "vip", "vil"]
    assert papers.table("vix", "table1")["rows"]["vit"]["params"] == 530442
    assert papers.table_for("vix", "tiny-imagenet") == "table2"
    assert papers.caption("vix", "table1").endswith("Table 1: CIFAR-10, batch size 64")


def test_protocol_settings_per_model():
    protocol = papers.protocol("vix")
    assert papers.per_model(protocol["batch_size"], "vil") == 256
    assert papers.per_model(protocol["epochs"], "fnet") == 100 and papers.per_model(protocol["epochs"], "vit") == 40
    cfg = models.model_cfg("hybrid_vin")
    assert (cfg["paper"], cfg["label"], cfg["batch_size"], cfg["epochs"]) == ("vix", "Hybrid ViN", 128, 40)


def test_a_tampered_paper_file_names_itself(paper_dir):
    edited(paper_dir, "favor", "  table2:", "  tableX:")
    with pytest.raises(papers.PaperFileError, match=r"vixnb/papers/favor.yaml has no table 'table2'; its tables: "):
        papers.table("favor", "table2")
    (paper_dir / "vix.yaml").write_text("tables: [unclosed")
    papers.load.cache_clear()
    with pytest.raises(papers.PaperFileError, match=r"vixnb/papers/vix.yaml is not valid YAML .*restore it from git"):
        papers.load("vix")
    (paper_dir / "favor.yaml").unlink()
    with pytest.raises(papers.PaperFileError, match=r"paper 'favor' has no paper file yet \(vixnb/papers/favor.yaml\)"):
        papers.load("favor")
    with pytest.raises(papers.PaperFileError,
                       match="unknown paper 'nope'; valid keys: cxv, favor, linattn, shaped, vix"):
        papers.load("nope")


def test_the_paper_file_is_read_on_first_use_not_at_import():
    import subprocess
    import sys

    code = ("import vixnb, vixnb.papers, vixnb.models, vixnb.runs.profiles, vixnb.report; "
            "print(vixnb.papers.load.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0"


@pytest.mark.parametrize("name,marker", [("table3", "Table 3. Comparison"), ("table4", "Table 4. Comparison"),
                                         ("table5", "Table 5. Comparison")])
def test_tables_3_to_5_are_transcribed_as_printed(paper_text, name, marker):
    """Each row of vix.yaml's Tables 3-5, in order, equals the line of the paper's table with its label."""
    text = paper_text("vix")
    end = text.index(marker)
    block = text[text.rindex("Model\tParameters", 0, end):end]
    printed = [line.split("\t") for line in block.splitlines()[1:] if line.strip()]
    rows = papers.table("vix", name)["rows"]
    assert [r["label"] for r in rows.values()] == [p[0] for p in printed]
    for row, (label, params, size, top1, top5, gpu) in zip(rows.values(), printed):
        assert (row["params"], row["size_mb"], row["top1"], row["top5"], row["gpu_gb"]) == (
            int(params.replace(",", "")), float(size), float(top1), float(top5), float(gpu)), label


def test_book_chapters_one_or_several_per_paper(paper_dir):
    assert [c["notebook"] for c in papers.book_chapters("vix")] == ["vix_table1", "vix_families", "vix_rope"]
    assert [c["notebook"] for c in papers.book_chapters("favor")] == ["efficiency"]  # a list of one chapter
    assert papers.book_chapter("vix", "vix_rope")["train"] == ["table6"]
    with pytest.raises(papers.PaperFileError,
                       match=r"vix.yaml: no chapter 'nope' in `book`; its chapters: vix_table1, "):
        papers.book_chapter("vix", "nope")
    edited(paper_dir, "vix", "  - notebook: vix_rope", "  - notebok: vix_rope")
    assert refused("vix").startswith("vixnb/papers/vix.yaml: book[2] has an unknown key 'notebok'; allowed: notebook, ")
    edited(paper_dir, "vix", "  - notebok: vix_rope", "  - references: []")
    assert refused("vix") == "vixnb/papers/vix.yaml: book[2] lacks 'notebook'; add it (a notebook name " \
                             "(notebooks/<name>.ipynb))"


def test_every_paper_file_validates_and_its_book_is_a_list():
    assert papers.list_papers() == sorted(papers.DOCUMENTS)
    for key in papers.list_papers():
        raw = yaml.safe_load(papers.paper_file(key).read_text(encoding="utf-8"))
        schema.check(raw, key)
        assert isinstance(raw["book"], list) and raw["book"], key
        assert papers.book_chapters(key) == raw["book"], key


def test_the_readme_describes_every_key_of_the_schema():
    text = (Path(papers.__file__).parent / "README.md").read_text(encoding="utf-8")
    for section, keys in schema.SECTIONS.items():
        for key in keys:
            assert f"`{key}`" in text, (section, key)


def test_an_unknown_chapter_key_is_refused_with_one_line_naming_file_and_key(paper_dir):
    edited(paper_dir, "shaped", "    keep_weights: [table5]", "    keep_weight: [table5]")
    assert refused("shaped") == ("vixnb/papers/shaped.yaml: book[0] has an unknown key 'keep_weight'; allowed: "
                                 + ", ".join(schema.SECTIONS["chapter"]))
    assert "keep_weights, first" in refused("shaped")


def test_a_book_that_is_one_mapping_is_refused(paper_dir):
    edited(paper_dir, "favor", "  - notebook: efficiency", "    notebook: efficiency")
    assert yaml.safe_load((paper_dir / "favor.yaml").read_text())["book"]["notebook"] == "efficiency"
    assert refused("favor") == ("vixnb/papers/favor.yaml: `book` must be a list of chapters, not one mapping; write "
                                "its chapter as a list item (`- notebook: ...`)")


def test_an_unknown_table_key_is_refused(paper_dir):
    edited(paper_dir, "vix", '    caption: "Table 6:', '    captoin: "Table 6:')
    assert refused("vix").startswith("vixnb/papers/vix.yaml: tables.table6 has an unknown key 'captoin'; allowed: "
                                     "caption, dataset, rows, ")


def test_names_that_point_nowhere_are_refused(paper_dir):
    edited(paper_dir, "vix", "    train: [table6]", "    train: [table7]")
    assert refused("vix") == ("vixnb/papers/vix.yaml: book[2].train names 'table7', which is not a table of the file; "
                              "its tables: table1, table2, table3, table4, table5, table6, earlier_reading")
    edited(paper_dir, "vix", "    train: [table7]", "    train: [table6]")
    edited(paper_dir, "shaped", "    keep_weights: [table5]", "    keep_weights: [table5, table6]")
    assert refused("shaped").startswith("vixnb/papers/shaped.yaml: book[0].keep_weights names 'table6', which is "
                                        "not in book[0].train; it lists: table2, ")
    edited(paper_dir, "cxv", "    first: [cnv_randaugment,", "    first: [cnv_5_4,")
    assert refused("cxv").startswith("vixnb/papers/cxv.yaml: book[2].first names 'cnv_5_4', which is not a row of "
                                     "book[2].train's tables; their rows: cnv_randaugment, ")


def test_value_types_are_checked(paper_dir):
    edited(paper_dir, "linattn", 'params_convention: "true"', 'params_convention: "ture"')
    assert refused("linattn") == "vixnb/papers/linattn.yaml: params_convention must be 'paper' or 'true', not 'ture'"
    edited(paper_dir, "linattn", 'params_convention: "ture"', 'params_convention: "true"')
    edited(paper_dir, "linattn", "  weight_decay: 0.0", "  weight_decay: none")
    assert refused("linattn") == "vixnb/papers/linattn.yaml: protocol.weight_decay must be a number, not 'none'"
    edited(paper_dir, "favor", "claims:\n", "claims:\n  - just text\n")
    assert refused("favor").startswith("vixnb/papers/favor.yaml: claims[0] is 'just text'; claims must be a list of ")


def test_the_ledger_reads_a_kinds_figures_from_every_record_of_the_owners_chapters():
    from vixnb.record_kinds import Request, record_name, stored_figures
    from vixnb.results import ResultsStore

    store = ResultsStore()
    assert record_name(Request("gpu_memory", paper="vix", dataset="cifar10")) == "vix-gpu-memory-cifar10-b64"
    assert record_name(Request("gpu_memory", paper="vix", dataset="cifar10", part="rope")) == \
        "vix-rope-gpu-memory-cifar10-b64"
    store.save_record("measure", "vix-gpu-memory-cifar10-b64", {"rows": {"vit": {"x": 1.0}}, "provenance": {}},
                      profile="budget")
    store.save_record("measure", "vix-rope-gpu-memory-cifar10-b64",
                      {"rows": {"vit_rope": {"x": 2.0}}, "provenance": {"dtype": "bf16"}}, profile="budget")
    found, records = stored_figures("gpu_memory", "cifar10", ["vit", "vit_rope", "vil"], owner="vix", profile="budget",
                                    store=store)
    assert found == {"vit": ({"x": 1.0}, {}, "fp32"), "vit_rope": ({"x": 2.0}, {"dtype": "bf16"}, "bf16")}
    assert len(records) == 2
    assert stored_figures("gpu_memory", "tiny-imagenet", ["vit"], owner="vix", profile="budget",
                          store=store) == ({}, [])
    # another paper's chapters are read only where the owner's ask for none of the kind
    assert stored_figures("gpu_memory", "cifar10", ["vit"], owner="cxv", profile="budget", store=store) == ({}, [])


def test_papers_check_names_three_planted_mistakes_in_one_run(paper_dir, capsys):
    """A schema mistake, an unknown model and a bad claim operator, in one file: one run names all three (loading
    the file would stop at the first), exits 1, and a good file passes."""
    from vixnb.cli import main

    edited(paper_dir, "shaped", "    first_seed_only: true", "    first_seed_only: yes please")
    edited(paper_dir, "shaped", "exp1_vanilla:    {model: vit_small_vanilla,    label",
           "exp1_vanilla:    {model: vit_smal_vanilla,    label")
    text = (paper_dir / "shaped.yaml").read_text()
    (paper_dir / "shaped.yaml").write_text(text.replace("    op: greater", "    op: greatest", 1))
    assert main(["papers", "check"]) == 1
    out, err = capsys.readouterr()
    assert "tables.earlier_reading.first_seed_only must be true or false, not 'yes please'" in out
    assert "table 'table2', row 'exp1_vanilla' names unknown model 'vit_smal_vanilla'" in out
    assert "'greatest'" in out
    assert "3 problem(s) in 1 paper file(s) (shaped)" in err and "Traceback" not in err
    assert main(["papers", "check", "vix"]) == 0


# ----- issue 48, class 4: YAML takes nothing a paper file must not hold ---------------------------------------

def _problems(paper_dir, key, edit):
    from vixnb import paper_contract, papers

    path = paper_dir / f"{key}.yaml"
    path.write_bytes(edit(path.read_bytes()))
    papers.load.cache_clear()
    return paper_contract.problems(key)


def test_a_key_given_twice_is_named_with_its_lines(paper_dir):
    """PyYAML kept the last of two equal keys without a word: a pasted row replaced a printed one unseen."""
    row = (b"      exp1_vanilla:    {model: vit_small_vanilla,    label: \"Vanilla\",    params: 358186, "
           b"epoch_s: 12.954}\n")
    found = _problems(paper_dir, "shaped", lambda text: text.replace(row, row + row.replace(b"358186", b"1"), 1))
    assert len(found) == 1
    assert re.match(r"^vixnb/papers/shaped\.yaml: line (\d+): key 'exp1_vanilla' is given twice in one mapping "
                    r"\(line \1; first at line \d+\)", found[0]), found


def test_a_number_that_is_not_finite_is_refused_by_its_place(paper_dir):
    found = _problems(paper_dir, "shaped", lambda text: text.replace(b"value: -41.59", b"value: .nan", 1))
    assert any("claims[0].value is nan; a number of a paper file is finite" in line for line in found), found
    assert any("shaped-exp1-params" in line and "give a finite number" in line for line in found), found
    found = _problems(paper_dir, "shaped", lambda text: text.replace(b"params: 209210", b"params: .inf", 1))
    assert any("tables.table2.rows.exp1_simplified.params is inf" in line for line in found), found


def test_a_byte_that_is_not_utf8_names_the_file_and_line(paper_dir):
    found = _problems(paper_dir, "shaped", lambda text: text.replace(b"Vanilla", b"Van\xe9lla", 1))
    assert len(found) == 1 and re.match(r"^vixnb/papers/shaped\.yaml: byte 0xe9 at line \d+ is not UTF-8", found[0])


def test_a_question_name_that_would_be_a_path_is_refused(paper_dir):
    found = _problems(paper_dir, "shaped", lambda text: text.replace(b"      vanilla_gap_w96:", b"      ../gap:", 1))
    assert any("questions: the question '../gap' names a file of the results store" in line for line in found), found


# ----- issue 55: the authors' dropout, stated per model and read from the models built under the protocol -------------

def test_every_models_dropout_under_the_protocol_is_what_the_paper_file_states():
    """Every model of every paper file that states the authors' dropout (``protocol.dropout``), built under its
    protocol (``model_overrides``), applies exactly that; Hybrid ViN its 0.25 in the 8 feed-forward Dropout modules
    that HybridViN.py passes it, as ViN."""
    from vixnb.paper_contract import built_dropout
    from vixnb.papers import stated_dropout
    from vixnb.runs.spec import run_config

    stating = [k for k in papers.list_papers() if "dropout" in (papers.load(k).get("protocol") or {})]
    assert "vix" in stating
    for key in stating:
        protocol = papers.protocol(key)
        for model in sorted({m for m, _ in papers.paper_runs(key).values()}):
            assert built_dropout(model, protocol) == stated_dropout(protocol, model), (key, model)
    vix = papers.protocol("vix")
    assert built_dropout("hybrid_vin", vix) == built_dropout("vin", vix) == [[0.25, 8]]
    assert built_dropout("vit", vix) == [[0.25, 12]] and built_dropout("cct", vix) == [[0.1, 4]]
    assert built_dropout("hybrid_vin_rope", vix) == [[0.5, 9]] and built_dropout("hybrid_vip", vix) == []
    assert run_config("hybrid_vin", profile="budget")["model_overrides"] == {"dropout": 0.25}


def test_papers_check_fails_where_a_models_dropout_is_not_the_authors(paper_dir, capsys):
    from vixnb.cli import main

    override = b"                    hybrid_vin: {dropout: 0.25},\n"
    found = _problems(paper_dir, "vix", lambda text: text.replace(override, b"", 1))
    assert found == ["vixnb/papers/vix.yaml: model 'hybrid_vin' applies dropout none under the protocol, where the "
                     "authors' scripts apply 0.25 in 8 module(s) (protocol.dropout); give it their rates in "
                     "protocol.model_overrides, or correct protocol.dropout"]
    assert main(["papers", "check", "vix"]) == 1
    assert "model 'hybrid_vin' applies dropout none" in capsys.readouterr().out
    found = _problems(paper_dir, "vix", lambda text: text.replace(b"cct: {0.1: 4}", b"cct: {0.1: 0}, cvq: {}", 1))
    assert any("protocol.dropout names 'cvq', which is no model of the file's tables" in p for p in found), found
    assert any("protocol.dropout.cct must map each rate" in p for p in found), found


def test_the_page_lists_the_scripts_that_tested_with_dropout_active():
    """Scripts that never call model.eval() (``protocol.no_eval_mode``) on models with dropout: their published test
    accuracy was measured with it active."""
    from vixnb import report

    frame = report.tables.tested_with_dropout("vix")
    assert list(frame.index) == ["ViT", "ViN", "Hybrid ViN", "ViN-RoPE", "Hybrid ViN-RoPE"]
    assert frame.loc["Hybrid ViN", "dropout active in their test"] == "0.25 in 8 module(s)"
    assert frame.loc["Hybrid ViN-RoPE", "dropout active in their test"] == "0.5 in 9 module(s)"
    assert "CCT" not in frame.index  # CCT.py calls model.eval()
    assert report.tables.tested_with_dropout("shaped").empty
