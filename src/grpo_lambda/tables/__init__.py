"""The paper's tables, with uncertainty, from the results folder.

Reads the per-sample evaluation files (``{model}/{dataset}/{variant}/seed{seed}/eval/{step}/
{benchmark}.jsonl`` and the SFT baseline ``{model}/{dataset}/sft/eval/final/{benchmark}.jsonl``;
see docs/results-format.md) — the per-sample files are the source of truth, the summary JSON is not
read — and writes every table as CSV (numbers), Markdown and LaTeX (booktabs) to one folder:

``results``             per model × dataset × variant × seed × benchmark (final model), with the SFT
                        baseline, the gain over it and a 95% interval over problems
``results_by_variant``  the same, mean over seeds, interval over problems and seeds, gain over SFT
``checkpoints``         accuracy at every evaluated step (SFT = step 0), mean over seeds
``table1``              Table 1: per model × method, mean over training sets, five benchmarks and
                        their unweighted average
``table1_published``    Table 1 beside the published values, with the difference
``appendix_e_{model}``  Tables 3–6: rows benchmark × training set, columns the variants
``appendix_e_published`` Appendix E cells beside the published values, with the difference
``paired``              each method minus the baseline (GRPO) over the same problems, its interval,
                        and whether the gap is distinguishable from noise (interval excludes 0)
``learning_speed``      how fast the training reward rises: area under the curve and steps to a
                        threshold per variant, with intervals over seeds and paired gaps to the baseline
``final_reward``        per run, the mean training reward of its last ``report.final_window`` steps
``training_gain``       each variant's training reward relative to the baseline's (final window and
                        whole run), paired by seed with a t interval: the paper's "30–40%"
``training_curves``     the smoothed training curves (reward, KL) the figures draw (CSV only)
``missing``             cells the config asks for that have no evaluation file (a partial run)

Options, under ``report:`` in the config (all optional):

``bootstrap`` (1000)    bootstrap replicates per interval; 0 gives point estimates only.
``level`` (0.95)        coverage of the intervals.
``seed`` (0)            seed of the bootstrap's random generator (tables are reproducible).
``baseline``            the variant other methods are compared with (default: the first variant
                        whose objective is ``grpo``, else the first variant). Table 1's GRPO row is
                        the baseline when it is a ``grpo`` variant; a baseline of another objective
                        stays in its own method's row.
``grpo_lambda_variant`` which GRPO-λ variants make Table 1's GRPO-λ row: ``"mean"`` (all GRPO-λ
                        variants of the model), a variant name, or a selector of variant fields
                        such as ``{style: recent, update: trace}`` (mean over the matching
                        variants). Either one value for every model or a mapping model → value.
                        Default ``{style: recent, update: trace}``: the published Table 1 rows
                        equal the mean over the model's recent-style ε-trace variants (λ 0.98 and
                        0.99 for the 1.5B models, λ 0.99 alone for 3B and 7B), to the printed
                        precision. A selector that matches no variant falls back to ``"mean"``.
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
``final_window`` (20)   logged steps averaged for the final training reward (Figure 3, the
                        ``final_reward`` and ``training_gain`` tables, the learning-speed threshold).
                        The paper's §4.1 averages the last 100 steps of 10,000 (config/paper.yaml
                        sets 100); the default suits the embedded runs of 25–40 steps.

Every interval is a percentile bootstrap over problems and seeds (see ``grpo_lambda.stats``); the
training sets of a mean over datasets are fixed (they are the study's design, not a sample).

One module per job:

``keys``        the keys of a cell (``KEYS``) and the names ``final``, ``sft``, ``average``, ``all``
``options``     the ``report:`` options above (``report_options``, ``REPORT_DEFAULTS``)
``labels``      variants and methods: ``variant_spec``, ``variant_label``, ``method_variants`` (Table 1's
                rows), ``method_label``, the published twin of a variant
``collect``     reading the results folder: ``collect_samples``, ``summarise``, ``collect``,
                ``missing_cells``, ``collect_train_logs``, ``expected_cells``, ``load_published``
``cells``       ``Cells``: the verdict matrices and the bootstrap intervals built on them
``results``     ``results_table``, ``results_by_variant``, ``checkpoints_table``
``table1``      ``table1`` and ``table1_published``
``paired``      ``paired_table``
``appendix_e``  ``appendix_e`` and ``appendix_e_published``
``learning_speed`` ``learning_speed_table``
``training``    ``final_reward_table``, ``training_curves_table``, ``training_gain_table``
``names``       the ordered names of the tables and figures (``table_names``, ``figure_names``), read by
                the builders, the writer, ``grpo_lambda.figures`` and the workflow; standard library only
``build``       ``build_tables``: every table, by name
``write``       ``write_table`` (CSV, Markdown, LaTeX) and ``main``
"""

from grpo_lambda.tables.build import build_tables
from grpo_lambda.tables.collect import collect, collect_samples, collect_train_logs, load_published, summarise
from grpo_lambda.tables.names import figure_names, table_files, table_names
from grpo_lambda.tables.options import report_options
from grpo_lambda.tables.write import main, write_table

__all__ = ["build_tables", "collect", "collect_samples", "collect_train_logs", "figure_names", "load_published",
           "main", "report_options", "summarise", "table_files", "table_names", "write_table"]
