"""Run in .venv-verl (scripts/setup.sh verl-cpu) by tests/test_verl.py: verl 0.9.1's own dispatch against the
package, written as JSON to the path given.

    python tests/verl_plugin.py OUT.json

- "registered": the loss verl holds under "grpo_lambda" after a bare `import verl`, before this script imports the
  plugin, is the plugin's function (the package's verl.plugins entry point registered it).
- "loss": for every objective setting below and each of verl's loss_agg_modes, the largest difference between
  verl's get_policy_loss_fn("grpo_lambda") with an ActorConfig that verl built itself (omega_conf_to_dataclass from
  a config naming the plugin's _target_) and the package's objectives.policy_loss with the loss_type of that mode,
  in the loss and in its gradient (relative to the loss's size where it exceeds 1), float32 random batches.
- "oracle": on-policy, token-mean, no clamp: the largest difference between the gradient verl's dispatch gives and
  Theorem 1's −Σ_t W[t,c] A_t mask_t mask_c / N, W the dense trace matrix the package's tests take as the oracle.
- "actor_step": one training step of a tiny model through verl's worker loss (verl.workers.utils.losses.ppo_loss:
  the policy loss, then verl's k3 KL loss at Table 2's β = 0.04): its loss and parameter gradient against the
  package's policy_loss with the same KL (beta 0.04, no ratio correction), and the loss before and after an SGD step.
- "otb": the largest difference between verl's registered optimal_token_baseline and the package's otb_advantages.
- "refusals": the message of each bad setting.
- "command": the verl command of docs/verl.md composed with verl's own Hydra config (ppo_trainer), and the actor
  config verl builds from it.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path

import numpy as np
import torch
import verl  # noqa: F401  (loads the verl.plugins entry points)
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from tensordict import TensorDict
from verl.trainer.ppo import core_algos
from verl.utils import tensordict_utils
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.utils.losses import ppo_loss

# Read before this script imports the plugin itself: only the entry point can have registered the loss by now.
REGISTERED_ON_IMPORT = core_algos.POLICY_LOSS_REGISTRY.get("grpo_lambda")

from grpo_lambda.advantages import GroupBatch, otb_advantages  # noqa: E402
from grpo_lambda.integrations import verl as plugin  # noqa: E402
from grpo_lambda.objectives import ObjectiveParams, policy_loss  # noqa: E402
from grpo_lambda.traces import FORMS, STYLES, trace_matrix  # noqa: E402

B, T, GROUP = 8, 14, 4
CLIP_LOW, CLIP_HIGH = 0.2, 0.28
# verl's aggregation -> the package's loss_type that normalises alike (dr_grpo's constant: the padded width T,
# verl's default loss_scale_factor) and the dapo token count it amounts to.
MODES = {"token-mean": ("bnpo", None), "seq-mean-token-mean": ("grpo", None),
         "seq-mean-token-sum-norm": ("dr_grpo", None), "token-sum": ("dapo", 1.0)}


def settings():
    """The objective settings of tests/test_objectives.py and tests/test_traces*.py: every form, style and update
    at λ 0, 0.5, 0.99 and 1 with ε 0, 1e-7 and 0.05, the absolute form under each trace length, the clamp off and
    at the paper's −0.1; P-trace with both scopes; GRPO."""
    for form, style, update, lam, eps, clamp in itertools.product(FORMS, STYLES, ("trace", "weight", "position"),
                                                                   (0.0, 0.5, 0.99, 1.0), (0.0, 1e-7, 0.05),
                                                                   (None, -0.1)):
        lengths = (None, 2 * T, "batch_max", "per_sequence") if form == "absolute" else (None,)
        for trace_length in lengths:
            yield dict(objective="grpo_lambda", form=form, style=style, update=update, lam=lam, eps=eps,
                       advantage_clamp=clamp, trace_length=trace_length)
    for scope, lam, clamp in itertools.product(("past", "sequence"), (0.0, 0.5, 0.99, 1.0), (None, -0.1)):
        yield dict(objective="ptrace", history_scope=scope, lam=lam, advantage_clamp=clamp)
    yield dict(objective="grpo")
    yield dict(objective="grpo_lambda", lam=0.99, delta=1.5)


