"""The third skill: string transformations answered in plain text ({question, answer}), scored
by exact match of the answer's first line (llm_eval/exact_match.py).

Words come from QUOTED (code_skill.WORDS, then made-up ones), a split's from its own bucket
(buckets.py: no validation or test question quotes a word of a training question); answers
never start or end with a space (the scorer strips).
"""

import random
from typing import NamedTuple

from compgen_jax.llm_data import buckets, pools
from compgen_jax.llm_data.code_skill import WORDS

# the quoted words: code_skill's, then made-up ones to NUM_WORDS (pools.py: too many to pass by
# writing them; a made-up word is a few pieces of the tokenizer, as a rare real one is)
NUM_WORDS = 2000
QUOTED = pools.extend(WORDS, NUM_WORDS, (2, 3), seed="word")

VOWELS = "aeiou"


class Template(NamedTuple):
  """A question pattern over {w} (one word), {p} (a phrase of 2-4 words), {c} (a letter of the
  word) or {k} (2-3), and the answer as a function of those values."""
  name: str
  question: str
  answer: object  # Callable[[dict], str]


# The answers that a task and its rewording (config.REWORDED) share
def _last_letter(v):
  return v["w"][-1]


def _capitalize(v):
  return " ".join(w.capitalize() for w in v["p"].split())


def _double_letters(v):
  return "".join(ch * 2 for ch in v["w"])


def _last_word(v):
  return v["p"].split()[-1]


def _swap_ends(v):
  words = v["p"].split()
  return " ".join([words[-1]] + words[1:-1] + [words[0]])


def _repeat_word(v):
  return " ".join([v["w"]] * v["k"])


def _first_word(v):
  return v["p"].split()[0]


T = Template
TEMPLATES = (
    T("reverse_word", 'Write the word "{w}" backwards.', lambda v: v["w"][::-1]),
    T("upper_word", 'Write "{w}" in capital letters.', lambda v: v["w"].upper()),
    T("first_letter", 'What is the first letter of "{w}"?', lambda v: v["w"][0]),
    T("last_letter", 'What is the last letter of "{w}"?', _last_letter),
    T("initials", 'Give the first letter of each word in "{p}".',
      lambda v: "".join(w[0] for w in v["p"].split())),
    T("sort_letters", 'Write the letters of "{w}" in alphabetical order.',
      lambda v: "".join(sorted(v["w"]))),
    T("no_vowels", 'Write "{w}" without its vowels.',
      lambda v: "".join(ch for ch in v["w"] if ch not in VOWELS)),
    T("replace_letter", 'Replace every "{c}" in "{w}" with "*".', lambda v: v["w"].replace(
        v["c"], "*")),
    T("last_word", 'What is the last word of "{p}"?', _last_word),
    T("swap_words", 'Swap the first and last words of "{p}".', _swap_ends),
    T("capitalize", 'Capitalize each word of "{p}".', _capitalize),
    T("repeat_word", 'Write "{w}" {k} times, separated by spaces.', _repeat_word),
    T("dashes", 'Join the words of "{p}" with dashes.', lambda v: "-".join(v["p"].split())),
    T("double_letters", 'Write "{w}" with every letter doubled.', _double_letters),
    T("length", 'How many letters are in "{w}"?', lambda v: str(len(v["w"]))),
    T("count_letter", 'How many times does "{c}" occur in "{w}"?',
      lambda v: str(v["w"].count(v["c"]))),
    # Training twins of the default held-out letter templates' pieces: one word capitalized
    # (capitalize), a word letter by letter (double_letters)
    T("capitalize_word", 'Capitalize the word "{w}".', lambda v: v["w"].capitalize()),
    T("spell_out", 'Spell "{w}" with a space between the letters.', lambda v: " ".join(v["w"])),
    # Rewordings of the default held-out templates: held out with them by default; the quick
    # preset trains on them (config.py)
    T("final_letter", 'Which letter does "{w}" end with?', _last_letter),
    T("title_case", 'Write "{p}" with each word starting with a capital letter.', _capitalize),
    T("twice_letters", 'Repeat each letter of "{w}" twice.', _double_letters),
    # Rewordings of the word-level tasks (config.WORD_LEVEL: last_word, swap_words,
    # repeat_word, defined above with the rest), held out with them by default
    T("final_word", 'Which word does "{p}" end with?', _last_word),
    T("swap_ends", 'Exchange the first and the last word of "{p}".', _swap_ends),
    T("word_times", 'Say "{w}" {k} times, with a space between.', _repeat_word),
    # The default validation task (config.py), a word-level one as the presets' test tasks,
    # and its rewording (held out with it by default; the presets train it)
    T("first_word", 'What is the first word of "{p}"?', _first_word),
    T("opening_word", 'Which word does "{p}" start with?', _first_word),
)
BY_NAME = {t.name: t for t in TEMPLATES}


def make(template: Template, rand: random.Random, bucket: buckets.Bucket = buckets.ANY) -> dict:
  """One problem of `template`, its words from `bucket`: {question, answer, template}."""
  words = bucket.pool("word", QUOTED)
  w = rand.choice(words)
  values = dict(w=w, c=rand.choice(w), k=rand.randint(2, 3),
                p=" ".join(rand.choice(words) for _ in range(rand.randint(2, 4))))
  return dict(question=template.question.format(**values), answer=template.answer(values),
              template=template.name)
