"""A sweep config expanded into programs: names, command lines, and validation.

A sweep config file's get_config(preset) returns `name`, `base` (a config spec such as
"configs/hyperteacher.py:quick", relative to the repository root), `overrides` (dotted or nested
overrides for every program) and `programs` (one mapping of dotted overrides per program). Every
program is an experiments/train.py workdir of the base config's application (apps.of_config; one
with an `App.sweep`), evaluated and probed by experiments/evaluate.py / probe.py --workdir.
"""

import os
import re
import shlex
import sys
from collections.abc import Mapping
from typing import NamedTuple

import ml_collections
import numpy as np
from absl import flags
from ml_collections import config_flags

import compgen_jax
from compgen_jax import apps, cli, files
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis.setting import paper_spec
from compgen_jax.types import ConfigError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(compgen_jax.__file__)))
TRAIN = os.path.join("experiments", "train.py")
FIELDS = ("name", "base", "overrides", "programs")
# the binary of each stage after training, reading the program's workdir (--workdir)
FOLLOW_UPS = {"probe": (os.path.join("experiments", "probe.py"), workdir_lib.PROBE_FILE),
              "evaluate": (os.path.join("experiments", "evaluate.py"), workdir_lib.EVAL_FILE)}


def paper_programs(spec: str) -> list[dict]:
  """The flattened configs of the programs of a sweep config spec (relative to the repository
  root), as a launch builds and validates them; writes nothing. A report compares its programs
  with their paper preset's through this (analysis/setting.py)."""
  sweep = load(os.path.join(REPO, spec), os.path.join(REPO, "results", ".unused"))
  # without `app`: which application runs them is the sweep index's, not the setting (and the
  # committed files predate the field)
  return [{k: v for k, v in workdir_lib.flatten(p.config).items() if k != "app"}
          for p in sweep.programs]


def write_paper_programs(sweep_dir: str, spec: str) -> str:
  """PAPER_PROGRAMS_FILE in `sweep_dir`: the flattened configs of the `paper` preset of the
  sweep config `spec` (relative to the repository root), or why it does not load, so that a
  report compares the sweep with the paper's setting from files alone."""
  path, _, preset = spec.partition(":")
  paper = paper_spec(f"{os.path.abspath(path) if os.path.exists(path) else path}:{preset}")
  try:  # builds and validates the paper programs' configs; trains and writes nothing
    out = {"programs": paper_programs(paper)}
  except ConfigError as e:
    out = {"error": str(e)}
  return files.write_json(os.path.join(sweep_dir, workdir_lib.PAPER_PROGRAMS_FILE), out,
                          sort_keys=True)


LOG_DIR = "logs"
# Names in the sweep dir that are not programs.
RESERVED = (LOG_DIR, "slurm", workdir_lib.INDEX_FILE)
# Short labels in program names: task.num_modules=8, task.max_hotness=2 -> M8_K2.
ABBREVIATIONS = {"task.num_modules": "M", "task.max_hotness": "K"}


class Program(NamedTuple):
  """One program of a sweep: an ordinary workdir of experiments/train.py."""
  name: str
  overrides: dict  # this program's own dotted overrides (its shape-changing settings)
  workdir: str  # absolute
  command: tuple[str, ...]  # train.py's command line (config and overrides), run from REPO
  log: str  # stdout and stderr of every command run for it
  num_steps: int
  app: str = "scaling"  # a key of apps.APPS, an application with an App.sweep
  config: ml_collections.ConfigDict | None = None  # as validated by spec.load (None: not loaded)


class Sweep(NamedTuple):
  spec: str  # the sweep config spec, path.py:preset
  name: str
  base: str  # the config spec every program starts from
  overrides: dict  # dotted overrides applied to every program
  sweep_dir: str  # absolute
  programs: tuple[Program, ...]
  app: str = "scaling"  # a key of apps.APPS: the base config's application


def _as_dict(tree) -> dict:
  return tree.to_dict() if isinstance(tree, ml_collections.ConfigDict) else dict(tree)


