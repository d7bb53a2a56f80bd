"""grpo_lambda.tables.raw: a published run's raw files written and read back as the results folder gave them,
so that a rebuild from docs/<run>/raw/ computes the same tables (answers that read like missing values
included: "None", "NA", "nan" are answers a model writes, and maj@k counts their votes)."""

import gzip

import numpy as np
import pandas as pd
import pytest

from grpo_lambda.tables import raw
from grpo_lambda.tables.collect import _SAMPLE_DTYPES, summarise

CONFIG = {"results": "results", "seeds": [0], "models": {"tiny": {"source": "x"}}}
# What pandas reads as missing by default, each a real extracted answer here.
LOOKS_MISSING = ["None", "NA", "N/A", "nan", "NaN", "null", "<NA>", "n/a", "#N/A"]


def samples(rows):
    """A samples frame as collect.collect_samples builds it, from (variant, seed, mode, sample, id, correct,
    extracted) rows of the tiny/arith/final/bench cell."""
    frame = pd.DataFrame(rows, columns=["variant", "seed", "mode", "sample", "id", "correct", "extracted"])
    frame = frame.assign(model="tiny", dataset="arith", step="final", benchmark="bench", formatted=1.0,
                         length=[12.0] * (len(frame) - 1) + [np.nan])
    frame = frame[["model", "dataset", "variant", "seed", "step", "benchmark", "id", "mode", "sample", "correct",
                   "formatted", "length", "extracted"]]
    frame = frame.astype({key: value for key, value in _SAMPLE_DTYPES.items() if key in frame})
    frame = frame.astype({"id": object})
    frame["extracted"] = pd.Series([row[-1] for row in rows], dtype=object)  # None kept: as collect_samples has it
    return frame


def run_data(sample_frame):
    logs = pd.DataFrame({"model": ["tiny"], "dataset": ["arith"], "variant": ["grpo"], "seed": [0], "step": [1],
                         "loss": [0.25]})
    provenance = pd.DataFrame({"stage": ["train"], "commit": ["abc"], "dirty": [None], "files": [2]})
    completions = pd.DataFrame({"model": ["tiny"], "dataset": ["arith"], "variant": ["grpo"], "seed": [0],
                                "phase": ["early"], "prompt": ["NA"], "completion": ["None"], "reward": [1.0],
                                "advantage": [np.nan]})
    return raw.RunData(sample_frame, logs, provenance, completions)


# Problem p1: four sampled answers "None", "None", "7", (no answer); the majority answer "None" is right.
# Problem p2: "NA" right once, "3" wrong twice: the majority "3" is wrong. The greedy rows and the SFT
# row (no seed) carry the other look-alikes.
ROWS = [("grpo", 0, "sampled", 0, "p1", 1.0, "None"), ("grpo", 0, "sampled", 1, "p1", 1.0, "None"),
        ("grpo", 0, "sampled", 2, "p1", 0.0, "7"), ("grpo", 0, "sampled", 3, "p1", 0.0, None),
        ("grpo", 0, "sampled", 0, "p2", 1.0, "NA"), ("grpo", 0, "sampled", 1, "p2", 0.0, "3"),
        ("grpo", 0, "sampled", 2, "p2", 0.0, "3"), ("grpo", 0, "sampled", 3, "p2", 0.0, None),
        *[("grpo", 0, "greedy", 0, f"g{i}", 1.0, answer) for i, answer in enumerate(LOOKS_MISSING)],
        ("sft", None, "greedy", 0, "g0", 0.0, None)]


def test_answers_that_look_missing_read_back_as_the_answers_and_maj_at_k_is_unchanged(tmp_path):
    written = samples(ROWS)
    raw.write_raw(CONFIG, run_data(written), tmp_path)
    assert raw.has_raw(tmp_path)
    config, data = raw.read_raw(tmp_path)
    assert config == CONFIG
    back = data.samples
    assert back["extracted"].tolist() == [row[-1] for row in ROWS]  # "None" is the text, None is no answer
    assert back["seed"].tolist()[-1] is pd.NA and back["seed"].tolist()[0] == 0
    assert np.isnan(back["length"].iloc[-1]) and back["length"].iloc[0] == 12.0
    pd.testing.assert_frame_equal(back, written, check_dtype=False, check_categorical=False)  # (id: str, not object)

    before, after = summarise(written), summarise(back)
    maj = after.set_index("variant")["maj_at_k"]
    assert maj["grpo"] == pytest.approx((1.0 + 0.0) / 2)  # p1's majority "None" right, p2's "3" wrong
    pd.testing.assert_frame_equal(after, before, check_dtype=False, check_categorical=False)
    # the other raw files keep such text too
    assert data.completions[["prompt", "completion"]].values.tolist() == [["NA", "None"]]
    assert data.provenance["dirty"].tolist() == [None] and data.provenance["files"].tolist() == [2]


def test_the_raw_files_are_byte_reproducible_and_a_missing_one_is_named(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        folder.mkdir()
        paths = raw.write_raw(CONFIG, run_data(samples(ROWS)), folder)
    assert sorted(path.name for path in paths) == sorted(raw.RAW_FILES)
    for name in raw.RAW_FILES:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    header = (first / raw.SAMPLES).read_bytes()[:10]
    assert header[4:8] == b"\0\0\0\0"  # gzip's mtime field: 0
    assert gzip.decompress((first / raw.SAMPLES).read_bytes()).decode().splitlines()[0].startswith("model,dataset")
    (first / raw.PROVENANCE).unlink()
    assert not raw.has_raw(first)
    with pytest.raises(FileNotFoundError, match=r"raw file\(s\) \['provenance.csv'\] missing"):
        raw.read_raw(first)
