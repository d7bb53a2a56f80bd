"""Snakemake's job blocks, shortened for the terminal of a run: a job's ``input``, ``output`` and ``reason`` list
every file (the tables' job reads every evaluation file, a reason can name a hundred paths), so a run of the
embedded default printed lines of thousands of characters. During a run (not a dry run, whose full listing
``grpo-lambda plan`` and the tests read) each list keeps its first files and says how many more there are
(workflow/rules/common.smk installs :func:`shorten_job_info` on Snakemake's logger). A failed job's error block is
left whole: it names every file of the job, its log and its command. Standard library only.
"""

from __future__ import annotations

SHOWN_FILES = 3  # files a list keeps; the rest are counted


def short_files(files: list[str], shown: int = SHOWN_FILES) -> list[str]:
    """``files``, or its first ``shown`` and "… N more" when that is shorter."""
    if len(files) <= shown + 1:
        return list(files)
    return [*files[:shown], f"… {len(files) - shown} more"]


def short_reason(reason: str, shown: int = SHOWN_FILES) -> str:
    """Snakemake's reason (parts joined by "; ", each "What: file, file, ..." or a sentence) with each part's
    files shortened by :func:`short_files`; every part keeps its words, so the reason still says why."""
    parts = []
    for part in reason.split("; "):
        head, colon, files = part.partition(": ")
        parts.append(f"{head}{colon}{', '.join(short_files(files.split(', '), shown))}" if colon else part)
    return "; ".join(parts)


def shorten_job_info(record) -> None:
    """Shorten a job-info log record's ``input``, ``output``, ``log`` and ``reason`` in place."""
    for field in ("input", "output", "log"):
        value = getattr(record, field, None)
        if isinstance(value, list):
            setattr(record, field, short_files(value))
    if isinstance(getattr(record, "reason", None), str):
        record.reason = short_reason(record.reason)