def render(value) -> str:
  """A value as the flag text that absl / ml_collections parse back to it: 0.001, (0.25,0.5)."""
  if isinstance(value, tuple | list):
    items = ",".join(_literal(v) for v in value)
    return f"({items},)" if len(value) == 1 else f"({items})"
  if isinstance(value, str):
    return value
  return _literal(value)


def _literal(value) -> str:
  value = value.item() if isinstance(value, np.generic) else value
  if not isinstance(value, bool | int | float | str | None):
    raise TypeError(f"cannot render {value!r} ({type(value).__name__}) as a flag value")
  return repr(value)


def override_args(overrides: dict) -> list[str]:
  """--config.a.b=value for each dotted override."""
  return [f"--config.{path}={render(value)}" for path, value in overrides.items()]


def program_name(overrides: dict) -> str:
  """A readable directory name from a program's overrides: M8_K2_width-256_encoding-orthogonal."""
  parts = []
  for path, value in overrides.items():
    text = "-".join(map(str, value)) if isinstance(value, tuple | list) else str(value)
    text = re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-")
    if path in ABBREVIATIONS:
      parts.append(f"{ABBREVIATIONS[path]}{text}")
    else:
      *parents, leaf = path.split(".")
      parts.append(f"{parents[-1] if leaf == 'name' and parents else leaf}-{text}")
  return "_".join(parts) or "base"


def expand(programs) -> list[tuple[str, dict]]:
  """(name, dotted overrides) per program; refuses duplicate and reserved names."""
  if not isinstance(programs, tuple | list) or not programs:
    raise ConfigError("sweep_config.programs", f"must be a non-empty tuple of dicts of dotted "
                      f"overrides, got {programs!r}")
  out, seen = [], {}
  for i, program in enumerate(programs):
    if not isinstance(program, Mapping | ml_collections.ConfigDict):
      raise ConfigError(f"sweep_config.programs[{i}]", f"must be a dict, got {program!r}")
    overrides = workdir_lib.flatten(program)
    name = program_name(overrides)
    if name in seen:
      raise ConfigError(f"sweep_config.programs[{i}]", f"program name {name!r} is used twice "
                        f"({seen[name]} and {overrides}); make the programs differ")
    if name in RESERVED or name.startswith("."):
      raise ConfigError(f"sweep_config.programs[{i}]", f"program name {name!r} is reserved")
    seen[name] = overrides
    out.append((name, overrides))
  return out


def parse_train_config(base: str, args: list[str]) -> ml_collections.ConfigDict:
  """The config train.py builds from `--config=base args...`, parsed by the same absl flag."""
  argv = ["train.py", f"--config={base}", *args]
  flag_values = flags.FlagValues()
  holder = config_flags.DEFINE_config_file("config", None, "Train config.", flag_values=flag_values,
                                           lock_config=True, sys_argv=argv)
  flag_values(argv)
  return holder.value


def _message(e: ConfigError) -> str:
  return str(e).split(": ", 1)[-1]  # without ConfigError's "config field 'x'" prefix


def program_config(base: str, name: str, overrides: dict,
                   app: str = "scaling") -> ml_collections.ConfigDict:
  """The program's config (base + overrides) as train.py reads it, validated by its
  application's checks; ConfigError naming the program and the field otherwise."""
  args = override_args(overrides)
  try:
    cfg = parse_train_config(base, args)
  except (AttributeError, KeyError) as e:  # an unknown field, as cli.parse_flags reports it
    message = cli.unknown_override([f"--config={base}", *args]) or repr(e)
    field = message.split(":", 1)[0].removeprefix("--config.")
    raise ConfigError(field, f"sweep program {name!r}: {message.split(': ', 1)[-1]}") from None
  except flags.Error as e:
    match = re.search(r"--config\.([\w.]+)=", str(e))
    raise ConfigError(match.group(1) if match else "?",
                      f"sweep program {name!r}: {e}") from None
  for path, value in overrides.items():
    got = cfg
    for key in path.split("."):
      got = got[key]
    if _plain(got) != _plain(value):
      raise ConfigError(path, f"sweep program {name!r}: {value!r} is read back from the "
                        f"command line as {got!r}; give a value of the field's type")
  try:
    apps.APPS[app].validate(cfg)
  except ConfigError as e:
    raise ConfigError(e.field, f"sweep program {name!r}: {_message(e)}") from None
  return cfg


