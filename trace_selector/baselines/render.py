"""Plain-text views of trajectories for the LLM aggregators: whole transcripts, step ranges and short
solutions (AggAgent's own tools are in `baselines.inspection`).

Observations are clipped per document (`doc_chars`) because a single search returns several
hundred tokens and a 135M-2K-context aggregator would otherwise see one step of one trajectory.
"""

from __future__ import annotations

import re

from trace_selector.records import Step, Trajectory


def _clip_chars(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: max(0, n - 3)].rstrip() + "..."


def _observation_lines(step: Step, doc_chars: int) -> list[str]:
    if step.documents:
        return [f"    Doc {d.rank} (Title: {d.title}) {_clip_chars(d.text, doc_chars)}" for d in step.documents]
    lines = [ln for ln in step.search_result.splitlines() if ln.strip()]
    return [f"    {_clip_chars(ln, doc_chars + 40)}" for ln in lines]


def render_step(i: int, step: Step, doc_chars: int = 240, thought_chars: int = 240) -> str:
    """One numbered step: the model's reasoning (if recorded), the tool call, the clipped observation."""
    lines = []
    if step.raw_text:
        thought = re.sub(r"<(search|answer)>.*?</\1>", "", step.raw_text, flags=re.S)
        thought = _clip_chars(thought, thought_chars)
        if thought:
            lines.append(f"  Thought: {thought}")
    lines.append(f"Step {i} [{step.action}] {_clip_chars(step.content, 200)}")
    lines.extend(_observation_lines(step, doc_chars))
    return "\n".join(lines)


def render_steps(traj: Trajectory, start: int = 1, end: int | None = None, doc_chars: int = 240) -> str:
    """Steps `start`..`end` (1-based, inclusive; clipped to the trajectory)."""
    n = len(traj.steps)
    asked = n if end is None else end
    start, end = max(1, start), min(asked, n)
    if start > end:
        return f"(no steps {start}-{asked}; this trajectory has {n} step{'s' if n != 1 else ''})"
    return "\n".join(render_step(i, traj.steps[i - 1], doc_chars) for i in range(start, end + 1))


def render_final(traj: Trajectory, final_chars: int = 600) -> str:
    """The final turn (reasoning that led to the answer, when recorded) and the final answer."""
    parts = []
    if traj.final_text:
        parts.append(f"Final turn: {_clip_chars(traj.final_text, final_chars)}")
    parts.append(f"Final answer: {traj.answer or '(none)'}")
    return "\n".join(parts)


def render_transcript(traj: Trajectory, doc_chars: int = 240) -> str:
    """The whole trajectory: every step with clipped observations, then the final turn and answer."""
    body = render_steps(traj, 1, None, doc_chars) if traj.steps else "(no tool calls)"
    return f"{body}\n{render_final(traj)}"


def short_solution(traj: Trajectory, chars: int = 400) -> str:
    """A few lines of how the trajectory got its answer: its final turn, else its queries."""
    if traj.final_text:
        return _clip_chars(traj.final_text, chars)
    queries = [s.content for s in traj.steps if s.action != "invalid"]
    if not queries:
        return "(answered without searching)"
    return _clip_chars("Searched: " + " | ".join(queries), chars)
