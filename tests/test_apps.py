"""The application table (apps.py): every preset of every config file is exactly one
application's, a config of none is refused naming what each needs, and the uniform report
binary regenerates a committed report from its directory alone."""

import ast
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import ml_collections
import pytest

from compgen_jax import apps, cli
from compgen_jax import workdir as workdir_lib
from compgen_jax.types import ConfigError
from tests.helpers import REPO, load_config

# configs/<file>.py -> the application its presets belong to
EXPECTED = {"hyperteacher": "scaling", "preference": "scaling", "images": "images",
            "letters": "letters", "theorem": "theory", "llm": "llm", "lm_train": "lm_train",
            "llm_study": "llm_study"}


def _presets(name: str) -> tuple[str, ...]:
  spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, "configs", f"{name}.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return tuple(module.PRESETS)


def _unnamed(cfg: ml_collections.ConfigDict) -> dict:
  """A config as a config.json written before configs named their application holds it."""
  return {k: v for k, v in workdir_lib.config_dict(cfg).items() if k != workdir_lib.APP_FIELD}


def test_every_preset_names_its_application_and_an_unnamed_one_is_recognised_the_same():
  files = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(REPO, "configs", "*.py"))}
  assert files == set(EXPECTED)  # a new config file gets its application here
  for name, app in EXPECTED.items():
    for preset in _presets(name):
      cfg = load_config(name, preset)
      assert cfg[workdir_lib.APP_FIELD] == app, (name, preset)
      assert apps.of_config(cfg).name == app, (name, preset)
      assert apps.of_config(_unnamed(cfg)).name == app, (name, preset)  # an old config.json
  apps.of_config(load_config("images", "tiny")).validate(load_config("images", "tiny"))


def test_a_config_of_no_application_is_refused_naming_each():
  with pytest.raises(ConfigError, match="no application's config.*scaling has encoding"):
    apps.of_config(ml_collections.ConfigDict({"seed": 0, "train": {}}))
  both = _unnamed(load_config("hyperteacher", "tiny")) | {"scene": {}, "flow": {}, "sampler": {}}
  with pytest.raises(ConfigError, match="more than one"):
    apps.of_config(both)
  with pytest.raises(ConfigError, match="'app'.*names the application 'scalling'; known: scaling"):
    apps.of_config({**both, "app": "scalling"})


def test_a_workdir_of_an_unnamed_config_resumes_under_the_named_one(tmp_path):
  # config.json of a run trained before configs named their application: the same config with
  # its `app` field is the same run (resumed), any other difference is refused
  cfg = load_config("hyperteacher", "tiny")
  os.makedirs(tmp_path / "w")
  with open(tmp_path / "w" / workdir_lib.CONFIG_FILE, "w") as f:
    json.dump(_unnamed(cfg), f)
  assert workdir_lib.check(str(tmp_path / "w"), cfg)
  assert apps.of_workdir(str(tmp_path / "w"))[0].name == "scaling"
  cfg.seed = 1
  with pytest.raises(ConfigError, match="differs in: seed"):
    workdir_lib.check(str(tmp_path / "w"), cfg)


def test_binaries_name_no_application():
  # the binaries reach every application through its apps.APPS record alone: no import of an
  # application package, no literal application name. experiments/score.py is exempt: a tool
  # of llm_eval's code benchmarks (pass@k of another tool's samples), not an experiment binary.
  packages = {"scaling", "images", "letters", "theory", "llm_eval", "lm_train", "llm_study",
              "llm_data"}
  names = set(apps.APPS) | packages
  for path in glob.glob(os.path.join(REPO, "experiments", "*.py")):
    if os.path.basename(path) == "score.py":
      continue
    tree = ast.parse(open(path).read())
    for node in ast.walk(tree):
      modules = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                 if isinstance(node, ast.ImportFrom) else [])
      for module in modules:
        assert not set(module.split(".")) & packages, (path, module)
      if isinstance(node, ast.Constant) and isinstance(node.value, str):
        assert node.value not in names, (path, node.value)


def test_a_stage_an_application_lacks_is_a_clear_error():
  with pytest.raises(ConfigError, match="a theory workdir has no probe pass"):
    apps.stage(apps.APPS["theory"], "probe")


def test_report_binary_regenerates_the_committed_theorem_report(tmp_path):
  committed = os.path.join(REPO, "results", "cpu", "theorem")
  copy = str(tmp_path / "theorem")
  shutil.copytree(committed, copy, ignore=shutil.ignore_patterns("report.md", "*.png"))
  out = subprocess.run([sys.executable, os.path.join(REPO, "experiments", "report.py"),
                        f"--dir={copy}"], capture_output=True, text=True, cwd=REPO, timeout=300)
  assert out.returncode == 0, out.stderr[-3000:]
  with open(os.path.join(committed, "report.md")) as a, open(os.path.join(copy, "report.md")) as b:
    assert a.read() == b.read()


def test_importing_the_libraries_registers_no_flag():
  # a notebook imports the sweep launcher and the application table without global absl flags
  code = ("from absl import flags\nimport compgen_jax.apps, compgen_jax.sweeps.spec\n"
          "print(sorted(n for n in flags.FLAGS if n in ('compilation_cache', 'distributed', "
          "'print_config', 'config', 'workdir')))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stdout.strip() == "[]"


def test_workdir_config_overrides_parse_as_the_config_flag_and_change_only_what_is_allowed():
  # config.json reads back with lists; an override of a tuple field parses as train.py's would
  saved = ml_collections.ConfigDict(json.loads(json.dumps(
      workdir_lib.config_dict(load_config("letters", "tiny")))))
  allowed = apps.APPS["letters"].overridable
  cfg = cli.with_overrides(saved, ["--config.compose.ta_lambdas=(0.25,0.5)",
                                   "--config.train.progress"], allowed, "an evaluation",
                           {"experiments": ("baselines",)})
  old, new = (workdir_lib.flatten(workdir_lib.config_dict(c)) for c in (saved, cfg))
  assert {k for k in new if new[k] != old[k]} == {"compose.ta_lambdas", "train.progress",
                                                  "experiments"}
  assert cfg.compose.ta_lambdas == (0.25, 0.5) and cfg.train.progress is True
  for args, words in [(["--config.model.width=32"], "config field 'model.width'"),
                      (["--config.model.nope=1"], "unknown field 'nope' in config.model"),
                      (["--config.data.test_size=x"], "test_size")]:
    with pytest.raises(ConfigError, match=words):
      cli.with_overrides(saved, args, allowed, "an evaluation")
  with pytest.raises(ConfigError, match="a scaling evaluation takes no config overrides"):
    cli.with_overrides(saved, ["--config.compose.ta_lambdas=(1.0,)"], (), "a scaling evaluation")


def test_every_overridable_field_is_a_field_of_its_applications_configs():
  for name, app in EXPECTED.items():
    fields = workdir_lib.flatten(load_config(name, _presets(name)[-1]))
    for field in apps.APPS[app].overridable:
      assert any(k == field or k.startswith(field + ".") for k in fields), (app, field)
