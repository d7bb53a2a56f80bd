"""OAR in the trainer (the estimator "oar" of the trainer's hook, `grpo_lambda.scored_batch`): which tokens are scored, against which answer, and how
the scores become A_i · w_t, on a scored batch written out by hand with the tiny character tokenizer (one token per
character, so every position below is counted by hand from the text).

The other OAR tests check that each completion's advantage mass is kept and that some weight differs from 1; these
pin the masks handed to the importance functions (no prompt token is a reasoning token, the answer is the last
\\boxed{...} or the last `oar_answer_tokens` tokens), that rows with a negative advantage are reweighted like positive
ones, and the OAR-G / OAR-P scores against an independent computation on the tiny model."""

import math

import pytest
import torch
from datasets import Dataset
from transformers import AutoTokenizer

import grpo_lambda.oar as oar_module
from grpo_lambda.scored_batch import per_token_advantages
from grpo_lambda.trainer import GRPOLambdaTrainer
from grpo_lambda.trainer_config import GRPOLambdaConfig

PROMPTS = ["1+2=", "34", "5-6=", "7+8=", "9*9="]  # the second is left-padded to 4 tokens
# (completion text, ends with EOS, advantage); width 24.
ROWS = [
    ("12+3=\\boxed{15} ok", True, 1.0),
    ("\\boxed{1}, \\boxed{{2}}", True, -0.5),   # two boxes: the last one, nested braces included
    ("7 \\boxed{7}", True, 0.0),
    ("abcdefgh", False, -2.0),                  # no box, truncated (no EOS): the last 3 tokens
    ("\\boxed{7}", True, 0.7),                  # the answer only: no reasoning token
]
WIDTH, PROMPT = 24, 4
ANSWER_TOKENS = 3
# Counted by hand on the texts above (one character = one token; EOS is a token, decoded as "").
REASONING = {0: range(0, 5), 1: range(0, 11), 2: range(0, 2), 3: range(0, 5), 4: range(0, 0)}
ANSWER = {0: range(5, 15), 1: range(11, 22), 2: range(2, 11), 3: range(5, 8), 4: range(0, 9)}


def build(model_dir, tmp_path, method, batch_size=2):
    args = GRPOLambdaConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none",
                            per_device_train_batch_size=batch_size, num_generations=batch_size,
                            max_completion_length=WIDTH, objective="grpo", oar_method=method,
                            oar_answer_tokens=ANSWER_TOKENS, oar_sigma=0.05, oar_quantile=0.5)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    trainer = GRPOLambdaTrainer(model=model_dir, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                                args=args, train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
                                processing_class=tokenizer)
    return trainer, tokenizer


def oar_advantages(trainer, output):
    """The advantages the trainer's hook gives a scored batch with oar_method set (the estimators "oar", then
    "grpo"); the rewards do not enter them."""
    trainer._rewards_per_func = torch.zeros(output["completion_ids"].size(0), 1)
    return per_token_advantages(trainer, output)


def scored_batch(tokenizer, rows=ROWS):
    """A batch shaped like TRL's scored output: left-padded prompts, right-padded completions."""
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    prompt_ids = torch.full((len(rows), PROMPT), pad)
    prompt_mask = torch.zeros(len(rows), PROMPT, dtype=torch.long)
    completion_ids = torch.full((len(rows), WIDTH), pad)
    completion_mask = torch.zeros(len(rows), WIDTH, dtype=torch.long)
    for i, (prompt, (text, ends, _)) in enumerate(zip(PROMPTS, rows)):
        ids = tokenizer.convert_tokens_to_ids(list(prompt))
        prompt_ids[i, PROMPT - len(ids):] = torch.tensor(ids)
        prompt_mask[i, PROMPT - len(ids):] = 1
        ids = tokenizer.convert_tokens_to_ids(list(text)) + ([eos] if ends else [])
        assert len(ids) == len(text) + ends and pad not in ids
        completion_ids[i, :len(ids)] = torch.tensor(ids)
        completion_mask[i, :len(ids)] = 1
    assert prompt_mask[1].tolist() == [0, 0, 1, 1]
    return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
            "completion_mask": completion_mask, "advantages": torch.tensor([a for _, _, a in rows])}


def expected_masks(row):
    """(reasoning, answer) bool (WIDTH,) of one row, from the hand-counted ranges."""
    reasoning, answer = torch.zeros(WIDTH, dtype=torch.bool), torch.zeros(WIDTH, dtype=torch.bool)
    reasoning[list(REASONING[row])] = True
    answer[list(ANSWER[row])] = True
    return reasoning, answer


