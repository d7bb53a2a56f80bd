"""The grader and the RL reward, under their former module name: they live in ``grpo_lambda.grading``
(see its docstring for the grading rule and its package layout). Every name this module held before is
importable from here still; a monkeypatch must target the module that defines the name.
"""

from grpo_lambda.grading.workers import (  # noqa: F401
    allocated_cpus,
    close_workers, DEFAULT_TIMEOUT, _POOL, _raise_soft_timeout, _serve, _SoftTimeout, _symbolic_equal,
    _symbolic_match, _Worker, _WORKER_BOOT, WORKER_START_TIMEOUT, _WorkerPool,
)
from grpo_lambda.grading.string_match import (  # noqa: F401
    _comparison_keys, _fast_verdict, MAX_ANSWER_CHARS, MAX_DIGITS, _NUMBER_BEFORE_PERIOD, MAX_SYMBOLIC_CHARS,
    _without_final_period,
)
from grpo_lambda.grading.extract import (  # noqa: F401
    _BOX_OPENERS, _BRACE, extract_boxed, format_number, gold_forms,
)
from grpo_lambda.grading.hendrycks import (  # noqa: F401
    _ARRAY_BEGIN, _ENCLOSING_TEXT, _fix_a_slash_b, _fix_fracs, _fix_sqrt, hendrycks_normalize,
    _remove_unit_words, _remove_unit_words_one_by_one, _strip_math_string, _TRAILING_TEXT, _UNIT_PATTERNS,
    _UNIT_WORD, _UNIT_WORDS, _Unnormalisable,
)
from grpo_lambda.grading.latex import (  # noqa: F401
    _LATEX_CONTENT_ONLY, _LATEX_DROPPED, _LATEX_MACRO, _LATEX_MAX_DEPTH, _LATEX_SYMBOLS, _LatexToPlain,
    _parenthesised, _SIMPLE_TOKEN,
)
from grpo_lambda.grading.prm800k import (  # noqa: F401
    _as_integer, _DECIMAL, _INTEGER, plain_normalize, _PLAIN_UNITS, _strip_thousands_commas,
    _THOUSANDS_COMMA,
)
from grpo_lambda.grading.symbolic import (  # noqa: F401
    _FRACTION, _math_verify_equal, _split_tuple, _SYMPY_ALLOWED, _SYMPY_BAD_PATTERNS, _SYMPY_BAD_SUBSTRINGS,
    _sympy_difference_is_zero, _sympy_equal, _sympy_or_math_verify_equal, _TUPLE_CHARS,
)
from grpo_lambda.grading.grade import (  # noqa: F401
    _check_timeout, grade, grade_details, grade_many, grade_many_details,
)
from grpo_lambda.grading.reward import (  # noqa: F401
    accuracy_reward, _completion_text, is_single_answer, _MACRO_NAME, make_accuracy_reward, _NUMBER, REWARDS,
    strict_accuracy_reward, _WORD,
)
