"""The skills' answer formats without the skills: control problems a background reads so that it
knows how an answer looks before any expert teaches it a skill (issue 55; the paper's background
is a general model that writes every format). An expert's change is then the skill, not a
format shift that would apply to every prompt.

  arith format   a question whose answer is a number stated in it (a label, a year, a room):
                 a worked sentence, then "#### n", as arith's answers end; no arithmetic
  funcs format   a function whose body is given away by its docstring (return a constant,
                 return the argument), in funcs' prompt format (signature, docstring, doctest)
The strings format (a one-line plain answer) is the qa source's. Names, argument names and
constants come from the train bucket alone (buckets.py), so no validation or test problem
shares its content with them either.
"""

import random

from compgen_jax.llm_data import buckets, code_skill, math_skill

# (question, worked sentence) with {p} a person and {n} the number the answer states
ARITH_FORMATS = (
    ("{p} was born in {n}. In which year was {p} born?", "{p} was born in {n}."),
    ("{p} waits in room {n}. In which room does {p} wait?", "{p} waits in room {n}."),
    ("{p} takes bus number {n} to school. Which bus does {p} take?", "{p} takes bus {n}."),
    ("{p} stopped reading on page {n}. On which page did {p} stop?", "{p} stopped on page {n}."),
    ("The locker of {p} has the number {n}. What number does the locker of {p} have?",
     "The locker of {p} is number {n}."),
    ("{p} lives at house number {n}. At which number does {p} live?", "{p} lives at number {n}."),
)
NUMBERS = (10, 999)  # past arith's operands (at most max_operand, 10 in every preset)

T = code_skill.Template
FUNCS_FORMATS = (
    T("return_constant", "ints", "int", "Return {k}, whatever {a} holds.", "return {k}",
      ("always", "constant_value"), code_skill.K),
    T("return_argument", "ints", "list[int]", "Return {a} unchanged.", "return {a}",
      ("identity", "unchanged")),
    T("return_text", "text", "str", "Return {a} unchanged.", "return {a}",
      ("same_text", "echo_text")),
    T("return_letter", "text", "str", "Return the letter '{c}', whatever {a} holds.",
      "return '{c}'", ("letter_only", "fixed_letter"), code_skill.LETTER),
)


def arith_format(rand: random.Random, bucket: buckets.Bucket) -> tuple[str, str]:
  """(question, answer) of one arith-format control problem."""
  question, sentence = rand.choice(ARITH_FORMATS)
  words = dict(p=bucket.choice(rand, "person", math_skill.NAMES), n=rand.randint(*NUMBERS))
  return question.format(**words), f"{sentence.format(**words)}\n#### {words['n']}"


def funcs_format(rand: random.Random, bucket: buckets.Bucket) -> tuple[str, str]:
  """(prompt, body) of one funcs-format control problem."""
  record = code_skill.make(rand.choice(FUNCS_FORMATS), rand, 1, 1, bucket)
  return record["prompt"], record["canonical_solution"]


def problems(count: int, seed: int, bucket: buckets.Bucket) -> list[tuple[str, str, str]]:
  """`count` control problems, half of each format: (format, context, target)."""
  rand = random.Random(seed)
  out = []
  for i in range(count):
    if i % 2:
      out.append(("funcs", *funcs_format(rand, bucket)))
    else:
      out.append(("arith", *arith_format(rand, bucket)))
  return out
