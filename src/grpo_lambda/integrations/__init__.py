"""Adapters that run the package's objectives inside other training engines (verl: `grpo_lambda.integrations.verl`)."""
