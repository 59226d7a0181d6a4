"""DeepConf offline voting (`baselines.confidence`) against values worked out by hand from the paper's
definitions: token confidence C = -mean top-20 log-prob, sliding-window group confidence, the four
trajectory scores, the confidence-summing vote and the eta percentile filter."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trace_selector.baselines.confidence import (
    ConfidenceConfig,
    DeepConfVote,
    forced_positions,
    group_confidences,
    keep_top,
    percentile,
    token_confidences,
    token_logprobs,
    token_signal,
    trajectory_confidence,
)
from trace_selector.baselines.registry import build_fast
from trace_selector.baselines.voting import Majority
from trace_selector.records import QuestionGroup, Step, Trajectory
from trace_selector.records.pick import Pick


def lp_traj(sid, answer, lps):
    """A trajectory whose only signal is the sampled-token log-probs of its final turn."""
    return Trajectory("q", "Q?", sid, answer, final_logprobs=list(lps))


def conf_traj(sid, answer, confs):
    """A trajectory with DeepConf confidences on its final turn (log-probs aligned, values irrelevant)."""
    return Trajectory("q", "Q?", sid, answer, final_logprobs=[-0.5] * len(confs), final_token_conf=list(confs))


def group(*trajs):
    return QuestionGroup("q", "Q?", ["ann"], list(trajs))


# --- windows and scores ---------------------------------------------------------------------------

def test_group_confidences_slide_one_token_and_collapse_when_short():
    assert group_confidences([1, 2, 3, 4], 2) == [1.5, 2.5, 3.5]  # n - w + 1 = 3 groups
    assert group_confidences([1, 2, 3, 4], 2048) == [2.5]  # shorter than the window: one group, the mean
    assert group_confidences([], 3) == []


def test_four_scores_by_hand():
    c = [2.0, 2.0, 0.5, 2.0, 1.0, 1.5]
    # windows of 2: (2+2)/2, (2+.5)/2, (.5+2)/2, (2+1)/2, (1+1.5)/2
    assert group_confidences(c, 2) == pytest.approx([2.0, 1.25, 1.25, 1.5, 1.25])
    score = lambda **kw: trajectory_confidence(c, ConfidenceConfig(window=2, tail=2, **kw))  # noqa: E731
    assert score(score="mean") == pytest.approx(9.0 / 6)
    assert score(score="tail") == pytest.approx((1.0 + 1.5) / 2)
    assert score(score="lowest") == pytest.approx(1.25)
    assert score(score="bottom10") == pytest.approx(1.25)  # floor(0.1 * 5) = 0 -> at least 1 group
    assert score(score="bottom10", bottom_fraction=0.8) == pytest.approx((1.25 * 3 + 1.5) / 4)  # floor(4) = 4
    with pytest.raises(ValueError, match="no per-token values"):
        trajectory_confidence([], ConfidenceConfig())


def test_bottom10_floors_the_group_count_like_the_paper():
    # 25 tokens, window 4 -> 22 groups; floor(2.2) = 2 lowest. A dip of 2 among 10s: the 4 windows
    # holding it average (30 + 2) / 4 = 8; a shallower dip of 6 gives (30 + 6) / 4 = 9.
    c = [10.0] * 10 + [2.0] + [10.0] * 14
    c[20] = 6.0
    groups = sorted(group_confidences(c, 4))
    assert len(groups) == 22 and groups[:8] == pytest.approx([8.0] * 4 + [9.0] * 4)
    assert trajectory_confidence(c, ConfidenceConfig(score="bottom10", window=4)) == pytest.approx(8.0)
    # 25% -> floor(5.5) = 5 groups: four 8s and one 9.
    cfg = ConfidenceConfig(score="bottom10", window=4, bottom_fraction=0.25)
    assert trajectory_confidence(c, cfg) == pytest.approx((4 * 8.0 + 9.0) / 5)


def test_paper_window_makes_the_group_scores_the_mean_on_short_traces():
    c = [3.0, 1.0, 2.0, 6.0]
    paper = {s: trajectory_confidence(c, ConfidenceConfig(score=s, window=2048, tail=2048)) for s in ("mean", "tail", "bottom10", "lowest")}
    assert set(paper.values()) == {3.0}
    assert trajectory_confidence(c, ConfidenceConfig(score="lowest", window=2)) == pytest.approx(1.5)


# --- the eta filter -------------------------------------------------------------------------------

def test_percentile_matches_numpy_linear_interpolation():
    for values in ([5.0], [1, 2, 3, 4, 5, 6, 7, 8], [0.3, 2.0, 2.0, 7.5, -1.0], list(range(16))):
        for q in (0, 10, 37.5, 90, 100):
            assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_keep_top_by_hand():
    s = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    # eta 10%: 90th percentile at position 7 * 0.9 = 6.3 -> 7.3, so only the 8 passes.
    assert keep_top(s, 0.1) == [False] * 7 + [True]
    # eta 90%: 10th percentile at 7 * 0.1 = 0.7 -> 1.7, so 2..8 pass (7 of 8).
    assert keep_top(s, 0.9) == [False] + [True] * 7
    # 16 scores, eta 10%: position 15 * 0.9 = 13.5 -> the top two.
    assert sum(keep_top(list(range(16)), 0.1)) == 2
    assert keep_top([2.0, 2.0, 2.0], 0.1) == [True] * 3  # ties at the threshold all pass
    assert keep_top([3.0, 1.0], 1.0) == [True, True]


# --- signals --------------------------------------------------------------------------------------

def test_token_logprobs_concatenate_steps_then_final():
    t = Trajectory("q", "Q?", 0, "Ann", steps=[Step("search", "a", logprobs=[-1.0]), Step("search", "b"),
                                            Step("search", "c", logprobs=[-2.0, -3.0])], final_logprobs=[-4.0])
    assert token_logprobs(t) == [-1.0, -2.0, -3.0, -4.0]
    assert token_signal(t) == ("sampled_logprob", [-1.0, -2.0, -3.0, -4.0])
    assert token_logprobs(Trajectory("q", "Q?", 1, "Ann")) is None and token_signal(Trajectory("q", "Q?", 1, "A")) is None


def test_token_confidences_need_every_turn():
    steps = [Step("search", "a", logprobs=[-1.0, -0.1], token_conf=[4.0, 9.0]), Step("search", "b")]
    t = Trajectory("q", "Q?", 0, "Ann", steps=steps, final_logprobs=[-0.2], final_token_conf=[7.0])
    assert token_confidences(t) == [4.0, 9.0, 7.0]
    assert token_signal(t) == ("token_conf", [4.0, 9.0, 7.0])
    # A turn with sampled tokens but no confidences: the trace would lose a turn, so no confidences.
    t.final_token_conf = None
    assert token_confidences(t) is None and token_signal(t)[0] == "sampled_logprob"


def test_grammar_forced_positions_are_left_out():
    # Under processed log-probs a forced position has log-prob 0 and C = -(0 + 19 x -20) / 20 = 19.
    # A sure free token (log-prob 0, some candidates above the floor) and a two-way tag choice stay.
    lps, conf = [-0.0, -1.2, 0.0, -0.0, -0.3], [19.0, 4.0, 18.2, 19.0004, 17.7]
    assert forced_positions(lps, conf) == [True, False, False, True, False]
    assert forced_positions(None, conf) == [False] * 5
    t = Trajectory("q", "Q?", 0, "Ann", steps=[Step("search", "a", logprobs=lps, token_conf=conf)],
                   final_logprobs=[-0.0, -2.0], final_token_conf=[19.0, 5.0])
    assert token_confidences(t) == [19.0, 4.0, 18.2, 19.0004, 17.7, 19.0, 5.0]
    assert token_confidences(t, exclude_forced=True) == [4.0, 18.2, 17.7, 5.0]
    only_forced = Trajectory("q", "Q?", 1, "Bob", final_logprobs=[0.0], final_token_conf=[19.0])
    assert token_confidences(only_forced, exclude_forced=True) is None


def test_forced_tokens_no_longer_decide_the_vote():
    # Bob's free tokens are less sure than Ann's, but his turns end in three forced closing-tag tokens
    # (C = 19). Counting them (the old signal) makes Bob the surer one; on free tokens Ann wins.
    def traj(sid, answer, free, forced):
        return Trajectory("q", "Q?", sid, answer, final_logprobs=[-0.5] * len(free) + [0.0] * forced,
                          final_token_conf=list(free) + [19.0] * forced)

    g = group(traj(0, "Ann", [8.0, 8.0], 0), traj(1, "Bob", [5.0, 5.0], 3))
    assert DeepConfVote(ConfidenceConfig(score="mean", exclude_forced=False)).select([g])[0].answer == "Bob"
    assert DeepConfVote(ConfidenceConfig(score="mean")).select([g])[0].answer == "Ann"


def test_paper_sizes_are_the_defaults():
    cfg = ConfidenceConfig()
    assert (cfg.window, cfg.tail, cfg.exclude_forced) == (2048, 2048, True)
    # on a trace shorter than 2048 tokens every score is its mean (the whole trajectory is one group)
    c = [3.0, 1.0, 2.0, 6.0]
    assert {trajectory_confidence(c, ConfidenceConfig(score=s)) for s in ("mean", "tail", "bottom10", "lowest")} == {3.0}


# --- the vote ---------------------------------------------------------------------------------------

def test_weighted_vote_sums_confidences():
    # Ann: C = 3.0; Bob: 1.0 + 1.0 = 2.0 -> Ann (majority says Bob).
    g = group(conf_traj(0, "Bob", [1.0]), conf_traj(1, "Ann", [3.0]), conf_traj(2, "Bob", [1.0]))
    [p] = DeepConfVote(ConfidenceConfig(score="mean")).select([g])
    assert p.answer == "Ann" and p.scores == {0: 1.0, 1: 3.0, 2: 1.0}
    assert p.extra["signal"] == "token_conf" and p.extra["voters"] == 3
    assert Majority().select([g])[0].answer == "Bob"


def test_filtering_eta_changes_the_winner():
    # Ann 3.0 vs Bob 2.0 + 2.0 = 4.0: all vote -> Bob. eta 10%: the 90th percentile of [2, 2, 3] is at
    # position 1.8 -> 2.8, so only Ann votes. eta 90%: position 0.2 -> 2.0, everybody votes -> Bob.
    g = group(conf_traj(0, "Bob", [2.0]), conf_traj(1, "Ann", [3.0]), conf_traj(2, "Bob", [2.0]))
    cfg = ConfidenceConfig(score="mean")
    assert build_fast("weighted_token", cfg).select([g])[0].answer == "Bob"
    low = build_fast("deepconf_low", cfg).select([g])[0]
    assert low.answer == "Ann" and low.extra["voters"] == 1
    high = build_fast("deepconf_high", cfg).select([g])[0]
    assert high.answer == "Bob" and high.extra["voters"] == 3


def test_variants_disagree_on_one_dip():
    # Ann: confident except one dip; Bob: uniformly middling. window 2.
    ann = conf_traj(0, "Ann", [9.0] * 9 + [1.0])  # mean 8.2, lowest group (9 + 1) / 2 = 5.0
    bob = conf_traj(1, "Bob", [6.0] * 10)  # mean = lowest = 6.0
    g = group(ann, bob)
    cfg = ConfidenceConfig(window=2)
    assert build_fast("weighted_token_mean", cfg).select([g])[0].answer == "Ann"
    assert build_fast("weighted_token_lowest", cfg).select([g])[0].answer == "Bob"


def test_token_conf_wins_over_the_fallback_and_imputes_missing():
    # One trajectory has confidences, the other only log-probs: the question uses token_conf and the
    # second gets the mean of the known scores (4.0), not its log-prob score on another scale.
    g = group(conf_traj(0, "Ann", [4.0]), lp_traj(1, "Bob", [-0.1]), conf_traj(2, "Bob", [4.0]))
    [p] = DeepConfVote(ConfidenceConfig(score="mean")).select([g])
    assert p.extra == {"signal": "token_conf", "voters": 3, "imputed": 1} and p.scores[1] == 4.0
    assert p.answer == "Bob"  # 8.0 vs 4.0


def test_fallback_to_sampled_logprobs_is_labelled():
    # Ann exp(-0.1) = 0.905 vs Bob 2 exp(-2) = 0.271 -> Ann; each pick says which signal it used.
    g = group(lp_traj(0, "Bob", [-2.0, -2.0]), lp_traj(1, "Ann", [-0.1, -0.1]), lp_traj(2, "Bob", [-2.0]))
    m = DeepConfVote(ConfidenceConfig(score="mean"))
    [p] = m.select([g])
    assert p.answer == "Ann" and p.scores[1] == pytest.approx(-0.1) and p.extra["signal"] == "sampled_logprob"
    assert m.describe()["window"] == 2048 and m.describe()["exclude_forced"] is True


def test_skip_and_majority_fallback():
    m = DeepConfVote()
    assert "no token log-probabilities" in m.check([group(Trajectory("q", "Q?", 0, "Ann"))])
    [p] = m.select([group(Trajectory("q", "Q?", 0, "Ann"), lp_traj(1, "", [-0.1]))])
    assert isinstance(p, Pick) and p.answer == "Ann" and "majority" in p.fallback


def test_confidence_config_validation():
    with pytest.raises(ValueError, match="score must be one of"):
        ConfidenceConfig(score="median")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="window and tail"):
        ConfidenceConfig(window=0)
    with pytest.raises(ValueError, match="bottom_fraction"):
        ConfidenceConfig(bottom_fraction=0.0)
    with pytest.raises(ValueError, match="keep_top"):
        ConfidenceConfig(keep_top=1.5)
    assert math.isclose(ConfidenceConfig().bottom_fraction, 0.1)


def test_token_conf_survives_the_pool_codec(tmp_path):
    # Written by the records codec (3-decimal floats) and read back: the vote still uses token_conf.
    from trace_selector.records import Pool, read_pool, write_pool

    steps = [Step("search", "q", logprobs=[-0.1, -0.2], token_conf=[5.0004, 6.0])]
    trajs = [Trajectory("q", "Q?", 0, "Ann", steps=steps, final_logprobs=[-0.3], final_token_conf=[7.0]),
             conf_traj(1, "Bob", [2.0, 2.0]), conf_traj(2, "Bob", [2.0, 2.0])]
    path = tmp_path / "pool.jsonl"
    write_pool(Pool([QuestionGroup("q", "Q?", [], trajs)]), path)
    [g] = read_pool(path).groups
    assert token_confidences(g.trajectories[0]) == [5.0, 6.0, 7.0]
    [p] = DeepConfVote(ConfidenceConfig(score="mean")).select([g])
    assert p.extra["signal"] == "token_conf" and p.scores[0] == pytest.approx(6.0)
    assert p.answer == "Ann"  # 6.0 > 2.0 + 2.0
