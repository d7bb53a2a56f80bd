"""The credit profile of each trace reading of config/trace/: for a completion of L tokens, the total weight
a token at position c receives from the later tokens' traces, Σ_{t>c} W[t,c] (in the ε-trace, token c's log-ratio
enters every later token's ratio with that weight, so this is how much of the later tokens' advantage reaches
it; 0 for GRPO), computed with grpo_lambda.traces.trace_matrix at γλ = 0.99.

    python scripts/trace_credit.py     # the Markdown table of docs/paper-vs-code.md, "Trace form and n"

tests/test_paper_vs_code.py checks that the table in the docs is this script's output.
"""

from __future__ import annotations

from grpo_lambda.traces import trace_matrix

LAM = 0.99
LENGTHS = (100, 1000)
# reading -> (form, eps, n for a completion of L tokens, or None where it cannot hold one that long)
READINGS = {
    "relative (main text, Eq. 1–2)": ("relative", 0.0, lambda L: L),
    "batch max, n = L (the batch's longest)": ("absolute", 1e-7, lambda L: L),
    "n = 256 (or batch max beside a 256-token completion)": ("absolute", 1e-7, lambda L: 256 if L <= 256 else None),
    "n = 3072 (released scripts)": ("absolute", 1e-7, lambda L: 3072),
}


def positions(length: int) -> list[int]:
    return [0, length // 4, length // 2, 3 * length // 4, length - 2]


def credit(form: str, eps: float, n: int, length: int, style: str) -> list[float]:
    """Σ_{t>c} W[t,c] at the positions of `positions(length)`."""
    weights = trace_matrix(length, LAM, style=style, form=form, eps=eps, length=n if form == "absolute" else None)
    later = weights.sum(0) - 1.0  # the column sums without the diagonal
    return [later[c].item() for c in positions(length)]


def table() -> str:
    lines = []
    for length in LENGTHS:
        header = " | ".join(f"c = {c}" for c in positions(length))
        lines += [f"| {length} tokens, style | reading | {header} |", "|---|---|" + "---|" * len(positions(length))]
        for style in ("recent", "both"):
            for reading, (form, eps, n_of) in READINGS.items():
                n = n_of(length)
                if n is None:
                    continue
                values = " | ".join(f"{value:.3g}" for value in credit(form, eps, n, length, style))
                lines.append(f"| {style} | {reading} | {values} |")
        lines.append("")
    return "\n".join(lines).rstrip("\n")


if __name__ == "__main__":
    print(table())
