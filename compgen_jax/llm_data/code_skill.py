"""The code skill: one Python function from its signature and docstring, in HumanEval+'s schema
(task_id, prompt, entry_point, canonical_solution, base_input, plus_input, atol).

A template is a small task over a list of ints, a string or an int (filter, map, count, sum,
max/min, index, reverse, string building, ...) with a constant drawn per problem ("greater than
7") and a function and argument name drawn from a few; the prompt ends with one doctest example
computed by the canonical body. plus_input adds the edge cases (empty inputs, negatives, longer
inputs) that separate a right body from a nearly right one, as HumanEval+ does.
A split draws its argument names and constants from its own bucket (buckets.py), so no test
body (e.g. `return min(seq)`) is a training body; entry-point names belong to one template each.
"""

import random
from typing import NamedTuple

from compgen_jax.llm_data import buckets, pools

WORDS = ("apple", "river", "stone", "cloud", "tiger", "lemon", "piano", "grass", "maple", "ocean",
         "candle", "rabbit", "silver", "window", "garden", "pepper", "forest", "bottle", "planet",
         "yellow", "dragon", "winter", "button", "mirror", "honey", "sun", "cat", "map", "ink",
         "owl", "red", "sky", "tea", "zebra", "quiet", "jumps", "bread", "chair", "table",
         "house", "horse", "mouse", "water", "light", "night", "green", "orange", "purple",
         "little", "small", "large", "happy", "sunny", "rainy", "snow", "wind", "storm", "field",
         "bridge", "castle", "tower", "market", "street", "school", "teacher", "student",
         "pencil", "paper", "letter", "number", "circle", "square", "basket", "blanket", "pillow",
         "carpet", "kitchen", "spoon", "plate", "cup", "glass", "coffee", "sugar", "salt",
         "butter", "cheese", "carrot", "potato", "tomato", "onion", "garlic", "banana", "cherry",
         "grape", "melon", "peach", "plum", "berry", "olive", "walnut", "almond", "coconut",
         "violin", "guitar", "drum", "flute", "trumpet", "song", "dance", "story", "poem", "book",
         "page", "word", "line", "dot", "star", "moon", "comet", "rocket", "engine", "wheel",
         "wagon", "train", "ship", "boat", "anchor", "island", "beach", "sand", "shell", "wave",
         "coral", "fish", "shark", "whale", "seal", "otter", "beaver", "badger", "fox", "wolf",
         "bear", "deer", "moose", "eagle", "hawk", "crow", "robin", "sparrow", "swan", "duck",
         "goose", "frog", "toad", "snake", "lizard", "turtle", "spider", "beetle", "ant", "bee",
         "wasp", "moth", "jacket", "shoe", "boot", "hat", "scarf", "glove", "ring", "crown",
         "key", "lock", "door", "gate", "fence", "roof", "wall", "brick", "tile", "clock",
         "watch", "phone", "radio", "camera", "lamp", "desk", "shelf", "drawer", "box", "bag",
         "rope", "chain", "hammer", "nail", "saw", "drill", "brush", "paint", "color")
# Argument names, split among the buckets (buckets.py): enough that each bucket holds several
# of every kind (none a builtin or loop variable the bodies use: sum, min, x, i, w, ...)
ARGS = {"ints": ("xs", "nums", "values", "numbers", "items", "data", "arr", "seq", "lst", "vals",
                 "elems", "ints", "scores", "points", "entries", "series", "counts", "amounts",
                 "readings", "marks", "weights", "heights", "ages", "prices", "sizes", "levels",
                 "grades", "samples", "measures", "totals", "digits", "figures"),
        "text": ("s", "text", "sentence", "line", "phrase", "words", "string", "msg", "message",
                 "content", "source", "raw", "label", "title", "caption", "note", "remark",
                 "quote", "verse", "slogan", "motto", "greeting", "headline", "comment"),
        "n": ("n", "count", "size", "num", "length", "bound", "upto", "steps", "times",
              "amount", "depth", "width", "rounds", "span", "reps", "quantity", "ceiling",
              "factor", "first", "second", "third", "extra", "base", "offset", "ratio",
              "share", "batch", "piles", "stacks", "crowd", "heap", "stock")}
