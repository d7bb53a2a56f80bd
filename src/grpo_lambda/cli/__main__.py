"""python -m grpo_lambda.cli: the grpo-lambda command."""

import sys

from grpo_lambda.cli import main

sys.exit(main())
