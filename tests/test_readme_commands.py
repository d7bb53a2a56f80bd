"""The README is a short front door whose links all lead somewhere, and its commands and those of
docs/cluster.md, as written, plan without error (``snakemake -n``)."""

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from conftest import CLUSTER_ENV, planned

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 200
# (file, sections whose bash blocks hold cluster commands)
CLUSTER_SECTIONS = (
    ("README.md", ("## On a cluster (SLURM)",)),
    ("docs/cluster.md", ("## Before your first cluster run", "## Then, on the cluster", "## Paper scale")),
)
# the README's local commands (a report is not planned: `--report` writes one from what exists)
LOCAL_SECTIONS = (("README.md", ("## Running parts of it",)),)
# the Markdown whose relative links must reach a file: the README, docs/ and the folder READMEs it links
LINKED_PAGES = ["README.md", *sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs").rglob("*.md")),
                "benchmarks/README.md", "config/README.md"]


def section(text: str, title: str) -> str:
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:end if end >= 0 else None]


def snakemake_commands(text: str) -> list[str]:
    """Every `snakemake ...` line of the bash blocks, continuation lines joined, comments dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("snakemake "):
                commands.append(line)
    return commands


def read(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


COMMANDS_BY_FILE = {name: [command for title in titles for command in snakemake_commands(section(read(name), title))]
                    for name, titles in CLUSTER_SECTIONS}
LOCAL_COMMANDS = [command for name, titles in LOCAL_SECTIONS for title in titles
                  for command in snakemake_commands(section(read(name), title)) if "--report" not in command]
# the README repeats the cluster page's first commands: each distinct command is planned once
CLUSTER_COMMANDS = [command for commands in COMMANDS_BY_FILE.values() for command in commands]
COMMANDS = list(dict.fromkeys([*LOCAL_COMMANDS, *CLUSTER_COMMANDS]))


def dry_run_words(command: str) -> tuple[str, ...]:
    """The command's words with -n (a dry run) where it has none."""
    words = shlex.split(command)
    if "-n" not in words:
        words.insert(1, "-n")
    return tuple(words)


@pytest.mark.parametrize("name", list(COMMANDS_BY_FILE))
def test_the_cluster_sections_hold_slurm_commands(name):
    assert len([c for c in COMMANDS_BY_FILE[name] if "workflow/profiles/slurm" in c]) >= 3, name


def test_the_readme_shows_how_to_run_one_cell_and_one_table():
    assert any(re.search(r"results/[^ ]+/seed\d+/done\b", command) for command in LOCAL_COMMANDS)  # a cell
    assert any("/tables/" in command for command in LOCAL_COMMANDS)
    # a target after --configfile would be read as a config file
    for command in COMMANDS:
        words = shlex.split(command)
        if "--configfile" in words:
            after = words[words.index("--configfile") + 2:]
            assert not after or after[0].startswith("-"), command


@pytest.mark.parametrize("command", COMMANDS)
def test_documented_command_dry_runs(command):
    # planned once per session: the same plan (the cluster page's) is read by tests/test_paper_grid.py, and
    # a command that becomes another one with -n (the grid's run and its plan) is planned once
    done = planned(*dry_run_words(command), cluster=True)
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert "This was a dry-run" in done.stdout + done.stderr


def test_unset_partition_stops_with_a_message_naming_it():
    env = {key: value for key, value in os.environ.items() if key not in CLUSTER_ENV}
    done = subprocess.run(["snakemake", "-n", "--profile", "workflow/profiles/slurm", "--configfile",
                           "config/paper.yaml"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "GRPO_LAMBDA_PARTITION is not set" in done.stdout + done.stderr


def test_the_readme_is_a_front_door_of_at_most_200_lines():
    lines = read("README.md").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


def without_fences(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def without_code(text: str) -> str:
    """The Markdown with fenced blocks and inline code removed: links are read outside them."""
    return re.sub(r"`[^`\n]*`", "", without_fences(text))


def anchors(text: str) -> set[str]:
    """The heading anchors GitHub makes: lower case, punctuation dropped, spaces as hyphens, repeats numbered."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*$", without_fences(text), flags=re.M):
        heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        number, unique = 0, slug
        while unique in found:
            number += 1
            unique = f"{slug}-{number}"
        found.add(unique)
    return found


def relative_links(text: str) -> list[str]:
    """Every link and image target of Markdown text that is not a web address or a mail link."""
    targets = re.findall(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", without_code(text))
    return [target for target in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.I)]


def broken_links(name: str) -> list[str]:
    broken = []
    for target in relative_links(read(name)):
        path, _, anchor = target.partition("#")
        file = (ROOT / name).parent / path if path else ROOT / name
        if not file.exists():
            broken.append(f"{name}: {target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text(encoding="utf-8")):
            broken.append(f"{name}: {target} (no such heading in {file.name})")
    return broken


def test_the_link_check_reads_links_and_headings_as_github_does():
    text = "# Paper scale\n## Cost per step (`bench.py`)\n## Paper scale\n```\n# not a heading\n```\n"
    assert anchors(text) == {"paper-scale", "cost-per-step-benchpy", "paper-scale-1"}
    text = "see [a](x.md), `[b](y.md)`, ![i](p.png), [w](https://w.org), [h](#h)\n```\n[c](z.md)\n```\n"
    assert relative_links(text) == ["x.md", "p.png", "#h"]


@pytest.mark.parametrize("name", LINKED_PAGES)
def test_every_relative_link_reaches_an_existing_file_and_heading(name):
    assert relative_links(read(name)) or name != "README.md"  # the README links its docs
    assert broken_links(name) == []
