#!/usr/bin/env bash
# Mutation testing of the maths, grading, config and data code (mutmut): plant one small bug at a time and check that
# the module's fast tests fail. Not part of CI (minutes to hours); run it before a release, and record
# the score and every surviving mutant in docs/testing.md.
#
#   pip install -c envs/constraints-cpu.txt mutmut     # once, into the project's environment (not a CI
#                                                      # requirement; mutmut 3.8.1 made the recorded score)
#   bash scripts/mutation.sh                           # every module below, one after the other
#   bash scripts/mutation.sh traces objectives         # some of them
#   MUTATION_JOBS=4 bash scripts/mutation.sh stats     # more parallel test processes (default 2)
#   MUTANTS='*policy_loss__mutmut_* *_normalise__mutmut_*' bash scripts/mutation.sh objectives
#                                                      # only the mutants of some functions (globs)
#
# Each module runs in its own scratch copy of the working tree (${MUTATION_DIR}/<module>/, where mutmut
# keeps its mutants/ folder and cache), against the fast tests that cover it: a rerun only tests
# mutants whose code changed. `cd ${MUTATION_DIR}/<module> && mutmut results` lists the survivors and
# `mutmut show <name>` prints one as a diff. The trainer is scoped to its loss path (the functions
# listed in LOSS_PATH), not to OAR, dynamic sampling or config parsing.
# `preflight`, `progress` and `position` are scoped to the functions SCOPES lists (MUTANTS overrides it).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MUTATION_DIR="${MUTATION_DIR:-${TMPDIR:-/tmp}/grpo-lambda-mutation}"
JOBS="${MUTATION_JOBS:-2}"
[[ -d "$ROOT/.venv" && -z "${VIRTUAL_ENV:-}" ]] && source "$ROOT/.venv/bin/activate"
command -v mutmut >/dev/null || { echo "mutmut not found: pip install -c envs/constraints-cpu.txt mutmut" >&2; exit 1; }

