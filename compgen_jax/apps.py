"""One record per experiment (application): how its config is validated, how a workdir of it is
run, evaluated, probed and reported, the report file it writes, and how a sweep runs its
programs. The uniform binaries read this table alone (experiments/train.py --config, evaluate.py
/ probe.py --workdir from the workdir's config.json, report.py --dir), and so does the sweep
launcher (sweeps/). A config names its application in its top-level `app` field (config files
set it; config.json records it)."""

import importlib
import os
from collections.abc import Callable
from typing import NamedTuple

import ml_collections

from compgen_jax import workdir as workdir_lib
from compgen_jax.letters import config as letters_config
from compgen_jax.types import ConfigError


def _lazy(module: str, name: str) -> Callable:
  """`module.name`, imported at its first call: a binary imports only the application it runs
  (all of them together took 2.5 s of every start: scipy, sympy, matplotlib, orbax)."""
  def call(*args, **kwargs):
    return getattr(importlib.import_module(module), name)(*args, **kwargs)
  call.__qualname__ = call.__name__ = f"{module}.{name}"
  return call


class Sweepable(NamedTuple):
  """How the sweep launcher runs an application's programs (after train.py: FOLLOW_UPS)."""
  follow_up_args: dict  # stage (evaluate, probe) -> its extra flags
  final_key: str  # a metrics.jsonl row of the last step with a key of this prefix: trained


class App(NamedTuple):
  """An experiment as the binaries see it. Stages it lacks are None (the binary says so)."""
  name: str
  # top-level config sections every config of it has: how a config.json written before configs
  # named their application (no `app` field) is recognised
  keys: frozenset
  validate: Callable        # (cfg) -> None; ConfigError naming the field, before anything runs
  run: Callable             # (cfg, workdir) -> text: train (llm: score) the config's program
  # (cfg, workdir, step, every, evaluators) -> text, over saved checkpoints; `evaluators`: the
  # names of `evaluate.py --evaluators` (None: the application's default)
  evaluate: Callable | None
  probe: Callable | None    # (cfg, workdir, step, every) -> text
  report: Callable          # (dir, out_dir=None) -> path of the report it wrote (workdir.py names)
  resolve: Callable = lambda cfg: cfg  # the tree --print_config shows (defaults filled in)
  # config fields (dotted; a section covers its fields) an evaluate pass may override with
  # --config.<field>=value (cli.with_overrides): none of what its checkpoints depend on
  overridable: tuple[str, ...] = ()
  sweep: Sweepable | None = None  # None: a sweep does not run its programs


def _scaling_run(cfg, workdir) -> str:
  from compgen_jax.analysis import curves, report
  from compgen_jax.scaling import train
  from compgen_jax.training import sharding
  rows = train.train_and_evaluate(cfg, workdir)
  if sharding.is_main_process():  # the workdir's one writer
    curves.plot_curves(workdir)
  return report.final_table(rows, workdir)


def _scaling_evaluate(cfg, workdir, step=None, every=False, evaluators=None) -> str:
  """The evaluators' pass, its table, and the OOD R^2 curve over checkpoints when --every."""
  from compgen_jax.analysis import plots, report
  from compgen_jax.scaling import passes
  from compgen_jax.training import sharding
  rows = passes.evaluate_workdir(workdir, step, every, evaluators)
  out = (f"{report.eval_table(rows)}\n\n{len(rows)} rows written to "
         f"{workdir}/{workdir_lib.EVAL_FILE}")
  if (len({r["step"] for r in rows}) > 1 and any("ood/r2" in r for r in rows)
      and sharding.is_main_process()):
    path = os.path.join(workdir, workdir_lib.EVAL_CURVE_FILE)
    plots.curve_png(rows, path, key="ood/r2")
    out += f"\nOOD R^2 over checkpoints: {path}"
  return out


def _scaling_probe(cfg, workdir, step=None, every=False) -> str:
  from compgen_jax.analysis import report
  from compgen_jax.scaling import passes
  rows = passes.probe_workdir(workdir, step, every)
  return (f"{report.table(*passes.probe_table(rows))}\n\n{len(rows)} rows written to "
          f"{workdir}/{workdir_lib.PROBE_FILE}")


def _no_evaluators(app: str, evaluators) -> None:
  if evaluators:
    raise ConfigError("evaluators", f"a {app} workdir has no evaluator registry")


def _images_stage(mode: str):
  def stage(cfg, workdir, step=None, every=False, evaluators=None):
    _no_evaluators("images", evaluators)
    from compgen_jax.images import experiment
    return experiment.run(cfg, workdir, mode, step, every)
  return stage


def _letters_run(cfg, workdir) -> str:
  from compgen_jax.letters import runner
  results = runner.run(cfg, workdir)
  return f"experiments {', '.join(results)}: {workdir}/<experiment>/results.jsonl"


