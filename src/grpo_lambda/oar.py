r"""OAR's token weights on TRL's scored batch, w_t of its per-token advantages A_{i,t} = A_i · w_t ("gradient":
OAR-G, "perturbation": OAR-P; the estimator "oar" of `grpo_lambda.advantages` multiplies), computed once per
generation batch with the policy that generated it.

P_final scores, by default, the completion's own final answer (``oar_pfinal: own_answer``: the paper's "how much
each token influences the model's final answer"); ``oar_pfinal: reference`` is the authors' code instead: the
prompt's reference answer appended after a "conclude" segment, every completion token a reasoning token
(:func:`with_reference_answers`). P_final's logits, as the authors configure each method (Valsure/Outcome-Grounded-Advantage-Reshaping; their README):
OAR-G the mean of the logits over the answer positions ("answer_mean"), OAR-P the logits that predict the
first answer token ("last": the end of their perturbed input, which stops before the answer). Where this
differs from their code, and why: docs/objectives.md, "OAR against its authors' code".

The final answer of a completion is the tokens that overlap the answer the grader reads
(`grpo_lambda.grading.extract.boxed_span`: the last ``\boxed{...}`` or ``\fbox{...}``, braces
matched), else its last ``oar_answer_tokens`` tokens; the reasoning tokens are those before it; the
other tokens keep weight 1. The scores and weights themselves are pure torch
(`grpo_lambda.oar_scores`: ``oar_gradient_importance``, ``oar_perturbation_importance``,
``oar_weights``); this module finds the tokens and runs the model.
"""

from __future__ import annotations

import torch

from grpo_lambda.grading.extract import boxed_span
from grpo_lambda.oar_scores import oar_gradient_importance, oar_perturbation_importance, oar_weights


def oar_token_weights(model, tokenizer, output: dict, args, temperature: float,
                      references: list | None = None) -> tuple[torch.Tensor, float | None]:
    """(B, T) token weights w_t of a scored batch (float32; 1 on the tokens OAR does not weigh), and the mean over
    the scored rows of their largest weight (None when no row was scored). w comes from OAR on the rows whose
    advantage and reasoning are not empty, ``args.per_device_train_batch_size`` rows per forward pass; the
    advantages are A_i · w_t (`grpo_lambda.advantages`, estimator "oar").

    model: the unwrapped policy; args: a GRPOLambdaConfig (its ``oar_*`` fields); temperature: the
    sampling temperature the logits are divided by, as in TRL; references: each row's reference answer, read
    with ``args.oar_pfinal`` "reference" (:func:`with_reference_answers`).
    """
    advantages, completion_mask = output["advantages"], output["completion_mask"]
    width = completion_mask.size(1)
    if getattr(args, "oar_pfinal", "own_answer") == "reference":
        if references is None or len(references) != completion_mask.size(0):
            raise ValueError("oar_pfinal 'reference' needs one reference answer per scored row")
        scored = with_reference_answers(tokenizer, output, references, args.oar_conclude)
        answer, reasoning = scored.pop("answer"), scored.pop("reasoning")
    else:
        scored = output
        answer, reasoning = answer_and_reasoning_masks(token_texts(tokenizer, output["completion_ids"]),
                                                       completion_mask, args.oar_answer_tokens)
    # as wide as the reading's sequences, and at least as the completions (the reference reading's may be narrower
    # than a batch padded wider than its longest unmasked row)
    weights = torch.ones(reasoning.size(0), max(reasoning.size(1), width), dtype=torch.float32,
                         device=completion_mask.device)
    rows = ((advantages != 0) & reasoning.any(-1)).nonzero().squeeze(1)
    max_weight = None
    for chunk in rows.split(args.per_device_train_batch_size) if len(rows) else ():  # split gives one empty chunk
        importance = _importance(model, tokenizer, scored, chunk, answer[chunk], reasoning[chunk], args, temperature)
        weights[chunk, :reasoning.size(1)] = oar_weights(importance, reasoning[chunk], quantile=args.oar_quantile,
                                                         boost=args.oar_boost).to(weights.dtype)
    if len(rows):
        max_weight = weights[rows].amax(-1).mean().item()
    return weights[:, :width], max_weight  # the reference reading's appended tokens are no completion tokens