# module -> its fast tests (files or test node ids)
declare -A TESTS=(
  [traces]="tests/test_traces.py tests/test_trace_length.py tests/test_traces.py::test_window_width_is_exact_where_logarithms_round
            tests/test_traces.py::test_apply_trace_across_two_scan_blocks tests/test_objectives.py::test_half_precision_loss_keeps_every_trace_setting"
  [objectives]="tests/test_objectives.py tests/test_objectives.py::test_ptrace_decays_with_gamma_times_lambda
                tests/test_objectives.py::test_half_precision_loss_keeps_every_trace_setting tests/test_trace_length.py"
  [trainer]="tests/test_trainer.py::test_trainer_loss_is_policy_loss_with_every_grpo_lambda_setting
             tests/test_trainer.py::test_advantage_clamp_default_per_objective
             tests/test_trainer.py::test_lambda_zero_equals_trl_when_steps_per_generation_differs
             tests/test_trainer.py::test_off_policy_mask_drops_the_sequences_trl_drops tests/test_trainer.py::test_dapo_normaliser_per_process_equals_trl
             tests/test_trainer.py::test_what_vllm_sampling_adds_to_a_batch_reaches_the_loss_as_in_trl
             tests/test_trainer.py::test_lambda_zero_equals_trl_grpo
             tests/test_trainer.py::test_positive_lambda_changes_the_loss_and_logs_trace_weight
             tests/test_trainer.py::test_objective_grpo_with_clamp_is_trl_loss_on_clamped_advantages
             tests/test_trainer.py::test_config_advantage_clamp_defaults
             tests/test_trainer.py::test_config_rejects_bad_values_naming_the_field tests/test_trace_length.py
             tests/test_beyond.py::test_strace_at_quantile_zero_is_ptrace_and_uses_trls_entropy_rule"
  [rewards]="tests/test_grading.py tests/test_strict_reward.py
             tests/test_grading.py::test_grade_many_in_parallel_keeps_each_verdict_in_its_row"
  [stats]="tests/test_stats.py tests/test_stats.py::test_interval_width_is_the_binomial_width_of_its_level
           tests/test_max_t.py tests/test_nested_intervals.py tests/test_seed_interval.py tests/test_verdicts_procedures.py"
  [signflip]="tests/test_seed_interval.py tests/test_nested_intervals.py tests/test_max_t.py"
  [seed_level]="tests/test_seed_interval.py tests/test_nested_intervals.py tests/test_verdicts_procedures.py"
  [multiplicity]="tests/test_max_t.py tests/test_stats.py tests/test_verdicts_procedures.py"
  [aggregate]="tests/test_tables.py tests/test_tables.py::test_table1_averages_over_the_variants_present"
  [config]="tests/config tests/test_sweep.py tests/test_data_sources.py
            tests/test_trace_length.py::test_a_fixed_trace_length_must_hold_the_completion_length_rounded_up_to_the_padding_multiple
            tests/test_trace_length.py::test_trace_length_values_are_checked_in_the_trainer_config_and_before_any_job
            tests/test_trace_length.py::test_a_fixed_trace_length_is_checked_against_trls_default_completion_length_where_no_setting_names_one"
  [oar_scores]="tests/test_oar_scores.py"
  [variants]="tests/test_variants.py tests/test_sweep.py"
  [registry]="tests/test_registry.py tests/test_data_sources.py"
  [rows]="tests/test_registry.py tests/test_data_sources.py"
  [prepare]="tests/test_prepare.py tests/test_data_sources.py tests/test_bad_rows.py tests/test_prompt_limit.py"
  [horizon]="tests/test_horizon.py"
  [advantages]="tests/test_advantages.py"
  [families]="tests/config/test_families.py tests/test_verdicts_procedures.py tests/test_factorial.py tests/test_paired.py
              tests/test_horizon.py"  # the tables' tests too: these are the rules the tables name families by
  [design]="tests/config/test_families.py"
  [control]="tests/test_control.py"
  [history]="tests/config/test_history.py"
  [methods]="tests/config/test_methods.py tests/test_tables.py tests/config/test_families.py tests/test_paired.py"
  [headline]="tests/test_report.py"
  [preflight]="tests/test_preflight.py"
  [progress]="tests/test_progress.py tests/test_train_log.py::test_steps_on_which_every_group_got_one_reward_are_warned_of_once"
  [position]="tests/test_position_weight.py"
)
# module -> tests of its files left out (--deselect): those that run a subprocess (which mutmut's coverage does
# not follow) or train, and kill nothing in the module for their minutes; and the preflight's hub check, outside
# the study rules it is scoped to, which finds a model cached in mutmut's clean run (it passes under pytest)
declare -A DESELECT=(
  [horizon]="tests/test_horizon.py::test_check_band_exits_1_naming_the_horizon_and_writes_no_record_outside_the_band
             tests/test_horizon.py::test_a_banded_horizon_study_trains_a_horizon_only_after_its_band_check
             tests/test_horizon.py::test_the_lambda_config_is_the_horizon_study_s_longest_horizon_with_lambda_and_the_trace_form_varied"
  [advantages]="tests/test_advantages.py::test_an_estimator_registered_from_a_test_file_is_configured_and_trains
                tests/test_advantages.py::test_the_80_20_control_leaves_gradient_on_the_top_20_percent_entropy_tokens_only"
  [families]="tests/test_horizon.py::test_check_band_exits_1_naming_the_horizon_and_writes_no_record_outside_the_band
              tests/test_horizon.py::test_a_banded_horizon_study_trains_a_horizon_only_after_its_band_check
              tests/test_horizon.py::test_the_lambda_config_is_the_horizon_study_s_longest_horizon_with_lambda_and_the_trace_form_varied"
  [stats]="tests/test_nested_intervals.py::test_the_nested_interval_covers_where_one_sft_model_does_not
           tests/test_seed_interval.py::test_coverage_of_the_seed_level_procedures_is_what_the_docs_quote"
  [headline]="tests/test_report.py::test_a_report_after_a_partial_run_says_what_is_missing
              tests/test_report.py::test_the_reports_first_screen_shows_the_headline"
  [preflight]="tests/test_preflight.py::test_the_study_check_runs_every_stage_and_reads_the_accuracies
               tests/test_preflight.py::test_ctrl_c_during_a_slow_check_leaves_a_partial_record_and_no_traceback
               tests/test_preflight.py::test_cpu_preflight_answers_within_five_minutes_on_the_small_built_in_study
               tests/test_preflight.py::test_hub_models_neither_cached_nor_reachable_fail_by_name"
)
# module -> the source it mutates (a module of its own unless named here)
declare -A SOURCES=(
  [trainer]="src/grpo_lambda/trainer*.py"
  [rewards]="src/grpo_lambda/grading/*"
  [aggregate]="src/grpo_lambda/tables/*"
  [registry]="src/grpo_lambda/data/registry.py"
  [rows]="src/grpo_lambda/data/rows.py"
  [config]="src/grpo_lambda/config/*"
  [horizon]="src/grpo_lambda/tables/horizon.py"
  [families]="src/grpo_lambda/config/families.py src/grpo_lambda/config/family_names.py"
  [control]="src/grpo_lambda/tables/control.py"
  [history]="src/grpo_lambda/config/history.py"
  [methods]="src/grpo_lambda/config/methods.py"
  [position]="src/grpo_lambda/objectives.py"
)
# module -> the functions it is scoped to when MUTANTS is not set (globs of mutmut's names; a method of class C
# is xǁCǁmethod): the preflight's study rules, the no-signal warning, the position weight.
declare -A SCOPES=(
  [preflight]="*check_study__mutmut_* *nothing_learned__mutmut_* *study_train_logs__mutmut_* *study_accuracies__mutmut_*"
  [progress]="*ǁ_NoLearningSignalǁ*__mutmut_*"
  [position]="*position_weight__mutmut_*"
)
# The trainer's loss path (trainer.py and trainer_config.py): mutants of these functions only.
LOSS_PATH=(_compute_loss _token_weights _dapo_normalizer _global_masked_mean objective_params _widest_completion
           _resolve_advantage_clamp)