class ImportanceSpy:
    """Stands in for oar_gradient_importance / oar_perturbation_importance: records the reasoning (noise) mask and
    the answer mask of every row it is given, and scores completion token j of a reasoning row expm1(j) (prompt
    columns 1e6, so that a score read from the wrong columns shows)."""

    def __init__(self, embed, full_ids):
        self.embed, self.full_ids, self.seen = embed, full_ids, []

    def row_of(self, ids=None, embeds=None):
        for row in range(self.full_ids.size(0)):
            if ids is not None and torch.equal(ids, self.full_ids[row]):
                return row
            if embeds is not None and torch.equal(embeds, self.embed(self.full_ids[row])):
                return row
        raise AssertionError("a row the batch does not have")

    def scores(self, rows, reasoning_full, answer):
        for row, reasoning_row, answer_row in zip(rows, reasoning_full, answer):
            self.seen.append((row, reasoning_row.bool().clone(), answer_row.bool().clone()))
        importance = torch.full(reasoning_full.shape, 1e6, dtype=torch.float64)
        importance[:, PROMPT:] = torch.expm1(torch.arange(WIDTH, dtype=torch.float64))
        return importance

    def gradient(self, forward, embeds, noise_mask, answer_mask, **kwargs):
        with torch.no_grad():
            rows = [self.row_of(embeds=row) for row in embeds]
        return self.scores(rows, noise_mask, answer_mask)

    def perturbation(self, forward, input_ids, attention_mask, reasoning_mask, answer_mask, **kwargs):
        return self.scores([self.row_of(ids=row) for row in input_ids], reasoning_mask, answer_mask)


def run_with_spy(model_dir, tmp_path, monkeypatch, method):
    trainer, tokenizer = build(model_dir, tmp_path, method)
    output = scored_batch(tokenizer)
    full_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], 1)
    spy = ImportanceSpy(trainer.model.get_input_embeddings(), full_ids)
    monkeypatch.setattr(oar_module, f"oar_{method}_importance", getattr(spy, method))
    trainer._metrics["train"].clear()
    return oar_advantages(trainer, output), output, spy


@pytest.mark.parametrize("method", ["gradient", "perturbation"])
def test_oar_scores_only_completion_reasoning_tokens_against_the_last_boxed_answer(model_dir, tmp_path, monkeypatch,
                                                                                    method):
    """The masks handed to the importance function, over prompt + completion: no prompt position is a reasoning
    (noised / perturbed) token; the reasoning is the completion before its answer; the answer is the tokens of the
    last \\boxed{...} (nested braces, a box before it in the reasoning), else the last 3 tokens of the completion
    (not of the padded width); OAR-P reads only its first token's position (the authors' P_final "last"). Every row
    with a nonzero advantage and some reasoning is scored, negative ones too."""
    _, _, spy = run_with_spy(model_dir, tmp_path, monkeypatch, method)
    seen_rows = [row for row, _, _ in spy.seen]
    assert len(seen_rows) == len(set(seen_rows)) and {0, 1, 3} <= set(seen_rows)  # the negative rows 1 and 3 too
    for row, reasoning_full, answer in spy.seen:
        reasoning, expected_answer = expected_masks(row)
        assert reasoning_full.shape == (PROMPT + WIDTH,) and answer.shape == (WIDTH,)
        assert not reasoning_full[:PROMPT].any(), f"row {row}: prompt tokens in the reasoning mask"
        assert reasoning_full[PROMPT:].nonzero().flatten().tolist() == list(REASONING[row]), row
        if method == "perturbation":
            expected_answer = expected_answer & (expected_answer.cumsum(0) == 1)
        assert answer.nonzero().flatten().tolist() == expected_answer.nonzero().flatten().tolist(), row
        assert torch.equal(reasoning_full[PROMPT:], reasoning) and torch.equal(answer, expected_answer)


