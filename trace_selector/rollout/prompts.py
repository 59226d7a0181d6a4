"""Every piece of prompt text the rollout uses, and the grammars that constrain the agent's actions.

Nothing else in `rollout/` holds literal prompt wording, so a prompt change is one diff here (and the
pool metadata records a hash of it, `prompt_version`). The texts are written for small models: one
concrete worked example, short instructions, and a closing tag on every action so stop strings and the
structured-output regex can cut the turn right after the action. Every worked example is about invented
places and people (the country Veltria, its capital Korvast on the river Anselle; the Orvanne lighthouse
and Mireille Sauvat), named in no title or lead of the source articles, so an example states no fact
that a question of any split asks about (tests/rollout/test_prompts.py checks it).

Observations are appended inside the assistant message (Search-R1 style) rather than as new chat
turns, so the prompt of turn t+1 is literally the prompt of turn t plus the generated tokens plus the
encoded observation: every turn hits the prefix cache and a branch can restart from any step boundary.
"""

from __future__ import annotations

import hashlib
import re

WEBQA_SYSTEM = """\
You answer questions by searching an encyclopedia. Work in turns. In every turn, first think briefly \
inside <think> </think>, then write exactly one action:
<search>a few keywords</search> looks something up; the top results come back inside \
<information> </information>.
<answer>short answer</answer> ends the task. The answer is a name, place, date or short phrase taken \
from what you read, never a document number.

Example.
Question: Which river flows through the capital of Veltria?
<think>The capital of Veltria is Korvast. I need the river that runs through it.</think>
<search>Korvast river</search>
<information>Doc 1 (Title: Korvast) Korvast is the capital of Veltria, on both banks of the Anselle.\
</information>
<think>Korvast lies on the Anselle.</think>
<answer>Anselle</answer>"""

WEBQA_CLUES_SYSTEM = """\
You answer questions by searching an encyclopedia. Work in turns. In every turn, first think briefly \
inside <think> </think>, then write exactly one action:
<search>keywords</search> looks something up; the top results come back inside \
<information> </information>.
<answer>short answer</answer> ends the task.
Search with the question's own clue words (its names, dates, places and descriptive words), not with \
a name you guess: the encyclopedia finds the right article from the clues. Answer with the title or \
name you read in the results, never a document number.

Example.
Question: Which Veltrian city on both banks of the Anselle is the country's capital?
<think>I should not guess. The clues are: Veltrian, city, both banks, Anselle, capital.</think>
<search>Veltrian city both banks Anselle capital</search>
<information>Doc 1 (Title: Korvast) Korvast is the capital of Veltria, on both banks of the Anselle.\
</information>
<think>The result says Korvast is the capital of Veltria on both banks of the Anselle.</think>
<answer>Korvast</answer>"""
"""WebQA prompt variant (`agent.prompt=clues`) that teaches searching with the question's own words: the
plain prompt's agent searched guessed names and answered from them (see data/pools/README.md)."""

WEBQA_HOPS_SYSTEM = """\
You answer questions by searching an encyclopedia. Most questions need two searches or more: the first \
finds a name, the next uses that name. Work in turns. In every turn, first think briefly inside \
<think> </think>, then write exactly one action:
<search>keywords</search> looks one fact up; the top results come back inside <information> </information>.
<answer>short answer</answer> ends the task.
Search for one fact at a time, using the question's own clue words. When a result gives you a name, put \
that name in your next search. Answer only when the results state the answer; reply with the name, \
year or place you read, never a document number.

Example.
Question: In what year was the person born who designed the Orvanne lighthouse?
<think>Two facts: who designed the Orvanne lighthouse, then that person's birth year.</think>
<search>designed Orvanne lighthouse</search>
<information>Doc 1 (Title: Orvanne lighthouse) The Orvanne lighthouse is a stone tower designed by Mireille \
Sauvat.</information>
<think>The designer is Mireille Sauvat. Now her birth year.</think>
<search>Mireille Sauvat born</search>
<information>Doc 1 (Title: Mireille Sauvat) Mireille Sauvat (1802–1871) was a French engineer.</information>
<think>Mireille Sauvat was born in 1802.</think>
<answer>1802</answer>"""
"""Multi-hop prompt variant (`agent.prompt=hops`, the wikihops recipe): one fact per search, the bridge
name carried into the next query. Its worked example is about invented names, so it states no fact
that any question of any split asks about."""

