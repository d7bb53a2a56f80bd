"""Publishing: an RL cell's final model, with a model card, to its own hub repo (the opt-in publish rule).

The repo of a cell is the config's ``publish.repo_id`` template (``{user}``: the token's account,
``{model}``, ``{dataset}``, ``{variant}``, ``{seed}``), so every cell has its own; TRL's own
``push_to_hub`` is refused in ``rl.trl`` (every job runs offline, and all cells would share one repo). The
card holds the cell, its metrics (the final model's accuracy per benchmark, the last training reward), its
settings and its provenance (versions, commit, resume fingerprint). One commit uploads the model folder
and the card (huggingface_hub's ``HfApi``); ``published.json`` records the repo and the commit.
"""

from __future__ import annotations

import csv
import json
import logging
import string
from pathlib import Path

import yaml

from grpo_lambda import __version__, files, layout

log = logging.getLogger(__name__)

PLACEHOLDERS = ("user", "model", "dataset", "variant", "seed")
TAGS = ["grpo-lambda", "trl", "grpo", "reinforcement-learning"]


def repo_id(template: str, cell: dict, user: str) -> str:
    return template.format(user=user, **{name: cell[name] for name in PLACEHOLDERS[1:]})


def template_problem(template: str, cells: list[dict]) -> str | None:
    """Why ``template`` cannot name the cells' repos (an unknown placeholder, an id the hub refuses, two cells
    in one repo), or None."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        names = {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}
    except ValueError as error:
        return f"{template!r} is not a template: {error}"
    unknown = sorted(names - set(PLACEHOLDERS))
    if unknown:
        return f"{template!r} names {{{unknown[0]}}}; a template may name {', '.join(f'{{{n}}}' for n in PLACEHOLDERS)}"
    ids: dict[str, dict] = {}
    for cell in cells:
        repo = repo_id(template, cell, "user")
        try:
            validate_repo_id(repo)
        except HFValidationError as error:
            return f"{template!r} makes {repo!r} for {layout.cell(**cell)}, which the hub refuses: {error}"
        if repo.count("/") != 1:
            return f"{template!r} makes {repo!r}: a repo id is namespace/name"
        if repo in ids:
            return (f"{template!r} puts {layout.cell(**ids[repo])} and {layout.cell(**cell)} in one repo {repo!r}; "
                    "name what differs between them ({model}, {dataset}, {variant}, {seed})")
        ids[repo] = cell
    return None


def read_metrics(cell_dir: Path, benchmarks: list[str]) -> dict:
    """The final model's evaluation per benchmark and the last logged training step."""
    evaluation = {}
    for benchmark in benchmarks:
        summary = json.loads((cell_dir / "eval" / "final" / f"{benchmark}.json").read_text(encoding="utf-8"))
        evaluation[benchmark] = {key: summary.get(key) for key in ("n", "accuracy", "formatted", "mean_length")
                                 if summary.get(key) is not None}
        if summary.get("sampled"):
            evaluation[benchmark]["avg_at_k"] = summary["sampled"]["mean_accuracy"]
    with open(cell_dir / layout.TRAIN_LOG, newline="") as handle:
        rows = list(csv.DictReader(handle))
    last = rows[-1] if rows else {}
    training = {key: float(last[key]) if last.get(key) not in (None, "") else None for key in ("step", "reward", "kl")}
    return {"evaluation": evaluation, "training": training}


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def card(settings: dict, cell: dict, cell_dir: Path, repo: str) -> str:
    """The model card (README.md): YAML front matter, then the cell, its metrics, settings and provenance."""
    from huggingface_hub import ModelCardData

    train = settings["train"]
    source = train["model"]["source"]
    metrics = read_metrics(cell_dir, settings["benchmarks"])
    provenance = _json(cell_dir / "provenance.json")
    fingerprint = _json(cell_dir / "resume" / "fingerprint.json")
    data = ModelCardData(library_name="transformers", pipeline_tag="text-generation", tags=TAGS,
                         base_model=source if "/" in source and not source.startswith((".", "/")) else None)
    variant = train["variant"]
    name = layout.cell(**cell)
    lines = [
        "---", data.to_yaml(), "---", "",
        f"# {repo.split('/')[-1]}", "",
        f"One RL cell of a [grpo-lambda](https://arxiv.org/abs/2510.00194) study: `{name}`, "
        f"trained with `{variant['objective']}` from the SFT model of `{source}`, saved as a full "
        "transformers model.", "",
        "## Cell", "",
        "| | |", "|---|---|",
        f"| model | `{cell['model']}` (base: `{source}`, prompt `{train['model']['prompt']}`) |",
        f"| training set | `{cell['dataset']}` |",
        f"| variant | `{cell['variant']}`: `{json.dumps(variant, sort_keys=True)}` |",
        f"| seed | {cell['seed']} |",
        f"| RL steps | {train['rl']['max_steps']} |",
        f"| loss_type | `{loss_type(train)}` |",
        "",
        "## Metrics", "",
        "Final model, greedy completions unless stated (`avg_at_k`: mean over sampled completions).", "",
        "| benchmark | n | accuracy | formatted | avg_at_k |", "|---|---|---|---|---|",
        *(f"| {benchmark} | {values.get('n', '')} | {_number(values.get('accuracy'))} | "
          f"{_number(values.get('formatted'))} | {_number(values.get('avg_at_k'))} |"
          for benchmark, values in metrics["evaluation"].items()),
        "",
        f"Last training step {_number(metrics['training']['step'], '.0f')}: reward "
        f"{_number(metrics['training']['reward'])}, KL {_number(metrics['training']['kl'], '.3g')}.", "",
        "## Settings", "",
        "The cell's settings as the pipeline passed them to `grpo-lambda train`:", "",
        "```yaml", yaml.safe_dump(train, sort_keys=True).rstrip(), "```", "",
        "## Provenance", "",
        "```yaml", yaml.safe_dump({"grpo_lambda": __version__, **provenance,
                                   "fingerprint": fingerprint.get("hash")}, sort_keys=False).rstrip(), "```", "",
        "## Use", "",
        "```python",
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        f'model = AutoModelForCausalLM.from_pretrained("{repo}")',
        f'tokenizer = AutoTokenizer.from_pretrained("{repo}")',
        "```", "",
    ]
    return "\n".join(lines)


