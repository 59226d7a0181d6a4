"""Browsing-style graph of one question, after TRACE's long-horizon graph (DESIGN §Graph).

Nodes (schema `BROWSING`, layout version `BROWSING_VERSION`):
- ``query``: the question (traj -1); it is in no relation, the model reads its state for the score;
- ``subquery``: one per search step that returned at least one result, plus at most one *orphan* per
  trajectory: the opens and finds made before the trajectory's first search (a chain with no search
  ancestor) hang off a subquery node with no text (x = zeros, ``orphan`` True; the model adds a
  learned state). A trajectory that answered without any successful search, open or find is kept
  as a candidate with an orphan alone, as TRACE draws it, so it still counts in c and R;
- ``evidence``: one per successful open or find, embedded from the observation text (never merged);
- ``document``: one per page (canonical URL) that some evidence came from, shared by all
  trajectories (traj -1) so that evidence -of-> document -has-> evidence is the cross-trajectory
  path; x is zeros and the model gives it a learned state. Without cross edges every trajectory
  gets its own copy (traj = that trajectory);
- ``answer``: one per retained trajectory, as in the WebQA graph.

Relations: subquery -next-> the trajectory's following subquery and -previous-> its preceding one
(the orphan, when there is one, comes first); subquery -opens-> evidence for an open and -finds->
evidence for a find, with the reverses opened_by / found_by; evidence -of-> document and
document -has-> evidence. An evidence's subquery is its search ancestor: for an open, the latest
earlier search of the trajectory that listed the page, else its latest search; for a find, the
subquery of the open that brought up the page it searched, else the same rule; with no earlier
search at all, the trajectory's orphan.

Which steps count: a search counts when it returned results (structured or not); an open or find
succeeds when it has an observation that is not a tool error ("Page not found", "No lines
matching", ...).

Document identity (`page_url`): the ``URL:`` header of the page the tool returned, else the URL or
corpus id the record gives for it, else the URL the open asked for. A link index (harmony's
``open{"id": 0}``) is never an identity: "0" is a different page in every trajectory, so such an
open without a header has no document node. A find reads the page opened last in its trajectory
unless its reply or record names one.
"""

from __future__ import annotations

import re
import unicodedata

from trace_selector.graph.plan import (
    DropReport,
    GraphOptions,
    GraphPlan,
    add_candidates,
    check_kept,
    drop_reason,
)
from trace_selector.graph.schema import BROWSING
from trace_selector.records import QuestionGroup, Step, Trajectory
from trace_selector.search.urls import canonical_url

# Observations of failed tool calls, as written by search/pages.py and rollout/browser_agent.py and
# by common browsing harnesses ("Error: ...", "Invalid ...").
_FAILED = re.compile(
    r"^\s*(page not found|no lines? (matching|of)|empty pattern|no page is open|no results|not found|"
    r"error|invalid|could not|failed)",
    re.IGNORECASE,
)
_URL_HEADER = re.compile(r"^\s*URL:\s*(\S+)", re.IGNORECASE | re.MULTILINE)


def observation(step: Step) -> str:
    """What the tool returned: the recorded observation, else the structured documents' text."""
    if step.search_result.strip():
        return step.search_result
    return "\n".join(d.text for d in step.documents)


def is_evidence(step: Step) -> bool:
    """An open or find that returned page content."""
    if step.action not in ("open", "find"):
        return False
    text = observation(step)
    return bool(text.strip()) and not _FAILED.match(text)


def is_search(step: Step) -> bool:
    """A search that returned results; a reply the reader could not split into hits still counts."""
    if step.action != "search":
        return False
    text = step.search_result
    return bool(step.documents) or (bool(text.strip()) and not _FAILED.match(text))


def is_link_index(target: str | None) -> bool:
    """True for a link number on the page shown last ("0", "12"), which names no page by itself."""
    return target is not None and target.strip().lstrip("-").isdigit()


def page_url(step: Step, current: str | None) -> str | None:
    """Canonical URL of the page an evidence step read (rules in the module docstring), or None."""
    m = _URL_HEADER.search(observation(step)[:500])
    if m:  # the page names itself; what the call asked for may be a link index or a redirect
        return canonical_url(m.group(1))
    for doc in step.documents:  # the reader records no document for a link index (records docstring)
        if doc.url or doc.doc_id:
            return canonical_url(doc.url or doc.doc_id)
    if step.action == "open" and step.content.strip():
        return None if is_link_index(step.content) else canonical_url(step.content)
    return current


