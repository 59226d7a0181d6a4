"""wikihops generation on a small hand-written article list (the facts it reads, the two-retrieval
rule, leakage, determinism), the multi-hop prompt's example, and (slow) the full prepare twice."""

from __future__ import annotations

import json

import pytest

from trace_selector.search import wikihops as wh
from trace_selector.search import wikileads as wl
from trace_selector.search.bm25 import BM25Index

DICKENS = wl.Article(
    "Charles Dickens",
    "Charles John Huffam Dickens was an English novelist and social critic who created some of the world's best "
    "known fictional characters. He is regarded by many as the greatest novelist of the Victorian era. "
    "He grew up in poverty and worked in a blacking factory as a boy while his father was in prison. "
    "He edited a weekly journal for twenty years and wrote fifteen novels and five novellas. "
    "He toured the United States twice and gave public readings until the end of his life.",
    "English novelist (1812–1870)", "People")
HUGO = wl.Article(
    "Victor Hugo",
    "Victor-Marie Hugo was a French Romantic writer and politician. During a literary career that spanned more "
    "than sixty years, he wrote in a variety of genres. He spent nearly twenty years in exile on the island of "
    "Guernsey after opposing the coup of Napoleon III. He was buried in the Pantheon after a state funeral "
    "attended by two million mourners.",
    "French writer (1802–1885)", "People")
CAROL = wl.Article(
    "A Christmas Carol",
    "A Christmas Carol is a novella by Charles Dickens first published in London. It recounts the story of "
    "Ebenezer Scrooge, an elderly miser who is visited by the ghost of his former business partner. "
    "It was written in six weeks in the autumn before its publication. It sold out its first printing "
    "of six thousand copies by Christmas Eve.",
    "1843 novella by Charles Dickens", "Arts")
KENYA = wl.Article(
    "Kenya",
    "Kenya is a country in East Africa on the Indian Ocean coast. It borders Ethiopia, Somalia, Tanzania, "
    "Uganda and South Sudan. Its highlands are among the most fertile farming regions of the continent.",
    "Country in East Africa", "Geography")
NAIROBI = wl.Article(
    "Nairobi",
    "Nairobi is the largest city of its country, with about four million people. The city began as a rail depot "
    "on the Uganda Railway. It hosts the headquarters of several international organisations.",
    "Capital and largest city of Kenya", "Geography")
MOMBASA = wl.Article(
    "Mombasa",
    "Mombasa is a coastal city on an island in the Indian Ocean. It was a centre of the spice trade for "
    "centuries. Its old town is known for narrow streets and carved wooden doors.",
    "City in Kenya", "Geography")
STORY = wl.Article(
    "Serial fiction",
    "Serial fiction is a story published in parts over weeks or months. Many of the novels by Charles Dickens "
    "first appeared in monthly parts sold for one shilling each. The form shaped how readers followed long plots.",
    "Publishing format", "Arts")
ARTICLES = sorted([DICKENS, HUGO, CAROL, KENYA, NAIROBI, MOMBASA, STORY], key=lambda a: a.title)


def corpus(arts=ARTICLES):
    passages, _, owned = wl.build_corpus(arts)
    return passages, owned, BM25Index.build(passages)


def test_facts_read_off_descriptions():
    assert wh.life_span(DICKENS) == ("1812", "1870")
    assert wh.life_span(CAROL) == (None, None)
    rel = wh.creator_of(CAROL, {"Charles Dickens", "Victor Hugo"})
    assert (rel.role, rel.target, rel.kind) == ("author", "Charles Dickens", "novella")
    assert wh.creator_of(CAROL, {"Victor Hugo"}) is None  # the creator has no article
    assert wh.capitals(ARTICLES) == {"Kenya": "Nairobi"}
    loc = wh.location_of(MOMBASA, {"Kenya": "Nairobi"})
    assert (loc.role, loc.target) == ("located", "Kenya")
    assert wh.location_of(NAIROBI, {"Kenya": "Nairobi"}) is None  # the capital itself
    assert wh.place_aliases("San José, Costa Rica") == ["San José, Costa Rica", "San José"]


def test_candidates_have_two_hops_and_never_state_the_answer():
    _, owned, _ = corpus()
    main, pairs = wh.candidates(ARTICLES, owned)
    templates = {c.template for c in main + pairs}
    assert {"born_year", "died_year", "creator", "creator_born", "capital_of_location", "mention_born",
            "born_first"} <= templates
    for c in main:
        assert len(c.hops) == 2 and c.chance == 0.0
        assert not wl.contains_answer(c.question, c.answers), c.question
    born = next(c for c in main if c.template == "creator_born")
    assert born.question == "In what year was the author of A Christmas Carol born?" and born.answers == ["1812"]
    assert [h.title for h in born.hops] == ["A Christmas Carol", "Charles Dickens"]
    assert born.hops[1].passage == owned["Charles Dickens"][0]  # the life span sits in the first passage
    bridge = next(c for c in main if c.template == "born_year" and c.entities == ["Charles Dickens"])
    # The clue comes from a later passage than the one holding the year.
    assert bridge.hops[0].passage != bridge.hops[1].passage == owned["Charles Dickens"][0]
    mentions = [c for c in main if c.template == "mention_born"]
    assert {c.entities[0] for c in mentions} == {"A Christmas Carol", "Serial fiction"}
    mention = next(c for c in mentions if c.entities[0] == "Serial fiction")
    assert '"Many of the novels by ___ first appeared' in mention.question and mention.answers == ["1812"]
    cmp = next(c for c in pairs if c.template == "born_first")
    assert cmp.chance == 0.5 and cmp.answers[0] == "Victor Hugo" and sorted(cmp.years) == ["1802", "1812"]