BROWSING_SYSTEM = """\
You answer questions by browsing a small encyclopedia website. Work in turns. In every turn, first \
think briefly inside <think> </think>, then write exactly one action:
<search>a few keywords</search> lists matching pages with their URLs.
<open>URL or page title</open> shows a page with numbered lines.
<find>word</find> shows the lines of the page you opened last that contain the word.
<answer>short answer</answer> ends the task. The answer is a name, place, date or short phrase.
Results come back inside <information> </information>.

Example.
Question: Which river flows through the capital of Veltria?
<think>The capital of Veltria is Korvast.</think>
<search>Korvast</search>
<information>[1] Korvast (https://wiki.local/korvast) Korvast is the capital of Veltria...</information>
<think>I will open the Korvast page and look for the river.</think>
<open>https://wiki.local/korvast</open>
<information>URL: https://wiki.local/korvast
L0 Korvast is the capital of Veltria, on both banks of the Anselle.</information>
<think>It lies on the Anselle.</think>
<answer>Anselle</answer>"""

USER_TEMPLATE = "Question: {question}"

# Observation wrappers: appended to the running assistant message after each tool call.
OBSERVATION_TEMPLATE = "\n<information>{body}</information>\n"
EMPTY_RESULT = "No results."
INVALID_ACTION = (
    "Invalid action. Think inside <think> </think>, then write exactly one of {actions} "
    "with the closing tag."
)
FORCE_ANSWER = "No more searches are allowed. Give your final answer now inside <answer> </answer>."
CONFIDENCE_PROMPT = "\nConfidence (0-100): "

PARALLEL_HINT = (
    "\nYou may write up to {n} <search> tags one after another in one turn; they run at the same time."
)
"""Appended to the system prompt when a turn may hold several searches (TIPEX structural parallelism)."""

# Replica strategy instructions (TIPEX): appended to the system prompt of one replica.
STRATEGY_SUFFIX = "\n\nStrategy for this attempt: {instruction}"

DIVINIT_PROMPT = """\
Question: {question}

Write {n} different search queries that could help answer this question. Each query is a few \
keywords. Make them as different from each other as you can: different entities, different \
aspects, different wordings. One per line, numbered."""

OHG_PROMPT = """\
Question: {question}

Write {k} different strategies for finding the answer with a search engine, each one sentence and \
each taking a clearly different route (which entity to look up first, which fact to verify, which \
wording to try). One per line, numbered."""

LIST_PREFILL = "1."
"""Start of the assistant reply for list-writing calls, so the completion is the list itself."""

ACTIONS: dict[str, tuple[str, ...]] = {
    "webqa": ("search", "answer"),
    "browsing": ("search", "open", "find", "answer"),
}
"""Action tags of each agent kind; `answer` ends a trajectory, the others are tool calls."""


SYSTEM_PROMPTS = {
    ("webqa", "plain"): WEBQA_SYSTEM,
    ("webqa", "clues"): WEBQA_CLUES_SYSTEM,
    ("webqa", "hops"): WEBQA_HOPS_SYSTEM,
    ("browsing", "plain"): BROWSING_SYSTEM,
}
"""(agent kind, prompt variant) -> system prompt."""


def system_prompt(kind: str, variant: str = "plain") -> str:
    """The system prompt of agent `kind` ("webqa" or "browsing") in prompt `variant`."""
    try:
        return SYSTEM_PROMPTS[kind, variant]
    except KeyError:
        known = sorted(v for k, v in SYSTEM_PROMPTS if k == kind)
        raise ValueError(f"no prompt variant {variant!r} for the {kind} agent; known: {', '.join(known)}") from None


