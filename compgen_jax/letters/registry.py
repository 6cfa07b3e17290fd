"""The letter experiments, by name: what each runs, summarises, plots, trains and checks.

Adding an experiment is one entry here (and its function): the config's default list, the
models trained, validation, the stdout summary and the plot all read this table.
"""

from collections.abc import Callable
from typing import NamedTuple

from compgen_jax import checks as config_checks
from compgen_jax.letters import checks, data, experiments, plots, training
from compgen_jax.letters.context import pairs
from compgen_jax.types import ConfigError


def _none(cfg) -> list:
  del cfg
  return []


class Experiment(NamedTuple):
  run: Callable                # Ctx -> result rows, one per seed and setting
  group_by: tuple[str, ...]    # the stdout summary: one line per setting, ...
  summary_keys: tuple[str, ...]  # ... with these columns averaged over seeds (the first per seed)
  plot: Callable               # (matplotlib axes, rows) -> None: draws <name>/plot.png
  tasks: Callable = _none      # cfg -> task names it reads, trained from scratch
  finetuned: Callable = _none  # cfg -> (expert, regime) runs fine-tuned from identity
  validate: Callable | None = None  # cfg -> None; raises ConfigError
  table: Callable | None = None     # rows -> an extra stdout table


def _pair_experts(cfg) -> list[str]:
  return [s for p in pairs(cfg) for s in p]


def _with_joints(cfg) -> list[str]:
  return _pair_experts(cfg) + [data.joint_name(p) for p in pairs(cfg)]


def _with_mixtures(cfg) -> list[str]:
  return _pair_experts(cfg) + [data.mixture_name(p) for p in pairs(cfg)]


def _k_experts(cfg) -> list[str]:
  return list(cfg.compose.k_experts[:cfg.compose.k_max])


def _k_joints(cfg) -> list[str]:
  """The k experts and, for each k >= 2, the model trained on the first k substitutions."""
  subs = experiments.k_subs(cfg)
  return _k_experts(cfg) + [data.joint_name(subs[:k]) for k in range(2, len(subs) + 1)]


def _violations(cfg) -> list[str]:
  return list(cfg.compose.overlap) + list(cfg.compose.chain)


def _finetuned(cfg) -> list[tuple[str, str]]:
  """The first pair's experts, fine-tuned in every regime."""
  return [(e, r) for r in cfg.finetune.regimes for e in pairs(cfg)[0]]


def _validate_arithmetic(cfg) -> None:
  config_checks.choices("finetune.regimes", cfg.finetune.regimes,
                        training.regimes(cfg.model.num_layers))
  if cfg.model.tie_head:
    raise ConfigError("model.tie_head", "the arithmetic experiment needs an untied head")


_EM = ("exact_match", "exact_match_all_sources")
EXPERIMENTS: dict[str, Experiment] = {
    "substitution": Experiment(
        experiments.substitution, ("pair",), _EM + ("mean_abs_log_z", "overlap", "ortho_cos"),
        plots.bars(("pair",), "exact_match", "substitution"), _pair_experts),
    "length": Experiment(
        experiments.length, ("model",), ("exact_match",), plots.length, _with_joints,
        table=experiments.length_table),
    "baselines": Experiment(
        experiments.baselines, ("pair", "method"), _EM,
        plots.bars(("pair", "method"), "exact_match", "baselines"), _with_joints),
    "background": Experiment(
        experiments.background, ("pair", "background"), _EM + ("mean_abs_log_z",),
        plots.bars(("pair", "background"), "exact_match", "background"), _with_mixtures),
    "k_experts": Experiment(
        experiments.k_experts, ("k",),
        _EM + ("num_all_sources", "mean_abs_log_z", "max_abs_log_z", "ortho_cos", "p_eos_at_eos"),
        plots.k_experts, _k_experts),
    "k_baselines": Experiment(
        experiments.k_baselines, ("k", "method"), _EM,
        plots.bars(("k", "method"), "exact_match", "k_baselines"), _k_joints),
    "violations": Experiment(
        checks.violations, ("case",),
        ("exact_match_parallel", "exact_match_parallel_all_sources", "exact_match_sequential",
         "overlap", "ortho_cos", "mean_abs_log_z", "max_abs_log_z"),
        plots.bars(("case",), "mean_abs_log_z", "violations"), _violations),
    "arithmetic": Experiment(
        checks.arithmetic_equivalence, ("regime",),
        ("max_abs_logp_diff", "mean_tv", "exact_match_task_arithmetic",
         "exact_match_composition", "exact_match_composition_all_sources"),
        plots.arithmetic, finetuned=_finetuned, validate=_validate_arithmetic),
}


def enabled(cfg) -> list[Experiment]:
  """The entries of cfg.experiments, in registry order."""
  return [e for name, e in EXPERIMENTS.items() if name in cfg.experiments]


def scratch_tasks(cfg) -> list[str]:
  """Task names trained from scratch for the enabled experiments (identity first, no repeats)."""
  return list(dict.fromkeys(["identity"] + [t for e in enabled(cfg) for t in e.tasks(cfg)]))


def finetune_runs(cfg) -> list[tuple[str, str]]:
  """(expert, regime) runs fine-tuned from the identity model for the enabled experiments."""
  return list(dict.fromkeys(r for e in enabled(cfg) for r in e.finetuned(cfg)))