def loss_type(train: dict) -> str:
    """The cell's loss_type as build_config sets it: the variant's, else rl.trl's, else rl's, else TRL's default."""
    return (train["variant"].get("loss_type") or train["rl"].get("trl", {}).get("loss_type")
            or train["rl"].get("loss_type") or "dapo (TRL 1.16's default)")


def _number(value, form: str = ".3f") -> str:
    return "" if value is None else format(value, form)


def cell_names(settings: dict, seed: int) -> dict:
    """The cell's model, dataset, variant and seed, from its publish settings."""
    train = settings["train"]
    return {"model": train["model"]["name"], "dataset": train["dataset"], "variant": train["variant_name"],
            "seed": seed}


def run(settings: dict, *, cell_dir: str, seed: int, out: str, api=None) -> dict:
    """Push the cell's final model and card to its repo; write and return the record (``out``). ``settings``:
    ``config.stage_settings(config, "publish", ...)``; ``api``: an ``HfApi`` (tests pass a stand-in)."""
    from huggingface_hub import CommitOperationAdd, HfApi, get_token

    api = api or HfApi()
    cell_path = Path(cell_dir)
    cell = cell_names(settings, seed)
    options = settings["publish"]
    model_dir = cell_path / "model"
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"{model_dir}: no trained model to publish (train the cell first)")
    if api.token is None and get_token() is None:
        raise PermissionError("publishing needs a Hugging Face token with write access: `hf auth login`, or set HF_TOKEN")
    problem = template_problem(options["repo_id"], [cell])  # the default template is checked here, per cell
    if problem:
        raise ValueError(f"publish.repo_id: {problem}")
    user = api.whoami()["name"] if "{user}" in options["repo_id"] else ""
    repo = repo_id(options["repo_id"], cell, user)
    text = card(settings, cell, cell_path, repo)
    uploads = sorted(path for path in model_dir.rglob("*") if path.is_file())
    operations = [CommitOperationAdd(path_in_repo=path.relative_to(model_dir).as_posix(), path_or_fileobj=str(path))
                  for path in uploads if path.name != "README.md"]
    operations.append(CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=text.encode("utf-8")))
    api.create_repo(repo, repo_type="model", private=options["private"], exist_ok=True)
    commit = api.create_commit(repo, operations=operations, repo_type="model",
                               commit_message=f"grpo-lambda: {layout.cell(**cell)}")
    record = {"repo_id": repo, "private": options["private"], "commit": commit.oid, "commit_url": commit.commit_url,
              "files": [operation.path_in_repo for operation in operations]}
    files.write_json(out, record)
    log.info("published %s to %s (%s)", cell_dir, repo, commit.commit_url)
    return record
