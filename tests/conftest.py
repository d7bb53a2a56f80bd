import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
E2E_CONFIG = ROOT / "tests" / "data" / "config-e2e.yaml"

# Tests run the CLI as a user would; it must be the one of this interpreter's environment.
os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A small tiny model (and its tokenizer) saved once for the whole session."""
    from grpo_lambda import tiny

    folder = tmp_path_factory.mktemp("tiny") / "model"
    tiny.build(str(folder), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    return folder


@pytest.fixture(scope="session")
def cli():
    path = shutil.which("grpo-lambda")
    if path is None:
        pytest.skip("the grpo-lambda command is not installed (pip install -e .)")
    return path
