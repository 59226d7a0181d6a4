"""Worked examples in the agent prompts state no fact of the source: a question of any split could
otherwise be answered by copying the example (the clue prompt's Budapest/Danube example did so)."""

from __future__ import annotations

import re

import pytest

from trace_selector.rollout import prompts
from trace_selector.search import wikileads as wl

INVENTED = ("Veltria", "Veltrian", "Korvast", "Anselle", "Orvanne", "Mireille Sauvat", "Sauvat")
"""The made-up places and people the examples are about."""
ORDINARY = frozenset({"Doc", "I", "In", "It", "Now", "Question", "The", "Title", "Two", "URL", "Which", "French"})
"""Capitalised words of the examples that are not names (sentence starts, format labels, a nationality)."""


@pytest.fixture(scope="module")
def source_text() -> str:
    """Every title and lead of the source articles, lowercased (the same load as tests/search/test_wikihops.py)."""
    arts = wl.load_articles(wl.source_path())
    return " ".join(a.title + " " + a.lead for a in arts).lower()


def example(prompt: str) -> str:
    return prompt.split("Example.", 1)[1]


def names(text: str) -> set[str]:
    """Capitalised words and runs of them ("Mireille Sauvat")."""
    return set(re.findall(r"\b[A-Z][\w'-]*", text)) | set(re.findall(r"\b[A-Z][\w-]*(?: [A-Z][\w-]*)+", text))


def occurs(name: str, text: str) -> bool:
    return re.search(rf"\b{re.escape(name.lower())}\b", text) is not None


@pytest.mark.parametrize("key", list(prompts.SYSTEM_PROMPTS), ids="-".join)
def test_prompt_examples_name_nothing_in_the_source(key, source_text):
    text = example(prompts.SYSTEM_PROMPTS[key])
    found = sorted(n for n in names(text) if n not in ORDINARY and occurs(n, source_text))
    assert found == [], f"{key}: the worked example names {found}, which the source articles mention"
    assert any(n in text for n in INVENTED)


def test_invented_names_are_in_no_title_or_lead(source_text):
    everything = "\n".join(prompts.SYSTEM_PROMPTS.values())
    for name in INVENTED:
        assert name in everything and not occurs(name, source_text), name


def test_the_check_catches_a_real_place(source_text):
    real = "Example.\nQuestion: Which river flows through the capital of Hungary?\n<answer>Danube</answer>"
    assert {"Hungary", "Danube"} <= {n for n in names(example(real)) if occurs(n, source_text)}