def test_kept_questions_pass_the_two_retrieval_rule():
    passages, owned, index = corpus()
    rows, report = wh.generate(ARTICLES, passages, owned, index)
    assert rows
    by_id = {p.id: p for p in passages}
    for row in rows:
        hits = index.search(row["question"], wh.TOP_K)
        if row["type"] == "comparison":
            continue
        assert not any(wh.passage_has(by_id[h.doc_id], row["golden_answers"]) for h in hits), row["question"]
        for hop in row["hops"]:
            assert hop["passage"] in {h.doc_id for h in index.search(hop["question"], wh.TOP_K)}
    assert set(report["candidates"]) == set(wh.TYPES)
    assert sum(r["type"] == "comparison" for r in rows) <= wh.MAX_COMPARISON_SHARE * len(rows)


def test_a_question_one_search_answers_is_dropped():
    # The year sits in the clue passage too, so searching the whole question finds it at once.
    leaky = wl.Article(DICKENS.title, DICKENS.lead.replace("He edited a weekly journal",
                                                           "He, born in 1812, edited a weekly journal"),
                       DICKENS.description, DICKENS.topic)
    arts = sorted([leaky, HUGO, CAROL], key=lambda a: a.title)
    passages, owned, index = corpus(arts)
    main, _ = wh.candidates(arts, owned)
    checks = wh.check(main, index)
    one = [c.template for c, r in zip(main, checks) if r.one_search]
    assert "born_year" in one or "creator_born" in one
    rows, report = wh.generate(arts, passages, owned, index)
    assert report["dropped"]["bridge"].get("dropped_one_search_finds_answer", 0) + \
        report["dropped"]["compositional"].get("dropped_one_search_finds_answer", 0) >= 1
    assert not any(r["golden_answers"] == ["1812"] and r["template"] == "born_year" and
                   "weekly journal" in r["question"] for r in rows)


def test_split_assigner_never_shares_an_article_between_splits():
    s = wh.SplitAssigner()
    first = s.assign("q1", ["A", "B"])
    assert s.assign("q2", ["B", "C"]) == first  # follows the article already placed
    other = next(q for q in (f"x{i}" for i in range(200)) if wh.SplitAssigner().assign(q, ["D"]) != first)
    assert s.assign(other, ["D"]) != first
    assert s.assign("q3", ["A", "D"]) is None  # its articles sit in two splits
    rows = [{"split": "train", "entities": ["A", "B"]}, {"split": "test", "entities": ["B"]}]
    assert wh.leakage(rows)["train&test"] == 1


def test_generation_is_deterministic_and_leak_free():
    passages, owned, index = corpus()
    a = wh.generate(ARTICLES, passages, owned, index)
    b = wh.generate(ARTICLES, passages, owned, index)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert set(wh.leakage(a[0]).values()) == {0}


def test_multihop_prompt_example_is_about_no_real_article():
    """The worked example of the multi-hop prompt uses invented names, so it answers no question of any
    split: none of its names is a title or occurs in a lead of the source."""
    from trace_selector.rollout import prompts

    arts = wl.load_articles(wl.source_path())
    text = " ".join(a.title + " " + a.lead for a in arts).lower()
    for name in ("Orvanne", "Mireille Sauvat", "Sauvat"):
        assert name in prompts.WEBQA_HOPS_SYSTEM
        assert name.lower() not in text


@pytest.mark.slow
def test_full_prepare_is_byte_identical_and_idempotent(tmp_path):
    from trace_selector.search.setting import load_setting, prepare

    first = prepare("wikihops", out=tmp_path / "a")
    second = prepare("wikihops", out=tmp_path / "b", force=True)
    ma = json.loads((tmp_path / "a" / "manifest.json").read_text())
    mb = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert ma["files"] == mb["files"]
    assert first.replace("/a", "/b") == second
    assert prepare("wikihops", out=tmp_path / "a").endswith("--force rebuilds")
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    counts = report["questions"]
    assert counts["all"]["total"] >= 3000 and counts["all"]["train"] == max(counts["all"][s] for s in wl.SPLITS)
    assert all(counts[t]["total"] > 0 for t in wh.TYPES) and report["comparison_share"] <= wh.MAX_COMPARISON_SHARE
    assert set(report["leakage_shared_articles"].values()) == {0}
    assert report["independent_bm25_answer_at_3"]["dev+test"] <= 0.15
    s = load_setting(tmp_path / "a")
    train = {t for q in s.questions("train") for t in q.meta["entities"]}
    assert not train & {t for q in s.questions("test") for t in q.meta["entities"]}
