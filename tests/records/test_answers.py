"""Answer normalisation, EM, token F1 and pass@k on the cases that trip evaluation scripts up.

What normalisation does (SQuAD/HotpotQA, extended to unicode): NFKC, lowercase, delete punctuation
and symbols (ASCII and unicode P*/S* categories, without inserting a space), drop the articles
a/an/the, collapse whitespace. It does NOT fold accents, reorder words, or understand numbers beyond
deleting their separators ("1,000" == "1000", but also "1.5" == "15").
"""

from __future__ import annotations

import math

import pytest

from trace_selector.records.answers import any_correct, exact_match, f1_score, normalize_answer, pass_at_k


@pytest.mark.parametrize(
    "text, normalized",
    [
        ("The Beatles", "beatles"),
        ("  An   apple a day ", "apple day"),
        ("U.S.A.", "usa"),
        ("New York-based", "new yorkbased"),  # hyphen deleted, not turned into a space (as in SQuAD)
        ("1,000", "1000"),
        ("1.5", "15"),  # decimal points go too: a known SQuAD quirk
        ("Rock ’n’ roll", "rock n roll"),  # curly quotes are punctuation
        ("“Hello” — world", "hello world"),  # em dash removed, spaces collapse
        ("€100", "100"),  # currency symbols go like "$"
        ("ＡＢＣ １２３", "abc 123"),  # NFKC folds full-width forms
        ("the\u00a0Beatles", "beatles"),  # no-break space is whitespace after NFKC
        ("Café", "café"),  # accents are kept
        ("Theatre", "theatre"),  # "the" only as a whole word
        ("...!?", ""),
        ("the a an", ""),
        ("", ""),
    ],
)
def test_normalize_answer(text, normalized):
    assert normalize_answer(text) == normalized


def test_normalize_is_idempotent():
    for text in ["The “Rock ’n’ roll” hall", "1,000 km", "A Café in Paris!"]:
        once = normalize_answer(text)
        assert normalize_answer(once) == once


def test_exact_match_aliases_and_formatting():
    golds = ["Chinua Achebe", "Albert Chinualumogu Achebe"]
    assert exact_match("chinua achebe.", golds) == 1.0
    assert exact_match("Albert Chinualumogu Achebe", golds) == 1.0
    assert exact_match("Achebe", golds) == 0.0
    assert exact_match("1000", ["1,000"]) == 1.0
    assert exact_match("Rock 'n' roll", "Rock ’n’ roll") == 1.0  # a bare string is one alias
    assert exact_match("Cafe", ["Café"]) == 0.0  # accents matter
    assert exact_match("Paris", []) == 0.0  # no gold, nothing matches


@pytest.mark.parametrize("prediction", ["", "   ", "...", "the", "A an THE!"])
def test_empty_prediction_is_never_correct(prediction):
    # also not against a gold that normalises to nothing (the band "The The")
    assert exact_match(prediction, ["The The", "..."]) == 0.0
    assert f1_score(prediction, ["The The", "..."]) == 0.0


def test_f1_known_values():
    # pred {cat, sat}, gold {cat, sat, on, mat}: P = 1, R = 1/2, F1 = 2/3
    assert f1_score("The cat sat", "the cat sat on the mat") == pytest.approx(2 / 3)
    # best alias wins
    assert f1_score("Achebe", ["Wole Soyinka", "Chinua Achebe"]) == pytest.approx(2 / 3)
    # repeated tokens count with multiplicity: pred {a:2}, gold {a:1} -> P = 1/2, R = 1 (a is an article, so use x)
    assert f1_score("x x", "x") == pytest.approx(2 / 3)
    assert f1_score("November 9, 1989", "1989") == pytest.approx(0.5)
    assert f1_score("Bucharest", "Kyiv") == 0.0


def test_f1_has_no_yes_no_special_case():
    # SQuAD 2 / HotpotQA give 0 whenever yes/no/noanswer differs; here it is plain token overlap
    assert f1_score("yes", "yes") == 1.0
    assert f1_score("yes", "no") == 0.0
    assert f1_score("yes it is", "yes") == pytest.approx(0.5)