MODULES=("$@")
[[ ${#MODULES[@]} -gt 0 ]] || MODULES=(traces objectives oar_scores trainer stats signflip seed_level multiplicity rewards aggregate
                                        config variants registry rows prepare horizon advantages families design control
                                        history methods headline preflight progress position)

export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
unset PYTHONPATH  # mutmut puts its mutated copy of src/ first on the path

for module in "${MODULES[@]}"; do
  [[ -n "${TESTS[$module]:-}" ]] || { echo "unknown module '$module' (known: ${!TESTS[*]})" >&2; exit 2; }
  work="$MUTATION_DIR/$module"
  mkdir -p "$work"
  # The working tree as it is (tracked and new files, not ignored ones) over the scratch copy.
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | xargs -0 tar -cf -) | tar -xf - -C "$work"
  # setup.cfg: mutmut's settings; one test file (with its -k selection) per line.
  {
    echo "[mutmut]"
    echo "source_paths = src/grpo_lambda/"
    echo "only_mutate = ${SOURCES[$module]:-src/grpo_lambda/$module.py}"
    echo "also_copy ="
    for folder in config workflow envs benchmarks docs scripts examples README.md Snakefile; do echo "    $folder"; done
    echo "pytest_add_cli_args ="
    echo "    -p"
    echo "    no:cacheprovider"
    echo "    -q"
    for test in ${DESELECT[$module]:-}; do echo "    --deselect"; echo "    $test"; done
    echo "pytest_add_cli_args_test_selection ="
    for test in ${TESTS[$module]}; do echo "    $test"; done
  } > "$work/setup.cfg"
  names=()
  if [[ -n "${MUTANTS:-}" ]]; then
    read -r -a names <<< "$MUTANTS"
  elif [[ "$module" == trainer ]]; then
    for function in "${LOSS_PATH[@]}"; do names+=("grpo_lambda.trainer*.*${function}__mutmut_*"); done
  elif [[ -n "${SCOPES[$module]:-}" ]]; then
    read -r -a names <<< "${SCOPES[$module]}"
  fi
  echo "== $module: $(echo ${TESTS[$module]})${names[*]:+ (mutants: ${names[*]})}"
  start=$SECONDS
  (cd "$work" && mutmut run --max-children "$JOBS" "${names[@]}" > mutmut-run.log 2>&1) || true
  tail -n 3 "$work/mutmut-run.log" | tr '\r' '\n' | tail -n 2
  (cd "$work" && mutmut results --all true > results.txt 2>&1) || true
  echo "   $((SECONDS - start)) s; survivors: $(grep -c ': survived' "$work/results.txt" || true) (list: $work/results.txt)"
done