def actor_config(actor=None, **policy_loss):
    """An ActorConfig as verl's workers build it: hydra instantiates the config from its _target_s."""
    return omega_conf_to_dataclass(OmegaConf.create({
        "_target_": "verl.workers.config.ActorConfig", "strategy": "fsdp", "rollout_n": GROUP,
        "ppo_mini_batch_size": B, "ppo_micro_batch_size_per_gpu": B, "clip_ratio": 0.2,
        "clip_ratio_low": CLIP_LOW, "clip_ratio_high": CLIP_HIGH, **(actor or {}),
        "policy_loss": {"_target_": "grpo_lambda.integrations.verl.GRPOLambdaLossConfig", "loss_mode": "grpo_lambda",
                        **policy_loss}}))


def batch(seed):
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=generator)
    lengths[0] = T
    mask = torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)
    logps = -torch.rand(B, T, generator=generator) * 3
    old = logps + 0.3 * torch.randn(B, T, generator=generator)
    per_sequence = torch.randn(B, 1, generator=generator).expand(B, T)
    per_token = torch.randn(B, T, generator=generator)
    return logps, old, mask, per_sequence, per_token


def loss_differences():
    loss_fn = core_algos.get_policy_loss_fn("grpo_lambda")
    worst = {"loss": 0.0, "gradient": 0.0, "settings": 0, "cases": 0}
    for index, setting in enumerate(settings()):
        config = actor_config(**setting)
        logps, old, mask, per_sequence, per_token = batch(index)
        for mode, (loss_type, num_items) in MODES.items():
            for advantages in (per_sequence, per_token):
                mine = logps.clone().requires_grad_()
                loss, metrics = loss_fn(old_log_prob=old, log_prob=mine, advantages=advantages, response_mask=mask,
                                        loss_agg_mode=mode, config=config, rollout_is_weights=None)
                (grad,) = torch.autograd.grad(loss, mine)
                theirs = logps.clone().requires_grad_()
                params = ObjectiveParams(**setting, epsilon_low=CLIP_LOW, epsilon_high=CLIP_HIGH, loss_type=loss_type,
                                         max_completion_length=T)
                expected, _ = policy_loss(theirs, old, None, advantages, mask.float(), params, num_items=num_items)
                (expected_grad,) = torch.autograd.grad(expected, theirs)
                # relative to the loss's size where it exceeds 1 (token-sum adds up to a hundred tokens)
                scale = max(1.0, expected.abs().item(), expected_grad.abs().max().item())
                worst["loss"] = max(worst["loss"], (loss - expected).abs().item() / scale)
                worst["gradient"] = max(worst["gradient"], (grad - expected_grad).abs().max().item() / scale)
                worst["cases"] += 1
                assert set(metrics) >= {"actor/pg_clipfrac", "actor/ppo_kl"}, metrics
        worst["settings"] += 1
    return worst


def data_parallel_difference():
    """token-mean over two data-parallel ranks: verl divides by the global token count and multiplies by dp_size,
    the package's dapo divides by the count it is given (the global count over the ranks)."""
    config = actor_config(lam=0.99, form="absolute", style="both", eps=1e-7, advantage_clamp=-0.1, trace_length=2 * T)
    logps, old, mask, per_sequence, _ = batch(1000)
    global_tokens = 3 * int(mask.sum())
    config.global_batch_info.update(dp_size=2, batch_num_tokens=global_tokens, global_batch_size=3 * B)
    mine = logps.clone().requires_grad_()
    loss, _ = core_algos.get_policy_loss_fn("grpo_lambda")(old, mine, per_sequence, mask, "token-mean", config)
    params = ObjectiveParams(objective="grpo_lambda", lam=0.99, form="absolute", style="both", eps=1e-7,
                             advantage_clamp=-0.1, trace_length=2 * T, epsilon_low=CLIP_LOW, epsilon_high=CLIP_HIGH,
                             loss_type="dapo")
    expected, _ = policy_loss(logps, old, None, per_sequence, mask.float(), params, num_items=global_tokens / 2)
    return abs(loss.item() - expected.item())