def keep(group: QuestionGroup, report: DropReport) -> list[Trajectory]:
    """Trajectories with an answer; those without any successful search, open or find are kept too
    (they hang off an orphan subquery), so browsing graphs drop only for no_answer."""
    kept = []
    for traj in group.trajectories:
        reason = drop_reason(traj, True)
        if reason is None:
            kept.append(traj)
        else:
            report.dropped[reason] = report.dropped.get(reason, 0) + 1
    return kept


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def plan_browsing(group: QuestionGroup, options: GraphOptions, report: DropReport | None = None) -> GraphPlan:
    """Plan the browsing graph of `group`; raises `InputError` if no trajectory is retained."""
    kept = keep(group, report if report is not None else DropReport())
    check_kept(group, kept)
    plan = GraphPlan(BROWSING, group.question_id, options.max_text_chars)
    plan.add_node("query", group.question, -1)
    documents: dict[object, int] = {}
    merged: dict[object, int] = {}
    for t, traj in enumerate(kept):
        chain: list[int] = []  # the trajectory's subqueries in time order (orphan first)
        listed: dict[str, int] = {}  # page -> subquery of the latest search listing it
        opened: dict[str, int] = {}  # page -> subquery its latest open hangs off
        orphan: int | None = None
        current: str | None = None
        for step in traj.steps:
            if is_search(step):
                s = plan.add_node("subquery", step.content, t)
                _link_in_time(plan, chain, s)
                for doc in step.documents:
                    if doc.url or doc.doc_id:
                        listed[canonical_url(doc.url or doc.doc_id)] = s
                continue
            if not is_evidence(step):
                continue
            url = page_url(step, current)
            parent = None
            if step.action == "find" and url is not None:
                parent = opened.get(url)
            if parent is None and url is not None:
                parent = listed.get(url)
            if parent is None:
                searches = [s for s in chain if s != orphan]
                parent = searches[-1] if searches else None
            if parent is None:  # an open/find chain with no search ancestor
                if orphan is None:
                    orphan = plan.add_node("subquery", None, t)
                    chain.insert(0, orphan)  # before any search: nothing to link yet
                parent = orphan
            if step.action == "open":
                current = url
                if url is not None:
                    opened[url] = parent
            e, new = _evidence_node(plan, step, t, url, options, merged)
            rel = ("opens", "opened_by") if step.action == "open" else ("finds", "found_by")
            plan.add_edge(("subquery", rel[0], "evidence"), parent, e)
            plan.add_edge(("evidence", rel[1], "subquery"), e, parent)
            if url is not None and new:
                key = url if options.cross_edges else (t, url)
                d = documents.get(key)
                if d is None:
                    d = documents[key] = plan.add_node("document", None, -1 if options.cross_edges else t)
                plan.add_edge(("evidence", "of", "document"), e, d)
                plan.add_edge(("document", "has", "evidence"), d, e)
        if not chain:  # answered without a successful tool call: the chain is its orphan alone
            chain.append(plan.add_node("subquery", None, t))
    add_candidates(plan, group, kept, options.merge_answers)
    return plan


def _link_in_time(plan: GraphPlan, chain: list[int], s: int) -> None:
    """Append subquery `s` to a trajectory's chain with next / previous edges to its predecessor."""
    if chain:
        plan.add_edge(("subquery", "next", "subquery"), chain[-1], s)
        plan.add_edge(("subquery", "previous", "subquery"), s, chain[-1])
    chain.append(s)


def _evidence_node(plan: GraphPlan, step: Step, t: int, url: str | None, options: GraphOptions,
                   merged: dict[object, int]) -> tuple[int, bool]:
    """The evidence node of a step, and whether it is new (merge_evidence reuses identical ones)."""
    text = observation(step)
    if not options.merge_evidence:
        return plan.add_node("evidence", text, t), True
    slot = (url, _norm(text)) if options.cross_edges else (t, url, _norm(text))
    e = merged.get(slot)
    if e is None:
        e = merged[slot] = plan.add_node("evidence", text, t)
        return e, True
    if plan.traj["evidence"][e] != t:
        plan.traj["evidence"][e] = -1
    return e, False  # its document link exists already: same URL, same document
