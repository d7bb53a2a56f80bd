"""A run's job blocks, shortened (grpo_lambda.job_log): a few files of each list and how many more; a reason
keeps every one of its parts, so `grpo-lambda plan` reads the same reasons from it."""

from __future__ import annotations

import logging

from grpo_lambda import job_log, plan

FILES = [f"results/tiny/arith/grpo/seed{seed}/eval/final/arith-{b}.json" for seed in range(4) for b in range(1, 6)]


def test_a_long_list_keeps_its_first_files_and_counts_the_rest():
    assert job_log.short_files(FILES) == [*FILES[:3], "… 17 more"]
    assert job_log.short_files(FILES[:4]) == FILES[:4]  # "… 1 more" would be no shorter


def test_a_reason_keeps_every_part_with_a_few_files_each():
    reason = (f"Missing output files: {', '.join(FILES)}; Input files updated by another job: {', '.join(FILES[:2])}; "
              "Params have changed since last execution")
    short = job_log.short_reason(reason)
    assert short == (f"Missing output files: {', '.join(FILES[:3])}, … 17 more; Input files updated by another job: "
                     f"{', '.join(FILES[:2])}; Params have changed since last execution")
    block = "rule train:\n    reason: {}\n    wildcards: seed=0"
    # plan reads dry runs, which are never shortened; a shortened block still gives it every reason
    shown, full = plan.parse_jobs(block.format(short)), plan.parse_jobs(block.format(reason))
    assert [(j["rule"], j["reasons"], j["wildcards"]) for j in shown] == \
        [(j["rule"], j["reasons"], j["wildcards"]) for j in full]


def test_a_job_info_record_is_shortened_in_place():
    record = logging.makeLogRecord({"input": FILES, "output": FILES[:2], "log": [], "reason": "Forced execution"})
    job_log.shorten_job_info(record)
    assert (record.input, record.output, record.log, record.reason) == (
        [*FILES[:3], "… 17 more"], FILES[:2], [], "Forced execution")