def _theory_run(cfg, workdir) -> str:
  import json

  from compgen_jax.theory import experiment
  return json.dumps(experiment.run(cfg, workdir), indent=1)


def _llm_run(cfg, workdir) -> str:
  from compgen_jax.llm_eval import runner
  runner.run(cfg, workdir)  # prints its table and the report's path
  return ""


def _lm_run(cfg, workdir) -> str:
  from compgen_jax.analysis import curves, report
  from compgen_jax.lm_train import experiment
  from compgen_jax.training import sharding
  rows = experiment.train(cfg, workdir)
  if sharding.is_main_process():  # the workdir's one writer
    curves.plot_curves(workdir)
  exports = [experiment.export_dir(workdir, s) for s in range(cfg.num_seeds)]
  return (report.final_table(rows, workdir) + "\n  exported: " + ", ".join(exports)
          if cfg.export.enabled else report.final_table(rows, workdir))


def _letters_evaluate(cfg, workdir, step=None, every=False, evaluators=None) -> str:
  _no_evaluators("letters", evaluators)
  if step is not None or every:
    raise ConfigError("step", "letters evaluates each phase's final models; no --step / --every")
  from compgen_jax.letters import standalone
  results = standalone.evaluate(cfg, workdir)
  return f"experiments {', '.join(results)}: {workdir}/<experiment>/results.jsonl"


def _llm_evaluate(cfg, workdir, step=None, every=False, evaluators=None) -> str:
  """The diagnostics pass over a scored workdir's composed decodes (llm_eval/diagnose.py)."""
  _no_evaluators("llm", evaluators)
  if step is not None or every:
    raise ConfigError("step", "an llm workdir has no checkpoints to pick; no --step / --every")
  from compgen_jax.llm_eval import diagnose
  return diagnose.run(cfg, workdir)


def _llm_report(directory: str, out_dir: str | None = None) -> str:
  """report.md from the summary rows, and the evaluate pass's rows when it has run."""
  if out_dir not in (None, directory):
    raise ConfigError("out", "an llm report is written into its workdir")
  from compgen_jax.llm_eval import report
  return report.rewrite(directory)


def _llm_study_report(directory: str, out_dir: str | None = None) -> str:
  """Each score stage's report.md (llm_eval's, from its summary rows and its diagnostics
  stage's rows): each seed's past 0 (score_<split>/seed_<s>/), then each split's over every
  seed (each recipe's: <recipe>/score_<split>/); the first split's path."""
  if out_dir not in (None, directory):
    raise ConfigError("out", "an llm_study report is written into its score workdirs")
  from compgen_jax.llm_eval import comparisons
  from compgen_jax.llm_study import drift, layout, recipes, retention
  cfg = workdir_lib.load_config(directory)
  found = [layout.score_dir(directory, s, 0, r) for r in recipes.names(cfg)
           for s in cfg.study.splits]
  found = [d for d in found if os.path.isfile(os.path.join(d, workdir_lib.SUMMARY_FILE))]
  if not found:
    raise ConfigError("dir", f"{directory!r} has no scored split yet (run the study first)")
  for d in found:
    for seed in comparisons.seeds_of(d)[1:]:
      _llm_report(comparisons.seed_dir(d, seed))
  paths = [_llm_report(d) for d in found]
  for split in cfg.study.splits:
    if all(os.path.isfile(os.path.join(layout.score_dir(directory, split, 0, r),
                                       workdir_lib.SUMMARY_FILE)) and os.path.isfile(
        os.path.join(recipes.root(directory, r), layout.DRIFT, drift.ROWS_FILE))
           for r in recipes.names(cfg)):  # a study run before the drift stage has none
      retention.write(cfg, directory, split)
  return paths[0]


APPS = {
    "scaling": App(
        "scaling", frozenset({"task", "encoding", "student"}),
        _lazy("compgen_jax.scaling.runs", "validate"), _scaling_run, _scaling_evaluate,
        _scaling_probe, _lazy("compgen_jax.analysis.sweep_report", "write_report"),
        _lazy("compgen_jax.scaling.config", "resolved"),
        sweep=Sweepable({"probe": (), "evaluate": ("--every",)}, "ood/")),
    "images": App(
        "images", frozenset({"scene", "flow", "sampler"}),
        _lazy("compgen_jax.images.experiment", "validate_program"),
        _images_stage("train"), _images_stage("evaluate"), _images_stage("probe"),
        _lazy("compgen_jax.images.report", "write"),
        # one program per shape-changing setting (model width); seeds x coverage vmapped inside
        # it; evaluated and probed at the latest checkpoint (the report's step)
        sweep=Sweepable({"probe": (), "evaluate": ()}, "train/")),
    "letters": App(
        "letters", frozenset({"experiments", "data", "compose", "finetune"}),
        _lazy("compgen_jax.letters.config", "validate"), _letters_run, _letters_evaluate, None,
        _lazy("compgen_jax.letters.report", "write_report"),
        overridable=letters_config.EVALUATION_FIELDS),
    "theory": App(
        "theory", frozenset({"theorem", "hyperteacher"}),
        _lazy("compgen_jax.theory.experiment", "validate"), _theory_run, None, None,
        _lazy("compgen_jax.theory.report", "write_report")),
    "llm": App(
        "llm", frozenset({"benchmarks", "systems", "models"}),
        _lazy("compgen_jax.llm_eval.runner", "validate"), _llm_run, _llm_evaluate, None,
        _llm_report),
    "lm_train": App(
        "lm_train", frozenset({"corpus", "export"}),
        _lazy("compgen_jax.lm_train.experiment", "validate"), _lm_run, None, None,
        _lazy("compgen_jax.lm_train.report", "write")),
    "llm_study": App(
        "llm_study", frozenset({"study", "background", "experts", "score"}),
        _lazy("compgen_jax.llm_study.pipeline", "validate"),
        _lazy("compgen_jax.llm_study.pipeline", "run"), None, None, _llm_study_report),
}


