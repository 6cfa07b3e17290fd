"""The math skill: arithmetic word problems in GSM8K's schema (question, answer).

Each template is a short story whose question takes 1-3 operations (+, -, *, and / that leaves
no remainder) on integers drawn from [2, max_operand]; its worked solution states each step as
"a op b = c" and ends "#### n". GSM8K's <<a*b=c>> calculator notes are left out: they only
lengthen what a small model must learn. Every intermediate result is a non-negative integer
(draws that break this are redrawn), so the story never takes more than there is.
The cross skill (cross_skill.py) renders the same stories as Python functions. A split draws
its numbers (the question's numbers as a multiset) and person names from its own bucket
(buckets.py).
"""

import random
import re
from typing import NamedTuple

from compgen_jax.llm_data import buckets, pools

# 60 real names, so that each bucket of buckets.py holds a dozen or more (the first 20: 5 to 9),
# then made-up ones to NUM_NAMES (pools.py: a pool too large to pass by writing its names)
NUM_NAMES = 1500
NAMES = ("Ava", "Ben", "Chloe", "Dan", "Emma", "Finn", "Grace", "Hugo", "Ivy", "Jack", "Kate",
         "Leo", "Mia", "Noah", "Olga", "Pablo", "Rosa", "Sam", "Tara", "Umar", "Vera", "Will",
         "Xena", "Yusuf", "Zoe", "Aria", "Boris", "Carla", "Diego", "Elena", "Felix", "Gina",
         "Hana", "Igor", "Jonas", "Kira", "Liam", "Maya", "Nico", "Omar", "Petra", "Quinn",
         "Ravi", "Sofia", "Theo", "Uma", "Victor", "Wanda", "Yara", "Zane", "Amir", "Bella",
         "Cyrus", "Dora", "Eli", "Fiona", "Gus", "Hazel", "Ian", "June")
NAMES = pools.extend(NAMES, NUM_NAMES, (2, 3), "person", capitalize=True)
OPS = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
       "/": lambda x, y: x // y}
MAX_TRIES = 10_000  # redraws of one problem's numbers before the template is called unusable


class Template(NamedTuple):
  """A story: `text` with {n} (a name), {x} (an item, from `items`) and number slots; `steps`
  as (expression "p op q" over slots and earlier results s1, s2, ..., the step's sentence)."""
  name: str
  text: str
  steps: tuple[tuple[str, str], ...]
  items: tuple[str, ...]


def _t(name, text, steps, items):
  return Template(name, text, tuple(steps), tuple(items))


