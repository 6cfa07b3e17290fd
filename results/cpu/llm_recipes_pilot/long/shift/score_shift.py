"""Pilot (issue 55): the background, the skill's expert and the trivial baselines scored on
each cell of make_shift.py by the study's own score config (strict scoring), into OUT/<cell>/.

  python results/cpu/llm_recipes_pilot/long/shift/score_shift.py WORKDIR DATA OUT
"""
import json
import sys

import ml_collections
from make_shift import CELLS  # run as a script beside it

from compgen_jax.llm_eval import runner


def _tuples(x):
  if isinstance(x, dict):
    return {k: _tuples(v) for k, v in x.items()}
  return tuple(map(_tuples, x)) if isinstance(x, list) else x


def main(workdir: str, data: str, out: str) -> None:
  with open(f"{workdir}/score_validation/config.json") as f:
    cfg = ml_collections.ConfigDict(_tuples(json.load(f)))
  keep = ("base", "last_number", "product_first_two", "nearest_train")
  for skill in ("arith", "strings"):
    for templates, content in CELLS:
      cell = f"{skill}_T{templates}_C{content}"
      c = ml_collections.ConfigDict(cfg.to_dict())
      c.benchmarks[skill].path = f"{data}/{cell}.jsonl"
      c.run = (skill,)
      c.systems = tuple(s for s in cfg.systems if s in keep or s == skill)
      runner.run(c, f"{out}/{cell}")


if __name__ == "__main__":
  main(*sys.argv[1:4])
