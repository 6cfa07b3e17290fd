"""The application table (apps.py): every preset of every config file is exactly one
application's, a config of none is refused naming what each needs, and the uniform report
binary regenerates a committed report from its directory alone."""

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


def test_every_preset_is_exactly_one_applications():
  files = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(REPO, "configs", "*.py"))}
  assert files == set(EXPECTED)  # a new config file gets its application here
  for name, app in EXPECTED.items():
    for preset in _presets(name):
      assert apps.of_config(load_config(name, preset)).name == app, (name, preset)
  apps.of_config(load_config("images", "tiny")).validate(load_config("images", "tiny"))


def test_a_config_of_no_application_is_refused_naming_each():
  with pytest.raises(ConfigError, match="no application's config.*scaling has encoding"):
    apps.of_config(ml_collections.ConfigDict({"seed": 0, "train": {}}))
  both = dict(load_config("hyperteacher", "tiny")) | {"scene": {}, "flow": {}, "sampler": {}}
  with pytest.raises(ConfigError, match="more than one"):
    apps.of_config(both)


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
