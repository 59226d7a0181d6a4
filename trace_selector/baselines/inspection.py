"""AggAgent's trajectory-inspection tools (Lee et al. 2025, AggAgent; the reference implementation's
``aggagent/tools.py`` fixes the limits used here), over our records.

A trajectory is seen as a numbered list of messages, as the agent that produced it saw its
conversation: for every tool call an ``assistant`` message (its reasoning and the call) and a ``tool``
message (what the tool returned), then the final ``assistant`` message with the answer. Steps are
numbered from 1 over that list.

- `get_solution`: the content of a trajectory's last message (all trajectories when no id is given);
- `search_trajectory`: the steps of one trajectory ranked by ROUGE-L *recall* of the query against the
  step's text (the share of the query's tokens found, in order), score > 0 only, at most `k` <= 10
  hits (5 by default), each hit's text cut to 150 words;
- `get_segment`: steps start..end of one trajectory, at most 5 (a longer range is cut to start+4),
  each message cut to 600 words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trace_selector.records import Trajectory

SEARCH_WORDS = 150
"""Words kept of each search hit."""
SEGMENT_WORDS = 600
"""Words kept of each message of a segment."""
SEGMENT_STEPS = 5
"""Most steps one get_segment call returns."""
SEARCH_MAX_K = 10
"""Most hits one search_trajectory call returns."""
SEARCH_DEFAULT_K = 5
"""Hits returned when the call does not say."""

_TOKEN = re.compile(r"[a-z0-9]+")


@dataclass(slots=True)
class Message:
    """One step of a trajectory as the inspection tools number it."""

    role: str
    """"assistant" (reasoning and tool call, or the final answer) or "tool" (an observation)."""
    content: str


def messages_of(traj: Trajectory) -> list[Message]:
    """The trajectory as assistant / tool messages (see the module docstring)."""
    out: list[Message] = []
    for step in traj.steps:
        call = f"[{step.action}] {step.content}".strip()
        thought = (step.raw_text or "").strip()
        out.append(Message("assistant", f"{thought}\n{call}" if thought and call not in thought else thought or call))
        out.append(Message("tool", step.search_result.strip() or "(empty result)"))
    final = (traj.final_text or "").strip()
    out.append(Message("assistant", final or f"Final answer: {traj.answer or '(none)'}"))
    return out


def truncate_words(text: str, max_words: int) -> str:
    """`text` up to its `max_words`-th word, marked when cut."""
    words = list(re.finditer(r"\S+", text))
    if len(words) <= max_words:
        return text
    return text[: words[max_words - 1].end()] + "\n[... truncated]"


def tokens(text: str) -> list[str]:
    """ROUGE tokens: lower-cased alphanumeric runs (rouge_score's default tokenizer, no stemming)."""
    return _TOKEN.findall(text.lower())


def rouge_l_recall(query: str, text: str) -> float:
    """Length of the longest common token subsequence of query and text, over the query's length."""
    q, t = tokens(query), tokens(text)
    if not q or not t:
        return 0.0
    # One row of the LCS table per text token; the query is short, so O(len(text) * len(query)).
    row = [0] * (len(q) + 1)
    for tok in t:
        prev_diag = 0
        for j, qt in enumerate(q, 1):
            keep = row[j]
            row[j] = prev_diag + 1 if tok == qt else max(row[j], row[j - 1])
            prev_diag = keep
    return row[-1] / len(q)


def get_solution(trajs: list[Trajectory], trajectory_id: int | None = None) -> str:
    """Last message of one trajectory (1-based id) or of all of them."""
    ids = range(1, len(trajs) + 1) if trajectory_id is None else [trajectory_id]
    if trajectory_id is not None and not 1 <= trajectory_id <= len(trajs):
        return f"[get_solution] trajectory_id must be 1-{len(trajs)}"
    return "\n\n".join(f"[trajectory {i}]\n{messages_of(trajs[i - 1])[-1].content}" for i in ids)


def search_trajectory(trajs: list[Trajectory], trajectory_id: int, query: str, role: str | None = None,
                      k: int = SEARCH_DEFAULT_K) -> str:
    """Steps of one trajectory ranked by ROUGE-L recall of `query` (ties: earlier step first)."""
    if not 1 <= trajectory_id <= len(trajs):
        return f"[search_trajectory] trajectory_id must be 1-{len(trajs)}"
    k = max(1, min(k, SEARCH_MAX_K))
    scored = []
    for step, m in enumerate(messages_of(trajs[trajectory_id - 1]), 1):
        if role is not None and m.role != role:
            continue
        score = rouge_l_recall(query, m.content)
        if score > 0:
            scored.append((-score, step, m))
    if not scored:
        where = f" (role={role})" if role else ""
        return f"[search_trajectory] no match for '{query}'{where} in trajectory {trajectory_id}"
    hits = [f"step {step} ({m.role}, score {-neg:.3f}): {truncate_words(m.content, SEARCH_WORDS)}"
            for neg, step, m in sorted(scored, key=lambda s: (s[0], s[1]))[:k]]
    return "\n\n".join(hits)


def get_segment(trajs: list[Trajectory], trajectory_id: int, start: int, end: int) -> str:
    """Steps start..end (clamped to the trajectory, at most `SEGMENT_STEPS`) of one trajectory."""
    if not 1 <= trajectory_id <= len(trajs):
        return f"[get_segment] trajectory_id must be 1-{len(trajs)}"
    msgs = messages_of(trajs[trajectory_id - 1])
    n = len(msgs)
    start, end = max(1, min(start, n)), max(1, min(end, n))
    start = min(start, end)
    end = min(end, start + SEGMENT_STEPS - 1)
    return "\n\n".join(f"step {i} ({msgs[i - 1].role}): {truncate_words(msgs[i - 1].content, SEGMENT_WORDS)}"
                       for i in range(start, end + 1))


def metadata(trajs: list[Trajectory]) -> str:
    """One line per trajectory: steps, approximate tokens (4 characters each, as the reference) and tool counts."""
    lines = []
    for i, t in enumerate(trajs, 1):
        msgs = messages_of(t)
        approx = sum(len(m.content) for m in msgs) // 4
        counts: dict[str, int] = {}
        for s in t.steps:
            counts[s.action] = counts.get(s.action, 0) + 1
        used = ", ".join(f"{a}x{c}" for a, c in sorted(counts.items())) or "none"
        lines.append(f"Trajectory {i}: {len(msgs)} steps, ~{approx} tokens | tools: {used}")
    return "\n".join(lines)
