"""The cross skill, which neither expert trains on: a math word problem (a math_skill story) whose
answer a Python function must return, in HumanEval+'s schema, scored through evalplus.py.

The story's numbers become the function's arguments ("Ava has a apples and buys b more."); the
canonical body computes the worked solution's steps (/ as //: the story's divisions are exact,
and every base and plus input is drawn by the same sampler as the word problems, so they stay
exact and non-negative). The person name and the doctest example's numbers (the arguments the
prompt shows, as a multiset) come from the split's bucket (buckets.py), as arith's do.
"""

import random

from compgen_jax.llm_data import buckets, code_skill, math_skill

PY_OPS = {"+": "+", "-": "-", "*": "*", "/": "//"}


def solution(template: math_skill.Template, names: dict | None = None) -> str:
  """The body: one line per step, s1 = ..., then the last result returned; `names` maps the
  story's number slots to the function's argument names (default: the slots' own)."""
  names = names or {}
  lines = []
  for i, (step, _) in enumerate(template.steps):
    left, op, right = step.split()
    left, right = names.get(left, left), names.get(right, right)
    lines.append(f"    s{i + 1} = {left} {PY_OPS[op]} {right}\n")
  return "".join(lines) + f"    return s{len(template.steps)}\n"


def make(template: math_skill.Template, rand: random.Random, max_operand: int, num_base: int,
         num_plus: int, bucket: buckets.Bucket = buckets.ANY) -> dict:
  """One problem: the story with its numbers as arguments, in HumanEval+'s schema; its person,
  argument names and shown example from `bucket` (the other inputs are not in the prompt). The
  argument names make the body's text the problem's own: a story's steps alone (which every
  instance of it shares) do not write it."""
  args = math_skill.slots(template)
  name = bucket.choice(rand, "person", math_skill.NAMES)
  names = dict(zip(args, rand.sample(bucket.pool("argument", code_skill.ARGS["n"]), len(args)),
                   strict=True))
  item = rand.choice(template.items)
  story = template.text.format(n=name, x=item, **names)
  entry = f"{template.name}_{name.lower()}"
  head = f"def {entry}({', '.join(f'{names[a]}: int' for a in args)}) -> int:\n"
  draws = [math_skill.draw_values(template, rand, max_operand, bucket if i == 0 else buckets.ANY)
           for i in range(num_base + num_plus)]
  rows = [[values[a] for a in args] for values in draws]
  example = rows[0]
  answer = math_skill.evaluate(template, dict(zip(args, example, strict=True)))[-1]
  doc = (f'    """{story}\n    Return the answer as an int.\n'
         f'    >>> {entry}({", ".join(map(str, example))})\n    {answer}\n    """\n')
  return dict(task_id="", prompt=head + doc, entry_point=entry,
              canonical_solution=solution(template, names), base_input=rows[:num_base],
              plus_input=rows[num_base:], atol=0, template=template.name)
