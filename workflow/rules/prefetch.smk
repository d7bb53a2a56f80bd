# Every hub model and dataset of the study, downloaded once into $HF_HOME by the submitting machine
# (a local rule), at the revision its config names; the output records the commit and file hashes of
# each. Jobs run with HF_HUB_OFFLINE=1 and read that cache. Only in the plan when the study reads
# something from the hub.
rule prefetch:
    output:
        f"{RESULTS}/{prefetch.RECORD}",
    params:
        settings=lambda w: json.dumps(HUB_SOURCES, sort_keys=True),
    log:
        f"{RESULTS}/logs/prefetch.log",
    shell:
        "env -u HF_HUB_OFFLINE -u HF_DATASETS_OFFLINE"
        " grpo-lambda prefetch --settings {params.settings:q} --out {output:q} > {log:q} 2>&1"
