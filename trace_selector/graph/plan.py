"""Graph plans: a question's graph as node texts and index lists, before any embedding.

Builders (`webqa.py`, `browsing.py`) turn a `QuestionGroup` into a `GraphPlan`; `materialize` turns a
plan plus one embedding table into a ``HeteroData`` with every type of its schema (graph/schema.py).
Splitting the two lets `build_graphs` send the texts of all questions through the encoder in one call
instead of one call per graph.

Shared rules live here: which trajectories are kept (`DropReport` counts the rest), candidate
(answer) nodes with vote features and labels, same-content links, and the ablation switches
(`GraphOptions`).
"""

from __future__ import annotations

import math
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from trace_selector.errors import InputError
from trace_selector.graph.schema import VOTE_FEATURES, GraphSchema
from trace_selector.records import Document, QuestionGroup, Trajectory
from trace_selector.records.answers import is_correct, normalize_answer, restates_question
from trace_selector.records.evidence import evidence_words, last_read_words, mentions, passage_text
from trace_selector.types import EdgeType, NodeType

GraphKind = Literal["auto", "webqa", "browsing"]
DropReason = Literal["no_answer", "no_search"]

MENTIONS: EdgeType = ("answer", "mentioned_by", "answer")
"""Bookkeeping relation, not a GNN relation (it is in no schema, so the model never reads it): an
edge j -> i when trajectory j's evidence contains candidate i's normalised answer. It lets
`graph.subset.subset_graph` recompute the g/R vote column for any subset of trajectories without the
pool. Written only without merge_answers (candidates are then trajectories)."""


@dataclass(frozen=True, slots=True)
class GraphOptions:
    """How a pool becomes graphs, including the model issue's ablation switches."""

    kind: GraphKind = "auto"
    """"webqa", "browsing", or "auto" (the style of the group's first trajectory)."""
    cross_edges: bool = True
    """Link trajectories (same_across chunks; shared browsing documents). False: every trajectory
    is its own island (browsing documents are copied per trajectory; merging stays within one)."""
    merge_evidence: bool = False
    """Merge identical chunk / evidence occurrences into one node (ablation of occurrence preservation);
    a merged node seen by several trajectories gets traj -1."""
    merge_answers: bool = False
    """One candidate node per distinct normalised answer instead of one per trajectory; `traj` of
    every node then holds its candidate index."""
    max_text_chars: int = 2048
    """Texts are cut to this many characters before encoding (MiniLM reads 256 tokens, ~1,000
    characters, anyway); the cut text is also the cache key."""

    def __post_init__(self) -> None:
        if self.kind not in ("auto", "webqa", "browsing"):
            raise ValueError(f"kind must be auto, webqa or browsing, got {self.kind!r}")
        if self.max_text_chars < 1:
            raise ValueError(f"max_text_chars must be >= 1, got {self.max_text_chars}")

    def resolve_kind(self, group: QuestionGroup, source: str | None = None) -> Literal["webqa", "browsing"]:
        """The group's graph kind; `InputError` naming `source` (the pool file) if it contradicts `kind`."""
        style = group.trajectories[0].style if group.trajectories else "webqa"
        if self.kind != "auto" and style != self.kind:
            # The two schemas share no node types a model could transfer, so a silent build would
            # score a graph the selector never saw; say which selector the pool needs instead.
            where = f"{source}: " if source else ""
            raise InputError(
                f"{where}question {group.question_id!r}: the pool is {style}-style but {self.kind} graphs were asked "
                f"for (model.kind={self.kind}); use a selector trained on {style} pools (model.kind={style})"
            )
        return self.kind if self.kind != "auto" else style


def graph_options(config: Any) -> GraphOptions:
    """`GraphOptions` matching a `ModelConfig` (kind, cross-trajectory links, merge ablations), so a
    checkpoint's pools become graphs the way its training pools did."""
    return GraphOptions(
        kind=config.kind,
        cross_edges=config.cross_trajectory,
        merge_evidence=config.merge_evidence,
        merge_answers=config.merge_answers,
    )


@dataclass(slots=True)
class DropReport:
    """What `build_graphs` left out and why."""

    questions: int = 0
    """Questions seen."""
    graphs: int = 0
    """Graphs built (questions with at least one retained trajectory)."""
    trajectories: int = 0
    """Trajectories seen."""
    retained: int = 0
    """Trajectories that became candidates."""
    dropped: dict[str, int] = field(default_factory=lambda: {"no_answer": 0, "no_search": 0})
    """Dropped trajectories per reason: no_answer (answer empty after normalisation), no_search (WebQA:
    no search returned anything; browsing graphs keep such trajectories with an orphan subquery)."""
    empty_questions: list[str] = field(default_factory=list)
    """Ids of questions with no retained trajectory (no graph)."""

    def add(self, other: DropReport) -> None:
        self.questions += other.questions
        self.graphs += other.graphs
        self.trajectories += other.trajectories
        self.retained += other.retained
        for k, v in other.dropped.items():
            self.dropped[k] = self.dropped.get(k, 0) + v
        self.empty_questions.extend(other.empty_questions)

    def to_text(self) -> str:
        reasons = ", ".join(f"{k} {v}" for k, v in self.dropped.items())
        return (
            f"{self.graphs}/{self.questions} questions -> graphs ({len(self.empty_questions)} without "
            f"a retained trajectory); {self.retained}/{self.trajectories} trajectories kept "
            f"(dropped: {reasons})"
        )


