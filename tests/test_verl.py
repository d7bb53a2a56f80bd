"""The GRPO-λ loss as a verl plugin (grpo_lambda.integrations.verl), checked against verl 0.9.1 itself in its own
environment (envs/requirements-verl-cpu.txt, installed into .venv-verl by scripts/setup.sh verl-cpu): verl's
dispatch gives the package's loss and gradient, a training step through verl's worker loss is the package's objective,
the package's OTB is verl's, bad settings are refused by name (tests/verl_plugin.py runs them there)."""

import json
import os
import subprocess

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def verl_result(tmp_path_factory):
    installed = subprocess.run(["bash", "scripts/setup.sh", "verl-cpu"], cwd=ROOT, capture_output=True, text=True,
                               timeout=1800)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    out = tmp_path_factory.mktemp("verl") / "verl.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "VERL_USE_EXTERNAL_PLUGINS": "auto"}
    done = subprocess.run([str(ROOT / ".venv-verl" / "bin" / "python"), "tests/verl_plugin.py", str(out)], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.slow
def test_importing_verl_registers_the_loss_through_the_packages_entry_point(verl_result):
    assert verl_result["registered"] is True


@pytest.mark.slow
def test_verls_dispatch_gives_the_packages_loss_and_gradient_for_every_setting_and_aggregation(verl_result):
    loss = verl_result["loss"]
    # every form x style x update x 4 λ x 3 ε x 2 clamps (x 4 trace lengths for the absolute form), P-trace, GRPO,
    # the two-sided clip; each under 4 loss_agg_modes and 2 advantage shapes
    assert loss["settings"] == 3 * 3 * 4 * 3 * 2 * (1 + 4) + 16 + 2 and loss["cases"] == loss["settings"] * 8
    assert loss["loss"] <= 1e-6 and loss["gradient"] <= 1e-6, loss
    assert verl_result["data_parallel"] <= 1e-6


@pytest.mark.slow
def test_verls_dispatch_gives_theorem_1s_gradient_with_the_dense_trace_matrix(verl_result):
    assert verl_result["oracle"] <= 1e-6


@pytest.mark.slow
def test_a_training_step_through_verls_worker_loss_is_the_packages_objective_with_table_2s_kl(verl_result):
    """verl's ppo_loss (policy loss + its k3 KL loss at β 0.04) on a tiny model: the package's loss and parameter
    gradient (beta 0.04, no ratio correction), and an SGD step on it lowers the loss."""
    step = verl_result["actor_step"]
    assert step["loss"] <= 1e-6 and step["gradient"] <= 1e-6, step
    assert step["after"] < step["before"], step


@pytest.mark.slow
def test_the_packages_otb_is_verls_registered_optimal_token_baseline(verl_result):
    assert verl_result["otb"] <= 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("key", ["lam", "style", "form", "trace_length", "advantage_clamp", "objective"])
def test_a_bad_setting_is_refused_naming_its_verl_key(verl_result, key):
    message = verl_result["refusals"][key]
    assert message is not None and f"actor_rollout_ref.actor.policy_loss.{key}" in message, message


@pytest.mark.slow
def test_verls_own_policy_loss_config_is_refused_with_the_plugins_config_named(verl_result):
    message = verl_result["refusals"]["verl's own PolicyLossConfig"]
    assert message is not None and "_target_=grpo_lambda.integrations.verl.GRPOLambdaLossConfig" in message


@pytest.mark.slow
def test_the_documented_verl_command_composes_into_table_2s_grpo_lambda_setting(verl_result):
    """docs/verl.md's command (not run: no GPU) against verl's own Hydra config: every override a key verl knows,
    and the actor config verl builds from it holds the plugin's config with the paper's both/ε-trace/0.99 setting."""
    command = verl_result["command"]
    assert command["config_class"] == "GRPOLambdaLossConfig" and command["loss_mode"] == "grpo_lambda"
    assert command["settings"] == {"objective": "grpo_lambda", "lam": 0.99, "gamma": 1.0, "style": "both",
                                   "form": "absolute", "eps": 1e-7, "update": "trace", "trace_length": 256,
                                   "advantage_clamp": -0.1, "delta": None, "history_scope": "past"}
    assert command["settings"]["trace_length"] == command["max_response_length"] == 256
    assert command["rollout_n"] == 8 and command["use_kl_loss"] is True and command["kl_loss_coef"] == 0.04
