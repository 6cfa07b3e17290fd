"""What every absl binary shares: user errors become one line and exit status 2."""

import contextlib
import functools
import importlib.util
import json
import os
import re
import sys
from typing import NamedTuple

import ml_collections
from absl import app, flags, logging
from ml_collections import config_flags

from compgen_jax import workdir as workdir_lib
from compgen_jax.types import CheckpointError, ConfigError, DataError, NonFiniteError

USER_ERRORS = (ConfigError, CheckpointError, DataError, NonFiniteError)
OVERRIDE = re.compile(r"^--?(no)?config\.")  # `--config.a.b=value`, `--noconfig.flag`


@contextlib.contextmanager
def user_errors():
  """Bad config, bad checkpoint, non-finite run: `error: ...` on stderr and exit status 2."""
  try:
    yield
  except USER_ERRORS as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)


def quiet_logging() -> None:
  """WARNING unless --verbosity was given: orbax logs every save at INFO."""
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)


def load_config_file(spec: str):
  """`path.py[:arg]` -> that file's get_config(arg), as ml_collections' config flag loads it."""
  path, _, arg = spec.partition(":")
  module_spec = importlib.util.spec_from_file_location(
      os.path.splitext(os.path.basename(path))[0], path)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  return module.get_config(arg) if arg else module.get_config()


def unknown_override(argv: list[str], flag: str = "config") -> str | None:
  """The message naming the first `--config.a.b=...` whose key the config does not have."""
  spec = next((a.split("=", 1)[1] for a in argv if a.startswith(f"--{flag}=")), None)
  if spec is None:
    return None
  try:
    cfg = load_config_file(spec)
  except Exception:  # noqa: BLE001 - the config file's own error is reported by absl instead.
    return None
  return unknown_field(cfg, argv, flag)


def unknown_field(cfg, argv: list[str], flag: str = "config") -> str | None:
  """The message naming the first `--config.a.b=...` of `argv` whose key `cfg` lacks."""
  for arg in argv:
    match = re.match(rf"^--?(no)?{flag}\.([^=]*)", arg)
    if match is None:
      continue
    path = match.group(2).split(".")
    node, section = cfg, flag
    for name in path:
      if not hasattr(node, "keys") or name not in node:
        fields = ", ".join(sorted(node.keys())) if hasattr(node, "keys") else "(not a section)"
        return (f"--{flag}.{'.'.join(path)}: unknown field {name!r} in {section}; its fields: "
                f"{fields}")
      node, section = node[name], f"{section}.{name}"
  return None


def config_file_error(argv: list[str]) -> str | None:
  """The message for the first config-file flag (`--config=path.py[:preset]`) whose file is
  missing or whose get_config fails (e.g. an unknown preset); None when all load.

  ml_collections defers a missing file's error to the first use of the config (a traceback
  from inside training) and wraps get_config's in a traceback: both become this one line."""
  for i, arg in enumerate(argv[1:], 1):
    name, eq, spec = arg[2:].partition("=") if arg.startswith("--") else ("", "", "")
    if name not in flags.FLAGS or not isinstance(flags.FLAGS[name].parser,
                                                 config_flags.config_flags.ConfigFileFlagParser):
      continue
    if not eq:  # `--config path.py:preset`
      spec = argv[i + 1] if i + 1 < len(argv) else ""
    path = spec.partition(":")[0]
    if not os.path.isfile(path):
      return f"--{name}={spec}: no config file {path!r}"
    try:
      load_config_file(spec)
    except (flags.Error, *USER_ERRORS) as e:  # already a message for the user
      return " ".join(str(e).split())
    except Exception as e:  # noqa: BLE001 - whatever the config file raises, in one line
      return f"--{name}={spec}: {type(e).__name__}: {' '.join(str(e).split())}"
  return None


