"""Answer-selection baselines on hand-built question groups, against values computed by hand."""

from __future__ import annotations

import pytest

from trace_selector.baselines.heuristics import Oracle, ToolCount, tool_calls
from trace_selector.baselines.registry import ALL_METHODS, build_fast
from trace_selector.baselines.voting import Majority, Single, grounded_vote, stated_confidence_vote
from trace_selector.evaluate import score_pick
from trace_selector.records import Document, QuestionGroup, Step, Trajectory
from trace_selector.records.answers import vote


def traj(sid, answer, n_search=0, conf=None, lps=None, final_lps=None, invalid=0, qid="q"):
    steps = [Step("search", f"query {i}", logprobs=lps if i == 0 else None) for i in range(n_search)]
    steps += [Step("invalid", "") for _ in range(invalid)]
    if lps is not None and not steps:
        steps = [Step("invalid", "", logprobs=lps)]
    return Trajectory(qid, "Q?", sid, answer, steps=steps, confidence=conf, final_logprobs=final_lps)


def group(*trajs, gold=("paris",)):
    return QuestionGroup("q", "Q?", list(gold), list(trajs))


# --- majority vote and its tie rule -------------------------------------------------------------

def test_majority_tie_goes_to_earliest_first_occurrence():
    g = group(traj(0, "Paris"), traj(1, "London"), traj(2, "london"), traj(3, "the paris."), traj(4, ""))
    [p] = Majority().select([g])
    assert (p.sample_id, p.answer) == (0, "Paris")  # 2 vs 2; Paris first seen at sample 0
    g = group(traj(3, "Paris"), traj(0, ""), traj(1, "London"), traj(2, "Paris"), traj(4, "London"))
    [p] = Majority().select([g])
    assert (p.sample_id, p.answer) == (1, "London")  # order of the list does not matter, sample_id does


def test_majority_empty_answers_never_vote():
    g = group(traj(0, ""), traj(1, "  "), traj(2, "..."), traj(3, "Rome"))
    [p] = Majority().select([g])
    assert (p.sample_id, p.answer) == (3, "Rome")
    [p] = Majority().select([group(traj(0, ""), traj(1, "the"))])  # "the" normalises to ""
    assert p.sample_id is None and p.answer == ""
    assert score_pick(group(traj(0, "")), p) == (0.0, 0.0)


def test_vote_weights_and_float_ties():
    trajs = [traj(0, "x"), traj(1, "y"), traj(2, "y")]
    winner, totals = vote(trajs, [0.3, 0.1, 0.2])
    assert winner.sample_id == 0 and totals == {"x": 0.3, "y": pytest.approx(0.3)}  # 0.1+0.2 ties 0.3
    with pytest.raises(ValueError, match="2 weights for 3"):
        vote(trajs, [1.0, 1.0])


# --- single rollout ----------------------------------------------------------------------------

def test_single_is_mean_over_all_k():
    g = group(traj(0, "Paris"), traj(1, "London"), traj(2, ""), traj(3, "Paris, France"), gold=("Paris",))
    [p] = Single().select([g])
    em, f1 = score_pick(g, p)
    assert em == pytest.approx(1 / 4)
    # F1: 1, 0, 0, and "paris france" vs "paris" = 2*(1/2*1)/(1/2+1) = 2/3
    assert f1 == pytest.approx((1 + 2 / 3) / 4)
    [p] = Single().select([group(gold=("x",))])
    assert score_pick(group(gold=("x",)), p) == (0.0, 0.0)


# --- grounded vote --------------------------------------------------------------------------------

def read(sid, answer, passage):
    step = Step("search", "q", documents=[Document(rank=1, title="T", text=passage)])
    return Trajectory("q", "Q?", sid, answer, steps=[step])


def test_grounded_vote_prefers_answers_found_in_their_own_evidence():
    g = group(read(0, "London", "Paris is the capital."), read(1, "London", "Lyon is big."),
              read(2, "Paris", "Paris is the capital."), read(3, "Pari", "Paris is the capital."))
    [p] = grounded_vote().select([g])
    assert (p.sample_id, p.answer) == (2, "Paris")  # the one grounded answer outvotes two ungrounded Londons
    assert p.scores == {0: 1e-3, 1: 1e-3, 2: 1.0, 3: 1e-3}  # "pari" is not a whole word of the passage
    assert Majority().select([g])[0].answer == "London"
    # Nothing grounded: the plain majority decides.
    [p] = grounded_vote().select([group(read(0, "Rome", "x"), read(1, "Oslo", "y"), read(2, "Oslo", "z"))])
    assert p.answer == "Oslo"