class GraphPlan:
    """Nodes (with texts) and edges of one question's graph, indexed per type.

    Args:
        schema: the graph kind's node and edge types.
        question_id: the question key, copied to ``data.question_id``.
        max_text_chars: texts are cut to this length when added.
    """

    def __init__(self, schema: GraphSchema, question_id: str, max_text_chars: int = 2048):
        self.schema = schema
        self.question_id = question_id
        self.max_text_chars = max_text_chars
        self.texts: dict[NodeType, list[str | None]] = {t: [] for t in schema.node_types}
        self.traj: dict[NodeType, list[int]] = {t: [] for t in schema.node_types}
        self.edges: dict[EdgeType, tuple[list[int], list[int]]] = {e: ([], []) for e in schema.edge_types}
        self.vote: list[tuple[float, float, float, float, float, float]] = []
        self.y: list[float] = []
        self.sample_id: list[int] = []
        self.answers: list[str] = []
        self.mentions: tuple[list[int], list[int]] | None = None
        """Edges of `MENTIONS` (reader trajectory j, candidate i); None under merge_answers."""
        self.kept = 0
        """Retained trajectories (candidates before any answer merging)."""

    def add_node(self, ntype: NodeType, text: str | None, traj: int) -> int:
        """Append a node; `text` None means a learned initial state (x = zeros)."""
        nodes = self.texts[ntype]
        nodes.append(None if text is None else text[: self.max_text_chars])
        self.traj[ntype].append(traj)
        return len(nodes) - 1

    def add_edge(self, etype: EdgeType, src: int, dst: int) -> None:
        s, d = self.edges[etype]
        s.append(src)
        d.append(dst)

    def add_subquery(self, text: str, traj: int, query: int, prev: int | None) -> int:
        """A subquery node chained in time: query-starts-> the first of a trajectory, then
        subquery-next-> each later one (the same rule for both graph kinds)."""
        s = self.add_node("subquery", text, traj)
        if prev is None:
            self.add_edge(("query", "starts", "subquery"), query, s)
        else:
            self.add_edge(("subquery", "next", "subquery"), prev, s)
        return s

    def num_nodes(self, ntype: NodeType) -> int:
        return len(self.texts[ntype])

    def all_texts(self) -> list[str]:
        return [t for texts in self.texts.values() for t in texts if t is not None]

    def relabel_traj(self, mapping: list[int]) -> None:
        """Replace every trajectory index k >= 0 by mapping[k] (merge_answers: candidate index)."""
        for ntype, trajs in self.traj.items():
            self.traj[ntype] = [mapping[k] if k >= 0 else k for k in trajs]


# --- trajectories and candidates -------------------------------------------------------------------


def drop_reason(traj: Trajectory, has_retrieval: bool) -> DropReason | None:
    """Why a trajectory is not a candidate, or None if it is."""
    if not normalize_answer(traj.answer):
        return "no_answer"
    if not has_retrieval:
        return "no_search"
    return None


def label(traj: Trajectory, golden_answers: list[str]) -> float:
    """1/0 by `answers.is_correct` (exact match against gold, else the pool's `correct`); NaN when unknown."""
    correct = is_correct(traj, golden_answers)
    return math.nan if correct is None else float(correct)


def add_candidates(plan: GraphPlan, group: QuestionGroup, kept: list[Trajectory], merge: bool) -> None:
    """Answer nodes for the kept trajectories, with vote features and labels.

    Vote features per candidate: log1p(c), c/R, own, g/R, echo, last. c counts kept trajectories with
    the same normalised answer and R = len(kept); own is 1 if the answer occurs as whole words in the
    evidence its trajectory read, g counts kept trajectories whose evidence contains it, echo is 1 if
    the answer only repeats words of the question (`answers.restates_question`), last is 1 if it
    occurs in its trajectory's last retrieval (`evidence.last_read_words`). With `merge`, one node
    per distinct normalised answer (first-seen order; the first trajectory's sample id, raw answer
    and label; own and last if any of its trajectories read it), and every node's `traj` is
    relabelled to its candidate index.
    """
    norm = [normalize_answer(t.answer) for t in kept]
    counts = Counter(norm)
    total = plan.kept = len(kept)
    evidence = [evidence_words(t) for t in kept]
    # readers[a]: the kept trajectories whose evidence contains answer a (one scan per distinct answer)
    readers = {a: [j for j, e in enumerate(evidence) if mentions(e, a)] for a in counts}
    read = [k in readers[a] for k, a in enumerate(norm)]
    grounded_any = {a for a, r in zip(norm, read) if r}
    last = [mentions(last_read_words(t), a) for t, a in zip(kept, norm)]
    last_any = {a for a, r in zip(norm, last) if r}
    read_by = {a: len(r) for a, r in readers.items()}  # like counts: once per answer
    echo = {a: float(restates_question(a, group.question)) for a in counts}
    slot: dict[str, int] = {}
    mapping: list[int] = []
    for k, (traj, a) in enumerate(zip(kept, norm)):
        if merge and a in slot:
            mapping.append(slot[a])
            continue
        idx = plan.add_node("answer", a, k)
        slot[a] = idx
        mapping.append(idx)
        c = counts[a]
        own = float(a in grounded_any) if merge else float(read[k])
        in_last = float(a in last_any) if merge else float(last[k])
        plan.vote.append((math.log1p(c), c / total, own, read_by[a] / total, echo[a], in_last))
        plan.y.append(label(traj, group.golden_answers))
        plan.sample_id.append(traj.sample_id)
        plan.answers.append(traj.answer)
    if merge:
        plan.relabel_traj(mapping)
    else:
        src, dst = plan.mentions = ([], [])
        for i, a in enumerate(norm):
            src.extend(readers[a])
            dst.extend([i] * len(readers[a]))


