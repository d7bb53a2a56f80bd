"""The RL rewards: TRL reward functions by name (``REWARDS``, ``REWARD_FACTORIES``), a user's own as
``module:function``, and the list of them with weights that a cell trains on (``reward_specs``,
``reward_functions``).

The names of ``rl.rewards`` (config/README.md):

- ``evaluation``: the evaluation grader, 1 for a correct last ``\\boxed{}`` answer (the accuracy reported);
- ``strict``: the same, and 0 when the boxed content is not a single answer (``is_single_answer``);
- ``boxed``: 1 when the completion holds a final ``\\boxed{}`` the grader reads (logged: the share of boxed
  answers; named ``format`` before, which §4.2's format reward is not);
- ``think_format``: open-r1's format reward (its ``format_reward``), this project's reading of §4.2's: 1 for
  ``<think>`` reasoning then an ``<answer>``, each tag on its own line;
- ``tag_count``: open-r1's ``tag_count_reward``, 0.25 for each of the four tags written exactly once;
- ``overlong``: DAPO's soft overlong punishment (its Eq. 13; open-r1's ``get_soft_overlong_punishment``), 0 up
  to ``max_tokens − cache_tokens`` tokens, then falling linearly to −1 at ``max_tokens``.

``rl.reward: evaluation|strict`` is the shorthand of ``[{name: <it>, weight: 1}, {name: boxed, weight: 0}]``,
what every cell trained on before ``rl.rewards`` existed. A weight-0 reward is computed and logged
(``rewards/<function>/mean`` in TRL's logs, a train_log.csv column) and trains nothing: TRL's advantage and
DAPO's filter (``grpo_lambda.trainer.uninformative_groups``) read the weighted sum.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import re
import sys
from pathlib import Path

from .extract import extract_boxed
from .grade import _check_timeout, grade_many
from .workers import DEFAULT_TIMEOUT

def _completion_text(completion) -> str:
    """The text of a completion: a string, or (conversational datasets) a list of chat messages whose
    assistant contents are joined; a content may itself be a list of ``{"type": "text"}`` parts."""
    if isinstance(completion, str):
        return completion
    messages = [completion] if isinstance(completion, dict) else completion
    if not isinstance(messages, (list, tuple)):
        raise TypeError(f"completions must hold strings or lists of chat messages, got {type(completion).__name__}")
    texts = []
    for message in messages:
        if not isinstance(message, dict):
            raise TypeError(f"a chat message must be a dict, got {type(message).__name__}")
        if message.get("role", "assistant") != "assistant":
            continue
        content = message.get("content") or ""
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        texts.append(str(content))
    return "\n".join(texts)


_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_MACRO_NAME = re.compile(r"\\[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z]{2,}")


def is_single_answer(content: str) -> bool:
    r"""Whether boxed content reads as one answer: False when two numbers are separated by words or
    by blank space alone (``the answer 4 no 5``, ``4 or 5``, ``4 5``).

    Math between numbers is one answer: ``(1, 2)``, ``2\sqrt{3}``, ``\frac{1}{2}``, ``3 + 4i``,
    ``12 \text{ cm}``. LaTeX command names are not words; the words inside ``\text{...}`` are.
    """
    numbers_found = list(_NUMBER.finditer(content))
    for before, after in zip(numbers_found, numbers_found[1:]):
        gap = _MACRO_NAME.sub(" ", content[before.end():after.start()])
        if _WORD.search(gap) or not gap.strip():
            return False
    return True


def make_accuracy_reward(*, timeout: float = DEFAULT_TIMEOUT, processes: int | None = None,
                         strict: bool = False):
    """A TRL ``GRPOTrainer`` reward function: 1.0 for a correct boxed answer, else 0.0.

    The returned function, ``f(completions, answer, **kwargs)``, reads the gold from the
    dataset's ``answer`` column; completions may be strings or lists of chat messages. ``strict``
    gives 0.0 to a boxed answer that is not a single answer (``is_single_answer``): the evaluation
    grader accepts ``\\boxed{the answer 4 no 5}`` for gold 4, a route to reward hacking in RL.
    """
    timeout = _check_timeout(timeout)

    def accuracy_reward(completions, answer, **kwargs) -> list[float]:
        texts = [_completion_text(completion) for completion in completions]
        correct = grade_many(texts, answer, processes=processes, timeout=timeout)
        if strict:
            correct = [ok and is_single_answer(extract_boxed(text) or "") for ok, text in zip(correct, texts)]
        return [float(ok) for ok in correct]

    # TRL logs a reward by its function's name (rewards/<name>/mean, a train_log.csv column): the name of the
    # rl.rewards entry it stands for, so that a log names `evaluation` as the config does
    accuracy_reward.__name__ = "strict_reward" if strict else "evaluation_reward"
    return accuracy_reward


def boxed_reward(completions, **kwargs) -> list[float]:
    """1.0 when a completion holds a final ``\\boxed{}`` answer the grader can read (its ``formatted``),
    else 0.0. Trained at weight 0: TRL logs it as ``rewards/boxed_reward/mean``, the share of boxed answers,
    without changing the training signal. Not §4.2's format reward (read here as open-r1's: ``think_format``)."""
    return [float(extract_boxed(_completion_text(completion)) is not None) for completion in completions]


def _think_open(prompt) -> str:
    """The ``<think>`` tag a prompt already opened for its completion (the r1 template and R1-Distill's chat
    template end with it), else ""."""
    text = prompt if isinstance(prompt, str) else ""
    start = text.rfind("<think>")
    return text[start:] if start >= 0 and not text[start + len("<think>"):].strip() else ""


def _think_texts(completions, prompts) -> list[str]:
    """Each completion as its reader sees it: with the ``<think>`` tag its prompt opened put back in front."""
    prompts = prompts if prompts is not None else [None] * len(completions)
    return [_think_open(prompt) + _completion_text(completion) for prompt, completion in zip(prompts, completions)]


def _has_think_answer_layout(text: str) -> bool:
    r"""open-r1's format: the text starts with ``<think>`` and a line break, and somewhere later holds
    ``\n</think>\n<answer>\n`` and after it ``\n</answer>`` at the end of a line (the end of the text or
    before a line break; open-r1's pattern is anchored in multi-line mode, so a line after it still passes).
    The reasoning and the answer may be empty and may hold anything, tags included."""
    opening, middle, closing = "<think>\n", "\n</think>\n<answer>\n", "\n</answer>"
    if not text.startswith(opening):
        return False
    split = text.find(middle, len(opening))
    if split < 0:
        return False
    end = text.find(closing, split + len(middle))
    while end >= 0:
        after = end + len(closing)
        if after == len(text) or text[after] == "\n":
            return True
        end = text.find(closing, end + 1)
    return False


def think_format_reward(completions, prompts=None, **kwargs) -> list[float]:
    r"""open-r1's format reward: 1.0 for ``<think>\nreasoning\n</think>\n<answer>\nanswer\n</answer>``
    (``_has_think_answer_layout``), else 0.0. Ours: a ``<think>`` tag that closes the prompt counts as
    written (the r1 template opens the reasoning for the model; open-r1's chat prompts do not)."""
    return [float(_has_think_answer_layout(text)) for text in _think_texts(completions, prompts)]


TAGS = ("<think>\n", "\n</think>\n", "\n<answer>\n", "\n</answer>")


def tag_count_reward(completions, prompts=None, **kwargs) -> list[float]:
    """open-r1's tag count: 0.25 for each of the four tags (as ``TAGS`` spells them, line breaks included)
    that appears exactly once; the prompt's opening ``<think>`` counts as in ``think_format_reward``."""
    return [sum(0.25 for tag in TAGS if text.count(tag) == 1) for text in _think_texts(completions, prompts)]


def make_overlong_reward(*, max_tokens: int, cache_tokens: int):
    """DAPO's soft overlong punishment (arXiv 2503.14476, Eq. 13; open-r1's ``get_soft_overlong_punishment``):
    0 for a completion of at most ``max_tokens − cache_tokens`` tokens, then (max_tokens − cache_tokens − L) /
    cache_tokens, down to −1 at ``max_tokens``, and −1 beyond. L counts the completion's token ids as TRL
    passes them (its EOS included). ``max_tokens`` defaults, in ``reward_functions``, to the cell's
    max_completion_length, so that only completions near the cut are punished."""
    for name, value in (("max_tokens", max_tokens), ("cache_tokens", cache_tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive whole number, got {value!r}")
    if cache_tokens > max_tokens:
        raise ValueError(f"cache_tokens ({cache_tokens}) must not exceed max_tokens ({max_tokens})")
    free = max_tokens - cache_tokens

    def overlong_reward(completion_ids, **kwargs) -> list[float]:
        return [max(-1.0, min(0.0, (free - len(ids)) / cache_tokens)) for ids in completion_ids]

    return overlong_reward


accuracy_reward = make_accuracy_reward()
strict_accuracy_reward = make_accuracy_reward(strict=True)
# rl.rewards name -> its TRL reward function. `evaluation` and `strict` are also rl.reward's values.
REWARDS = {"evaluation": accuracy_reward, "strict": strict_accuracy_reward, "boxed": boxed_reward,
           "think_format": think_format_reward, "tag_count": tag_count_reward}
# Old rl.rewards names -> what a config is told instead.
RENAMED_REWARDS = {"format": "'boxed' (the share of completions with a final \\boxed{} answer, named 'format' "
                             "before); §4.2's format reward, read as open-r1's, is 'think_format'"}
# rl.rewards name -> the factory of a reward with parameters (its keyword arguments, given beside the name).
REWARD_FACTORIES = {"overlong": make_overlong_reward}
# What TRL 1.16 passes every reward function by keyword (GRPOTrainer._calculate_rewards), besides the RL
# dataset's columns other than the prompt (grpo_lambda.train.rl_dataset: answer). `environments` only with
# environments, which the pipeline never sets.
TRL_REWARD_KEYWORDS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric")
DATASET_COLUMNS = ("answer",)
USER_REWARD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


def reward_specs(rl: dict) -> list[dict]:
    """A cell's rewards as ``[{name, weight, ...parameters}]``: ``rl.rewards``, or what ``rl.reward`` stands for."""
    if rl.get("rewards"):
        return [dict(spec) for spec in rl["rewards"]]
    return [{"name": rl.get("reward", "evaluation"), "weight": 1.0}, {"name": "boxed", "weight": 0.0}]


def reward_functions(specs: list[dict], *, max_completion_length: int) -> tuple[list, list[float]]:
    """(the TRL reward functions, their weights) of ``reward_specs``, in order; ``max_completion_length`` is the
    cell's (``overlong``'s default ``max_tokens``)."""
    functions = [reward_function(spec, max_completion_length=max_completion_length) for spec in specs]
    return functions, [float(spec.get("weight", 1.0)) for spec in specs]


def reward_function(spec: dict, *, max_completion_length: int):
    """The TRL reward function of one ``rl.rewards`` entry; ValueError says what is wrong with it."""
    name = spec["name"]
    if name in RENAMED_REWARDS:
        raise ValueError(f"reward {name!r} is now {RENAMED_REWARDS[name]}")
    parameters = {key: value for key, value in spec.items() if key not in ("name", "weight")}
    if name in REWARDS or USER_REWARD.match(name):
        if parameters:
            raise ValueError(f"reward {name!r} takes no parameters, got {sorted(parameters)}")
        return REWARDS[name] if name in REWARDS else user_reward(name)
    if name in REWARD_FACTORIES:
        factory = REWARD_FACTORIES[name]
        accepted = list(inspect.signature(factory).parameters)
        unknown = sorted(set(parameters) - set(accepted))
        if unknown:
            raise ValueError(f"reward {name!r} has no parameter(s) {unknown}; its parameters: {accepted}")
        if "max_tokens" in accepted and "max_tokens" not in parameters:
            parameters["max_tokens"] = max_completion_length  # a length limit defaults to the cell's
        try:
            return factory(**parameters)
        except TypeError as error:  # a parameter left out
            raise ValueError(f"reward {name!r}: {error}") from None
    raise ValueError(f"{name!r} is neither a reward of grpo_lambda.grading.reward ({', '.join(reward_names())}) "
                     "nor a user reward written module:function")


def reward_names() -> list[str]:
    return [*REWARDS, *REWARD_FACTORIES]


def user_reward(path: str):
    """The function ``module:function`` names, checked to take what TRL passes a reward function.

    The module is imported as Python would from the folder the run starts in (the Snakemake working
    directory) or PYTHONPATH. The function is called by keyword, as TRL calls it, with prompts, completions,
    completion_ids, trainer_state, log_extra, log_metric and the RL set's answer column: it must take every
    keyword it names (best: ``def f(completions, answer, **kwargs)``) and ask for nothing else.
    """
    if not USER_REWARD.match(path):
        raise ValueError(f"{path!r} is not written module:function (e.g. my_rewards:length_penalty)")
    module_name, function_name = path.split(":")
    if "" not in sys.path:
        sys.path.insert(0, "")  # the working directory, as `python -m` has it
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise ValueError(f"{path!r}: module {module_name!r} cannot be imported "
                         f"({type(error).__name__}: {error}); it must lie in the folder the run starts in or "
                         "on PYTHONPATH") from None
    function = getattr(module, function_name, None)
    if function is None:
        raise ValueError(f"{path!r}: module {module_name!r} ({module.__file__}) has no {function_name!r}")
    if not callable(function):
        raise ValueError(f"{path!r} is a {type(function).__name__}, not a function")
    if not isinstance(getattr(function, "__name__", None), str):
        raise ValueError(f"{path!r} is a {type(function).__name__} without a __name__, which TRL logs a reward "
                         "by: define it with def (a functools.partial can be wrapped in one)")
    problem = signature_problem(function)
    if problem:
        raise ValueError(f"{path!r}: {problem}")
    return function


def signature_problem(function) -> str | None:
    """Why TRL could not call ``function`` as a reward function, or None."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None  # a builtin without a signature: TRL will tell
    passed = (*TRL_REWARD_KEYWORDS, *DATASET_COLUMNS)
    takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters)
    positional_only = [p.name for p in parameters if p.kind is p.POSITIONAL_ONLY]
    if positional_only:
        return f"TRL passes every argument by keyword; {positional_only} are positional-only"
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    required = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                and p.default is p.empty and p.name not in passed]
    if required:
        return (f"it requires {required}, which TRL does not pass; a reward function receives "
                f"{', '.join(passed)} by keyword")
    if "completions" not in named and not takes_any:
        return "it takes no 'completions' (TRL's reward signature: f(completions, **kwargs) -> list[float])"
    unread = [name for name in passed if name not in named]
    if unread and not takes_any:
        return f"TRL also passes {unread} by keyword: add **kwargs"
    return None


def source_digest(specs: list[dict]) -> dict:
    """The source file digest of each user reward of ``specs`` (name -> sha256), so that a cell trained with
    one version of a user's reward never resumes with another (grpo_lambda.train's fingerprint)."""
    digests = {}
    for spec in specs:
        if spec["name"] not in REWARDS and spec["name"] not in REWARD_FACTORIES:
            source = inspect.getsourcefile(user_reward(spec["name"]))
            digests[spec["name"]] = hashlib.sha256(Path(source).read_bytes()).hexdigest() if source else None
    return digests
