"""Every sentence of the synthesis page that names a source document is backed by that document's paper file: each
number it states is a number of that file's data (not its comments; a glued or cited figure is computed or cited, not
stated), rounded or not, and each phrase it quotes is in that file. A number can coincide with an unrelated one of the
file: this catches what no file holds, not every misreading (issue 38: the page once said "CXV ... up to 200 epochs"
and "the report fine-tunes ViT-B/16", which no document says)."""
import re
from importlib import resources

import nbformat
import yaml

from vixnb.book.execute import repo_root

#: how the page names each document -> its paper file
NAMES = {"ViX": "vix", "CXV": "cxv", "linear-attention report": "linattn", "favor paper": "favor", "blog": "shaped"}
NUMBER = re.compile(r"(?<![\w./-])(\d[\d,]*(?:\.\d+)?)(?![\w])")  # not a name's digits (ViT-B/16)


def _numbers(text):
    return {n.replace(",", "") for n in NUMBER.findall(text)}


def _backed(stated, transcribed):
    """Whether ``stated`` (as written) is a transcribed number, or one of them rounded to ``stated``'s digits ("about
    20 %" of a printed 20.34)."""
    digits = len(stated.partition(".")[2])
    return any(abs(float(t) - float(stated)) <= 0.5 * 10 ** -digits for t in transcribed)


def _sentences(markdown):
    text = re.sub(r"\{[a-z:]+\}`[^`]*`", "", markdown.replace("\n", " "))  # glue and citation roles
    text = re.sub(r"\([^()]*\)", lambda m: m.group(0) if any(n in m.group(0) for n in NAMES) else "", text)
    # a sentence, or a clause of a list of documents ("..., the linear-attention report trains ...")
    return re.split(r"(?<=[.:;])\s+(?=[A-Z*-])|,\s+(?=the (?:linear-attention|favor|blog))", text)


def check(markdown, paper_text):
    """The problems of ``markdown``: ``(document keys, what is not backed, the sentence)``."""
    problems = []
    for sentence in _sentences(markdown):
        keys = [k for name, k in NAMES.items() if name in sentence]
        if not keys:
            continue
        files = "\n".join(paper_text(k) for k in keys)
        transcribed = _numbers(files)
        problems += [(keys, f"the number {n}", sentence.strip()) for n in sorted(_numbers(sentence))
                     if not _backed(n, transcribed)]
        problems += [(keys, f'the quote "{q}"', sentence.strip()) for q in re.findall(r'"([^"]+)"', sentence)
                     if q not in files]
    return problems


def _values(node):
    """Every key and scalar of a parsed paper file, as text: what it transcribes (its comments are ours)."""
    if isinstance(node, dict):
        return [t for k, v in node.items() for t in (str(k), *_values(v))]
    if isinstance(node, list):
        return [t for v in node for t in _values(v)]
    return [str(node)]


def _paper_file(key):
    """The data of paper ``key``'s file as text, one value a line, a model name's parts apart (``vit_b16_224``: the
    224 px input size it names)."""
    data = yaml.safe_load(resources.files("vixnb").joinpath("papers", f"{key}.yaml").read_text(encoding="utf-8"))
    return "\n".join(v.replace("_", " ") for v in _values(data))


def test_every_sentence_of_the_synthesis_that_names_a_document_is_backed_by_its_paper_file():
    nb = nbformat.read(repo_root() / "notebooks" / "synthesis.ipynb", as_version=4)
    markdown = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert any(name in markdown for name in NAMES)
    assert check(markdown, _paper_file) == []


def test_the_check_finds_an_invented_number_and_an_invented_quote():
    files = {"cxv": "epochs: {max_epochs: 1000}\n", "linattn": 'notes: "trains from scratch"\n'}
    bad = ('CXV trains for up to 200 epochs. The linear-attention report "fine-tunes ViT-B/16". '
           "CXV stops at 1,000 epochs.")
    found = check(bad, files.__getitem__)
    assert [(keys, what) for keys, what, _ in found] == [(["cxv"], "the number 200"),
                                                         (["linattn"], 'the quote "fine-tunes ViT-B/16"')]