@pytest.mark.parametrize("method", ["gradient", "perturbation"])
def test_oar_advantages_are_a_times_hand_computed_weights_for_positive_and_negative_rows(model_dir, tmp_path,
                                                                                          monkeypatch, method):
    """Scores expm1(j) on the R reasoning tokens j = 0..R−1: log1p gives j, min-max j/(R−1), median τ = 0.5, so
    w_j = max(j/(R−1)/0.5, 0.1) below τ and 1 + (j/(R−1) − 0.5)/0.5 above: both 2j/(R−1), floored at 0.1 for j = 0;
    Σ = R + 0.1, so after the rescaling to Σ = R, w_j = max(2j/(R−1), 0.1) · R/(R + 0.1). The advantage of token j
    is A·w_j on the reasoning and A on the other tokens of the completion; A = 0 stays 0."""
    advantages, output, _ = run_with_spy(model_dir, tmp_path, monkeypatch, method)
    assert advantages.shape == (len(ROWS), WIDTH)
    for row, (_, _, advantage) in enumerate(ROWS):
        length = int(output["completion_mask"][row].sum())
        r = len(REASONING[row])
        weights = [max(2 * j / (r - 1), 0.1) * r / (r + 0.1) if j < r else 1.0 for j in range(length)]
        expected = torch.tensor([advantage * w for w in weights])
        torch.testing.assert_close(advantages[row, :length], expected, rtol=1e-5, atol=1e-7, msg=f"row {row}")
    # by hand, row 1 (A = −0.5, R = 11): w_0 = 0.1·11/11.1, w_10 = 2·11/11.1
    assert advantages[1, 0].item() == pytest.approx(-0.5 * 0.1 * 11 / 11.1, rel=1e-5)
    assert advantages[1, 10].item() == pytest.approx(-0.5 * 2 * 11 / 11.1, rel=1e-5)
    assert advantages[3, :5].tolist() == pytest.approx([-2.0 * w * 5 / 5.1 for w in (0.1, 0.5, 1.0, 1.5, 2.0)],
                                                       rel=1e-5)


# --- the scores themselves, on the tiny model -------------------------------------------------------


def answer_log_p(logits, positions):
    """log softmax of the mean of the logits that predict the answer tokens (`positions`, in the full sequence)."""
    return torch.log_softmax(logits[positions - 1].mean(0), -1)


def first_answer_log_p(logits, positions):
    """log softmax of the logits that predict the first answer token (OAR-P's P_final, the authors' "last")."""
    return torch.log_softmax(logits[positions[0] - 1], -1)


def kl(log_p, log_q):
    return (log_p.exp() * (log_p - log_q)).sum()


@pytest.mark.parametrize("method", ["gradient", "perturbation"])
def test_oar_scores_equal_an_independent_computation_on_the_tiny_model(model_dir, tmp_path, monkeypatch, method):
    """I_t of each completion reasoning token, from the model called directly (full logits, one row at a time):
    OAR-P: KL(P_final ‖ P_final with token t replaced by the pad token); OAR-G: |∂J/∂e_t · e_t|, J = KL(P_final(e) ‖
    P_final(e + σξ)) with the noise ξ on the completion's reasoning embeddings only (the noise the trainer draws:
    torch.randn of the (rows, prompt + completion, hidden) embeddings after the same seed). P_final, as the authors
    configure each method: OAR-G the softmax of the mean of the logits at the positions that predict the answer
    tokens, OAR-P the softmax of the logits that predict the first answer token. Prompt and answer tokens score 0."""
    trainer, tokenizer = build(model_dir, tmp_path, method, batch_size=len(ROWS))  # one chunk: one noise draw
    model = trainer.model.double()
    output = scored_batch(tokenizer)
    captured = []
    real_weights = oar_module.oar_weights

    def weights_spy(importance, reasoning, **kwargs):
        captured.append((importance.detach().clone(), reasoning.clone()))
        return real_weights(importance, reasoning, **kwargs)

    monkeypatch.setattr(oar_module, "oar_weights", weights_spy)
    torch.manual_seed(11)
    oar_advantages(trainer, output)
    assert len(captured) == 1
    importance, reasoning = captured[0]
    scored = [row for row, (_, _, advantage) in enumerate(ROWS) if advantage != 0 and len(REASONING[row])]
    assert importance.shape == (len(scored), WIDTH)
    assert reasoning.nonzero().tolist() == [[i, j] for i, row in enumerate(scored) for j in REASONING[row]]

    full_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], 1)
    attention = torch.cat([output["prompt_mask"], output["completion_mask"]], 1)
    pad = tokenizer.pad_token_id
    expected = torch.zeros(len(scored), WIDTH, dtype=torch.float64)
    if method == "gradient":
        torch.manual_seed(11)
        embed = model.get_input_embeddings()
        noise = torch.randn((len(scored), PROMPT + WIDTH, embed.weight.size(1)), dtype=torch.float64)
    for i, row in enumerate(scored):
        ids, mask = full_ids[row:row + 1], attention[row:row + 1]
        answer = torch.tensor(list(ANSWER[row])) + PROMPT
        with torch.no_grad():
            clean = answer_log_p(model(input_ids=ids, attention_mask=mask).logits[0], answer)
        if method == "perturbation":
            with torch.no_grad():
                clean = first_answer_log_p(model(input_ids=ids, attention_mask=mask).logits[0], answer)
            for j in REASONING[row]:
                perturbed = ids.clone()
                perturbed[0, PROMPT + j] = pad
                with torch.no_grad():
                    expected[i, j] = kl(clean, first_answer_log_p(
                        model(input_ids=perturbed, attention_mask=mask).logits[0], answer))
        else:
            with torch.no_grad():
                embeds = embed(ids)[0]
            on_reasoning = torch.zeros(PROMPT + WIDTH, 1, dtype=torch.float64)
            on_reasoning[[PROMPT + j for j in REASONING[row]]] = 1.0
            noisy = (embeds + 0.05 * noise[i] * on_reasoning).requires_grad_()
            divergence = kl(clean, answer_log_p(model(inputs_embeds=noisy[None], attention_mask=mask).logits[0],
                                                answer))
            (grad,) = torch.autograd.grad(divergence, noisy)
            expected[i] = (grad * embeds).sum(-1)[PROMPT:].abs() * on_reasoning[PROMPT:, 0]
    assert (expected[reasoning] > 0).all() and not expected[~reasoning].any()
    torch.testing.assert_close(importance.double(), expected, rtol=1e-6, atol=1e-12)
    assert math.isfinite(importance.sum().item())


