"""What a lent GPU machine sends back: the pack in parts under the device's return limits, and ``vixnb unpack``,
which never replaces a result here silently (issue 36)."""
import json
import os
import tarfile

import pytest

from vixnb.cli import main
from vixnb.results import ResultsStore
from vixnb.results.pack import RETURN_FILE_MIB, archives, pack, unpack

MIB = 2**20


def _result(folder, name, finished, top1):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"top1": top1, "provenance": {"finished": finished}}))
    return path


def test_a_40_mib_checkpoint_travels_in_parts_and_comes_back_byte_for_byte(tmp_path):
    folder = ResultsStore().root / "budget"
    _result(folder, "run.json", "2026-11-26T10:00:00Z", 71.5)
    checkpoint = folder / ".checkpoints" / "paused.pt"
    checkpoint.parent.mkdir(parents=True)
    data = os.urandom(40 * MIB)  # incompressible, as trained weights nearly are
    checkpoint.write_bytes(data)
    parts, packed, left = pack(tmp_path / "out" / "results.tar.gz", "budget")
    assert left == [] and packed == ["results/budget/run.json", "results/budget/.checkpoints/paused.pt"]
    assert [p.name for p in parts] == [f"results.tar.gz.part{k}of3" for k in (1, 2, 3)]
    assert all(p.stat().st_size <= RETURN_FILE_MIB * MIB for p in parts)
    here = tmp_path / "here"
    report = unpack(list(reversed(parts)), root=here)  # any order: the part names give it
    assert report["written"] == packed and not report["conflicts"]
    assert (here / "budget" / ".checkpoints" / "paused.pt").read_bytes() == data
    with pytest.raises(ValueError, match=r"parts 2 of 3 are missing"):
        archives([parts[0], parts[2]])


def test_the_pack_never_writes_more_files_than_allowed_and_drops_checkpoints_first(tmp_path):
    folder = ResultsStore().root / "budget"
    for i in range(3):
        _result(folder, f"run{i}.json", "2026-11-26T10:00:00Z", 70.0 + i)
    (folder / "weights").mkdir()
    (folder / "weights" / "run0.pt").write_bytes(os.urandom(MIB))
    (folder / ".checkpoints").mkdir()
    for name, mib in (("a.pt", 1), ("b.pt", 2), ("c.pt", 3)):
        (folder / ".checkpoints" / name).write_bytes(os.urandom(mib * MIB))
    # parts of 1 MiB, at most 4: the results, the kept weights and the smallest checkpoints that fit
    parts, packed, left = pack(tmp_path / "results.tar.gz", "budget", max_parts=4, part_bytes=MIB)
    assert len(parts) <= 4 and all(p.stat().st_size <= MIB for p in parts)
    assert {f"results/budget/run{i}.json" for i in range(3)} | {"results/budget/weights/run0.pt"} <= set(packed)
    assert "results/budget/.checkpoints/c.pt" not in packed
    assert any("c.pt" in n and "paused run's checkpoint" in n for n in left)
    assert all(".checkpoints" in n for n in left)  # never a result