def _importance(model, tokenizer, output, rows, answer, reasoning, args, temperature):
    """OAR scores of the completion tokens of some rows, (n, T), with the policy as it is now."""
    prompt_length = output["prompt_ids"].size(1)
    completion_length = output["completion_ids"].size(1)
    input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], 1)[rows]
    attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], 1)[rows]
    # Scores are defined over the whole sequence; only completion tokens are reasoning tokens.
    reasoning_full = torch.cat([reasoning.new_zeros(len(rows), prompt_length), reasoning], 1)

    def completion_logits(mask, **model_inputs):
        # logits[:, i] predicts completion token i (TRL keeps logits_to_keep + 1 and drops the last)
        logits = model(attention_mask=mask, use_cache=False, logits_to_keep=completion_length + 1,
                       **model_inputs).logits[:, :-1]
        return logits / temperature

    if args.oar_method == "gradient":
        embeds = model.get_input_embeddings()(input_ids)
        importance = oar_gradient_importance(
            lambda e: completion_logits(attention_mask, inputs_embeds=e), embeds, reasoning_full, answer,
            sigma=args.oar_sigma)
    else:  # P_final "last", as the authors run OAR-P: the distribution the first answer token is drawn from
        importance = oar_perturbation_importance(
            lambda ids, mask: completion_logits(mask, input_ids=ids), input_ids, attention_mask,
            reasoning_full, first_position(answer), pad_id=tokenizer.pad_token_id,
            batch_size=args.per_device_train_batch_size)
    return importance[:, prompt_length:]


def with_reference_answers(tokenizer, output: dict, references: list, conclude: str) -> dict:
    """The authors' P_final reading (OAR-main.py: reasoning, then a "conclude" segment, then the prompt's answer):
    each row's completion tokens, then ``conclude`` and the row's reference answer, each tokenized on its own as
    segments are there; right-padded. Returns the output's prompt fields with these as completion_ids and
    completion_mask, and the masks "answer" (the reference's tokens) and "reasoning" (every completion token: the
    weights go on the first R positions of the response, R its length)."""
    completion_ids, completion_mask = output["completion_ids"], output["completion_mask"]
    conclude_ids = tokenizer(conclude, add_special_tokens=False)["input_ids"]
    rows = []
    for row, reference in enumerate(references):
        length = int(completion_mask[row].sum().item())
        answer_ids = tokenizer(str(reference), add_special_tokens=False)["input_ids"]
        rows.append((completion_ids[row, :length].tolist(), answer_ids))
    width = max(len(ids) + len(conclude_ids) + len(answer_ids) for ids, answer_ids in rows)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.full((len(rows), width), pad, dtype=completion_ids.dtype, device=completion_ids.device)
    mask = torch.zeros((len(rows), width), dtype=completion_mask.dtype, device=completion_mask.device)
    answer = torch.zeros((len(rows), width), dtype=torch.bool, device=completion_mask.device)
    reasoning = torch.zeros_like(answer)
    for row, (own, answer_ids) in enumerate(rows):
        sequence = own + conclude_ids + answer_ids
        ids[row, :len(sequence)] = torch.tensor(sequence, dtype=ids.dtype)
        mask[row, :len(sequence)] = 1
        reasoning[row, :len(own)] = True
        answer[row, len(own) + len(conclude_ids):len(sequence)] = True
    return {"prompt_ids": output["prompt_ids"], "prompt_mask": output["prompt_mask"], "completion_ids": ids,
            "completion_mask": mask, "answer": answer, "reasoning": reasoning}


def first_position(mask: torch.Tensor) -> torch.Tensor:
    """The first True of each row of a (B, T) bool mask (a row without one stays empty)."""
    return mask & (mask.cumsum(-1) == 1)


def token_texts(tokenizer, completion_ids: torch.Tensor) -> list[list[str]]:
    """Each completion token decoded on its own (special tokens as ''), one list per row."""
    flat = tokenizer.batch_decode(completion_ids.reshape(-1, 1).tolist(), skip_special_tokens=True)
    width = completion_ids.size(1)
    return [flat[row * width:(row + 1) * width] for row in range(completion_ids.size(0))]


def answer_and_reasoning_masks(texts_per_row: list[list[str]], completion_mask: torch.Tensor, last_tokens: int):
    """(answer, reasoning) bool masks (B, T) of completions, from each token's decoded text.

    The answer is the tokens that overlap the grader's answer span (`boxed_span`: the last ``\\boxed{...}``
    or ``\\fbox{...}`` through its matching brace); without one (no box, or one never closed), the last
    `last_tokens` tokens. The reasoning is the tokens before the answer. The completion is the first
    completion_mask.sum() tokens of its row.
    """
    answer = torch.zeros(completion_mask.shape, dtype=torch.bool)
    reasoning = torch.zeros(completion_mask.shape, dtype=torch.bool)
    for row, length in enumerate(completion_mask.sum(-1).tolist()):
        texts = texts_per_row[row][:int(length)]
        if not texts:
            continue
        starts = [0]
        for text in texts:
            starts.append(starts[-1] + len(text))
        span = boxed_span("".join(texts))
        if span is None:
            first = max(0, len(texts) - last_tokens)
            answer[row, first:len(texts)] = True
        else:
            begin, end = span  # character range [begin, end)
            hits = [i for i in range(len(texts)) if starts[i] < end and starts[i + 1] > begin]
            first = hits[0]
            answer[row, first:hits[-1] + 1] = True
        reasoning[row, :first] = True
    return answer.to(completion_mask.device), reasoning.to(completion_mask.device)
