"""Pilot (issue 55): the 2 x 2 of template (the training templates / the validation ones) by
content (the train bucket / the validation bucket) for arith and strings, 200 problems a cell,
drawn as llm_data/build.draw draws (none whose coarse key is in any split of the study's data).

  python results/cpu/llm_recipes_pilot/long/shift/make_shift.py WORKDIR OUT
"""
import json
import random
import sys

import ml_collections

from compgen_jax.llm_data import buckets, build

CELLS = [(t, c) for t in ("train", "validation") for c in ("train", "validation")]


def main(workdir: str, out: str) -> None:
  cfg = ml_collections.ConfigDict(json.load(open(f"{workdir}/data/config.json")))
  for skill in ("arith", "strings"):
    key = build.coarse_key(skill)
    taken = {key(r) for split in ("train", "validation", "test", "seen")
             for r in build.read_jsonl(f"{workdir}/data/{skill}_{split}.jsonl")}
    for templates, content in CELLS:
      pool, bucket = build.templates(cfg, skill, templates), buckets.for_split(cfg, content)
      rand, rows, seen = random.Random(f"{skill}|{templates}|{content}"), [], set()
      for _ in range(20000):
        if len(rows) == 200:
          break
        record = build.SKILLS[skill].make(rand.choice(pool), rand, cfg, bucket)
        if key(record) not in seen and key(record) not in taken:
          seen.add(key(record))
          rows.append(record)
      with open(f"{out}/{skill}_T{templates}_C{content}.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
  main(*sys.argv[1:3])