def observation(body: str) -> str:
    """Wrap a tool result (or a notice) the way the agent sees it."""
    return OBSERVATION_TEMPLATE.format(body=body if body.strip() else EMPTY_RESULT)


def invalid_action(kind: str) -> str:
    """Observation after a turn without a valid action, naming the allowed tags."""
    tags = ", ".join(f"<{t}>" for t in ACTIONS[kind])
    return INVALID_ACTION.format(actions=tags)


def prompt_version() -> str:
    """Short hash of all prompt text, recorded in the pool metadata."""
    text = "\x00".join(
        [*SYSTEM_PROMPTS.values(), USER_TEMPLATE, OBSERVATION_TEMPLATE, INVALID_ACTION, FORCE_ANSWER,
         CONFIDENCE_PROMPT, PARALLEL_HINT, STRATEGY_SUFFIX, DIVINIT_PROMPT, OHG_PROMPT, LIST_PREFILL]
    )
    return hashlib.sha1(text.encode()).hexdigest()[:10]


# --- structured outputs ---------------------------------------------------------------------------
# vLLM structured outputs (xgrammar) take a regex. Small models ramble inside <think> until max_tokens
# (SmolLM2-135M at T=1 did so in every turn of a smoke run), so the grammar bounds the thought and the
# arguments in words. Measured with xgrammar 0.2.8 (compile / token-mask time):
#   [^<]{0,240} (characters)            3-5 s / -       hit vLLM's 5 s compile timeout on a busy box
#   (\s?[^<\s]+){0,40} (optional sep.)  0.05 s / 4 s    ambiguous word splits: exponential masks
#   [^<\s]+( [^<\s]+){0,39} (one space)  0.6 s / 0.01 ms  what we use
# Words are separated by exactly one space so every string has one parse. Contents exclude "<" so a
# tag cannot open inside another; an argument needs at least one word.
THINK_WORDS = 40
ARG_WORDS = 12


def _words(n: int, exclude: str) -> str:
    word = f"[^{exclude}\\s]+"
    return f"{word}( {word}){{0,{n - 1}}}"


def action_regex(actions: tuple[str, ...], think: bool = True, max_parallel: int = 1) -> str:
    """Regex for one turn: a short one-line thought then exactly one action (or up to `max_parallel`
    `<search>` tags, TIPEX structural parallelism)."""
    content = f" ?{_words(ARG_WORDS, '<>')} ?"
    alts = []
    for tag in actions:
        one = f"<{tag}>{content}</{tag}>"
        if tag == "search" and max_parallel > 1:
            one = f"{one}(\\n?{one}){{0,{max_parallel - 1}}}"
        alts.append(one)
    body = "(" + "|".join(alts) + ")"
    return f"<think> ?({_words(THINK_WORDS, '<')})? ?</think>\\n?{body}" if think else body


def confidence_regex() -> str:
    """Regex for the stated-confidence completion (0 to 100)."""
    return r"(100|[1-9]?[0-9])"


_CONF = re.compile(r"\d{1,3}")


def parse_confidence(text: str) -> float | None:
    """Leading number of `text` as a confidence in [0, 1]; None when there is none."""
    match = _CONF.search(text or "")
    if match is None:
        return None
    return min(int(match.group()), 100) / 100.0


_NUMBERED = re.compile(r"^\s*(\d{1,2})\s*[.):]\s*(.+?)\s*$")


def parse_numbered_list(text: str) -> list[str]:
    """Items of a numbered list ("1. foo\n2) bar"), in order, stripped of quotes; other lines skipped."""
    items: list[str] = []
    for line in (text or "").splitlines():
        match = _NUMBERED.match(line)
        if match:
            item = match.group(2).strip().strip("\"'`").strip()
            if item:
                items.append(item)
    return items