def parse_flags(argv: list[str]):
  """absl flag parsing with one-line errors: a missing config file or a failing preset
  (config_file_error), or an unknown config override, which names the key and the fields of its
  section, instead of a traceback from inside ml_collections."""
  message = config_file_error(argv)
  if message is None:
    try:
      return flags.FLAGS(argv)
    except flags.Error as e:
      message = " ".join(str(e).split())
    except (AttributeError, KeyError) as e:
      message = unknown_override(argv) or e
  print(f"error: {message}", file=sys.stderr)
  sys.exit(2)


def with_overrides(saved: ml_collections.ConfigDict, args: list[str], allowed: tuple[str, ...],
                   what: str, values: dict | None = None) -> ml_collections.ConfigDict:
  """A workdir's `saved` config (its config.json) with `--config.<field>=value` `args` applied,
  parsed as ml_collections' config flag parses them, and the dotted `values` set; each may change
  only the `allowed` fields (what `what`, e.g. "an evaluation", may override: nothing else the
  workdir's checkpoints depend on). ConfigError naming the argument or field otherwise."""
  values = {k: v for k, v in (values or {}).items() if v is not None}
  stray = [a for a in args if not OVERRIDE.match(a)]
  if stray:
    raise ConfigError("config", f"unexpected argument {stray[0]!r}; config overrides are "
                      "--config.<field>=value")
  if (args or values) and not allowed:
    given = args[0] if args else f"--{next(iter(values))}"
    raise ConfigError("config", f"{given}: {what} takes no config overrides (it reads the "
                      "workdir's config.json as trained)")
  cfg = ml_collections.ConfigDict(workdir_lib.as_tuples(workdir_lib.config_dict(saved)))
  argv = ["workdir", *args]
  flag_values = flags.FlagValues()
  try:
    holder = config_flags.DEFINE_config_dict("config", cfg, flag_values=flag_values,
                                             sys_argv=argv, lock_config=True)
    flag_values(argv)
  except flags.Error as e:
    raise ConfigError("config", " ".join(str(e).split())) from None
  except (AttributeError, KeyError) as e:
    raise ConfigError("config", unknown_field(cfg, args) or repr(e)) from None
  cfg = holder.value
  for path, value in values.items():
    *parents, leaf = path.split(".")
    node = cfg
    for name in parents:
      node = node[name]
    node[leaf] = value
  workdir_lib.check_unchanged(saved, cfg, allowed, what)
  return cfg


def use_compilation_cache(directory: str | None) -> None:
  """Turns on the persistent compilation cache in `directory` (None: leave it off)."""
  if directory:
    import jax  # noqa: PLC0415 - only binaries that ask for it pay for importing jax here

    jax.config.update("jax_compilation_cache_dir", os.path.abspath(directory))
    # Cache every program: start-up is many small compiles (init, splits, evaluators).
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def init_distributed(enabled: bool, coordinator_address: str | None = None,
                     num_processes: int | None = None, process_id: int | None = None) -> None:
  """jax.distributed.initialize (unset arguments: auto-detected, e.g. from SLURM's variables).
  It must run before JAX touches a device, so binaries call it before main."""
  if enabled:
    import jax  # noqa: PLC0415 - only binaries that ask for it pay for importing jax here

    jax.distributed.initialize(coordinator_address, num_processes, process_id)


def workdir_lock(distributed: bool):
  """The lock of the binary's --workdir (workdir.lock: one writer per workdir), held by the
  process that writes it (process 0 of a --distributed job); none without a --workdir flag."""
  path = flags.FLAGS["workdir"].value if "workdir" in flags.FLAGS else None
  if path is None:
    return contextlib.nullcontext()
  if distributed:
    import jax  # noqa: PLC0415 - only binaries that ask for it pay for importing jax here

    if jax.process_index() != 0:
      return contextlib.nullcontext()
  return workdir_lib.lock(path)


class _Flags(NamedTuple):
  cache: flags.FlagHolder
  distributed: flags.FlagHolder
  coordinator: flags.FlagHolder
  num_processes: flags.FlagHolder
  process_id: flags.FlagHolder
  print_config: flags.FlagHolder