def oracle_difference():
    loss_fn = core_algos.get_policy_loss_fn("grpo_lambda")
    worst = 0.0
    for index, (form, style, lam, eps) in enumerate(itertools.product(FORMS, STYLES, (0.5, 0.99), (0.0, 0.05))):
        logps, _, mask, per_sequence, per_token = batch(2000 + index)
        for advantages in (per_sequence, per_token):
            mine = logps.clone().requires_grad_()
            config = actor_config(form=form, style=style, lam=lam, eps=eps)
            loss, _ = loss_fn(logps, mine, advantages, mask, "token-mean", config)
            (grad,) = torch.autograd.grad(loss, mine)
            matrix = trace_matrix(T, lam, style=style, form=form, eps=eps, dtype=torch.float32)
            weighted = advantages * mask
            expected = -(weighted @ matrix) * mask / mask.sum()
            worst = max(worst, (grad - expected).abs().max().item())
    return worst


def actor_step():
    """A tiny causal model (an embedding and a linear head) scored through verl's ppo_loss on padded prompts and
    responses laid out as verl's engines hand them over (one flat row of next-token log-probs per sequence)."""
    prompt_length, response_length, vocabulary, rows = 3, 6, 11, 4
    generator = torch.Generator().manual_seed(3)
    prompts = torch.randint(0, vocabulary, (rows, prompt_length), generator=generator)
    responses = torch.randint(0, vocabulary, (rows, response_length), generator=generator)
    lengths = torch.tensor([response_length, 2, 4, 5])
    response_mask = torch.arange(response_length).unsqueeze(0) < lengths.unsqueeze(1)
    attention_mask = torch.cat([torch.ones(rows, prompt_length, dtype=torch.long), response_mask.long()], 1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(vocabulary, 8), torch.nn.Linear(8, vocabulary))

    def next_token_logps():  # column i: log π(token i + 1 | tokens ≤ i)
        ids = torch.cat([prompts, responses], 1)
        logits = model(ids[:, :-1])
        return torch.log_softmax(logits, -1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)

    with torch.no_grad():
        current = next_token_logps()[:, prompt_length - 1:]
        old = current + 0.05 * torch.randn(rows, response_length, generator=generator)
        ref = current + 0.05 * torch.randn(rows, response_length, generator=generator)
    advantages = torch.randn(rows, 1, generator=generator).expand(rows, response_length) * response_mask
    settings = dict(lam=0.99, style="both", form="absolute", eps=1e-7, advantage_clamp=-0.1, trace_length=response_length)
    config = actor_config(actor={"use_kl_loss": True, "kl_loss_coef": 0.04, "kl_loss_type": "low_var_kl",
                                 "loss_agg_mode": "token-mean", "clip_ratio_high": CLIP_LOW}, **settings)
    data = TensorDict({"prompts": prompts, "responses": responses, "attention_mask": attention_mask,
                       "response_mask": response_mask.long(), "old_log_probs": old, "advantages": advantages,
                       "ref_log_prob": ref}, batch_size=[rows])
    tensordict_utils.assign_non_tensor(data, dp_size=1, batch_num_tokens=int(response_mask.sum()),
                                       global_batch_size=rows)

    def verl_loss():
        logps = next_token_logps()
        flat = torch.cat([torch.cat([logps[row, :prompt_length + int(lengths[row]) - 1], logps.new_zeros(1)])
                          for row in range(rows)])
        return ppo_loss(config, {"log_probs": flat}, data)[0]

    params = ObjectiveParams(objective="grpo_lambda", **settings, beta=0.04, kl_ratio_correction=False,
                             epsilon_low=CLIP_LOW, epsilon_high=CLIP_LOW, loss_type="bnpo")
    expected, _ = policy_loss(next_token_logps()[:, prompt_length - 1:], old, ref, advantages, response_mask.float(),
                              params)
    expected_grads = torch.autograd.grad(expected, list(model.parameters()))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loss = verl_loss()
    loss.backward()
    grad_difference = max((p.grad - e).abs().max().item() for p, e in zip(model.parameters(), expected_grads))
    optimizer.step()
    with torch.no_grad():
        after = verl_loss().item()
    return {"loss": abs(loss.item() - expected.item()), "gradient": grad_difference, "before": loss.item(),
            "after": after}


