"""grpo-lambda: a reference pipeline for GRPO-λ and the critic-free credit-assignment methods."""

__version__ = "0.1.0"