# then made-up names to NUM_ARGS per kind (pools.py: too many to pass by writing them)
NUM_ARGS = 400
_taken = {"x", "i", "w", "c", "k", *(a for names in ARGS.values() for a in names)}
for _kind, _names in ARGS.items():  # no name in two kinds' pools
  ARGS[_kind] = pools.extend(_names, NUM_ARGS, (2, 3), f"argument/{_kind}", avoid=_taken)
  _taken |= set(ARGS[_kind])
TYPES = {"ints": "list[int]", "text": "str", "n": "int"}


class Template(NamedTuple):
  """A task: `kind` of its one argument (ARGS), its return type, the docstring's first line and
  the body (both formatted with {a}, the argument's name, and the constants), the entry-point
  names to draw from, the constants' draws, and whether the argument may be empty."""
  name: str
  kind: str
  returns: str
  doc: str
  body: str
  names: tuple[str, ...]
  consts: tuple[tuple[str, tuple], ...] = ()  # (name, (low, high) ints or a tuple of choices)
  nonempty: bool = False


K = (("k", (0, 30)),)
SMALL = (("k", (2, 9)),)
# the letters in at least a tenth of WORDS (a test's inputs of 10-25 words hold them)
LETTER = (("c", tuple("abcdeghilmnoprstuw")),)
T = Template
TEMPLATES = (
    T("filter_greater", "ints", "list[int]", "Return the elements of {a} greater than {k}, in "
      "order.", "return [x for x in {a} if x > {k}]", ("keep_above", "greater_than"), K),
    T("filter_less", "ints", "list[int]", "Return the elements of {a} less than {k}, in order.",
      "return [x for x in {a} if x < {k}]", ("keep_below", "less_than", "below_cut", "under_bound"),
      K),
    T("filter_even", "ints", "list[int]", "Return the even elements of {a}, in order.",
      "return [x for x in {a} if x % 2 == 0]", ("evens", "keep_even", "only_even")),
    T("filter_divisible", "ints", "list[int]", "Return the elements of {a} divisible by {k}, in "
      "order.", "return [x for x in {a} if x % {k} == 0]", ("multiples_of", "divisible"), SMALL),
    T("map_add", "ints", "list[int]", "Return a list with {k} added to each element of {a}.",
      "return [x + {k} for x in {a}]", ("add_to_all", "shift_up", "plus_each"), K),
    T("map_mul", "ints", "list[int]", "Return a list with each element of {a} multiplied by {k}.",
      "return [x * {k} for x in {a}]", ("scale", "times_each", "multiply_all"), SMALL),
    T("square_all", "ints", "list[int]", "Return a list of the squares of the elements of {a}.",
      "return [x * x for x in {a}]", ("squares", "square_all", "squared")),
    T("reverse_list", "ints", "list[int]", "Return the elements of {a} in reverse order.",
      "return {a}[::-1]", ("reverse", "reversed_list", "backwards")),
    T("clamp", "ints", "list[int]", "Return {a} with every element larger than {k} replaced by "
      "{k}.", "return [min(x, {k}) for x in {a}]", ("clamp", "cap_at", "limit"), K),
    T("count_equal", "ints", "int", "Return how many elements of {a} are equal to {k}.",
      "return sum(1 for x in {a} if x == {k})", ("count_of", "how_many"), K),
    T("count_greater", "ints", "int", "Return how many elements of {a} are greater than {k}.",
      "return sum(1 for x in {a} if x > {k})", ("count_above", "num_greater", "how_many_above",
                                                 "greater_count"), K),
    T("sum_list", "ints", "int", "Return the sum of the elements of {a}.",
      "return sum({a})", ("total", "sum_all", "add_up")),
    T("sum_greater", "ints", "int", "Return the sum of the elements of {a} greater than {k}.",
      "return sum(x for x in {a} if x > {k})", ("sum_above", "total_above", "sum_bigger",
                                                 "sum_exceeding"), K),
    T("max_list", "ints", "int", "Return the largest element of the non-empty list {a}.",
      "return max({a})", ("largest", "biggest", "maximum", "max_of"), nonempty=True),
    T("min_list", "ints", "int", "Return the smallest element of the non-empty list {a}.",
      "return min({a})", ("smallest", "minimum", "least", "min_of"), nonempty=True),
    T("index_of", "ints", "int", "Return the index of the first element of {a} equal to {k}, or "
      "-1 if there is none.", "return {a}.index({k}) if {k} in {a} else -1",
      ("find", "index_of", "position"), K),
    T("reverse_string", "text", "str", "Return the string {a} reversed.", "return {a}[::-1]",
      ("reverse_text", "backwards_text", "mirror")),
    T("repeat_string", "text", "str", "Return the string {a} repeated {k} times.",
      "return {a} * {k}", ("repeat", "copies", "echo"), (("k", (2, 4)),)),
    T("replace_char", "text", "str", "Return {a} with every '{c}' replaced by '*'.",
      "return {a}.replace('{c}', '*')", ("mask", "star_out", "hide", "mask_letter"), LETTER),
    T("remove_char", "text", "str", "Return {a} with every '{c}' removed.",
      "return {a}.replace('{c}', '')", ("strip_letter", "drop", "without", "remove_letter"),
      LETTER),
    T("join_words", "text", "str", "Return the words of {a} (separated by spaces) joined by "
      "'{c}'.", "return '{c}'.join({a}.split())", ("join_with", "rejoin", "link"),
      (("c", ("-", ",", "+", "_")),)),
    T("first_letters", "text", "str", "Return the first letter of each word of {a}, joined.",
      "return ''.join(w[0] for w in {a}.split())", ("initials", "acronym", "first_letters")),
    T("upper_words", "text", "str", "Return {a} with every letter in upper case.",
      "return {a}.upper()", ("shout", "upper", "loud")),
    T("count_char", "text", "int", "Return how many times '{c}' occurs in {a}.",
      "return {a}.count('{c}')", ("count_letter", "occurrences", "tally", "letter_count"),
      LETTER),
    T("count_words", "text", "int", "Return the number of words of {a} (separated by spaces).",
      "return len({a}.split())", ("word_count", "num_words", "words_in")),
    T("multiples", "n", "list[int]", "Return the first {a} positive multiples of {k}, in "
      "increasing order.", "return [{k} * i for i in range(1, {a} + 1)]",
      ("multiples", "times_table", "steps_of"), SMALL),
    T("countdown", "n", "str", "Return the numbers from {a} down to 1 joined by '{c}'.",
      "return '{c}'.join(str(i) for i in range({a}, 0, -1))", ("countdown", "count_down"),
      (("c", (" ", ",", "-")),)),
    # Training twins that teach the pieces of the default held-out templates under other
    # tasks: "less than" (filter_less), the sum of the elements that pass a test (sum_greater),
    # "smallest" (min_list), "removed" (remove_char), counting in a string (count_char)
    T("count_less", "ints", "int", "Return how many elements of {a} are less than {k}.",
      "return sum(1 for x in {a} if x < {k})", ("count_below", "num_less"), K),
    T("sum_even", "ints", "int", "Return the sum of the even elements of {a}.",
      "return sum(x for x in {a} if x % 2 == 0)", ("sum_evens", "even_total")),
    T("spread", "ints", "int", "Return the largest element minus the smallest element of the "
      "non-empty list {a}.", "return max({a}) - min({a})", ("spread", "value_range"),
      nonempty=True),
    T("remove_spaces", "text", "str", "Return {a} with every space removed.",
      "return {a}.replace(' ', '')", ("squash", "no_spaces")),
    T("count_spaces", "text", "int", "Return how many times a space occurs in {a}.",
      "return {a}.count(' ')", ("count_spaces", "num_spaces")),
    # Rewordings of the default held-out templates (the same body, another docstring and
    # names): held out with them by default; the quick preset trains on them (config.py)
    T("keep_smaller", "ints", "list[int]", "Return, in order, the elements of {a} that are "
      "smaller than {k}.", "return [x for x in {a} if x < {k}]", ("smaller_ones", "under"), K),
    T("total_above", "ints", "int", "Return the total of the elements of {a} that are bigger "
      "than {k}.", "return sum(x for x in {a} if x > {k})", ("add_above", "sum_over"), K),
    T("lowest", "ints", "int", "Return the lowest value in the non-empty list {a}.",
      "return min({a})", ("lowest", "min_value"), nonempty=True),
    T("delete_char", "text", "str", "Return {a} without any '{c}'.",
      "return {a}.replace('{c}', '')", ("delete", "erase"), LETTER),
    T("char_count", "text", "int", "Return the number of '{c}' characters in {a}.",
      "return {a}.count('{c}')", ("char_count", "letter_total"), LETTER),
    # Rewordings of the default validation templates (config.py), as those of the test ones
    T("above_count", "ints", "int", "Return the number of elements of {a} that exceed {k}.",
      "return sum(1 for x in {a} if x > {k})", ("exceeding", "count_over"), K),
    T("star_char", "text", "str", "Return {a} where each '{c}' becomes '*'.",
      "return {a}.replace('{c}', '*')", ("starred", "mark_char"), LETTER),
    T("highest", "ints", "int", "Return the highest value in the non-empty list {a}.",
      "return max({a})", ("highest", "max_value"), nonempty=True),
)
BY_NAME = {t.name: t for t in TEMPLATES}