TEMPLATES = (
    _t("buy_more", "{n} has {a} {x}. {n} buys {b} more. How many {x} does {n} have now?",
       [("a + b", "{n} has {e} = {v} {x}.")], ["apples", "stickers", "marbles"]),
    _t("give_away", "{n} has {a} {x} and gives {b} of them to a friend. How many {x} does {n} "
       "have left?", [("a - b", "{n} has {e} = {v} {x} left.")], ["cards", "pens", "coins"]),
    _t("boxes", "{n} buys {a} boxes with {b} {x} in each box. How many {x} does {n} buy?",
       [("a * b", "{n} buys {e} = {v} {x}.")], ["crayons", "cookies", "beads"]),
    _t("share", "{n} shares {a} {x} equally among {b} friends. How many {x} does each friend "
       "get?", [("a / b", "Each friend gets {e} = {v} {x}.")], ["grapes", "candies", "nuts"]),
    _t("rows", "A garden has {a} rows of {x} with {b} in each row. {n} picks {c} of them. How "
       "many {x} are left?", [("a * b", "There are {e} = {v} {x}."),
                              ("s1 - c", "{e} = {v} {x} are left.")], ["tulips", "roses"]),
    _t("bags_left", "{n} has {a} {x} and puts them into bags of {b}. {n} gives away {c} bags. "
       "How many bags does {n} keep?", [("a / b", "{n} fills {e} = {v} bags."),
                                        ("s1 - c", "{n} keeps {e} = {v} bags.")],
       ["oranges", "lemons", "eggs"]),
    _t("two_friends", "{n} has {a} {x}. A friend has {b} more {x} than {n}. How many {x} do "
       "they have together?", [("a + b", "The friend has {e} = {v} {x}."),
                               ("a + s1", "Together they have {e} = {v} {x}.")],
       ["shells", "stamps", "books"]),
    _t("weekly", "{n} reads {a} pages a day for {b} days and then {c} more pages. How many "
       "pages does {n} read?", [("a * b", "{n} reads {e} = {v} pages in the days."),
                                ("s1 + c", "In all {n} reads {e} = {v} pages.")], ["pages"]),
    _t("spent", "{n} has {a} dollars, buys {b} {x} at {c} dollars each. How many dollars are "
       "left?", [("b * c", "The {x} cost {e} = {v} dollars."),
                 ("a - s1", "{n} has {e} = {v} dollars left.")], ["notebooks", "toys"]),
    _t("team", "{a} children join a club and {b} more join later. They form teams of {c}. "
       "How many teams are there?", [("a + b", "There are {e} = {v} children."),
                                     ("s1 / c", "There are {e} = {v} teams.")], ["teams"]),
    _t("bus", "A bus has {a} people. At a stop {b} get off and {c} get on. How many people are "
       "on the bus?", [("a - b", "After {b} get off there are {e} = {v} people."),
                       ("s1 + c", "Then there are {e} = {v} people.")], ["people"]),
    _t("trays", "{n} bakes {a} trays of {b} {x} and eats {c}. {n} packs the rest into boxes of "
       "{d}. How many boxes does {n} fill?", [("a * b", "{n} bakes {e} = {v} {x}."),
                                              ("s1 - c", "{e} = {v} {x} are left."),
                                              ("s2 / d", "{n} fills {e} = {v} boxes.")],
       ["muffins", "cookies"]),
    _t("savings", "{n} saves {a} dollars a week for {b} weeks, then spends {c} dollars and "
       "earns {d} dollars. How many dollars does {n} have?",
       [("a * b", "{n} saves {e} = {v} dollars."), ("s1 - c", "After spending: {e} = {v}."),
        ("s2 + d", "{n} has {e} = {v} dollars.")], ["dollars"]),
    _t("shelves", "A shop has {a} {x} and gets {b} boxes of {c} more. It puts them on {d} "
       "shelves equally. How many {x} go on each shelf?",
       [("b * c", "The boxes hold {e} = {v} {x}."), ("a + s1", "There are {e} = {v} {x}."),
        ("s2 / d", "Each shelf gets {e} = {v} {x}.")], ["cans", "jars", "bottles"]),
    _t("double_up", "{n} has {a} {x}, gets {b} more, then doubles the collection. How many {x} "
       "does {n} have?", [("a + b", "{n} has {e} = {v} {x}."),
                          ("s1 * 2", "Doubled: {e} = {v} {x}.")], ["coins", "stamps"]),
    _t("laps", "{n} runs {a} laps of {b} meters. How many meters does {n} run?",
       [("a * b", "{n} runs {e} = {v} meters.")], ["meters"]),
    _t("split_bill", "{a} friends share a bill of {b} dollars and a tip of {c} dollars equally. "
       "How many dollars does each pay?", [("b + c", "The total is {e} = {v} dollars."),
                                           ("s1 / a", "Each pays {e} = {v} dollars.")],
       ["dollars"]),
    _t("lost", "{n} had {a} {x}, lost {b} and then found {c}. How many {x} does {n} have?",
       [("a - b", "After losing: {e} = {v} {x}."), ("s1 + c", "After finding: {e} = {v} {x}.")],
       ["keys", "marbles", "buttons"]),
    _t("packs_cost", "A pack of {a} {x} costs {b} dollars. {n} needs {c} {x}. How many dollars "
       "does {n} pay?", [("c / a", "{n} needs {e} = {v} packs."),
                         ("s1 * b", "{n} pays {e} = {v} dollars.")], ["pencils", "cards"]),
    _t("classes", "A school has {a} classes of {b} students and {c} teachers. How many people "
       "are in the school?", [("a * b", "There are {e} = {v} students."),
                              ("s1 + c", "There are {e} = {v} people.")], ["people"]),
    _t("difference", "{n} has {a} {x} and a friend has {b}. How many more {x} does {n} have?",
       [("a - b", "{n} has {e} = {v} more {x}.")], ["stickers", "points", "shells"]),
    _t("groups_total", "{n} makes {a} groups of {b} {x}, then adds {c} groups of {d}. How many "
       "{x} are there?", [("a * b", "The first groups hold {e} = {v} {x}."),
                          ("c * d", "The others hold {e} = {v} {x}."),
                          ("s1 + s2", "There are {e} = {v} {x}.")], ["blocks", "beads"]),
    # Training twins of packs_cost and groups_total (the same steps, another story), so each
    # default held-out template's steps are trained under other wording (as laps ~ boxes,
    # lost ~ bus, difference ~ give_away already were)
    _t("sheets", "A shop sells {x} in sheets of {a}, and a sheet costs {b} dollars. {n} wants "
       "{c} {x}. How many dollars does {n} spend?", [("c / a", "{n} buys {e} = {v} sheets."),
                                                     ("s1 * b", "{n} spends {e} = {v} dollars.")],
       ["stamps", "labels"]),
    _t("crates", "{n} fills {a} crates with {b} {x} each and {c} bags with {d} {x} each. How "
       "many {x} does {n} pack?", [("a * b", "The crates hold {e} = {v} {x}."),
                                   ("c * d", "The bags hold {e} = {v} {x}."),
                                   ("s1 + s2", "{n} packs {e} = {v} {x}.")],
       ["potatoes", "pears"]),
)