def _plain(value):
  return tuple(_plain(v) for v in value) if isinstance(value, tuple | list) else value


def check_workdir(workdir: str, cfg: ml_collections.ConfigDict, name: str) -> None:
  """An existing workdir must hold this config (train.py would refuse it later, mid-sweep)."""
  try:
    workdir_lib.check(workdir, cfg)
  except ConfigError as e:
    message = _message(e).replace("use a new --workdir", "use a new --sweep_dir")
    raise ConfigError("workdir", f"sweep program {name!r}: {message}") from None


def resolve_base(base) -> str:
  """The base spec with its path made absolute (relative paths are from the repository root)."""
  if not isinstance(base, str) or not base:
    raise ConfigError("sweep_config.base", f"must be a train config spec such as "
                      f"'configs/hyperteacher.py:quick', got {base!r}")
  path, sep, preset = base.partition(":")
  path = os.path.join(REPO, path)
  if not os.path.isfile(path):
    raise ConfigError("sweep_config.base", f"{base!r}: no file {path!r} (paths are relative to "
                      f"the repository root)")
  resolved = f"{path}{sep}{preset}"
  try:
    cli.load_config_file(resolved)
  except Exception as e:  # noqa: BLE001 - the config file's own error, e.g. an unknown preset
    raise ConfigError("sweep_config.base", f"{base!r}: {type(e).__name__}: {e}") from None
  return resolved


def base_app(base: str) -> str:
  """The application of a resolved base spec (apps.of_config, as train.py finds it), one with
  an App.sweep; ConfigError otherwise."""
  try:
    app = apps.of_config(cli.load_config_file(base)).name
  except ConfigError as e:
    raise ConfigError("sweep_config.base", f"{base!r}: {_message(e)}") from None
  if apps.APPS[app].sweep is None:
    raise ConfigError("sweep_config.base", f"{base!r} is a {app} config; a sweep runs programs "
                      f"of {', '.join(a.name for a in apps.APPS.values() if a.sweep)} configs")
  return app


def load_sweep_config(spec: str) -> dict:
  """The sweep config file's fields as a dict; ConfigError for a missing or unknown field."""
  path = spec.partition(":")[0]
  if not os.path.isfile(path):
    raise ConfigError("config", f"sweep config file {path!r} not found")
  try:
    raw = _as_dict(cli.load_config_file(spec))
  except Exception as e:  # noqa: BLE001 - e.g. an unknown preset
    raise ConfigError("config", f"{spec}: {type(e).__name__}: {e}") from None
  for field in raw:
    if field not in FIELDS:
      raise ConfigError(f"sweep_config.{field}", f"unknown field in {spec}; a sweep config has "
                        f"{', '.join(FIELDS)}")
  for field in ("name", "base"):
    if not raw.get(field):
      raise ConfigError(f"sweep_config.{field}", f"missing in {spec}")
  return raw


def load(spec: str, sweep_dir: str) -> Sweep:
  """Expands and validates every program of the sweep config `spec`; writes nothing."""
  raw = load_sweep_config(spec)
  base = resolve_base(raw["base"])
  app = base_app(base)
  sweep_overrides = workdir_lib.flatten(raw.get("overrides") or {})
  sweep_dir = os.path.abspath(sweep_dir)
  programs = []
  for name, own in expand(raw.get("programs", ({},))):
    overrides = {**sweep_overrides, **own}
    cfg = program_config(base, name, overrides, app)
    workdir = os.path.join(sweep_dir, name)
    check_workdir(workdir, cfg, name)
    command = (sys.executable, TRAIN, f"--config={raw['base']}",
               f"--workdir={workdir}", *override_args(overrides))
    programs.append(Program(name, own, workdir, command,
                            os.path.join(sweep_dir, LOG_DIR, f"{name}.log"), cfg.train.num_steps,
                            app, cfg))
  return Sweep(spec, str(raw["name"]), raw["base"], sweep_overrides, sweep_dir, tuple(programs),
               app)


def shell(command) -> str:
  """A command line as a user pastes it into a shell (from the repository root)."""
  return shlex.join(command)
