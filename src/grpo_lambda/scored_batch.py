"""TRL's scored training batch, post-processed once per generation batch before any loss: DAPO's filter of the
groups without signal (``dynamic_sampling``), then the per-token advantages of `grpo_lambda.advantages` (OAR's
reshaping first when ``oar_method`` is set, then the variant's ``advantage_estimator``: a line of the table or
a user's ``module:function``), each handed the statistics it asks for.

GRPOLambdaTrainer calls `shape` from its ``_generate_and_score_completions``; the functions here read the
trainer's state (its args, the rewards TRL gathered, its accelerator and model) and write into TRL's output dict.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from grpo_lambda.advantages import (FORWARD_STATISTICS, GroupBatch, estimate_advantages, estimator, estimator_chain,
                                    token_statistics)
from grpo_lambda.oar import oar_token_weights


# The columns of the completions log (trainer._logs, `grpo_lambda.completions`) that hold each completion's advantages
# as the loss reads them, beside TRL's group-normalised A_i ("advantages").
TOKEN_ADVANTAGE_LOGS = ("token_advantage_mean", "token_advantage_first")


def shape(trainer, output: dict) -> None:
    """Dynamic sampling, then the per-token advantages, on TRL's scored training batch (in place)."""
    if trainer.args.dynamic_sampling:
        drop_uninformative_groups(trainer, output)
    output["advantages"] = per_token_advantages(trainer, output)
    log_token_advantages(trainer, output)


def log_token_advantages(trainer, output: dict) -> None:
    """Each completion's advantages as the loss reads them (the estimators' (B, T), raised to ``advantage_clamp``
    when set) into TRL's completion logs, gathered over processes in TRL's order: their mean over the completion's
    tokens in the loss and its first token's; NaN where no token of it is in the loss (a group dynamic sampling
    dropped)."""
    mask = output["completion_mask"] * output["tool_mask"] if "tool_mask" in output else output["completion_mask"]
    advantages = output["advantages"].detach().float()
    if trainer.args.advantage_clamp is not None:
        advantages = advantages.clamp(min=trainer.args.advantage_clamp)
    mask = mask.to(advantages.dtype)
    tokens = mask.sum(1)
    nan = torch.full_like(tokens, math.nan)
    mean = torch.where(tokens > 0, (advantages * mask).sum(1) / tokens.clamp(min=1), nan)
    first = torch.where(mask[:, 0] > 0, advantages[:, 0], nan)
    for name, values in zip(TOKEN_ADVANTAGE_LOGS, (mean, first)):
        trainer._logs[name].extend(trainer.accelerator.gather(values).tolist())


def per_token_advantages(trainer, output: dict) -> torch.Tensor:
    """(B, T) advantages of this process's rows: the estimators of `estimator_chain` in turn, the first reading
    TRL's group-normalised A_i, each next one the result before it.

    The batch: the training rewards (TRL's weighted sum, NaN where no function scored the row), the loss mask,
    and the statistics the estimators ask for (one forward pass of the policy as it is now, which generated the
    batch, for those of ``FORWARD_STATISTICS``; OAR's own passes for ``oar_weights``)."""
    args = trainer.args
    names = estimator_chain(args.advantage_estimator, oar_method=args.oar_method)
    chain = [estimator(name) for name in names]
    mask = output["completion_mask"]
    if "tool_mask" in output:
        mask = mask * output["tool_mask"]
    local_rows = mask.size(0)
    start = trainer.accelerator.process_index * local_rows  # TRL's process slice of the gathered rows
    for name, chosen in zip(names, chain):
        if chosen.grouped and (start % trainer.num_generations or local_rows % trainer.num_generations):
            raise ValueError(f"advantage_estimator {name!r} needs whole groups on each process: {local_rows} rows "
                             f"from row {start}, num_generations {trainer.num_generations}")
    rewards_per_func = trainer._rewards_per_func[start:start + local_rows]
    rewards = (rewards_per_func * trainer.reward_weights.to(rewards_per_func)).nansum(-1)
    # unscored: no function of nonzero weight scored the row (a weight-0 monitor does not make it a 0 reward)
    rewards[torch.isnan(rewards_per_func[:, trainer.reward_weights != 0]).all(-1)] = math.nan
    needs = {need for chosen in chain for need in chosen.needs}
    statistics = {}
    forward = tuple(need for need in FORWARD_STATISTICS if need in needs)
    if forward:
        statistics.update(policy_statistics(trainer, output, forward))
    if "completion_ids" in needs:
        statistics["completion_ids"] = output["completion_ids"]
    if "oar_weights" in needs:
        statistics["oar_weights"] = oar_weights(trainer, output)
    batch = GroupBatch(rewards=rewards, mask=mask, advantages=output["advantages"], group_size=trainer.num_generations,
                       scale_rewards=trainer.scale_rewards, **statistics)
    for name in names:
        batch = dataclasses.replace(batch, advantages=estimate_advantages(name, batch))
    return batch.advantages


