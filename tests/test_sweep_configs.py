"""The paper's sweep configs (configs/sweeps/*.py): every preset expands and validates, every
run of the small presets can be split, the paper presets are the authors' grids, and the grid
helpers choose the valid held-out fractions."""

import glob
import os

import pytest

from compgen_jax.analysis import paper, sweep_report
from compgen_jax.scaling import grid, runs
from compgen_jax.sweeps import spec
from compgen_jax.tasks import combinatorics, supports
from tests.helpers import REPO

SWEEPS = sorted(os.path.splitext(os.path.basename(p))[0]
                for p in glob.glob(os.path.join(REPO, "configs", "sweeps", "*.py")))
PAPER_EXPERIMENTS = ("data_scaling", "model_size", "encoding_table", "encoding_width",
                     "scaling_law", "task_support", "transformer_vs_mlp",
                     "preference_data_scaling", "preference_model_size",
                     "preference_task_support")


# ------------------------------------------------------------------------------------------
# Sweep configs


@pytest.mark.parametrize("experiment", SWEEPS)
def test_every_preset_expands_and_validates(experiment, tmp_path):
  sizes = {}
  for preset in ("tiny", "cpu", "paper"):
    sweep = spec.load(f"{REPO}/configs/sweeps/{experiment}.py:{preset}", str(tmp_path / "s"))
    names = [p.name for p in sweep.programs]
    assert len(set(names)) == len(names) and names, (preset, names)
    sizes[preset] = len(names)
  assert sizes["tiny"] <= sizes["cpu"] <= sizes["paper"], sizes
  assert not os.path.exists(tmp_path / "s")  # validation writes nothing
  assert set(PAPER_EXPERIMENTS) <= set(SWEEPS)
  if sweep.app == "scaling":  # its report's sections; other applications write their own
    assert experiment in sweep_report.EXPERIMENTS


def _paper(experiment: str, tmp_path) -> spec.Sweep:
  return spec.load(f"{REPO}/configs/sweeps/{experiment}.py:paper", str(tmp_path))


@pytest.mark.parametrize("preset", ["tiny", "cpu"])
def test_every_run_of_the_small_presets_can_be_split(preset, tmp_path):
  # Validation bounds the budget; the random / equal retries must also find a valid split, as
  # train.py builds it before compiling (the paper presets were checked the same way once).
  for experiment in SWEEPS:
    sweep = spec.load(f"{REPO}/configs/sweeps/{experiment}.py:{preset}", str(tmp_path))
    if sweep.app != "scaling":  # spec.load built its splits (the application's validation)
      continue
    base = spec.resolve_base(sweep.base)
    for program in sweep.programs:
      cfg = spec.program_config(base, program.name, {**sweep.overrides, **program.overrides})
      for run in runs.precompute_splits(cfg, runs.run_grid(cfg)):
        assert run["n_train"] > 0 and run["n_ood"] > 0, (program.name, run)


def test_paper_presets_are_the_authors_grids(tmp_path):
  data = _paper("data_scaling", tmp_path)
  assert {(p.overrides["task.num_modules"], p.overrides["task.max_hotness"])
          for p in data.programs} == {(M, K) for M in (8, 16, 24, 32) for K in range(2, 8)}
  assert {p.num_steps for p in data.programs} == {300_000}
  # Every frac_ood of the authors' list that leaves a valid support is kept, and only those.
  for p in data.programs:
    M, K = p.overrides["task.num_modules"], p.overrides["task.max_hotness"]
    kept = p.overrides["sweep.frac_ood"]
    for frac in (0.125, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98, 0.99):
      _, _, n_train = combinatorics.split_sizes(M, K, frac)
      assert (frac in kept) == (n_train >= combinatorics.min_train_tasks(M, K)), (M, K, frac)
  model = _paper("model_size", tmp_path)
  assert len(model.programs) == 6 * 2 * 5
  assert {p.overrides["encoding.name"] for p in model.programs} == set(paper.ENCODING_TABLE)
  table = _paper("encoding_table", tmp_path)  # the paper's table at its own student
  assert [p.overrides["encoding.name"] for p in table.programs] == list(paper.ENCODING_TABLE)
  assert {p.num_steps for p in table.programs} == {300_000}
  assert {k: table.overrides[k] for k in paper.TABLE_MODEL} == paper.TABLE_MODEL
  # encoding_table's and encoding_width's paper programs are model_size's (the same configs),
  # and encoding_steps' longest and encoding_nonlinearity's default scale are encoding_table's
  # invertible one: results/cpu/ESTIMATES.md's table counts each once.
  def configs(sweep):
    base = spec.resolve_base(sweep.base)
    out = []
    for p in sweep.programs:
      cfg = spec.program_config(base, "-", {**sweep.overrides, **p.overrides}).to_dict()
      out.append({k: v for k, v in cfg.items() if k != "name"})
    return out
  in_model = configs(model)
  width = _paper("encoding_width", tmp_path)
  assert len(width.programs) == 2 * 5 and {p.num_steps for p in width.programs} == {300_000}
  for sub in (table, width):
    assert all(c in in_model for c in configs(sub))
  steps = configs(_paper("encoding_steps", tmp_path))  # its 300k program: the table's invertible
  assert [c["train"]["num_steps"] for c in steps] == [75_000, 150_000, 300_000]
  assert steps[-1] in configs(table) and steps[0] not in in_model
  scales = configs(_paper("encoding_nonlinearity", tmp_path))  # 1.05, the default: the table's
  assert [c["encoding"]["inn_init_scale"] for c in scales] == [0.1, 0.9, 1.05, 1.5]
  assert [c in configs(table) for c in scales] == [False, False, True, False]
  law = _paper("scaling_law", tmp_path)
  assert {(p.overrides["task.num_modules"], p.overrides["task.max_hotness"],
           p.overrides["student.name"]) for p in law.programs} == {
      (M, K, s) for M in range(10, 29, 2) for K in (4, 5, 6) for s in ("mlp", "transformer")}
  support = _paper("task_support", tmp_path)
  assert {p.overrides["task.support"] for p in support.programs} == set(supports.STRATEGIES)
  assert {p.num_steps for p in _paper("preference_task_support", tmp_path).programs} == {
      3_000_000}


