"""Templates per model family and the one tokenisation shared by TRL, the hf and the vLLM backends."""

import re
from types import SimpleNamespace

import pytest
import yaml
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from grpo_lambda.data import prompts
from grpo_lambda.generation import hf_batch

BOS, EOS, PAD = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<pad>"
# The shape of the DeepSeek-R1-Distill chat template: it writes the BOS itself, and the tokenizer
# (add_bos_token) adds one too.
R1_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}{{ message['content'] }}"
    "{% elif message['role'] == 'user' %}<｜User｜>{{ message['content'] }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<｜Assistant｜><think>\n{% endif %}"
)
PROBLEM = "What is $1+2$? Give \\boxed{} answer."


def _tokenizer(adds_bos: bool) -> PreTrainedTokenizerFast:
    """A character-level tokenizer with R1-Distill's special tokens and chat template."""
    specials = [PAD, BOS, EOS, "<｜User｜>", "<｜Assistant｜>", "<think>", "<|im_start|>", "<|im_end|>"]
    chars = sorted({c for c in prompts.QWEN_MATH_TEMPLATE + prompts.R1_TEMPLATE + PROBLEM + "a\n"})
    vocab = {token: i for i, token in enumerate(specials + [c for c in chars if c not in specials])}
    core = Tokenizer(models.WordLevel(vocab, unk_token=PAD))
    core.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    if adds_bos:
        core.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, vocab[BOS])])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                        additional_special_tokens=specials[3:])
    tokenizer.chat_template = R1_CHAT_TEMPLATE
    tokenizer.padding_side = "left"
    return tokenizer


@pytest.fixture(params=[True, False], ids=["adds-bos", "no-bos"])
def tokenizer(request):
    return _tokenizer(request.param)


def test_the_fixture_tokenizer_adds_a_bos_where_asked():
    assert prompts.adds_bos(_tokenizer(True)) and not prompts.adds_bos(_tokenizer(False))
    # The pitfall the shared tokenisation avoids: the template's BOS plus the tokenizer's.
    tokenizer = _tokenizer(True)
    raw = prompts.render(tokenizer, "r1d", PROBLEM)
    assert tokenizer(raw)["input_ids"][:2] == [tokenizer.bos_token_id] * 2


def test_qwen_math_is_the_evaluation_codes_string():
    text = prompts.prompt_text(_tokenizer(False), "qwen_math", "1+1?")
    assert text == ("<|im_start|>system\nPlease reason step by step, and put your final answer within \\boxed{}."
                    "<|im_end|>\n<|im_start|>user\n1+1?<|im_end|>\n<|im_start|>assistant\n")


def test_r1d_is_the_tokenizers_template_with_the_user_turn_only(tokenizer):
    text = prompts.render(tokenizer, "r1d", PROBLEM)
    assert text == f"{BOS}<｜User｜>{PROBLEM}<｜Assistant｜><think>\n"
    assert prompts.QWEN_MATH_SYSTEM not in text


def test_r1d_needs_a_chat_template():
    tokenizer = _tokenizer(False)
    tokenizer.chat_template = None
    with pytest.raises(ValueError, match="chat template"):
        prompts.prompt_text(tokenizer, "r1d", PROBLEM)


def test_an_unknown_template_is_named():
    with pytest.raises(ValueError, match="'chatml'"):
        prompts.prompt_text(_tokenizer(False), "chatml", PROBLEM)


@pytest.mark.parametrize("template", prompts.TEMPLATES)
def test_every_path_gets_the_same_ids_with_one_bos(tokenizer, template):
    from trl.data_utils import _tokenize
    from trl.trainer.grpo_trainer import GRPOTrainer

    texts = [prompts.prompt_text(tokenizer, template, problem) for problem in (PROBLEM, "2+2?", "1")]
    ours = [prompts.prompt_token_ids(tokenizer, text) for text in texts]
    # TRL's GRPOTrainer on text prompts (and its vLLM generation, which it hands these ids).
    grpo_ids, _, _ = GRPOTrainer._tokenize_prompts(SimpleNamespace(processing_class=tokenizer), texts)
    # TRL's SFTTrainer tokenises a prompt/completion row's prompt this way.
    sft_ids = [_tokenize(tokenizer, text)["input_ids"] for text in texts]
    # The hf backend: left-padded batch; the padding stripped again by the attention mask.
    batch = hf_batch(tokenizer, ours)
    hf_ids = [[t for t, m in zip(row, mask) if m] for row, mask in
              zip(batch["input_ids"].tolist(), batch["attention_mask"].tolist())]
    # generation.generate hands both backends prompt_token_ids (vLLM as {"prompt_token_ids": ids}).
    assert [list(ids) for ids in grpo_ids] == sft_ids == hf_ids == ours
    bos = tokenizer.bos_token_id
    for ids in ours:
        # plain and r1d render the chat template, which writes the BOS; the tokenizer may add it instead
        assert ids.count(bos) == (1 if template in ("plain", "r1d") or prompts.adds_bos(tokenizer) else 0)
        assert bos not in ids or ids[0] == bos


def test_the_hf_batch_pads_on_the_left():
    tokenizer = _tokenizer(True)
    ids = [prompts.prompt_token_ids(tokenizer, text) for text in ("a", "aaaa")]
    batch = hf_batch(tokenizer, ids)
    assert batch["input_ids"][0].tolist()[:3] == [tokenizer.pad_token_id] * 3
    assert batch["input_ids"][0].tolist()[-2:] == ids[0]


