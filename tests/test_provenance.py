"""grpo_lambda.provenance: the versions and commit behind a file, and the table of the distinct ones."""

import json
import subprocess

import torch

from conftest import ROOT
from grpo_lambda import config as study
from grpo_lambda import files, provenance
from grpo_lambda.tables.collect import collect_provenance


def test_a_record_names_the_running_versions_and_this_checkouts_commit():
    import transformers
    import trl

    record = provenance.record()
    assert tuple(record) == provenance.FIELDS
    assert record["torch"] == torch.__version__ and record["transformers"] == transformers.__version__
    assert record["trl"] == trl.__version__
    assert record["vllm"] is None and record["cuda"] is None  # no vLLM asked for, no GPU here
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert record["commit"].split("+")[0] == head.stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD"]).returncode != 0
        assert record["commit"].endswith("+changes") == dirty


def test_outside_a_checkout_the_commit_is_unknown(tmp_path):
    assert provenance.git_commit.__wrapped__(tmp_path) == "unknown"


def test_the_table_counts_each_distinct_record_per_stage(tmp_path):
    config = study.load(str(ROOT / "config" / "config.yaml"))
    results = tmp_path / "results"
    here = provenance.record()
    other = {**here, "trl": "0.0.1"}
    files.write_json(results / "tiny" / "arith" / "sft" / "provenance.json", here)
    files.write_json(results / "tiny" / "arith" / "grpo" / "seed0" / "provenance.json", here)
    files.write_json(results / "tiny" / "arith" / "grpo" / "seed1" / "provenance.json", other)
    benchmarks = list(config["benchmarks"])
    for benchmark in benchmarks:
        files.write_json(results / "tiny" / "arith" / "grpo" / "seed0" / "eval" / "final" / f"{benchmark}.json",
                         {"accuracy": 0.5, "provenance": here})
    # A summary written before provenance was recorded counts nowhere.
    files.write_json(results / "tiny" / "arith" / "grpo" / "seed1" / "eval" / "final" / f"{benchmarks[0]}.json",
                     {"accuracy": 0.5})
    table = collect_provenance(results, config)
    rows = {(row.stage, row.trl): row.files for row in table.itertuples()}
    assert rows == {("sft", here["trl"]): 1, ("train", here["trl"]): 1, ("train", "0.0.1"): 1,
                    ("evaluate", here["trl"]): len(benchmarks)}
    assert json.loads(table.to_json(orient="records"))[0]["commit"] == here["commit"]