@functools.cache
def common_flags() -> _Flags:
  """The flags every binary has, defined on the first call (binaries: through mark_required or
  run), so that importing a library module (a notebook) registers no global flag."""
  return _Flags(
      flags.DEFINE_string(
          "compilation_cache", os.environ.get("JAX_COMPILATION_CACHE_DIR"),
          "Directory of JAX's persistent compilation cache: a second run of the same program "
          "skips XLA compilation. Default: $JAX_COMPILATION_CACHE_DIR (unset: no cache)."),
      flags.DEFINE_bool(
          "distributed", False, "Join a multi-host job with jax.distributed.initialize() before "
          "any JAX computation: the run axis is then sharded over every host's devices. Under "
          "SLURM (one task per host) JAX reads the job from the environment; elsewhere give "
          "--coordinator_address, --num_processes and --process_id."),
      flags.DEFINE_string("coordinator_address", None, "With --distributed: host:port of "
                          "process 0 (default: from the cluster environment)."),
      flags.DEFINE_integer("num_processes", None, "With --distributed: number of processes "
                           "(default: from the cluster environment)."),
      flags.DEFINE_integer("process_id", None, "With --distributed: this process's index "
                           "(default: from the cluster environment)."),
      flags.DEFINE_bool(
          "print_config", False, "Print the resolved config tree of every config-file flag "
          "(--config, with its overrides and, for training configs, the evaluator defaults "
          "filled in) as JSON and exit, writing nothing."))


def mark_required(names: list[str]) -> None:
  """flags.mark_flags_as_required, except that --print_config, which writes nothing, needs only
  the config-file flags among `names` (not --workdir or --sweep_dir)."""
  def check(values: dict) -> bool:
    needed = [n for n in names if not values["print_config"] or n == "config"]
    missing = [n for n in needed if values[n] is None]
    if missing:
      raise flags.ValidationError(f"Flag --{missing[0]} must have a value other than None.")
    return True

  common_flags()
  flags.register_multi_flags_validator([*names, "print_config"], check)


def print_configs(resolve=None) -> None:
  """--print_config: each config-file flag's tree, through `resolve` (the binary's own view of
  its config, e.g. training.config.resolved) when given; a ConfigError when there is none."""
  names = [name for name in flags.FLAGS
           if isinstance(flags.FLAGS[name].parser, config_flags.config_flags.ConfigFileFlagParser)
           and flags.FLAGS[name].value is not None]
  if not names:
    raise ConfigError("print_config", "this binary takes no --config to print (a workdir's "
                      "config is its config.json)")
  for name in names:
    cfg = flags.FLAGS[name].value
    print(json.dumps(workdir_lib.config_dict(resolve(cfg) if resolve else cfg), indent=2,
                     sort_keys=True))


def run(main, resolve=None, overrides: bool = False) -> None:
  """app.run(main) with parse_flags, and --compilation_cache and --distributed applied first;
  main runs holding the --workdir's lock (a second writer is refused in one line, exit 2).
  With --print_config the config tree is printed instead (print_configs, through `resolve`).
  `overrides`: the binary has no --config flag but reads `--config.<field>=value` overrides of
  its workdir's config.json; they reach main in argv[1:] (for with_overrides)."""
  f = common_flags()
  parser = parse_flags
  if overrides:
    def parser(argv):  # absl never sees them: they are fields of a config read later
      return [*parse_flags([a for a in argv if not OVERRIDE.match(a)]),
              *(a for a in argv if OVERRIDE.match(a))]

  def with_cache(argv):
    if f.print_config.value:
      with user_errors():
        print_configs(resolve)
      return 0
    use_compilation_cache(f.cache.value)
    init_distributed(f.distributed.value, f.coordinator.value, f.num_processes.value,
                     f.process_id.value)
    with user_errors(), workdir_lock(f.distributed.value):
      return main(argv)

  app.run(with_cache, flags_parser=parser)