# --- weighted by stated confidence --------------------------------------------------------------

def test_weighted_stated_outvotes_majority():
    g = group(traj(0, "Ann", conf=0.9), traj(1, "Bob", conf=0.5), traj(2, "Bob", conf=0.3))
    [p] = stated_confidence_vote().select([g])
    assert p.answer == "Ann" and p.scores == {0: 0.9, 1: 0.5, 2: 0.3}  # 0.9 > 0.8


def test_weighted_stated_imputes_missing_with_question_mean():
    g = group(traj(0, "Ann"), traj(1, "Bob", conf=0.5), traj(2, "Bob", conf=0.3))
    [p] = stated_confidence_vote().select([g])
    assert p.answer == "Bob" and p.scores[0] == pytest.approx(0.4) and p.extra == {"imputed": 1}


def test_weighted_stated_skips_and_falls_back():
    m = stated_confidence_vote()
    assert "no stated confidences" in m.check([group(traj(0, "Ann"), traj(1, "Bob"))])
    with_conf = QuestionGroup("q2", "Q?", ["x"], [traj(0, "x", conf=0.7, qid="q2")])
    without = group(traj(0, "Ann"), traj(1, "Bob"), traj(2, "Bob"), traj(3, "Cy", conf=None))
    assert m.check([with_conf, without]) is None
    p_with, p_without = m.select([with_conf, without])
    assert p_with.fallback is None and p_with.answer == "x"
    assert p_without.answer == "Bob" and "majority" in p_without.fallback
    # An unanswered trajectory's confidence does not rescue a question from the fallback.
    [p] = m.select([group(traj(0, "", conf=1.0), traj(1, "Ann"))])
    assert p.answer == "Ann" and p.fallback is not None


# --- tool-count heuristics and oracle -----------------------------------------------------------

def test_tool_counts_ignore_invalid_steps_and_unanswered():
    assert tool_calls(traj(0, "Ann", n_search=2, invalid=3)) == 2
    g = group(traj(0, "Ann", n_search=3), traj(1, "Cy", n_search=1, invalid=5), traj(2, "Bob", n_search=1),
              traj(3, "", n_search=0), traj(4, "Dee", n_search=4))
    fewest = ToolCount(fewest=True).select([g])[0]
    most = ToolCount(fewest=False).select([g])[0]
    assert (fewest.sample_id, fewest.answer) == (1, "Cy")  # B and C tie at 1 call; C has the smaller sample_id
    assert (most.sample_id, most.answer) == (4, "Dee")
    assert fewest.scores == {0: 3.0, 1: 1.0, 2: 1.0, 4: 4.0}


def test_tool_count_tie_broken_by_vote():
    g = group(traj(0, "X", n_search=2), traj(1, "Y", n_search=2), traj(2, "Y", n_search=2))
    assert ToolCount(fewest=True).select([g])[0].answer == "Y"
    assert ToolCount(fewest=True).select([group(traj(0, ""))])[0].sample_id is None


def test_oracle_and_browsing_correct_flags():
    g = group(traj(0, "London"), traj(1, "Rome"), traj(2, "Paris"), traj(3, "paris"))
    assert Oracle().select([g])[0].sample_id == 2
    a, b = traj(0, "x"), traj(1, "y")
    a.correct, b.correct = False, True
    browsing = QuestionGroup("q", "Q?", [], [a, b])
    p = Oracle().select([browsing])[0]
    assert p.sample_id == 1 and score_pick(browsing, p) == (1.0, 1.0)
    assert score_pick(browsing, Majority().select([browsing])[0]) == (0.0, 0.0)


def test_registry_knows_every_named_method():
    for name in ("single", "majority", "weighted_stated", "weighted_token", "grounded_vote", "fewest_tools", "most_tools",
                 "solagg", "summagg", "aggagent", "judge_gs", "judge_fves", "judge_tks", "trace"):
        assert name in ALL_METHODS
    with pytest.raises(ValueError, match="unknown fast method"):
        build_fast("solagg")