def _value(rand: random.Random, kind: str, size: int, spread: int, nonempty: bool):
  """A random argument of `kind`: `size` list items / words, or an int up to `size`."""
  size = max(size, 1) if nonempty else size
  if kind == "ints":
    return [rand.randint(-spread, spread) for _ in range(size)]
  if kind == "text":
    return " ".join(rand.choice(WORDS) for _ in range(size))
  return size


def inputs(template: Template, rand: random.Random, num_base: int, num_plus: int
           ) -> tuple[list, list]:
  """(base_input, plus_input): small ordinary arguments; then edge cases (empty unless the task
  forbids it, one item, negatives and large values, long inputs) and more random ones."""
  nonempty = template.nonempty
  base = [[_value(rand, template.kind, rand.randint(2, 6), 20, nonempty)] for _ in range(num_base)]
  edges = [[_value(rand, template.kind, 0 if not nonempty else 1, 20, nonempty)],
           [_value(rand, template.kind, 1, 100, nonempty)],
           [_value(rand, template.kind, rand.randint(10, 25), 100, nonempty)]]
  more = [[_value(rand, template.kind, rand.randint(0, 12), 60, nonempty)]
          for _ in range(max(num_plus - len(edges), 0))]
  return base, (edges + more)[:num_plus]


def _constant(rand: random.Random, draw, bucket: buckets.Bucket):
  """A constant of `draw` ((low, high) ints or a tuple of choices) in `bucket`."""
  pool = range(draw[0], draw[1] + 1) if isinstance(draw[0], int) else draw
  return bucket.choice(rand, "constant", tuple(pool))


