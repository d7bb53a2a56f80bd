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
