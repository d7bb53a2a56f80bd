import json

import pytest

from grpo_lambda import files


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.json"
    files.write_json(target, {"complete": True})
    with pytest.raises(RuntimeError):
        with files.atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert json.loads(target.read_text()) == {"complete": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_folders_are_replaced_whole(tmp_path):
    target = tmp_path / "model"
    with files.atomic_path(target) as tmp:
        tmp.mkdir()
        (tmp / "old.bin").write_text("old")
    with files.atomic_path(target) as tmp:
        tmp.mkdir()
        (tmp / "new.bin").write_text("new")
    assert [p.name for p in target.iterdir()] == ["new.bin"]


def test_jsonl_rows_that_cannot_be_written_leave_the_previous_file(tmp_path):
    path = tmp_path / "out" / "rows.jsonl"
    files.write_jsonl(path, [{"id": "1", "answer": "π"}])
    assert files.read_jsonl(path) == [{"id": "1", "answer": "π"}]
    with pytest.raises(TypeError):
        files.write_jsonl(path, [{"id": "2"}, {"id": "3", "answer": object()}])
    assert files.read_jsonl(path) == [{"id": "1", "answer": "π"}]
    assert [entry.name for entry in path.parent.iterdir()] == ["rows.jsonl"]


def test_one_trainer_per_cell_a_second_is_refused_naming_the_first(tmp_path):
    """Two runs from different working folders on one results tree (Snakemake's lock is per working
    folder) must not train the same cell at once: the second fails before touching anything."""
    import os

    import pytest

    from grpo_lambda import train

    cell = tmp_path / "cell"
    with files.exclusive(cell):
        with pytest.raises(files.CellBusy, match=rf"{cell}: another trainer is writing this cell \(pid {os.getpid()} on "):
            train.run({}, base="unused", data_path="unused", cell_dir=str(cell), seed=0)
        assert sorted(path.name for path in cell.iterdir()) == [".lock"]  # nothing else was touched
    with files.exclusive(cell):  # released at the end of the block
        pass


# ---- a write interrupted half-way: the target is never written in place -------------------------


class _HalfWriter:
    """A file handle that writes the first half of what it is given, then fails as ``error`` says."""

    def __init__(self, handle, error, on_fail):
        self._handle, self._error, self._on_fail = handle, error, on_fail

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()
        return False

    def write(self, data):
        self._handle.write(data[: len(data) // 2])
        self._handle.flush()
        self._on_fail()
        raise self._error

    def __getattr__(self, name):
        return getattr(self._handle, name)


@pytest.mark.parametrize("error", [KeyboardInterrupt(), OSError(28, "No space left on device")],
                         ids=["ctrl-c", "disk-full"])
def test_a_write_interrupted_half_way_leaves_the_old_file_whole_and_no_temporary(tmp_path, monkeypatch, error):
    """Half of the new text reaches the disk before the write fails: whatever opened the file for
    writing (pathlib or open()), the target keeps its old content throughout and no temporary is left,
    also for a KeyboardInterrupt (not an Exception)."""
    import builtins
    import io
    import os

    target = tmp_path / "summary.json"
    old = {"complete": True, "rows": list(range(50))}
    files.write_json(target, old)
    old_text = target.read_text()
    real_open = builtins.open
    seen_mid_write = []

    def failing_open(file, mode="r", *args, **kwargs):
        handle = real_open(file, mode, *args, **kwargs)
        if any(flag in mode for flag in "wax") and os.path.dirname(os.fspath(file)) == str(tmp_path):
            return _HalfWriter(handle, error, lambda: seen_mid_write.append(target.read_text()))
        return handle

    monkeypatch.setattr(builtins, "open", failing_open)
    monkeypatch.setattr(io, "open", failing_open)  # pathlib opens through io.open
    with pytest.raises(type(error)):
        files.write_json(target, {"complete": False, "rows": list(range(100, 200))})
    monkeypatch.undo()
    assert seen_mid_write == [old_text]  # a reader during the write saw the old file, not a truncated one
    assert target.read_text() == old_text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]
    files.write_json(target, {"complete": "again"})  # the next write is not hindered by a leftover
    assert json.loads(target.read_text()) == {"complete": "again"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_a_keyboard_interrupt_inside_atomic_path_removes_the_temporary_folder(tmp_path):
    """Ctrl-C while a folder is being filled (a model being saved): the old folder stays, the half-filled
    temporary goes."""
    target = tmp_path / "model"
    with files.atomic_path(target) as tmp:
        tmp.mkdir()
        (tmp / "weights.bin").write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with files.atomic_path(target) as tmp:
            tmp.mkdir()
            (tmp / "weights.bin").write_text("ne")
            raise KeyboardInterrupt
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    assert (target / "weights.bin").read_text() == "old"
