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