@pytest.mark.parametrize(
    "n, c, k, expected",
    [
        (5, 2, 2, 1 - math.comb(3, 2) / math.comb(5, 2)),  # 0.7
        (10, 0, 3, 0.0),
        (4, 4, 1, 1.0),
        (3, 1, 3, 1.0),  # n - c < k: every draw of 3 contains the correct one
        (8, 3, 1, 3 / 8),  # pass@1 is the fraction correct
        (100, 1, 50, 0.5),
    ],
)
def test_pass_at_k_known_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_matches_combinatorial_definition():
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k))


@pytest.mark.parametrize("n, c, k", [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6), (0, 0, 1)])
def test_pass_at_k_rejects_bad_arguments(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_any_correct():
    assert any_correct(["Kyiv", "", "bucharest"], ["Bucharest"]) == 1.0
    assert any_correct(["Kyiv", ""], ["Bucharest"]) == 0.0
    assert any_correct([], ["Bucharest"]) == 0.0


def test_normalize_matches_per_character_reference():
    # The translate table must delete exactly what the per-character rule deletes, over every code
    # point class that occurs in pool text (ASCII, Latin-1, quotes, dashes, symbols, CJK, emoji).
    import unicodedata

    from trace_selector.records.answers import _ARTICLES, _is_punct

    def reference(text: str) -> str:
        text = unicodedata.normalize("NFKC", text).lower()
        text = "".join(ch for ch in text if not _is_punct(ch))
        return " ".join(_ARTICLES.sub(" ", text).split())

    sample = "".join(chr(c) for c in [*range(0x20, 0x250), *range(0x2000, 0x2070), *range(0x20A0, 0x20C0),
                                      *range(0x3000, 0x3040), 0x1F600, 0xFF01, 0xFF21])
    for text in [sample, sample[::-1], "The “Rock ’n’ roll” — hall of fame, 1,000 €"]:
        assert normalize_answer(text) == reference(text)


def test_restates_question_needs_every_answer_word_in_the_question():
    from trace_selector.records.answers import restates_question

    q = "Which branch of continuum mechanics studies mechanical waves?"
    assert restates_question("Continuum Mechanics", q) and restates_question("the mechanical waves!", q)
    assert not restates_question("Acoustics", q) and not restates_question("continuum acoustics", q)
    assert not restates_question("", q) and not restates_question("the", q)  # nothing left after normalising


def test_evidence_words_split_at_separating_dashes_but_not_hyphens():
    from trace_selector.records.evidence import evidence_words, is_grounded, mentions
    from trace_selector.records.trajectory import Document, Step, Trajectory

    doc = Document(rank=1, title="Martin Luther", text="German priest (1483\u20131546), friend of Jean-Paul \u2014 a reformer.")
    traj = Trajectory(question_id="q", question="?", sample_id=0, answer="1483",
                      steps=[Step(action="search", content="luther", documents=[doc])])
    words = evidence_words(traj)
    assert mentions(words, "1483") and mentions(words, "1546") and is_grounded(traj)
    assert mentions(words, "jeanpaul") and not mentions(words, "paul")  # the ASCII hyphen still joins
    assert mentions(words, "reformer") and not mentions(words, "14831546")


def test_first_and_last_read_words_skip_steps_that_returned_nothing():
    from trace_selector.records.evidence import first_read_words, last_read_words, mentions
    from trace_selector.records.trajectory import Document, Step, Trajectory

    hop = lambda text: Step(action="search", content="q", documents=[Document(rank=1, title="T", text=text)])  # noqa: E731
    empty = Step(action="search", content="q", documents=[])
    traj = Trajectory(question_id="q", question="?", sample_id=0, answer="b",
                      steps=[empty, hop("alpha"), hop("beta"), hop("gamma"), empty])
    assert mentions(first_read_words(traj), "alpha") and not mentions(first_read_words(traj), "beta")
    assert mentions(last_read_words(traj), "gamma") and not mentions(last_read_words(traj), "alpha")
    none = Trajectory(question_id="q", question="?", sample_id=0, answer="b", steps=[empty])
    assert first_read_words(none) == last_read_words(none) == "  "
