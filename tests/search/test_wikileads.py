"""wikileads generation on a small synthetic article list, and (slow) the full prepare twice."""

from __future__ import annotations

import json

import pytest

from trace_selector.records.answers import normalize_answer
from trace_selector.search import wikileads as wl
from trace_selector.search.urls import wiki_url

ARTICLES = [
    wl.Article("Tomato", "The tomato is a plant whose fruit is an edible berry that is eaten as a vegetable. "
               "The tomato is a member of the nightshade family. It originated from western South America, and "
               "may have been domesticated there or in Mexico. The Spanish introduced tomatoes to Eurasia in the "
               "16th century.", "Edible berry", "Biology and health sciences"),
    wl.Article("Charlie Chaplin", "Sir Charles Spencer Chaplin was an English comic actor, filmmaker and composer "
               "who rose to fame in the era of silent film. He became a worldwide icon through his screen persona, "
               "the Tramp, and is considered one of the film industry's most important figures.",
               "English comedian and filmmaker (1889–1977)", "People"),
    wl.Article("2001: A Space Odyssey", "2001: A Space Odyssey is a 1968 epic science fiction film produced and "
               "directed by Stanley Kubrick, who co-wrote the screenplay with Arthur C. Clarke. It stars Keir Dullea "
               "and Gary Lockwood.", "1968 film by Stanley Kubrick", "Arts"),
    wl.Article("Nairobi", "Nairobi is the capital and largest city of Kenya. It has a population of about 4.4 "
               "million people in the city proper.", "Capital of Kenya", "Geography"),
    wl.Article("Mercury (planet)", "Mercury is the first planet from the Sun and the smallest in the Solar System. "
               "It is a rocky planet with a trace atmosphere and a surface gravity slightly higher than Mars.",
               "Smallest and closest planet to the Sun", "Physical sciences"),
    wl.Article("Gas", "Gas is a state of matter with neither fixed volume nor fixed shape that fills its container. "
               "Gas particles move freely.", "State of matter", "Physical sciences"),
]


def test_sentences_keep_initials_and_abbreviations_together():
    text = "It was by Arthur C. Clarke and Dr. Smith. The U.S. army came (c. 1900). Next one."
    assert wl.split_sentences(text) == [
        "It was by Arthur C. Clarke and Dr. Smith.", "The U.S. army came (c. 1900).", "Next one."]


def test_passages_hold_two_to_three_sentences():
    assert [wl.chunk_sizes(n) for n in (1, 2, 3, 4, 5, 7)] == [[1], [2], [3], [2, 2], [3, 2], [3, 2, 2]]
    passages, pages, owned = wl.build_corpus(ARTICLES)
    assert [p.id for p in passages] == [str(i) for i in range(len(passages))]
    tomato = [p for p in passages if p.title == "Tomato"]
    assert tomato[0].text.startswith("Edible berry. The tomato is a plant")
    assert all(2 <= len(wl.split_sentences(p.text)) <= 3 for p in tomato)
    assert owned["Tomato"] == [p.id for p in tomato]
    assert pages[0].url == wiki_url(pages[0].title)
    # Pages: the description, then one lead sentence per line.
    assert pages[4].text.split("\n") == [
        "Smallest and closest planet to the Sun.",
        "Mercury is the first planet from the Sun and the smallest in the Solar System.",
        "It is a rocky planet with a trace atmosphere and a surface gravity slightly higher than Mars."]


def test_question_families_and_invariants():
    rows, _ = wl.generate(ARTICLES)
    by = {(r["family"], r["entity"]): r for r in rows}
    assert by[("lookup", "2001: A Space Odyssey")]["question"] == "Who directed 2001: A Space Odyssey?"
    assert by[("lookup", "2001: A Space Odyssey")]["golden_answers"] == ["Stanley Kubrick"]
    assert by[("lookup", "Nairobi")]["golden_answers"] == ["Kenya"]
    assert by[("lookup", "Charlie Chaplin")]["golden_answers"][0] in {"1889", "1977"}
    assert by[("identify", "Tomato")]["question"].startswith("Which edible berry originated from western South America")
    assert by[("identify", "Gas")]["question"] == (
        "What is a state of matter with neither fixed volume nor fixed shape that fills its container?")
    assert by[("identify", "Mercury (planet)")]["golden_answers"] == ["Mercury (planet)", "Mercury"]
    for r in rows:
        q = normalize_answer(r["question"])
        assert not any(f" {normalize_answer(a)} " in f" {q} " for a in r["golden_answers"]), r
        assert r["split"] == wl.split_of(r["entity"]) and r["url"] == wiki_url(r["entity"])
        assert len(r["question"].split()) <= wl.MAX_QUESTION_WORDS and r["question"].endswith("?")
    # Deterministic, and every entity's questions sit in one split.
    assert wl.generate(ARTICLES)[0] == rows
    splits = {}
    for r in rows:
        splits.setdefault(r["entity"], set()).add(r["split"])
    assert all(len(s) == 1 for s in splits.values())


def test_leak_checks():
    assert wl.contains_answer("Which fruit is the Tomato?", ["tomato"])
    assert wl.contains_answer("Where do tomatoes grow?", ["Tomato"])  # plural of a one-word answer
    assert not wl.contains_answer("Which berry is red?", ["Tomato"])
    assert wl.contains_answer("Who was Charlie Chaplin's father?", ["Charlie Chaplin"])
    # A clue that gives away the title word is rejected even without the whole title.
    assert wl.title_overlap("Which arts are performed live?", "Performing arts", set()) == 0.5


def test_splits_are_about_70_15_15():
    titles = [f"Article {i}" for i in range(4000)]
    counts = {s: sum(wl.split_of(t) == s for t in titles) / len(titles) for s in wl.SPLITS}
    assert abs(counts["train"] - 0.70) < 0.03 and abs(counts["dev"] - 0.15) < 0.03


@pytest.mark.slow
def test_full_prepare_is_byte_identical_and_idempotent(tmp_path):
    from trace_selector.search.setting import load_setting, prepare

    first = prepare("wikileads", out=tmp_path / "a")
    second = prepare("wikileads", out=tmp_path / "b", force=True)
    ma = json.loads((tmp_path / "a" / "manifest.json").read_text())
    mb = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert ma["files"] == mb["files"] and "index/data.csc.index.npy" in ma["files"]
    assert first.replace("/a", "/b") == second
    again = prepare("wikileads", out=tmp_path / "a")
    assert again.endswith("--force rebuilds")
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["questions"]["all"]["total"] >= 3000 and set(report["questions"]) >= {"identify", "lookup"}
    s = load_setting(tmp_path / "a")
    test_qs = s.questions("test")
    train_entities = {q.meta["entity"] for q in s.questions("train")}
    assert not train_entities & {q.meta["entity"] for q in test_qs}
    hit = s.index().search(test_qs[0].question, 3)
    assert hit and s.page_store().open(test_qs[0].meta["url"]).startswith("URL: https://en.wikipedia.org/wiki/")
