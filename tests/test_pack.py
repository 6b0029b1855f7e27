"""What a lent GPU machine sends back: the pack in parts under the device's return limits, and ``vixnb unpack``,
which never replaces a result here silently (issue 36)."""
import json
import os
import re
import tarfile

import pytest

from vixnb.cli import main
from vixnb.results import ResultsStore
from vixnb.results.pack import RETURN_FILE_MIB, archives, pack, unpack

MIB = 2**20
RUN = "vit-cifar10-seed"  # a stored run's name: <model>-<dataset>-seed<N>-<key>
R, O = f"{RUN}0-00000000000000aa", "fnet-cifar10-seed0-00000000000000bb"


def _result(folder, name, finished, top1):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"top1": top1, "provenance": {"finished": finished}}))
    return path


def test_a_40_mib_checkpoint_travels_in_parts_and_comes_back_byte_for_byte(tmp_path):
    folder = ResultsStore().root / "budget"
    _result(folder, "vit-cifar10-seed0-00000000000000aa.json", "2026-11-26T10:00:00Z", 71.5)
    checkpoint = folder / ".checkpoints" / f"{R}.pt"
    checkpoint.parent.mkdir(parents=True)
    data = os.urandom(40 * MIB)  # incompressible, as trained weights nearly are
    checkpoint.write_bytes(data)
    parts, packed, left = pack(tmp_path / "out" / "results.tar.gz", "budget")
    assert left == [] and packed == [f"results/budget/{R}.json", f"results/budget/.checkpoints/{R}.pt"]
    assert [p.name for p in parts] == [f"results.tar.gz.part{k}of3" for k in (1, 2, 3)]
    assert all(p.stat().st_size <= RETURN_FILE_MIB * MIB for p in parts)
    here = tmp_path / "here"
    report = unpack(list(reversed(parts)), root=here)  # any order: the part names give it
    assert report["written"] == packed and not report["conflicts"]
    assert (here / "budget" / ".checkpoints" / "vit-cifar10-seed0-00000000000000aa.pt").read_bytes() == data
    with pytest.raises(ValueError, match=r"parts 2 of 3 are missing"):
        archives([parts[0], parts[2]])


def test_the_pack_never_writes_more_files_than_allowed_and_drops_checkpoints_first(tmp_path):
    folder = ResultsStore().root / "budget"
    for i in range(3):
        _result(folder, f"{RUN}{i}-00000000000000c{i}.json", "2026-11-26T10:00:00Z", 70.0 + i)
    (folder / "weights").mkdir()
    (folder / "weights" / f"{RUN}0-00000000000000c0.pt").write_bytes(os.urandom(MIB))
    (folder / ".checkpoints").mkdir()
    for name, mib in ((f"{RUN}1-0000000000000001.pt", 1), (f"{RUN}2-0000000000000002.pt", 2),
                      (f"{RUN}3-0000000000000003.pt", 3)):
        (folder / ".checkpoints" / name).write_bytes(os.urandom(mib * MIB))
    # parts of 1 MiB, at most 4: the results, the kept weights and the smallest checkpoints that fit
    parts, packed, left = pack(tmp_path / "results.tar.gz", "budget", max_parts=4, part_bytes=MIB)
    assert len(parts) <= 4 and all(p.stat().st_size <= MIB for p in parts)
    assert {f"results/budget/{RUN}{i}-00000000000000c{i}.json" for i in range(3)} | \
        {f"results/budget/weights/{RUN}0-00000000000000c0.pt"} <= set(packed)
    assert f"results/budget/.checkpoints/{RUN}3-0000000000000003.pt" not in packed
    assert any("0000000000000003.pt" in n and "paused run's checkpoint" in n for n in left)
    assert all(".checkpoints" in n for n in left)  # never a result


