"""grpo-lambda preflight: whether this node is ready for the grid, in minutes, before it spends GPU-days.

One line per check (ok, fail or skip, and why), then a go/no-go and a JSON record of every number:

    versions       the Python packages the jobs import, their versions, torch's CUDA and NCCL
    cuda           every visible GPU answers: a matrix product on each against the CPU's
    bf16           bfloat16 is supported and its matrix product agrees with float32
    all-reduce     torch.distributed across the visible GPUs (NCCL, one spawned process per GPU): the
                   sum is right, and its bus bandwidth; on a CPU, gloo across 2 processes (the CPU jobs'
                   backend); one GPU: nothing to reduce
    hub            every hub model and dataset of --configfile is in the hub cache ($HF_HOME), or else
                   reachable (then the prefetch rule downloads it)
    disk           free space where the results go, against an estimate of what the grid writes
    step-ratio     benchmarks/bench_step.py on the Qwen2.5-1.5B shape (the tiny model on a CPU): GRPO-λ's
                   loss + backward against TRL's GRPO, goal ≤ 1.03
    study          the embedded default (config/config.yaml) for one seed, stage by stage through the CLI
                   (Snakemake is not needed on the node): every stage runs, and RL beats SFT
    vllm-colocate  a 2-step train cell with TRL's colocated vLLM and its weight sync, when vLLM is installed

--quick skips the last three (the slow ones); once a check has failed (the verdict is no-go whatever
follows) the slow ones are skipped too, saying so. --cpu is for a node without a GPU: the GPU checks are
skipped instead of failed, and the study check runs a small built-in study (``small_study``: the default's
task at its first level, a 2-layer model, 240 SFT steps on 128 sums, 2 RL steps, 2 benchmarks of 20 problems:
every stage must run and every RL step be logged with a finite loss, RL need not beat SFT) unless
--study-config names one, so that the whole run answers in minutes on 2 cores. Any study that learned nothing
(accuracy 0 for every arm and every RL group's rewards equal: ``nothing_learned``) is a no-go, naming why. A slow check prints a line as each stage starts and every
``PROGRESS_SECONDS`` while one runs. The record is written after every check (a partial one on Ctrl-C,
marked ``interrupted``). It is a CLI stage rather than a script so that the jobs' own environment runs it,
as one job of the cluster (`srun --gpus 4 grpo-lambda preflight --configfile config/paper.yaml`).

One module per job:

``verdict``        the checks in their order (``CHECKS``, ``SLOW``), ``run`` (a line each, the go/no-go), ``write``
``context``        what a check is handed (``Context``), ``Skip``, ``Fail``, a stage's command run with its log
``node``           versions, cuda, bf16, all-reduce, hub, disk (``grid_disk_estimate``, ``model_parameters``)
``step_ratio``     the step-ratio check and its table (``ratio_table``)
``study``          the study check: ``small_study``, ``study_commands``, ``study_accuracies``,
                   ``study_train_logs``, ``nothing_learned``
``vllm_colocate``  the vllm-colocate check
"""

from grpo_lambda.preflight.context import DEFAULT_STUDY, PROGRESS_SECONDS, Context, Fail, Skip, last_line, run_logged
from grpo_lambda.preflight.node import (REQUIRED_PACKAGES, all_reduce, check_all_reduce, check_bf16, check_cuda,
                                        check_disk, check_hub, check_versions, grid_disk_estimate, model_parameters)
from grpo_lambda.preflight.step_ratio import STEP_RATIO_GOAL, STEP_VARIANTS, check_step_ratio, ratio_table
from grpo_lambda.preflight.study import (SMALL_BENCHMARK_ROWS, SMALL_BENCHMARKS, SMALL_STUDY, check_study,
                                         nothing_learned, small_study, study_accuracies, study_commands,
                                         study_train_logs, train_command)
from grpo_lambda.preflight.verdict import CHECKS, RUNS, SLOW, run, write
from grpo_lambda.preflight.vllm_colocate import check_vllm_colocate

__all__ = ["CHECKS", "DEFAULT_STUDY", "PROGRESS_SECONDS", "REQUIRED_PACKAGES", "RUNS", "SLOW", "SMALL_BENCHMARKS",
           "SMALL_BENCHMARK_ROWS", "SMALL_STUDY", "STEP_RATIO_GOAL", "STEP_VARIANTS", "Context", "Fail", "Skip",
           "all_reduce", "check_all_reduce", "check_bf16", "check_cuda", "check_disk", "check_hub", "check_step_ratio",
           "check_study", "check_versions", "check_vllm_colocate", "grid_disk_estimate", "last_line",
           "model_parameters", "nothing_learned", "ratio_table", "run", "run_logged", "small_study",
           "study_accuracies", "study_commands", "study_train_logs", "train_command", "write"]