def call(program: str, entry_point: str, args: list):
  """The entry point's value on `args`, running our own canonical program (never model output:
  that runs only in the sandbox)."""
  scope = {}
  exec(program, scope)  # noqa: S102 - the generator's own template code
  return scope[entry_point](*args)


def make(template: Template, rand: random.Random, num_base: int, num_plus: int,
         bucket: buckets.Bucket = buckets.ANY) -> dict:
  """One problem of `template` in HumanEval+'s schema, its argument name and constants from
  `bucket`, plus the template's name."""
  words = {name: _constant(rand, draw, bucket) for name, draw in template.consts}
  words["a"] = bucket.choice(rand, "argument", ARGS[template.kind])
  entry = rand.choice(template.names)
  head = f"def {entry}({words['a']}: {TYPES[template.kind]}) -> {template.returns}:\n"
  solution = f"    {template.body.format(**words)}\n"
  base, plus = inputs(template, rand, num_base, num_plus)
  example = base[0]
  shown = call(head + solution, entry, example)
  doc = (f'    """{template.doc.format(**words)}\n    >>> {entry}({repr(example[0])})\n'
         f'    {shown!r}\n    """\n')
  return dict(task_id="", prompt=head + doc, entry_point=entry, canonical_solution=solution,
              base_input=base, plus_input=plus, atol=0, template=template.name)

