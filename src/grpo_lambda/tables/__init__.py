"""The paper's tables, with uncertainty, from the results folder or a published run's raw files.

Reads the per-sample evaluation files (``{model}/{dataset}/{variant}/seed{seed}/eval/{step}/
{benchmark}.jsonl`` and the SFT baseline ``{model}/{dataset}/sft/eval/final/{benchmark}.jsonl``;
see docs/results-format.md) — the per-sample files are the source of truth, the summary JSON is not
read — and the training logs, and writes every table as CSV (numbers), Markdown and LaTeX (booktabs)
to one folder:

``results``             per model × dataset × variant × seed × benchmark (final model), with the SFT
                        baseline, the gain over it and a 95% interval over problems; with sampled
                        completions avg@k, pass@k and maj@k, each with its interval
``results_by_variant``  the same, mean over seeds, interval over problems and seeds, gain over SFT with
                        its p-values and verdict, and the sampled metrics with intervals
``checkpoints``         accuracy at every evaluated step (SFT = step 0), mean over seeds
``table1``              Table 1: per model × method, mean over training sets, five benchmarks and
                        their unweighted average
``table1_published``    Table 1 beside the published values, with the difference
``appendix_e_{model}``  Tables 3–6: rows benchmark × training set, columns the variants
``appendix_e_published`` Appendix E cells beside the published values, with the difference
``paired``              each method minus the baseline, paired by training seed and by problem: interval,
                        p-values, minimum detectable effect and verdict
``learning_speed``      how fast the training reward rises: area under the curve and steps to a
                        threshold per variant, with intervals over seeds and paired gaps to the baseline,
                        each with its verdict
``factorial``           the main effects and interaction of a 2 × 2 design (``report.factorial``)
``horizon``             a horizon study's (``report.horizon``): each pair's effect at each chain length on
                        its own suite and its trend with ln(chain length), the primary test
``horizon_errors``      a horizon study's: per chain length and arm, where the greedy chains first go
                        wrong (a carry, or elsewhere) and where the first carry error sits
``control``             a control study's (``report.control``): a pair's effect on each training set's own
                        suite against the direction declared before the run, and the contrast of the two,
                        or a dose-response control's trend of the effect on ln(relative weight)
``diagnostics``         per variant, clip fractions, entropy, KL, groups without signal, DAPO's dropped
                        groups: mean over steps, t interval over seeds
``final_reward``        per run, the mean training reward of its last ``report.final_window`` steps
``figure3_reward``      the same over ``report.figure3_window`` steps (Figure 3, Appendix D)
``dataset_gain``        §4.3: per training set, GRPO-λ's gain over GRPO, mean over models, beside the published
``training_gain``       each variant's training reward relative to the baseline's (final window and
                        whole run), paired by seed with a t interval: the paper's "30–40%"
``training_curves``     the smoothed training curves (reward, KL) the figures draw (CSV only)
``completions``         a few logged training completions per cell
``provenance``          the distinct version records of the files the tables read
``missing``             cells the config asks for that have no evaluation file (a partial run)

Options, under ``report:`` in the config (all optional; ``grpo_lambda.config.validate`` checks them):

``level`` (0.95)        coverage of the intervals; 1 − level is the verdicts' α (and the MDE's test level).
``metric`` ("greedy")   a problem's value in every accuracy table: the greedy verdict, or from
                        ``evaluation.samples`` sampled completions ``avg`` (avg@k), ``pass_at_k``, ``maj_at_k``.
``baseline``            the variant other methods are compared with (default: the first variant
                        whose objective is ``grpo``, else the first variant). Table 1's GRPO row is
                        the baseline when it is a ``grpo`` variant; a baseline of another objective
                        stays in its own row.
``grpo_lambda_variant`` which GRPO-λ variants make Table 1's GRPO-λ row: ``"mean"`` (all GRPO-λ
                        variants of the model), a variant name, or a selector of variant fields
                        such as ``{style: recent, update: trace}`` (mean over the matching
                        variants). Either one value for every model or a mapping model → value.
                        Default ``{style: recent, update: trace}``: the published Table 1 rows
                        equal the mean over the model's recent-style ε-trace variants (λ 0.98 and
                        0.99 for the 1.5B models, λ 0.99 alone for 3B and 7B), to the printed
                        precision. A selector that matches no variant falls back to ``"mean"``.
                        This is the only row that pools variants: every other Table 1 row is one
                        variant under its own label (``grpo_lambda.config.methods.method_variants``).
``equivalence_margin``  ({}) margins per metric, ``{accuracy: 0.02, reward_auc: 0.005}``: a difference
                        within ±margin by TOST after Holm is ``equivalent``; no margin, no such verdict.
``primary`` ("paired")  the table whose mean-accuracy comparisons are the study's one primary Holm family:
                        ``paired`` (every line minus the baseline) or ``factorial`` (the 2 × 2's four
                        simple effects); every other comparison is exploratory, in a family of its own
                        (``verdicts``; docs/statistics.md).
``checks`` ([])         variants that check the comparison itself (a line that should equal another): each
                        a family of its own, never in the primary family.
``multiplicity`` ("holm") how the seed-level families adjust their p: ``holm``, ``max_t`` (the step-down
                        max-T over joint sign flips of the seeds) or a mapping family key -> either
                        (grpo_lambda.config.families.KEYS); families of t tests are always Holm.
``descriptive`` ([])    family keys published without adjusted p or verdict; a family that cannot reject at
                        the study's seeds must be one (or get max_t, or seeds): grpo-lambda design-check.
``factorial``           a 2 × 2 design: ``{factors: [a, b], cells: {variant: {a: true|false, b: true|false}}}``,
                        each of the four level combinations exactly one variant (checked).
``horizon``             a horizon study: ``{chains: {dataset: benchmark}, pairs: {name: {treatment,
                        baseline}}, equivalence_margin: {effect, slope}}`` (grpo_lambda.tables.horizon)
``figure1_model``       the model of Figure 1 (default: the one whose ``paper_name`` is
                        DeepSeek-R1-Distill-Qwen-7B, as in the paper, else the first model).
``figure1_dataset``     the training set of Figure 1's cell, or ``"mean"`` (Table 1's methods, mean
                        over training sets). Default: the model's ``mathrl16k`` set (the paper's
                        Figure 1 is the 7B model trained on MathRL-16K), else its only training
                        set, else ``"mean"``. A cell shows the SFT model and every variant.
``figure4_datasets``    the training sets Figure 4 draws (default: all; config/paper.yaml leaves
                        GSM8K out, as the paper).
``smoothing`` ("auto")  weight w of the exponential moving average applied to training curves;
                        "auto" picks w = 1 − 1/(1 + n/50) for a run of n logged steps (an
                        averaging window of about 2% of the run: 0.44 for 40 steps, 0.995 for
                        10000).
``final_window`` (20)   logged steps averaged for the final training reward (the
                        ``final_reward`` and ``training_gain`` tables, the learning-speed threshold).
                        The paper's §4.1 averages the last 100 steps of 10,000 (config/paper.yaml
                        sets 100); the default suits the embedded runs of 25–40 steps.
``figure3_window`` (20) logged steps Figure 3 averages (its caption: the last 20 iterations).
``figure3_paper_cells`` (false) Figure 3 on its caption's cells only (the 1.5B models on ORZMath57K),
                        Appendix D the rest; config/paper.yaml sets true.
``figure4_variant``     the GRPO-λ variant Figure 4 draws: a selector (default ``{lam: 0.99, style: recent,
                        update: trace}``) or ``best`` (the highest final training reward: a choice on the outcome).
``eval_length_pooled`` (false) Appendix E.3: GRPO-λ's variants as one bar, their mean.
``dataset_gain_variant`` the GRPO-λ variant of the ``dataset_gain`` table (§4.3), a selector (default as
                        ``figure4_variant``'s).
``bootstrap``, ``seed`` accepted and unused: the intervals are analytic.

Every interval is analytic and deterministic (``grpo_lambda.stats``): accuracies by a two-way (seed,
problem) cluster-robust variance with a Welch–Satterthwaite t quantile, an accuracy itself kept in [0, 1]
(Wilson-type), seed-level comparisons by the exact sign-flip test (``seed_level.seed_interval``); every
difference is paired by seed (runs of one SFT model with the same training seed) and by problem. Every
comparison table applies one verdict rule (``verdicts``): Holm (or max-T) within declared families (one primary),
``ahead`` / ``behind`` / ``equivalent`` (TOST after Holm against the metric's margin) / ``too few seeds`` /
``not distinguishable``, the MDE at α/m. The training sets of
a mean over datasets are fixed (they are the study's design, not a sample).

One module per job:

``keys``        the keys of a cell (``KEYS``), the names ``final``, ``sft``, ``average``, ``all``
(the ``report:`` options above, ``report_options`` and ``REPORT_DEFAULTS``, are ``grpo_lambda.config.report``'s:
the config's checks read them before any job, so they live below both)
``labels``      variants' and methods' names: ``variant_label`` (one label per variant, everywhere),
                ``method_label``, the published twin of a variant (Table 1's rows, ``method_variants``, and
                ``variant_spec`` are ``grpo_lambda.config.methods``': the design check reads the same rule)
``collect``     reading the results folder: ``collect_samples``, ``summarise``, ``sampled_per_problem``,
                ``missing_cells``, ``collect_train_logs``, ``collect_provenance``, ``expected_cells``,
                ``load_published``
``raw``         ``RunData`` (what the tables are computed from), ``read_results``, and a published run's
                compressed raw files: ``write_raw``, ``read_raw``
``cells``       ``Cells``: the per-problem value matrices, paired by seed and problem, and their intervals
``verdicts``    the one verdict rule: ``comparison_columns``, ``add_verdicts`` (Holm, TOST, MDE)
``results``     ``results_table``, ``results_by_variant``, ``checkpoints_table``
``table1``      ``table1`` and ``table1_published``
``paired``      ``paired_table``
``appendix_e``  ``appendix_e`` and ``appendix_e_published``
``learning_speed`` ``learning_speed_table``, ``run_statistics``
``factorial``   ``factorial_table``
``horizon``     ``horizon_table``, ``horizon_errors_table``, ``collect_first_errors``
``control``     ``control_table``
``diagnostics`` ``diagnostics_table``
``training``    ``final_reward_table``, ``training_curves_table``, ``training_gain_table``
``names``       the ordered names of the tables and figures (``table_names``, ``figure_names``), read by
                the builders, the writer, ``grpo_lambda.figures`` and the workflow; standard library only
``build``       ``tables_from`` (every table of a run's data), ``build_tables`` (of a results folder),
                ``rebuild`` (of a published run's raw files): one code path
``blocks``      the generated Markdown blocks of the published runs' pages, from the tables
``write``       ``write_table`` (CSV, Markdown, LaTeX) and ``main``
"""

import importlib

# The package's names, each from its module, imported when first asked for (PEP 562): the workflow reads
# ``names`` (standard library only) at every Snakemake start, which need not load pandas and scipy.
_HOMES = {"build_tables": "grpo_lambda.tables.build", "collect": "grpo_lambda.tables.collect",
          "collect_samples": "grpo_lambda.tables.collect", "collect_train_logs": "grpo_lambda.tables.collect",
          "load_published": "grpo_lambda.tables.collect", "summarise": "grpo_lambda.tables.collect",
          "figure_names": "grpo_lambda.tables.names", "table_files": "grpo_lambda.tables.names",
          "table_names": "grpo_lambda.tables.names", "report_options": "grpo_lambda.config.report",
          "main": "grpo_lambda.tables.write", "write_table": "grpo_lambda.tables.write"}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