def otb_difference():
    generator = torch.Generator().manual_seed(7)
    lengths = torch.randint(1, T + 1, (B,), generator=generator)
    mask = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).float()
    rewards = torch.randint(0, 2, (B,), generator=generator).float()
    token_rewards = torch.zeros(B, T)
    token_rewards[torch.arange(B), lengths - 1] = rewards  # the outcome reward at the last token, as verl's
    logps = -torch.rand(B, T, generator=generator) * 2
    sum_pi_squared = torch.rand(B, T, generator=generator) * logps.exp() ** 2 + logps.exp() ** 2
    index = np.array([f"prompt-{row // GROUP}" for row in range(B)], dtype=object)
    theirs, _ = core_algos.get_adv_estimator_fn("optimal_token_baseline")(
        token_level_rewards=token_rewards, response_mask=mask, index=index, old_log_probs=logps,
        sum_pi_squared=sum_pi_squared, handle_zero_tail=False)
    mine = otb_advantages(GroupBatch(rewards=rewards, mask=mask, advantages=torch.zeros(B), group_size=GROUP,
                                     logps=logps, sum_pi_squared=sum_pi_squared))
    return (theirs - mine).abs().max().item()


def refusals():
    messages = {}
    for name, setting in {"lam": {"lam": 1.5}, "style": {"style": "late"}, "form": {"form": "rel"},
                          "trace_length": {"trace_length": -3}, "advantage_clamp": {"advantage_clamp": 0.5},
                          "objective": {"objective": "strace"}}.items():
        try:
            actor_config(**setting)
            messages[name] = None
        except Exception as error:  # hydra wraps the config's ValueError in its InstantiationException
            messages[name] = str(error)
    bare = omega_conf_to_dataclass(OmegaConf.create({
        "_target_": "verl.workers.config.ActorConfig", "strategy": "fsdp", "rollout_n": GROUP,
        "ppo_mini_batch_size": B, "ppo_micro_batch_size_per_gpu": B,
        "policy_loss": {"_target_": "verl.workers.config.PolicyLossConfig", "loss_mode": "grpo_lambda"}}))
    logps, old, mask, per_sequence, _ = batch(0)
    try:
        core_algos.get_policy_loss_fn("grpo_lambda")(old, logps, per_sequence, mask, "token-mean", bare)
        messages["verl's own PolicyLossConfig"] = None
    except ValueError as error:
        messages["verl's own PolicyLossConfig"] = str(error)
    return messages


def documented_command():
    """The overrides of docs/verl.md's command line ($VARIABLES as placeholders), composed and built as verl does."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "verl.md").read_text()
    block = re.search(r"```bash\npython3 -m verl\.trainer\.main_ppo \\\n(.*?)```", text, re.S).group(1)
    overrides = [re.sub(r"\$(\w+)", r"placeholder-\1", line.strip().rstrip("\\").strip())
                 for line in block.splitlines() if line.strip()]
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose(config_name="ppo_trainer", overrides=overrides)
    actor = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    loss = actor.policy_loss
    return {"overrides": len(overrides), "config_class": type(loss).__name__, "loss_mode": loss.loss_mode,
            "settings": {key: getattr(loss, key) for key in plugin.SETTINGS},
            "max_response_length": config.data.max_response_length, "rollout_n": config.actor_rollout_ref.rollout.n,
            "kl_loss_coef": actor.kl_loss_coef, "use_kl_loss": actor.use_kl_loss}


def main(out: str) -> None:
    result = {"registered": REGISTERED_ON_IMPORT is plugin.compute_policy_loss_grpo_lambda,
              "loss": loss_differences(), "data_parallel": data_parallel_difference(), "oracle": oracle_difference(),
              "actor_step": actor_step(), "otb": otb_difference(), "command": documented_command(),
              "refusals": refusals()}
    with open(out, "w") as handle:
        json.dump(result, handle, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