def _reword(name, story, text):
  """`story`'s steps, worked-solution sentences and items, the story told in `text`."""
  held_out = next(t for t in TEMPLATES if t.name == story)
  return Template(name, text, held_out.steps, held_out.items)


# Rewordings of the default held-out stories (test, then validation: config.py), in no split
# unless a config names them (config.OPT_IN): the quick preset trains them (configs/
# llm_study.py), so each of its test and validation stories is trained under other words, as
# its funcs and strings tasks are
REWORDINGS = (
    _reword("track_laps", "laps", "{n} does {a} laps around a track that is {b} meters long. "
            "How far does {n} go in meters?"),
    _reword("missing_found", "lost", "{n} started with {a} {x}. {b} of them went missing, but "
            "later {n} found {c}. How many {x} are there now?"),
    _reword("pack_price", "packs_cost", "{n} wants {c} {x}. They come in packs of {a}, and each "
            "pack is {b} dollars. What does {n} pay in dollars?"),
    _reword("group_sums", "groups_total", "{n} puts {b} {x} in each of {a} groups, and {d} {x} "
            "in each of {c} other groups. What is the total number of {x}?"),
    _reword("ahead_by", "difference", "{n} owns {a} {x}; a friend owns {b}. By how many {x} is "
            "{n} ahead of the friend?"),
    _reword("daily_pages", "weekly", "For {b} days {n} reads {a} pages each day, and after that "
            "{c} pages more. How many pages is that in all?"),
    _reword("picked_rows", "rows", "{n} picks {c} {x} from a garden of {a} rows that hold {b} "
            "{x} each. How many {x} remain in the garden?"),
)
BY_NAME = {t.name: t for t in TEMPLATES + REWORDINGS}


def slots(template: Template) -> tuple[str, ...]:
  """The number slots in the order the story first names them (a function's arguments)."""
  names = []
  for step, _ in template.steps:
    for term in (step.split()[0], step.split()[2]):
      if term.isalpha() and len(term) == 1 and term not in names:
        names.append(term)
  return tuple(sorted(names, key=lambda s: template.text.index("{" + s + "}")))


def numbers(template: Template, values: dict) -> tuple[int, ...]:
  """The question's numbers, sorted: the atom a split's bucket holds. A multiset, not the
  order the text shows them in: a rewording tells the same numbers in another order (packs_cost
  "a pack of 3 ... 5 dollars ... needs 6", pack_price "wants 6 ... packs of 3 ... 5 dollars"),
  and by the text's order alone a test problem's very instance trained under a rewording."""
  return tuple(sorted(values[s] for s in re.findall(r"\{(\w+)\}", template.text)
                      if s in values))


def evaluate(template: Template, values: dict) -> list[int] | None:
  """Each step's result (Python ints), or None where a step would leave the non-negative
  integers (a negative difference, a division with a remainder or by zero)."""
  env, results = dict(values), []
  for i, (step, _) in enumerate(template.steps):
    left, op, right = step.split()
    x, y = (env[t] if t in env else int(t) for t in (left, right))
    if op == "/" and (y == 0 or x % y):
      return None
    value = OPS[op](x, y)
    if value < 0:
      return None
    env[f"s{i + 1}"] = value
    results.append(value)
  return results


def draw_values(template: Template, rand: random.Random, max_operand: int,
                bucket: buckets.Bucket = buckets.ANY) -> dict:
  """Slot values in [2, max_operand] for which every step stays in the non-negative integers,
  their multiset (`numbers`) in `bucket`; EmptyBucket when MAX_TRIES draws find none."""
  for _ in range(MAX_TRIES):
    values = {s: rand.randint(2, max_operand) for s in slots(template)}
    if evaluate(template, values) is not None and bucket.holds("numbers",
                                                               numbers(template, values)):
      return values
  raise buckets.EmptyBucket(f"no valid numbers of the {bucket.name} bucket in {MAX_TRIES} "
                            "draws")


def render(template: Template, values: dict, name: str, item: str) -> dict:
  """GSM8K's record: the question and the worked answer ending '#### n'."""
  words = dict(n=name, x=item, **{k: str(v) for k, v in values.items()})
  results = evaluate(template, values)
  env = {**words, **{f"s{i + 1}": str(v) for i, v in enumerate(results)}}
  lines = []
  for (step, sentence), value in zip(template.steps, results, strict=True):
    left, op, right = step.split()
    expr = f"{env.get(left, left)} {op} {env.get(right, right)}"
    lines.append(sentence.format(e=expr, v=value, **words))
  return dict(question=template.text.format(**words),
              answer="\n".join(lines + [f"#### {results[-1]}"]))


def make(template: Template, rand: random.Random, max_operand: int,
         bucket: buckets.Bucket = buckets.ANY) -> dict:
  """One problem of `template`, its numbers and name from `bucket`: its record, plus the
  template's name."""
  values = draw_values(template, rand, max_operand, bucket)
  name, item = bucket.choice(rand, "person", NAMES), rand.choice(template.items)
  return dict(**render(template, values, name, item), template=template.name)