def test_grid_helpers():
  # The table setting, from the paper's (analysis/paper.py) and not restated in the configs.
  assert grid.table_task() == {"num_modules": 16, "max_hotness": 3, "support": "random",
                               "frac_ood": 0.25}
  assert grid.table_task() is not grid.table_task()
  assert grid.product({"a": (1, 2), "b": ("x",)}) == ({"a": 1, "b": "x"}, {"a": 2, "b": "x"})
  # M=8, K=2: T=36, the connected minimum is 7 training tasks; 0.9 leaves 4.
  assert grid.valid_fracs("random", 8, 2, (0.5, 0.75, 0.9)) == (0.5, 0.75)
  programs = grid.support_programs(8, 3, (0.25, 0.5, 0.75))
  by_name = {p["task.support"]: p for p in programs}
  assert by_name["connected"]["task.max_hotness"] == 2
  assert "sweep.frac_ood" not in by_name["non_compositional"]
  assert by_name["pseudo_random_disconnected"]["sweep.frac_ood"] == (0.5, 0.75)
  # fracs_for gives one strategy its own fractions (still filtered to the valid ones).
  own = {p["task.support"]: p for p in grid.support_programs(
      8, 3, (0.25,), fracs_for={"random": (0.25, 0.5), "pseudo_random_disconnected": (0.25, 0.5)})}
  assert own["random"]["sweep.frac_ood"] == (0.25, 0.5)
  assert own["pseudo_random_disconnected"]["sweep.frac_ood"] == (0.5,)
  assert own["equal"]["sweep.frac_ood"] == (0.25,)
  assert "pseudo_random_disconnected" not in {
      p["task.support"] for p in grid.support_programs(8, 3, (0.25,))}
  with pytest.raises(ValueError, match="unknown strategies"):
    grid.support_programs(8, 3, (0.25,), fracs_for={"randm": (0.5,)})


def test_preference_cpu_presets_share_the_fitting_world(tmp_path):
  # The cpu presets of the three preference claims' sweeps train in the 2-object world of
  # grid.preference_fitting_recipe (16000 steps); their paper presets keep the paper's 4 objects.
  task = {"num_modules": 8}
  recipe = grid.preference_fitting_recipe(task)
  assert task == {"num_modules": 8} and recipe["task"] == {"num_modules": 8, "num_objects": 2}
  assert grid.cpu_fitting_recipe()["train"]["num_steps"] == 8000  # not changed by the call
  for experiment in ("preference_data_scaling", "preference_model_size",
                     "preference_task_support"):
    for preset, objects, steps in (("cpu", 2, 16_000), ("paper", 4, 3_000_000)):
      sweep = spec.load(f"{REPO}/configs/sweeps/{experiment}.py:{preset}", str(tmp_path))
      base = spec.resolve_base(sweep.base)
      for program in sweep.programs:
        cfg = spec.program_config(base, program.name, {**sweep.overrides, **program.overrides})
        assert (cfg.task.num_objects, cfg.train.num_steps) == (objects, steps), (
            experiment, preset, program.name)