def policy_statistics(trainer, output: dict, needs: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """`grpo_lambda.advantages.token_statistics` of the completions, by one forward pass without gradient of the
    policy, ``per_device_train_batch_size`` rows at a time, logits divided by the temperature as TRL's."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    input_ids = torch.cat([output["prompt_ids"], output["completion_ids"]], 1)
    attention_mask = torch.cat([output["prompt_mask"], output["completion_mask"]], 1)
    width = output["completion_ids"].size(1)
    chunks = []
    with torch.no_grad():
        rows_in_order = torch.arange(input_ids.size(0), device=input_ids.device)
        for rows in rows_in_order.split(trainer.args.per_device_train_batch_size):
            # logits[:, i] predicts completion token i (TRL keeps logits_to_keep + 1 and drops the last)
            logits = model(input_ids=input_ids[rows], attention_mask=attention_mask[rows], use_cache=False,
                           logits_to_keep=width + 1).logits[:, :-1] / trainer.temperature
            chunks.append(token_statistics(logits, output["completion_ids"][rows], trainer.eos_token_ids, needs))
    return {key: torch.cat([chunk[key] for chunk in chunks]) for key in chunks[0]}


def oar_weights(trainer, output: dict) -> torch.Tensor:
    """(B, T) OAR token weights (`grpo_lambda.oar`) with the policy as it is now; their largest per row, averaged,
    logged as ``oar/max_weight``."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    weights, max_weight = oar_token_weights(model, trainer._tokenizer, output, trainer.args, trainer.temperature,
                                            references=getattr(trainer, "_oar_references", None))
    if max_weight is not None:
        trainer._metrics["train"]["oar/max_weight"].append(max_weight)
    return weights


def drop_uninformative_groups(trainer, output: dict) -> None:
    """Mask out this process's rows of the groups whose training rewards are all equal; log how many groups."""
    dropped = uninformative_groups(trainer._rewards_per_func, trainer.reward_weights, trainer.num_generations)
    local_rows = output["completion_ids"].size(0)
    start = trainer.accelerator.process_index * local_rows  # TRL's process slice of the gathered rows
    keep = ~dropped.repeat_interleave(trainer.num_generations)[start:start + local_rows]
    completion_mask = output["completion_mask"] * keep.unsqueeze(1).to(output["completion_mask"].dtype)
    output["completion_mask"] = completion_mask
    loss_mask = completion_mask if "tool_mask" not in output else completion_mask * output["tool_mask"]
    output["num_items_in_batch"] = trainer.accelerator.gather(loss_mask.sum()).sum()
    trainer._metrics["train"]["dynamic_sampling/dropped_groups"].append(float(dropped.sum().item()))


def uninformative_groups(rewards_per_func: torch.Tensor, reward_weights: torch.Tensor, group_size: int) -> torch.Tensor:
    """True for each group of `group_size` consecutive rows whose training reward is the same on every row
    (DAPO's filter: such a group has zero advantage). The training reward is the weighted sum of the reward
    functions, as TRL's; a weight-0 function (logged only, such as the format monitor) cannot keep or drop a
    group. A row none of whose weighted functions scored it (all NaN) is ignored, where TRL's sum counts it
    as 0 once any function (a weight-0 one included) scored it: the two differ only for a user reward that
    returns None; a group without any scored row counts as equal.

    rewards_per_func: (N, F) as TRL's _calculate_rewards returns it; reward_weights: (F,). Returns
    (N / group_size,) bool.
    """
    if rewards_per_func.dim() != 2 or rewards_per_func.size(0) % group_size:
        raise ValueError(f"rewards_per_func must be (N, F) with N a multiple of {group_size}, "
                         f"got {tuple(rewards_per_func.shape)}")
    if reward_weights.shape != (rewards_per_func.size(1),):
        raise ValueError(f"reward_weights must hold one weight per reward function ({rewards_per_func.size(1)}), "
                         f"got shape {tuple(reward_weights.shape)}")
    trained = reward_weights != 0
    columns = rewards_per_func[:, trained]
    weights = reward_weights[trained].to(columns)
    reward = (columns * weights).nansum(-1)  # as TRL's advantage computes it
    unscored = torch.isnan(columns).all(-1)
    grouped = reward.view(-1, group_size)
    missing = unscored.view(-1, group_size)
    highest = grouped.masked_fill(missing, -math.inf).amax(1)
    lowest = grouped.masked_fill(missing, math.inf).amin(1)
    return highest <= lowest