def test_unpack_of_an_older_pack_over_a_newer_result_keeps_both_and_names_them(tmp_path, capsys):
    store = ResultsStore()
    folder = store.root / "budget"
    _result(folder, "run.json", "2026-11-20T10:00:00Z", 60.0)
    _result(folder, "other.json", "2026-11-20T10:00:00Z", 50.0)
    parts, _, _ = pack(tmp_path / "old.tar.gz", "budget")
    newer = _result(folder, "run.json", "2026-11-26T10:00:00Z", 65.0)  # made here since
    (folder / "other.json").unlink()
    assert main(["unpack", *map(str, parts)]) == 0
    out = capsys.readouterr().out
    assert json.loads(newer.read_text())["top1"] == 65.0  # the newer one stays in place
    kept = list((store.root / ".conflicts").rglob("run.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["top1"] == 60.0
    assert "kept both" in out and str(newer) in out and str(kept[0]) in out and "the one here is newer" in out
    assert json.loads((folder / "other.json").read_text())["top1"] == 50.0  # missing here: written
    assert main(["unpack", *map(str, parts)]) == 0  # again: the same files are left alone, the conflict named again
    assert "1 the same" in capsys.readouterr().out


def test_unpack_refuses_a_member_outside_the_results(tmp_path):
    bad = tmp_path / "bad.tar.gz"
    (tmp_path / "x").write_text("x")
    with tarfile.open(bad, "w:gz") as tar:
        tar.add(tmp_path / "x", arcname="../x")
    with pytest.raises(ValueError, match="not a results/ or logs/ path"):
        unpack([bad])


# ----- issue 48, class 1: a pack is read and checked whole before anything is written ----------------------------

def _store_files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()} \
        if root.exists() else {}


def _tar(path, members, mode="w:gz"):
    """A tar archive at ``path`` of ``{name: bytes}``."""
    import io

    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1_700_000_000
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_pack_with_a_refused_later_member_writes_nothing(tmp_path):
    """Class 1 (archives taken whole or not at all): a refused member anywhere in the pack leaves the store as it
    was; before, the members ahead of it were written."""
    here = tmp_path / "here"
    (here / "budget").mkdir(parents=True)
    before = _store_files(here)
    for bad, why in ((b"../escape", "not a results/ or logs/ path"),
                     (b"results/budget", "would replace a folder of the store")):
        pack_file = _tar(tmp_path / "p.tar.gz", {"results/budget/a.json": b"{}", bad.decode(): b"x"})
        with pytest.raises(ValueError, match=rf"^p\.tar\.gz: .*{why}.*; nothing was unpacked"):
            unpack([pack_file], root=here)
        assert _store_files(here) == before and not list(here.glob(".unpack-*"))


def test_a_member_larger_than_a_pack_holds_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """Class 1: a member's size is bounded (a small pack could expand into gigabytes)."""
    import vixnb.results.pack as P

    monkeypatch.setattr(P, "MAX_MEMBER_BYTES", 1000)
    here = tmp_path / "here"
    pack_file = _tar(tmp_path / "big.tar.gz", {"results/budget/a.json": b"{}", "results/budget/b.pt": bytes(5000)})
    with pytest.raises(ValueError, match=r"member 'results/budget/b\.pt' holds 0 MiB, over the 0 MiB"):
        unpack([pack_file], root=here)
    assert _store_files(here) == {}
    monkeypatch.setattr(P, "MAX_MEMBER_BYTES", 10_000)
    monkeypatch.setattr(P, "MAX_UNPACKED_BYTES", 4000)
    with pytest.raises(ValueError, match=r"its members hold over"):
        unpack([pack_file], root=here)


@pytest.mark.parametrize("make, why", [
    (lambda d: _tar(d / "r.tar.gz", {"results/budget/a.json": b"{}"}, mode="w"),
     "not a pack of vixnb batch"),  # a plain tar
    (lambda d: (d / "r.tar.gz").write_bytes(b"not gzip at all") and d / "r.tar.gz", "not a pack of vixnb batch"),
])
def test_what_is_not_a_pack_is_named_in_one_line(tmp_path, make, why):
    """Class 1: tar and gzip errors name the pack and the fix, not "an unexpected error: not a gzip file"."""
    path = make(tmp_path)
    with pytest.raises(ValueError, match=rf"^r\.tar\.gz: {why}.*nothing was unpacked\. Give the \.tar\.gz"):
        unpack([path], root=tmp_path / "here")


def test_truncated_or_misordered_parts_are_named_and_write_nothing(tmp_path):
    folder = ResultsStore().root / "budget"
    for i in range(3):
        _result(folder, f"run{i}.json", "2026-11-26T10:00:00Z", 70.0 + i)
    (folder / "weights").mkdir()
    (folder / "weights" / "run0.pt").write_bytes(os.urandom(3 * MIB))
    parts, _, _ = pack(tmp_path / "results.tar.gz", "budget", part_bytes=MIB)
    assert len(parts) >= 3
    here = tmp_path / "here"
    truncated = tmp_path / "cut"
    truncated.mkdir()
    for p in parts:
        data = p.read_bytes()
        (truncated / p.name).write_bytes(data[: len(data) // 2] if p is parts[-1] else data)
    with pytest.raises(ValueError, match=r"^results\.tar\.gz \(\d parts\): not a pack of vixnb batch, or a part is "
                                         r"truncated or out of order"):
        unpack(sorted(truncated.iterdir()), root=here)
    swapped = tmp_path / "swapped"
    swapped.mkdir()
    for p, q in zip(parts, [parts[1], parts[0], *parts[2:]]):
        (swapped / p.name).write_bytes(q.read_bytes())
    with pytest.raises(ValueError, match="truncated or out of order"):
        unpack(sorted(swapped.iterdir()), root=here)
    assert _store_files(here) == {}


def test_two_conflicts_of_one_command_keep_two_copies(tmp_path, capsys):
    """Class 1: two packs holding other copies of one file, in one command: each copy is kept at its own place
    (they were written to one path, the second replacing the first, while both messages said "kept both")."""
    here = tmp_path / "here"
    (here / "budget").mkdir(parents=True)
    (here / "budget" / "r.json").write_text('{"top1": 1}')
    one = _tar(tmp_path / "one.tar.gz", {"results/budget/r.json": b'{"top1": 2}'})
    two = _tar(tmp_path / "two.tar.gz", {"results/budget/r.json": b'{"top1": 3}'})
    report = unpack([one, two], root=here)
    kept = [beside for _, beside, _ in report["conflicts"]]
    assert len(kept) == 2 and len(set(kept)) == 2
    assert sorted(json.loads(open(k).read())["top1"] for k in kept) == [2, 3]
    assert json.loads((here / "budget" / "r.json").read_text())["top1"] == 1