def test_a_doubled_bos_is_refused():
    tokenizer = _tokenizer(True)
    with pytest.raises(ValueError, match="two BOS"):
        prompts.prompt_token_ids(tokenizer, prompts.render(tokenizer, "r1d", PROBLEM))


def test_the_tiny_model_is_prompted_as_before(tiny_model_dir):
    from grpo_lambda.models import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_model_dir))
    text = prompts.prompt_text(tokenizer, "plain", "12+3=?")
    assert text == tokenizer.apply_chat_template([{"role": "user", "content": "12+3=?"}], tokenize=False,
                                                 add_generation_prompt=True)
    assert prompts.prompt_token_ids(tokenizer, text) == tokenizer(text, add_special_tokens=False)["input_ids"]


# ---- a system prompt and template strings from the config ----------------------------------------------

def test_qwen_math_takes_a_system_prompt_in_place_of_its_own():
    text = prompts.prompt_text(_tokenizer(False), "qwen_math", "1+1?", system_prompt="Answer in \\boxed{}.")
    assert text == ("<|im_start|>system\nAnswer in \\boxed{}.<|im_end|>\n<|im_start|>user\n1+1?<|im_end|>\n"
                    "<|im_start|>assistant\n")


def test_a_system_prompt_is_the_chat_templates_system_turn(tokenizer):
    text = prompts.render(tokenizer, "r1d", PROBLEM, "Think first.")
    assert text == f"{BOS}Think first.<｜User｜>{PROBLEM}<｜Assistant｜><think>\n"


def test_a_chat_template_that_drops_the_system_turn_is_refused(tiny_model_dir, tmp_path):
    from grpo_lambda import tiny
    from grpo_lambda.models import load_tokenizer

    chatml = load_tokenizer(str(tiny_model_dir))  # ChatML: writes every turn, the system's too
    assert prompts.prompt_text(chatml, "plain", "1+2", system_prompt="Add.") == (
        "<|im_start|>system\nAdd.<|im_end|>\n<|im_start|>user\n1+2<|im_end|>\n<|im_start|>assistant\n")
    r1 = tiny.build_tokenizer("r1")  # R1-Distill's, reduced to user and assistant turns: a system turn vanishes
    with pytest.raises(ValueError, match="chat template drops the system turn"):
        prompts.prompt_text(r1, "plain", "1+2", system_prompt="Add.")
    no_template = _tokenizer(False)
    no_template.chat_template = None
    with pytest.raises(ValueError, match="has none; write a template string"):
        prompts.prompt_text(no_template, "plain", "1+2", system_prompt="Add.")


def test_a_template_string_fills_its_two_placeholders_once_and_keeps_every_other_brace():
    template = "{system_prompt}\nQ: {problem}\nPut the answer in \\boxed{}.\nA:"
    text = prompts.render(None, template, "What is {system_prompt}?", "Be brief.")
    assert text == "Be brief.\nQ: What is {system_prompt}?\nPut the answer in \\boxed{}.\nA:"
    assert prompts.render(None, "Q: {problem} {x}", "1+1") == "Q: 1+1 {x}"


@pytest.mark.parametrize("template, system_prompt, problem", [
    ("qwen", None, "neither a named template"),
    ("Q: {question}", None, "holding {problem}"),
    ("Q: {problem}", "Be brief.", "has no {system_prompt}"),
    ("{system_prompt} Q: {problem}", None, "and the model has no system_prompt"),
    ("r1", "Be brief.", "'r1' has no system turn"),
])
def test_a_template_that_cannot_render_is_named_before_any_job(template, system_prompt, problem):
    from conftest import E2E_CONFIG
    from grpo_lambda import config as study

    assert problem in prompts.template_problem(template, system_prompt)
    config = yaml.safe_load(E2E_CONFIG.read_text())
    model = config["models"]["tiny-distill"]  # a model built by the pipeline: any named template is open to it
    model["prompt"] = template
    if system_prompt:
        model["system_prompt"] = system_prompt
    with pytest.raises(study.ConfigError, match=r"models\.tiny-distill\.prompt: .*" + re.escape(problem)):
        study.validate(config)


def test_the_prompt_settings_reach_every_stage_and_leave_other_cells_params_alone():
    """A system prompt is part of the model's settings of SFT, RL and evaluation (so of their params and the
    resume fingerprint); a model without one keeps the settings it had before the key existed."""
    from conftest import E2E_CONFIG
    from grpo_lambda import config as study

    config = yaml.safe_load(E2E_CONFIG.read_text())
    plain = study.validate(config)
    config["models"]["tiny"]["prompt"] = "{system_prompt}\nQ: {problem}\nA:"
    config["models"]["tiny"]["system_prompt"] = "Add."
    own = study.validate(config)
    cell = {"train": dict(dataset="arith", variant="grpo"), "sft": dict(dataset="arith"),
            "evaluate": dict(dataset="arith", variant="grpo")}
    for stage, names in cell.items():
        before = study.stage_settings(plain, stage, model="tiny", **names)["model"]
        after = study.stage_settings(own, stage, model="tiny", **names)["model"]
        assert before == {"name": "tiny", "source": "tiny", "prompt": "plain", "lora": None}, stage
        assert after == {**before, "prompt": "{system_prompt}\nQ: {problem}\nA:", "system_prompt": "Add."}, stage
