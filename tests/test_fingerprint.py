"""A cell's state is resumed only with the settings, base model and data it was made with."""

import json

from grpo_lambda import fingerprint

SETTINGS = {"variant": {"objective": "grpo_lambda", "lam": 0.99, "label": "GRPO-λ"}, "rl": {"max_steps": 4}}


def make_inputs(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text('{"hidden_size": 8}')
    (base / "model.safetensors").write_bytes(bytes(5 * fingerprint.CHUNK))
    data = tmp_path / "data.jsonl"
    data.write_text('{"id": "a", "problem": "1+1", "answer": "2"}\n')
    return base, data


def test_the_hash_follows_settings_seed_base_and_data_but_not_labels(tmp_path):
    base, data = make_inputs(tmp_path)

    def digest(settings=SETTINGS, seed=0):
        return fingerprint.compute(settings, seed=seed, base=str(base), data_path=str(data))["hash"]

    first = digest()
    assert digest() == first
    assert digest({**SETTINGS, "variant": {**SETTINGS["variant"], "label": "other"}}) == first
    assert digest({**SETTINGS, "variant": {**SETTINGS["variant"], "lam": 0.5}}) != first
    assert digest(seed=1) != first
    weights = bytearray((base / "model.safetensors").read_bytes())
    weights[-10] = 1  # the last MiB is sampled
    (base / "model.safetensors").write_bytes(bytes(weights))
    assert digest() != first
    second = digest()
    (base / "config.json").write_text('{"hidden_size": 16}')
    assert digest() != second
    third = digest()
    data.write_text('{"id": "b", "problem": "1+1", "answer": "2"}\n')
    assert digest() != third


def test_other_settings_move_the_state_aside_and_the_same_keep_it(tmp_path):
    base, data = make_inputs(tmp_path)
    cell = tmp_path / "cell"
    old = fingerprint.compute(SETTINGS, seed=0, base=str(base), data_path=str(data))
    fingerprint.claim(cell, old)
    (cell / "resume" / "checkpoint-2").mkdir(parents=True)
    (cell / "checkpoints" / "step-1").mkdir(parents=True)
    (cell / "train_log.csv").write_text("step\n1\n")

    fingerprint.claim(cell, old)  # same settings: resume
    assert (cell / "resume" / "checkpoint-2").is_dir() and not list(cell.glob("superseded-*"))

    new = fingerprint.compute({**SETTINGS, "rl": {"max_steps": 8}}, seed=0, base=str(base), data_path=str(data))
    fingerprint.claim(cell, new)
    aside = cell / f"superseded-{old['hash']}"
    assert sorted(p.name for p in aside.iterdir()) == ["checkpoints", "resume", "train_log.csv"]
    assert (aside / "resume" / "checkpoint-2").is_dir()
    assert sorted(p.name for p in cell.iterdir()) == ["resume", aside.name]
    assert json.loads((cell / "resume" / "fingerprint.json").read_text())["hash"] == new["hash"]


def test_state_without_a_fingerprint_is_not_resumed(tmp_path):
    base, data = make_inputs(tmp_path)
    cell = tmp_path / "cell"
    for round_ in range(2):
        (cell / "resume" / "checkpoint-2").mkdir(parents=True)
        (cell / "resume" / "fingerprint.json").unlink(missing_ok=True)
        fingerprint.claim(cell, fingerprint.compute(SETTINGS, seed=0, base=str(base), data_path=str(data)))
    assert sorted(p.name for p in cell.glob("superseded-*")) == ["superseded-unrecorded", "superseded-unrecorded-1"]


def test_a_hub_id_base_is_hashed_by_name(tmp_path):
    assert fingerprint.path_digest("Qwen/Qwen2.5-Math-1.5B") == "name:Qwen/Qwen2.5-Math-1.5B"


def test_the_hash_follows_the_training_code_and_library_versions_but_not_the_reporting_code(tmp_path, monkeypatch):
    """A fixed objectives.py or another TRL retrains the cell (a forced rerun would otherwise publish the
    old model); an edited table or figure module does not."""
    import shutil

    base, data = make_inputs(tmp_path)
    package = tmp_path / "grpo_lambda"
    shutil.copytree(fingerprint.PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(fingerprint, "PACKAGE", package)
    monkeypatch.setattr(fingerprint.code_digest, "__defaults__", (package,))

    def digest():
        return fingerprint.compute(SETTINGS, seed=0, base=str(base), data_path=str(data))["hash"]

    first = digest()
    with open(package / "figures" / "write.py", "a") as handle:
        handle.write("\n# a reporting change\n")
    assert digest() == first
    for source in ("objectives.py", "trainer.py", "grading/grade.py", "data/prompts.py", "oar.py", "trainer_config.py",
                   "variants.py"):
        with open(package / source, "a") as handle:
            handle.write("\n# a change that may change training\n")
        assert digest() != first, source
        first = digest()
    versions = fingerprint.library_versions()
    assert versions["torch"] and versions["trl"]
    monkeypatch.setattr(fingerprint, "library_versions", lambda: {**versions, "trl": "0.0.1"})
    assert digest() != first


def test_the_training_modules_are_every_package_module_train_and_sft_import():
    """The hashed modules are computed from the imports; checked against the standard library's own import
    scanner (modulefinder reads the bytecode, functions' imports included), so a module the trainer imports
    and the hash leaves out fails here."""
    import modulefinder

    source_root = fingerprint.PACKAGE.parent
    finder = modulefinder.ModuleFinder(path=[str(source_root)])  # the package only: other imports go unfound
    for entry in fingerprint.TRAINING_ENTRY:
        finder.run_script(str(fingerprint.PACKAGE / f"{entry}.py"))
    scanned = {name for name in finder.modules if name.split(".")[0] == "grpo_lambda"}
    scanned |= {f"grpo_lambda.{entry}" for entry in fingerprint.TRAINING_ENTRY}  # run as __main__ above
    hashed = set(fingerprint.training_modules())
    assert scanned - hashed == set()
    assert hashed - scanned == set()
    # the modules the trainer imports inside functions, split out of trainer.py over time
    assert {"grpo_lambda.trainer", "grpo_lambda.oar", "grpo_lambda.trainer_config", "grpo_lambda.variants",
            "grpo_lambda.objectives", "grpo_lambda.traces", "grpo_lambda.grading.grade"} <= hashed
    assert not any(name.startswith(("grpo_lambda.tables", "grpo_lambda.figures", "grpo_lambda.status"))
                   for name in hashed)


def test_a_module_imported_inside_a_function_is_hashed(tmp_path):
    """A new module that train.py imports lazily (as it does the trainer) joins the hash without a list."""
    package = tmp_path / "grpo_lambda"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sft.py").write_text("from . import shared\n")
    (package / "shared.py").write_text("X = 1\n")
    (package / "train.py").write_text("def run():\n    from grpo_lambda.sub.new import step\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "new.py").write_text("def step():\n    return 1\n")
    (package / "unused.py").write_text("")
    assert sorted(fingerprint.training_modules(package)) == [
        "grpo_lambda", "grpo_lambda.sft", "grpo_lambda.shared", "grpo_lambda.sub", "grpo_lambda.sub.new",
        "grpo_lambda.train"]
    first = fingerprint.code_digest(package)
    (package / "unused.py").write_text("# edited\n")
    assert fingerprint.code_digest(package) == first
    (package / "sub" / "new.py").write_text("def step():\n    return 2\n")
    assert fingerprint.code_digest(package) != first


def test_a_code_change_moves_the_state_aside_saying_so(tmp_path, monkeypatch, caplog):
    base, data = make_inputs(tmp_path)
    cell = tmp_path / "cell"
    (cell / "resume").mkdir(parents=True)
    fingerprint.claim(cell, fingerprint.compute(SETTINGS, seed=0, base=str(base), data_path=str(data)))
    monkeypatch.setattr(fingerprint, "code_digest", lambda: "edited")
    fingerprint.claim(cell, fingerprint.compute(SETTINGS, seed=0, base=str(base), data_path=str(data)))
    assert "the code changed" in caplog.text
    assert [path.name for path in cell.iterdir() if path.name.startswith("superseded-")]


def test_checkpoint_cadence_and_trackers_keep_the_state_but_the_learning_rate_does_not(tmp_path):
    base, data = make_inputs(tmp_path)
    settings = {**SETTINGS, "rl": {"max_steps": 4, "learning_rate": 1e-5, "save_steps": 2, "report_to": "none"}}

    def digest(rl):
        return fingerprint.compute({**settings, "rl": {**settings["rl"], **rl}}, seed=0, base=str(base),
                                   data_path=str(data))["hash"]

    first = digest({})
    assert digest({"save_steps": 3}) == first and digest({"report_to": "tensorboard"}) == first
    assert digest({"learning_rate": 2e-5}) != first and digest({"max_steps": 5}) != first


def test_a_fresh_start_moves_same_settings_state_aside(tmp_path, monkeypatch, caplog):
    base, data = make_inputs(tmp_path)
    cell = tmp_path / "cell"
    now = fingerprint.compute(SETTINGS, seed=0, base=str(base), data_path=str(data))
    fingerprint.claim(cell, now)
    (cell / "resume" / "checkpoint-2").mkdir(parents=True)
    (cell / "train_log.csv").write_text("step\n1\n")

    monkeypatch.delenv(fingerprint.FRESH_ENV, raising=False)
    fingerprint.claim(cell, now)  # resume
    assert (cell / "resume" / "checkpoint-2").is_dir() and not list(cell.glob("superseded-*"))

    monkeypatch.setenv(fingerprint.FRESH_ENV, "1")
    fingerprint.claim(cell, now)
    assert "GRPO_LAMBDA_FRESH asks for a fresh start" in caplog.text
    aside = cell / f"superseded-{now['hash']}"
    assert sorted(path.name for path in aside.iterdir()) == ["resume", "train_log.csv"]
    assert (aside / "resume" / "checkpoint-2").is_dir()
    assert sorted(path.name for path in (cell / "resume").iterdir()) == ["fingerprint.json"]
    monkeypatch.setenv(fingerprint.FRESH_ENV, "0")
    assert not fingerprint.fresh_requested()


def test_the_log_says_whether_the_users_code_or_the_settings_changed(tmp_path, caplog):
    """The user's code is hashed with the settings (a cell's hash as before it was recorded apart), and the line
    that moves old state aside names what changed: the user's code by its entry, the settings, or both."""
    base, data = make_inputs(tmp_path)
    code = {"user_estimator_sources": {"my_advantages:sign": ["aa", "aa"]}, "user_reward_sources": {"my_rewards:r": "cc"}}
    edited = {**code, "user_estimator_sources": {"my_advantages:sign": ["ab", "ab"]}}

    def made(settings=SETTINGS, user_code=code):
        return fingerprint.compute(settings, seed=0, base=str(base), data_path=str(data), user_code=user_code)

    assert made()["settings"] == fingerprint.settings_digest({**SETTINGS, **code, "seed": 0})
    assert made(user_code=None)["hash"] == fingerprint.compute(SETTINGS, seed=0, base=str(base),
                                                               data_path=str(data))["hash"]
    cell = tmp_path / "cell"
    reasons = []
    for now in (made(), made(user_code=edited), made({**SETTINGS, "rl": {"max_steps": 8}}, edited),
                made({**SETTINGS, "rl": {"max_steps": 5}}, code)):
        (cell / "resume" / "checkpoint-1").mkdir(parents=True, exist_ok=True)
        caplog.clear()
        fingerprint.claim(cell, now)
        reasons += [record.getMessage().split(": ", 1)[1].split(" (fingerprint")[0] for record in caplog.records]
    assert reasons[1:] == ["the user code (my_advantages:sign) changed since its state was made",
                           "the settings changed since its state was made",
                           "the settings and user code (my_advantages:sign) changed since its state was made"]
