"""Paper files (vixnb/papers/<key>.yaml): read on first use, checked, with errors that name the file."""
import pytest

from vixnb import models, papers


@pytest.fixture
def paper_dir(tmp_path, monkeypatch):
    """Paper files read from a temporary folder (a copy of the package's ``papers/``)."""
    import shutil
    from importlib import resources

    folder = tmp_path / "papers"
    shutil.copytree(resources.files("vixnb").joinpath("papers"), folder)
    monkeypatch.setattr(papers, "_file", lambda key: folder / f"{key}.yaml")
    papers.load.cache_clear()
    yield folder
    papers.load.cache_clear()


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
    text = (paper_dir / "vix.yaml").read_text()
    (paper_dir / "vix.yaml").write_text(text.replace("  table2:", "  tableX:"))
    with pytest.raises(papers.PaperFileError, match=r"vixnb/papers/vix.yaml has no table 'table2'; its tables: "):
        papers.table("vix", "table2")
    (paper_dir / "vix.yaml").write_text("tables: [unclosed")
    papers.load.cache_clear()
    with pytest.raises(papers.PaperFileError, match=r"vixnb/papers/vix.yaml is not valid YAML .*restore it from git"):
        papers.load("vix")
    (paper_dir / "favor.yaml").unlink()
    with pytest.raises(papers.PaperFileError, match=r"paper 'favor' has no paper file yet \(vixnb/papers/favor.yaml\)"):
        papers.load("favor")
    with pytest.raises(papers.PaperFileError, match="unknown paper 'nope'; valid keys: cxv, favor, linattn, shaped, vix"):
        papers.load("nope")


def test_the_paper_file_is_read_on_first_use_not_at_import():
    import subprocess
    import sys

    code = ("import vixnb, vixnb.papers, vixnb.models, vixnb.profiles, vixnb.report; "
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
    assert [c["notebook"] for c in papers.book_chapters("favor")] == ["efficiency"]  # one mapping: one chapter
    assert papers.book_chapter("vix", "vix_rope")["train"] == ["table6"]
    with pytest.raises(papers.PaperFileError, match=r"vix.yaml: no chapter 'nope' in `book`; its chapters: vix_table1, "):
        papers.book_chapter("vix", "nope")
    text = (paper_dir / "vix.yaml").read_text()
    (paper_dir / "vix.yaml").write_text(text.replace("  - notebook: vix_rope", "  - notes: vix_rope"))
    papers.load.cache_clear()
    with pytest.raises(papers.PaperFileError, match=r"vix.yaml: every chapter of `book` needs a `notebook`"):
        papers.book_chapters("vix")


def test_gpu_memory_rows_merge_the_chapters_records():
    from vixnb.record_kinds import Request, record_name
    from vixnb.report.collect import gpu_memory_rows
    from vixnb.results import ResultsStore

    store = ResultsStore()
    assert record_name(Request("gpu_memory", paper="vix", dataset="cifar10")) == "vix-gpu-memory-cifar10-b64"
    assert record_name(Request("gpu_memory", paper="vix", dataset="cifar10", part="rope")) == \
        "vix-rope-gpu-memory-cifar10-b64"
    store.save_record("measure", "vix-gpu-memory-cifar10-b64", {"rows": {"vit": {"x": 1.0}}, "provenance": {}},
                      profile="budget")
    store.save_record("measure", "vix-rope-gpu-memory-cifar10-b64", {"rows": {"vit_rope": {"x": 2.0}},
                                                                      "provenance": {}}, profile="budget")
    rows, records = gpu_memory_rows("vix", "cifar10", profile="budget", store=store)
    assert rows == {"vit": {"x": 1.0}, "vit_rope": {"x": 2.0}} and len(records) == 2
    assert gpu_memory_rows("vix", "tiny-imagenet", profile="budget", store=store) == ({}, [])