# --- same-content links ----------------------------------------------------------------------------


def content_keys(doc: Document) -> list[tuple[str, str]]:
    """Identities of a passage: its normalised text (NFKC, case-folded, whitespace collapsed, title
    included) and, when recorded, its corpus id; two passages have the same content if any key agrees."""
    text = unicodedata.normalize("NFKC", passage_text(doc)).casefold()
    keys = [("text", " ".join(text.split()))]
    if doc.doc_id:
        keys.append(("id", doc.doc_id))
    return keys


def content_groups(occurrences: list[tuple[int, int, list]]) -> list[list[tuple[int, int]]]:
    """Group (node, traj, keys) occurrences that share any key (union-find over nodes)."""
    parent = list(range(len(occurrences)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[object, int] = {}
    for i, (_, _, keys) in enumerate(occurrences):
        for key in keys:
            j = first.setdefault(key, i)
            if j != i:
                parent[find(i)] = find(j)
    groups: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for i, (node, traj, _) in enumerate(occurrences):
        groups[find(i)].append((node, traj))
    return [g for g in groups.values() if len(g) > 1]


def same_content_edges(
    plan: GraphPlan, ntype: NodeType, occurrences: list[tuple[int, int, list]], cross: bool
) -> None:
    """Link every ordered pair of distinct nodes with the same content: same_within when both belong
    to one trajectory, same_across otherwise (only if `cross`). `occurrences` = (node, traj, keys)."""
    within = (ntype, "same_within", ntype)
    across = (ntype, "same_across", ntype)
    for members in content_groups(occurrences):
        for a, ta in members:
            for b, tb in members:
                if a == b:
                    continue
                if ta == tb:
                    plan.add_edge(within, a, b)
                elif cross:
                    plan.add_edge(across, a, b)


# --- tensors ---------------------------------------------------------------------------------------


def materialize(plan: GraphPlan, rows: dict[str, int], table: torch.Tensor):
    """The plan as ``HeteroData``: x gathered from `table` by `rows[text]`; every schema type present."""
    from torch_geometric.data import HeteroData

    dim = table.shape[1]
    # Gather rows in numpy: a small torch index op pays an OpenMP fork/join per call, which measured
    # 3.5 ms (vs 8 us single-threaded) per gather on a busy 2-core machine.
    array = table.detach().cpu().numpy()
    data = HeteroData()
    for ntype in plan.schema.node_types:
        texts = plan.texts[ntype]
        missing = [t is None for t in texts]
        if texts and all(missing):
            x = torch.zeros(len(texts), dim)
        else:
            idx = np.fromiter((-1 if t is None else rows[t] for t in texts), dtype=np.int64, count=len(texts))
            gathered = array.take(np.maximum(idx, 0), axis=0)
            gathered[idx < 0] = 0.0  # text-less nodes (orphan subqueries): zeros, the model adds a learned state
            x = torch.from_numpy(gathered)
        data[ntype].x = x
        if ntype in plan.schema.orphan_types:
            data[ntype].orphan = torch.tensor(missing, dtype=torch.bool)
        data[ntype].traj = torch.tensor(plan.traj[ntype], dtype=torch.long)
    for etype in plan.schema.edge_types:
        src, dst = plan.edges[etype]
        data[etype].edge_index = torch.tensor([src, dst], dtype=torch.long).view(2, -1)
    cand = data[plan.schema.candidate_type]
    cand.vote = torch.tensor(plan.vote, dtype=torch.float32).view(-1, VOTE_FEATURES)
    cand.y = torch.tensor(plan.y, dtype=torch.float32)
    cand.sample_id = torch.tensor(plan.sample_id, dtype=torch.long)
    if plan.mentions is not None:
        data[MENTIONS].edge_index = torch.tensor(plan.mentions, dtype=torch.long).view(2, -1)
    data.question_id = plan.question_id
    data.answers = list(plan.answers)
    return data


def check_kept(group: QuestionGroup, kept: list[Trajectory]) -> None:
    if not kept:
        raise InputError(
            f"question {group.question_id}: no trajectory has both an answer and a search result; "
            "build_graphs skips such questions and counts them"
        )