# --- the answer is the grader's -------------------------------------------------------------------


@pytest.mark.parametrize("text, answer_text", [
    ("so 2+2 = \\fbox{4} indeed", "\\fbox{4}"),                        # the grader reads \fbox too
    ("\\boxed{3} no: \\fbox{\\frac{1}{2}}.", "\\fbox{\\frac{1}{2}}"),  # the last box, whichever opener
    ("\\fbox{3} no: \\boxed{{5}}", "\\boxed{{5}}"),
    ("the answer is \\fbox{4", None),                                 # never closed: no answer for the grader
])
def test_oars_answer_is_the_graders_answer_fbox_included(text, answer_text):
    """One character per token: the answer tokens are exactly the characters of the box the grader extracts
    (`extract_boxed`), the reasoning is everything before them; with no gradable answer, the last 3 tokens."""
    from grpo_lambda.grading import extract_boxed

    texts = list(text)
    mask = torch.ones(1, len(texts), dtype=torch.long)
    answer, reasoning = oar_module.answer_and_reasoning_masks([texts], mask, ANSWER_TOKENS)
    covered = "".join(texts[i] for i in answer[0].nonzero().flatten().tolist())
    if answer_text is None:
        assert extract_boxed(text) is None and covered == text[-ANSWER_TOKENS:]
    else:
        assert covered == answer_text and extract_boxed(text) == answer_text[answer_text.index("{") + 1:-1]
    first = int(answer[0].nonzero()[0])
    assert reasoning[0].nonzero().flatten().tolist() == list(range(first))


# --- the defaults, against the authors' code -------------------------------------------------------


def test_oar_defaults_are_the_authors(tmp_path):
    """The values docs/objectives.md ("OAR against its authors' code") compares with Valsure/Outcome-Grounded-
    Advantage-Reshaping at 8dbc478 and its README: threshold 0.25, beta 1.0, noise_std 1e-3, the 0.1 floor."""
    import inspect

    from grpo_lambda.oar_scores import oar_gradient_importance, oar_weights

    args = GRPOLambdaConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none",
                            objective="grpo", oar_method="gradient")
    assert (args.oar_quantile, args.oar_boost, args.oar_sigma) == (0.25, 1.0, 1e-3)
    defaults = {name: p.default for name, p in inspect.signature(oar_weights).parameters.items()}
    assert (defaults["quantile"], defaults["boost"], defaults["floor"]) == (0.25, 1.0, 0.1)
    assert inspect.signature(oar_gradient_importance).parameters["sigma"].default == 1e-3
    # q = 0.25 by hand: scores expm1([0, 1, 2, 3, 4]) -> n = [0, .25, .5, .75, 1], τ = 0.25:
    # w = [max(0, 0.1), 1, 1 + (.25/.75), 1 + (.5/.75), 2], then scaled to sum 5
    weights = oar_weights(torch.expm1(torch.arange(5.0)).unsqueeze(0), torch.ones(1, 5, dtype=torch.bool))
    raw = torch.tensor([0.1, 1.0, 1 + 1 / 3, 1 + 2 / 3, 2.0])
    torch.testing.assert_close(weights[0], raw * 5 / raw.sum())