def of_config(cfg: ml_collections.ConfigDict | dict) -> App:
  """The application a config (a config file's tree or a config.json) names in its `app` field.
  A config.json written before configs named it has none: then the one application whose
  marking sections (App.keys) it all has; ConfigError when none or several match."""
  name = cfg.get(workdir_lib.APP_FIELD)
  if name is not None:
    if name not in APPS:
      raise ConfigError(workdir_lib.APP_FIELD, f"names the application {name!r}; known: "
                        f"{', '.join(APPS)}")
    return APPS[name]
  have = set(cfg.keys())
  found = [app for app in APPS.values() if app.keys <= have]
  if len(found) != 1:
    raise ConfigError("config", f"it names no application (no `app` field) and its sections "
                      f"({', '.join(sorted(have))}) are "
                      f"{'no' if not found else 'more than one'} application's config: "
                      + "; ".join(f"{a.name} has {', '.join(sorted(a.keys))}"
                                  for a in APPS.values()))
  return found[0]


def train(cfg: ml_collections.ConfigDict, workdir: str) -> str:
  """experiments/train.py: the config's application validates it (ConfigError naming the field,
  before anything is written) and runs its program in `workdir`; the summary to print."""
  app = of_config(cfg)
  app.validate(cfg)
  return app.run(cfg, workdir)


def of_sweep_dir(path: str) -> App:
  """The application whose programs a sweep dir holds (its index's `app`)."""
  index = workdir_lib.read_index(path)
  if not index:
    raise ConfigError("sweep_dir", f"{path!r} has no {workdir_lib.INDEX_FILE}: not a sweep dir "
                      "(experiments/sweep.py writes it)")
  name = index.get("app")
  if name not in APPS:
    raise ConfigError("sweep_dir", f"{path!r}: its {workdir_lib.INDEX_FILE} names "
                      + (f"the application {name!r}" if name else "no application (\"app\")")
                      + f"; known: {', '.join(APPS)} (experiments/sweep.py records it)")
  return APPS[name]


def of_report_dir(path: str) -> App:
  """The application whose report `path` holds: a sweep dir (its index.json), a workdir (its
  config.json), or a folder of runs (letters: <dir>/runs/<name>/config.json, all of one
  application)."""
  if os.path.isfile(workdir_lib.index_path(path)):
    return of_sweep_dir(path)
  if os.path.isfile(os.path.join(path, workdir_lib.CONFIG_FILE)):
    return of_workdir(path)[0]
  runs = os.path.join(path, workdir_lib.RUNS_DIR)
  found = {of_workdir(os.path.join(runs, name))[0].name for name in
           (sorted(os.listdir(runs)) if os.path.isdir(runs) else [])}
  if len(found) != 1:
    raise ConfigError("dir", f"{path!r} holds no {workdir_lib.INDEX_FILE} (a sweep), no "
                      f"{workdir_lib.CONFIG_FILE} (a workdir) and no runs/ of one application")
  return APPS[found.pop()]


def of_workdir(path: str) -> tuple[App, ml_collections.ConfigDict]:
  """(application, saved config) of a workdir, from its config.json (ConfigError when it has
  none, or it is no application's)."""
  if not os.path.isdir(path):
    raise ConfigError("workdir", f"{path!r} does not exist or is not a directory")
  cfg = workdir_lib.load_config(path)
  return of_config(cfg), cfg


def stage(app: App, name: str) -> Callable:
  """The app's `name` stage (evaluate, probe), or a ConfigError saying it has none."""
  fn = getattr(app, name)
  if fn is None:
    have = [s for s in ("evaluate", "probe") if getattr(app, s) is not None]
    raise ConfigError("workdir", f"a {app.name} workdir has no {name} pass (its run does all of "
                      f"it{'; it has: ' + ', '.join(have) if have else ''})")
  return fn
