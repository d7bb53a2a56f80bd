"""The paper's figures, drawn from the tables the aggregate stage writes (their CSV files), as PNG and
PDF (matplotlib, Agg backend). Each figure draws the numbers of one or two tables and computes
nothing of its own: what it shows is in a table (Figure 2 excepted: it draws the trace weights of
:func:`grpo_lambda.traces.trace_matrix`, which need no run).

``figure1``            accuracy per benchmark of the SFT model and every variant of one cell: the
                       model report.figure1_model trained on report.figure1_dataset (the paper's
                       Figure 1 is DeepSeek-R1-Distill-Qwen-7B on MathRL-16K), with 95% intervals
                       (``results_by_variant``); with figure1_dataset "mean", Table 1's methods, mean
                       over training sets (``table1``). Up to ``GROUPED_BARS_MAX`` bars side by side per
                       benchmark, more as one panel per benchmark with a bar per line
``figure2``            the trace styles (recent, both, early) in both forms (relative: Eq. 1–2;
                       absolute with the run's n), as heatmaps of W[t, c] and the last token's weights
``figure3``            final training accuracy reward per variant: mean of the last
                       report.figure3_window logged steps (the paper's caption: 20), one dot per seed
                       (``figure3_reward``); with report.figure3_paper_cells the caption's cells only
                       (the 1.5B models on ORZMath57K)
``appendix_d``         the same for those models' other training sets (the paper's Appendix D)
``figure4``            training reward curves, GRPO vs the GRPO-λ variant of report.figure4_variant
                       (λ 0.99, recent ε-trace; or the best by ``final_reward``), per model × training
                       set of report.figure4_datasets (the paper leaves GSM8K out) (``training_curves``)
``reward_curves``      training reward curves of every variant (``training_curves``)
``learning_speed``     area under the reward curve and steps to the threshold (``learning_speed``)
``kl``                 KL to the reference model over training, every variant (``training_curves``)
``appendix_c_{model}`` Appendix C: training reward and KL of the model's GRPO-λ variants beside the
                       baseline, one column per λ and metric, one row per training set
                       (``training_curves``)
``eval_length``        mean generation length of the final models during evaluation (Appendix E.3),
                       mean over seeds, then over training sets (``results_by_variant``); with
                       report.eval_length_pooled GRPO-λ's variants as one bar, as the paper
``checkpoints_{model}`` accuracy on each benchmark at each evaluated checkpoint, SFT at step 0
                       (``checkpoints``)

Training curves are smoothed with a debiased exponential moving average (TensorBoard's rule) of
weight report.smoothing ("auto": a window of about 2% of the run, see
:func:`grpo_lambda.smoothing.smoothing_weight`): the paper's figures are smoothed, but its text as
available here does not say how, so the EMA is this pipeline's choice. Each seed is smoothed on its
own; the line is the mean over seeds and the band spans the seeds (min to max); the
``training_curves`` table holds them (:mod:`grpo_lambda.tables.training`). A panel of curves holds
the baseline and at most ``CURVES_PER_PANEL`` other variants; more make small multiples, the
baseline in each. Every variant keeps one colour (:func:`style.variant_colour`) and one name
(:func:`grpo_lambda.tables.labels.variant_label`, as in the tables) in every figure, and a figure's
legend sits outside its panels and names each line once. A figure whose data do not exist yet is
still written, with a note saying so, so that a partial run has a complete report.

Beside each figure, ``{name}.json`` holds what it draws, read back from its artists
(:func:`data.figure_data`): per panel the title, axis labels, notes, and each labelled curve, bar series,
point set and image with its values, and the legend entries. It is a by-product for checks and
reuse, not one of the rule's declared outputs.

One module per figure family, as ``grpo_lambda.tables`` has one per table:

``style``           what every figure shares: the Agg backend, ``variant_colour``, the panel grid, notes, one legend
``accuracy``        ``figure1``, ``checkpoints_figure``
``trace_weights``   ``figure2``, ``trace_settings``
``final_reward``    ``figure3`` (and Appendix D)
``curves``          ``figure4``, ``reward_curves_figure``, ``kl_figure``, ``appendix_c_figure``
``learning_speed``  ``learning_speed_figure``
``eval_length``     ``eval_length_figure``
``horizon``         ``horizon_figure``
``data``            ``figure_data``: what a drawn figure shows, read from its artists
``write``           ``read_table``, ``save`` and ``main`` (every figure of a study)
"""

from grpo_lambda.figures.accuracy import checkpoints_figure, figure1, GROUPED_BARS_MAX
from grpo_lambda.figures.curves import appendix_c_figure, figure4, kl_figure, reward_curves_figure
from grpo_lambda.figures.data import figure_data
from grpo_lambda.figures.eval_length import eval_length_figure
from grpo_lambda.figures.final_reward import figure3
from grpo_lambda.figures.horizon import horizon_figure
from grpo_lambda.figures.learning_speed import learning_speed_figure
from grpo_lambda.figures.style import GRPO_COLOUR, GRPO_LAMBDA_METHOD_COLOUR, SFT_COLOUR, variant_colour
from grpo_lambda.figures.trace_weights import figure2, trace_settings
from grpo_lambda.figures.write import main, read_table, save

__all__ = ["appendix_c_figure", "checkpoints_figure", "eval_length_figure", "figure1", "figure2",
           "figure3", "figure4", "figure_data", "GROUPED_BARS_MAX", "GRPO_COLOUR", "GRPO_LAMBDA_METHOD_COLOUR",
           "horizon_figure", "kl_figure", "learning_speed_figure", "main", "read_table", "reward_curves_figure", "save",
           "SFT_COLOUR", "trace_settings", "variant_colour"]