# --- the authors' P_final: the reference answer after a conclude segment (oar_pfinal: reference) -------------

REFERENCES = ["15", "2", "7", "9", "7"]


@pytest.mark.parametrize("method", ["gradient", "perturbation"])
def test_the_reference_reading_scores_every_completion_token_against_the_appended_reference(model_dir, tmp_path,
                                                                                            monkeypatch, method):
    """oar_pfinal reference (OAR-main.py: reasoning + conclude + the prompt's answer, the weights on the first R
    response positions): each scored row is its completion, then the conclude text "=", then its reference; every
    completion token is a reasoning token, the reference's tokens are the answer (OAR-P: its first token), and the
    weights land on the completion's R tokens: w_j = max(2j/(R−1), 0.1) rescaled to sum R, for scores expm1(j)."""
    args = GRPOLambdaConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none",
                            per_device_train_batch_size=2, num_generations=2, max_completion_length=WIDTH,
                            objective="grpo", oar_method=method, oar_quantile=0.5, oar_pfinal="reference",
                            oar_conclude="=")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    trainer = GRPOLambdaTrainer(model=model_dir, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                                args=args, train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
                                processing_class=tokenizer)
    output = scored_batch(tokenizer)
    seen = []

    def spy(*args, **kwargs):
        reasoning, answer = (args[2], args[3]) if method == "gradient" else (args[3], args[4])
        seen.extend(zip(reasoning.bool().clone(), answer.bool().clone()))
        scores = torch.zeros(reasoning.shape, dtype=torch.float64)
        scores[:, PROMPT:] = torch.expm1(torch.arange(reasoning.size(1) - PROMPT, dtype=torch.float64))
        return scores

    monkeypatch.setattr(oar_module, f"oar_{method}_importance", spy)
    with pytest.raises(ValueError, match="reference answer per scored row"):
        oar_advantages(trainer, output)  # no references handed over
    trainer._oar_references = REFERENCES
    advantages = oar_advantages(trainer, output)
    scored = [row for row, (_, _, advantage) in enumerate(ROWS) if advantage != 0]
    assert len(seen) == len(scored) == 4  # row 4 has no reasoning under the own-answer reading; here it has
    equals = tokenizer.convert_tokens_to_ids("=")
    for row, (reasoning_full, answer) in zip(scored, seen):
        length = int(output["completion_mask"][row].sum())
        assert not reasoning_full[:PROMPT].any()
        assert reasoning_full[PROMPT:].nonzero().flatten().tolist() == list(range(length)), row
        reference = list(range(length + 1, length + 1 + len(REFERENCES[row])))
        assert answer.nonzero().flatten().tolist() == (reference[:1] if method == "perturbation" else reference)
        assert equals is not None
    assert advantages.shape == (len(ROWS), WIDTH)
    for row in scored:
        length, advantage = int(output["completion_mask"][row].sum()), ROWS[row][2]
        raw = [max(2 * j / (length - 1), 0.1) for j in range(length)]  # R > 21 floors j = 1 too
        expected = torch.tensor([advantage * w * length / sum(raw) for w in raw])
        torch.testing.assert_close(advantages[row, :length], expected.to(advantages.dtype), rtol=1e-5, atol=1e-7)
    assert not advantages[2].any()  # A = 0 stays 0


def test_the_reference_reading_builds_completion_conclude_reference(model_dir):
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    output = scored_batch(tokenizer)
    built = oar_module.with_reference_answers(tokenizer, output, REFERENCES, "=")
    for row, (text, ends, _) in enumerate(ROWS):
        length = len(text) + ends
        sequence = built["completion_ids"][row][built["completion_mask"][row].bool()].tolist()
        assert sequence == output["completion_ids"][row, :length].tolist() + tokenizer.convert_tokens_to_ids(
            ["="] + list(REFERENCES[row]))
        assert built["reasoning"][row].sum() == length and built["answer"][row].sum() == len(REFERENCES[row])