def test_unpack_of_an_older_pack_over_a_newer_result_keeps_both_and_names_them(tmp_path, capsys):
    store = ResultsStore()
    folder = store.root / "budget"
    _result(folder, "vit-cifar10-seed0-00000000000000aa.json", "2026-11-20T10:00:00Z", 60.0)
    _result(folder, "fnet-cifar10-seed0-00000000000000bb.json", "2026-11-20T10:00:00Z", 50.0)
    parts, _, _ = pack(tmp_path / "old.tar.gz", "budget")
    newer = _result(folder, "vit-cifar10-seed0-00000000000000aa.json", "2026-11-26T10:00:00Z", 65.0)  # made here since
    (folder / "fnet-cifar10-seed0-00000000000000bb.json").unlink()
    assert main(["unpack", *map(str, parts)]) == 0
    out = capsys.readouterr().out
    assert json.loads(newer.read_text())["top1"] == 65.0  # the newer one stays in place
    kept = list((store.root / ".conflicts").rglob("vit-cifar10-seed0-00000000000000aa.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["top1"] == 60.0
    assert "kept both" in out and str(newer) in out and str(kept[0]) in out and "the one here is newer" in out
    assert json.loads((folder / f"{O}.json").read_text())["top1"] == 50.0  # missing here: written
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
    (here / "budget" / f"{O}.json").mkdir(parents=True)
    before = _store_files(here)
    for bad, why in ((b"../escape", "not a results/ or logs/ path"),
                     (b"results/budget", "not a file of the store's shapes"),
                     (f"results/budget/{O}.json".encode(), "would replace a folder of the store")):
        pack_file = _tar(tmp_path / "p.tar.gz", {f"results/budget/{R}.json": b"{}", bad.decode(): b"x"})
        with pytest.raises(ValueError, match=rf"^p\.tar\.gz: .*{why}.*; nothing was unpacked"):
            unpack([pack_file], root=here)
        assert _store_files(here) == before and not list(here.glob(".unpack.*"))


def test_a_member_larger_than_a_pack_holds_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """Class 1: a member's size is bounded (a small pack could expand into gigabytes)."""
    import vixnb.results.pack as P

    monkeypatch.setattr(P, "MAX_MEMBER_BYTES", 1000)
    here = tmp_path / "here"
    pack_file = _tar(tmp_path / "big.tar.gz", {f"results/budget/{R}.json": b"{}",
                                               f"results/budget/weights/{R}.pt": bytes(5000)})
    with pytest.raises(ValueError, match=rf"member 'results/budget/weights/{R}\.pt' holds 0 MiB, over the 0 MiB"):
        unpack([pack_file], root=here)
    assert _store_files(here) == {}
    monkeypatch.setattr(P, "MAX_MEMBER_BYTES", 10_000)
    monkeypatch.setattr(P, "MAX_UNPACKED_BYTES", 4000)
    with pytest.raises(ValueError, match=r"its members hold over"):
        unpack([pack_file], root=here)


@pytest.mark.parametrize("make, why", [
    (lambda d: _tar(d / "r.tar.gz", {"results/budget/vit-cifar10-seed0-00000000000000aa.json": b"{}"}, mode="w"),
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
        _result(folder, f"{RUN}{i}-00000000000000c{i}.json", "2026-11-26T10:00:00Z", 70.0 + i)
    (folder / "weights").mkdir()
    (folder / "weights" / f"{RUN}0-00000000000000c0.pt").write_bytes(os.urandom(3 * MIB))
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
    (here / "budget" / "vit-cifar10-seed0-00000000000000aa.json").write_text('{"top1": 1}')
    one = _tar(tmp_path / "one.tar.gz", {"results/budget/vit-cifar10-seed0-00000000000000aa.json": b'{"top1": 2}'})
    two = _tar(tmp_path / "two.tar.gz", {"results/budget/vit-cifar10-seed0-00000000000000aa.json": b'{"top1": 3}'})
    report = unpack([one, two], root=here)
    kept = [beside for _, beside, _ in report["conflicts"]]
    assert len(kept) == 2 and len(set(kept)) == 2
    assert sorted(json.loads(open(k).read())["top1"] for k in kept) == [2, 3]
    assert json.loads((here / "budget" / "vit-cifar10-seed0-00000000000000aa.json").read_text())["top1"] == 1


# ----- issue 57, class 1: names are claimed atomically ---------------------------------------------------------

def test_concurrent_unpacks_keep_every_copy_and_every_kept_both_is_true(tmp_path):
    """Class 1 (two processes choose the same name): eight unpacks at once, each pack holding another copy of a
    result here and of one that is new here. Each differing copy is kept at a place of its own, every "kept both"
    names a file that holds that pack's copy, and the new result is written once, the others kept beside it (the
    conflict names were chosen by checking that they did not exist, then written with replace: copies were lost)."""
    import threading

    here = tmp_path / "here"
    (here / "budget").mkdir(parents=True)
    (here / "budget" / f"{R}.json").write_text('{"top1": -1}')
    packs = [_tar(tmp_path / f"p{i}.tar.gz", {f"results/budget/{R}.json": f'{{"top1": {i}}}'.encode(),
                                              f"results/budget/{O}.json": f'{{"new": {i}}}'.encode()})
             for i in range(8)]
    start, reports, errors = threading.Barrier(len(packs)), [None] * len(packs), []

    def take(i):
        start.wait()
        try:
            reports[i] = unpack([packs[i]], root=here)
        except Exception as e:  # noqa: BLE001  (said by the assertion below)
            errors.append(e)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(len(packs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and all(r is not None for r in reports)
    kept = [beside for r in reports for _, beside, _ in r["conflicts"]]
    assert len(kept) == len(set(kept)) == 2 * len(packs) - 1  # every conflict at its own place
    copies = sorted(json.loads(open(k).read()).get("top1", 100) for k in kept)
    assert copies[:len(packs)] == list(range(len(packs)))  # every pack's copy of the result here, each once
    assert sum(f"results/budget/{O}.json" in r["written"] for r in reports) == 1  # the new one written once
    news = {json.loads(open(k).read())["new"] for k in kept if "fnet" in k}
    assert news | {json.loads((here / "budget" / f"{O}.json").read_text())["new"]} == set(range(len(packs)))
    assert json.loads((here / "budget" / f"{R}.json").read_text())["top1"] == -1  # the one here stays


# ----- issue 57, class 2: a pack is replaced whole or not at all -----------------------------------------------

def _store_with(folder, top1):
    for i in range(3):
        _result(folder, f"{RUN}{i}-00000000000000c{i}.json", "2026-11-26T10:00:00Z", top1 + i)
    (folder / "weights").mkdir(exist_ok=True)
    (folder / "weights" / f"{RUN}0-00000000000000c0.pt").write_bytes(os.urandom(2 * MIB))


@pytest.mark.parametrize("stop", ["signal", "full disk"])
def test_a_pack_stopped_while_it_is_rewritten_leaves_the_old_pack_whole(tmp_path, monkeypatch, stop):
    """Class 2 (an output of several files is not replaced whole): `vixnb batch --pack` deleted the earlier parts,
    then wrote the new ones in place; stopped in between (a lent machine's time out, a full disk) it left no pack
    that unpacks. Now the new parts are written beside the old under names of their own, and the old ones go only
    when the new are complete."""
    import errno

    folder = ResultsStore().root / "budget"
    _store_with(folder, 50.0)
    out = tmp_path / "out" / "results.tar.gz"
    old_parts, _, _ = pack(out, "budget", part_bytes=MIB)
    old = {p.name: p.read_bytes() for p in old_parts}
    assert len(old) >= 2
    _store_with(folder, 60.0)  # what the next pack would carry
    real, added = tarfile.TarFile.addfile, []

    def stopped(self, info, fileobj=None):
        added.append(info.name)
        if len(added) > 2:  # some files written into the new parts
            if stop == "signal":
                raise KeyboardInterrupt("stopped by signal SIGTERM")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, info, fileobj)

    monkeypatch.setattr(tarfile.TarFile, "addfile", stopped)
    with pytest.raises(KeyboardInterrupt if stop == "signal" else OSError) as raised:
        pack(out, "budget", part_bytes=MIB)
    if stop == "full disk":  # the one error of a full disk, naming the pack (class 8)
        assert str(raised.value).startswith(f"no space left to write {out} (needs about ")
    assert {p.name: p.read_bytes() for p in out.parent.iterdir()} == old  # the old pack, whole, and nothing else
    report = unpack(sorted(out.parent.iterdir()), root=tmp_path / "back")
    assert json.loads((tmp_path / "back" / "budget" / f"{RUN}0-00000000000000c0.json").read_text())["top1"] == 50.0
    assert len(report["written"]) == 4


def test_a_signal_while_the_new_parts_take_their_names_waits_until_they_have(tmp_path, monkeypatch):
    """Class 2: the renames that put the new parts in place, and the removal of the old ones, run with SIGTERM held:
    a signal in their midst acts after them, and the folder holds the new pack whole."""
    import signal

    from vixnb import files
    from vixnb.plan.stopping import stopped_by_signals

    folder = ResultsStore().root / "budget"
    _store_with(folder, 50.0)
    out = tmp_path / "out" / "results.tar.gz"
    pack(out, "budget", part_bytes=MIB)
    _store_with(folder, 60.0)
    real, renamed = files.os.replace, []

    def replace(a, b):
        real(a, b)
        renamed.append(b)
        if len(renamed) == 1:
            signal.raise_signal(signal.SIGTERM)  # in the midst of the renames

    monkeypatch.setattr(files.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"), stopped_by_signals():
        pack(out, "budget", part_bytes=MIB)
    monkeypatch.setattr(files.os, "replace", real)
    assert len(renamed) >= 2  # every rename ran before the signal acted
    unpack(sorted(out.parent.iterdir()), root=tmp_path / "back")
    assert json.loads((tmp_path / "back" / "budget" / f"{RUN}0-00000000000000c0.json").read_text())["top1"] == 60.0


# ----- issue 57, class 3: what pack writes, unpack takes -------------------------------------------------------

def test_every_kind_of_store_entry_packs_and_unpacks_byte_for_byte(tmp_path):
    """Class 3 (pack and unpack disagreed): a round trip over every shape of the store (``store.STORE_SHAPES``):
    results, measurements, benchmarks, kept weights, a paused run's checkpoint, the probe's ledger. A result reached
    through a symbolic link was packed as a link to the lent machine's path, and unpack then refused the whole pack;
    it is packed as the file it links to. What unpack would refuse (a link to nothing, a name of no shape) is named
    and left here, and the rest travels."""
    from vixnb.results.layout import STORE_SHAPES, store_kind

    root = ResultsStore().root
    made = {"result": f"budget/{R}.json", "measurement": "budget/measure/vix-gpu-memory-cifar10-b64.json",
            "benchmark": "bench/mixers-fp32.json", "weights": f"budget/weights/{R}.pt",
            "checkpoint": f"budget/.checkpoints/{O}.pt", "ledger": "probe-ledger.json"}
    assert set(made) == set(STORE_SHAPES) and all(store_kind(path) == kind for kind, path in made.items())
    for path in made.values():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(os.urandom(100) if path.endswith(".pt") else b'{"top1": 1}')
    elsewhere = tmp_path / "elsewhere.json"  # a result reached through a link, to a file outside the store
    elsewhere.write_text('{"top1": 2}')
    (root / "budget" / f"{RUN}1-00000000000000dd.json").symlink_to(elsewhere)
    (root / "budget" / f"{RUN}2-00000000000000ee.json").symlink_to(tmp_path / "nothing.json")
    (root / "budget" / "notes.json").write_text("{}")
    parts, packed, left = pack(tmp_path / "out" / "results.tar.gz", "budget")
    with tarfile.open(parts[0]) as tar:
        assert all(m.isfile() for m in tar.getmembers())  # never a link
    assert {f"results/{p}" for p in made.values()} | {f"results/budget/{RUN}1-00000000000000dd.json"} == set(packed)
    assert any(f"{RUN}2-00000000000000ee.json (a link to nothing" in n for n in left)
    assert any("notes.json (its name is none of a stored file's" in n for n in left)
    back = tmp_path / "back"
    report = unpack(parts, root=back)
    assert sorted(report["written"]) == sorted(packed)
    for name in packed:
        assert (back / name[len("results/"):]).read_bytes() == (root / name[len("results/"):]).read_bytes()
    assert not (back / "budget" / f"{RUN}1-00000000000000dd.json").is_symlink()


@pytest.mark.parametrize("member", ["results/budget", "results/stray.json", "results/.locks/batch.lock",
                                    "results/junk/0001.json", "results/budget/notes.json", "logs/../x",
                                    "results/budget/.weights-local/x.pt"])
def test_unpack_takes_only_the_shapes_pack_writes_and_refuses_the_rest_whole(tmp_path, member):
    """Class 3: unpack wrote any name under results/: a file where a profile's folder belongs, a result at the
    store's root, the batch lock, thousands of files in a folder nothing reads. A pack holding one is refused whole,
    naming it; nothing is written."""
    here = tmp_path / "here"
    pack_file = _tar(tmp_path / "p.tar.gz", {f"results/budget/{R}.json": b'{"top1": 1}', member: b"x"})
    with pytest.raises(ValueError, match=rf"^p\.tar\.gz: archive member {re.escape(repr(member))}: not .*; nothing "
                                         r"was unpacked"):
        unpack([pack_file], root=here)
    assert _store_files(here) == {}


def test_a_link_to_nothing_here_is_never_written_through_and_the_packs_copy_is_kept(tmp_path):
    """Class 1: where the store holds a link to nothing at a result's name, unpack neither follows it nor replaces
    it: the pack's copy is kept beside, named."""
    here = tmp_path / "here"
    (here / "budget").mkdir(parents=True)
    (here / "budget" / f"{R}.json").symlink_to(tmp_path / "gone.json")
    report = unpack([_tar(tmp_path / "p.tar.gz", {f"results/budget/{R}.json": b'{"top1": 1}'})], root=here)
    (_, beside, message), = report["conflicts"]
    assert open(beside).read() == '{"top1": 1}' and "cannot be read" in message
    assert (here / "budget" / f"{R}.json").is_symlink() and not (tmp_path / "gone.json").exists()
