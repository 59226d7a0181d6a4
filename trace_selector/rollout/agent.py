"""The ReAct search agent, run on many trajectories at once at the token level.

Each `Rollout` keeps its prompt as token ids. A turn samples a completion, appends the sampled token
ids and then the encoded observation, so the prompt of the next turn extends the previous one token
for token: vLLM's prefix cache serves all earlier turns, and a partial-rollout branch can restart from
the exact prompt at any step boundary (`Rollout.branch`). `Agent.run` advances every unfinished
rollout by one turn per `engine.generate` call, which is where batched vLLM throughput comes from.

    agent = Agent(engine, SearchTools(index), AgentConfig(max_turns=4))
    rollouts = [agent.start(q.id, q.question, q.golden_answers, sample_id=i) for i in range(4)]
    agent.run(rollouts)                      # one engine.generate call per turn for all four
    trajectories = [r.to_trajectory() for r in rollouts]

The browsing agent (`browser_agent.py`) reuses this loop with a different toolbox.
"""

from __future__ import annotations

import copy
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from trace_selector.engines.base import Engine, EngineStats, GenRequest, GenResult
from trace_selector.records import Step, Trajectory
from trace_selector.rollout import prompts
from trace_selector.rollout.tools import ToolResult, ToolSession, Toolbox, safe_call


@dataclass
class AgentConfig:
    """How one trajectory is sampled."""

    max_turns: int = 4
    """Tool-call turns (valid or not) before the forced final-answer turn."""
    top_k: int = 3
    """Passages shown per search."""
    doc_chars: int = 360
    """Passage text is cut to this many characters in the observation (and in the recorded document)."""
    max_tokens: int = 160
    """Most tokens sampled per turn."""
    temperature: float = 1.0
    """Sampling temperature."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    structured: bool = True
    """Constrain every turn with a think-then-one-action regex (vLLM structured outputs)."""
    think: bool = True
    """Ask for (and, when structured, require) a <think> block before the action."""
    max_parallel: int = 1
    """TIPEX structural parallelism: most <search> tags honoured in one turn (1 = one action per turn)."""
    concurrent_tools: bool = True
    """Run the searches of one turn concurrently (thread pool) rather than one after another."""
    ask_confidence: bool = False
    """After the answer, ask "Confidence (0-100)" and store it in Trajectory.confidence."""
    max_context: int = 4096
    """Context length of the engine; a rollout whose prompt would not fit is forced to answer."""
    prompt: str = "plain"
    """System prompt variant: plain; clues (WebQA: search with the question's own words); hops (WebQA,
    multi-hop questions: one fact per search, the bridge name carried into the next query)."""
    top_logprobs: int = 20
    """Candidates per token for DeepConf token confidence, recorded at generation time (the paper
    uses 20, vLLM's maximum here); 0 records only the sampled token's log-probability."""
    continuous: bool = False
    """Submit each trajectory's next turn as soon as its last one ends (continuous batching across
    turns, engines that support it: in-process vLLM), instead of one batch per turn that waits for
    its longest completion. Changes how work is grouped, not what is sampled."""

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        if self.max_tokens < 8:
            raise ValueError(f"max_tokens must be >= 8, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_parallel < 1:
            raise ValueError(f"max_parallel must be >= 1, got {self.max_parallel}")
        if self.doc_chars < 20:
            raise ValueError(f"doc_chars must be >= 20, got {self.doc_chars}")
        if self.max_context <= self.max_tokens:
            raise ValueError("max_context must exceed max_tokens")
        if not 0 <= self.top_logprobs <= 20:
            raise ValueError(f"top_logprobs must be in [0, 20] (the engine's max_logprobs), got {self.top_logprobs}")
        if self.prompt not in {v for _, v in prompts.SYSTEM_PROMPTS}:
            known = "|".join(sorted({v for _, v in prompts.SYSTEM_PROMPTS}))
            raise ValueError(f"prompt must be one of {known}, got {self.prompt!r}")


# --- parsing ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class ParsedTurn:
    """The action a completion contains."""

    kind: Literal["answer", "tool", "invalid"]
    calls: list[tuple[str, str]] = field(default_factory=list)
    """(action, content) tool calls, in order (several only with max_parallel > 1)."""
    answer: str = ""
    tool_start: int | None = None
    """Character offset of the first action tag (start of the tool-call region)."""


def parse_turn(text: str, actions: tuple[str, ...], max_parallel: int = 1) -> ParsedTurn:
    """Find the first complete action tag of `text`; with `max_parallel` > 1, also the <search> tags
    that directly follow the first one. An empty or missing action is invalid."""
    pattern = re.compile(r"<(" + "|".join(map(re.escape, actions)) + r")>(.*?)</\1>", re.S)
    matches = list(pattern.finditer(text))
    if not matches:
        return ParsedTurn("invalid")
    first = matches[0]
    tag, content = first.group(1), " ".join(first.group(2).split())
    if not content:
        return ParsedTurn("invalid")
    if tag == "answer":
        return ParsedTurn("answer", answer=content, tool_start=first.start())
    calls = [(tag, content)]
    if tag == "search":
        for m in matches[1:]:
            if len(calls) >= max_parallel or m.group(1) != "search":
                break
            query = " ".join(m.group(2).split())
            if query and (tag, query) not in calls:
                calls.append((tag, query))
    return ParsedTurn("tool", calls=calls, tool_start=first.start())


# --- accounting -------------------------------------------------------------------------------------


@dataclass(slots=True)
class Accounting:
    """Running totals of a rollout (per pool): the engine calls it made, counted by the engines' own
    `EngineStats`, plus the tool calls they led to. `to_dict` keeps the pool metadata's key names."""

    engine: EngineStats = field(default_factory=EngineStats)
    """LLM calls, prompt / cached / generated tokens and seconds inside `generate`."""
    tool_calls: int = 0
    tool_seconds: float = 0.0

    def add_results(self, results: list[GenResult], seconds: float) -> None:
        self.engine.add(results, seconds)

    def to_dict(self) -> dict[str, Any]:
        e = self.engine
        return {"llm_calls": e.requests, "generated_tokens": e.generated_tokens, "prompt_tokens": e.prompt_tokens,
                "cached_tokens": e.cached_tokens, "tool_calls": self.tool_calls, "tool_seconds": self.tool_seconds,
                "generate_seconds": e.seconds, "computed_tokens": e.computed_tokens}


# --- rollout state ----------------------------------------------------------------------------------

Phase = Literal["act", "forced", "confidence", "done"]


@dataclass(slots=True)
class Rollout:
    """One trajectory in progress: token-level prompt plus what has been recorded so far."""

    question_id: str
    question: str
    golden_answers: list[str]
    sample_id: int
    prompt_ids: list[int]
    session: Any
    seed: int | None = None
    phase: Phase = "act"
    turns: int = 0
    steps: list[Step] = field(default_factory=list)
    step_turn: list[int] = field(default_factory=list)
    """Turn index of every step (a TIPEX turn can hold several searches)."""
    turn_starts: list[int] = field(default_factory=list)
    """len(prompt_ids) when each turn began: the token-identical prefix a branch restarts from."""
    answer: str = ""
    final_text: str | None = None
    final_logprobs: list[float] | None = None
    final_token_conf: list[float] | None = None
    confidence: float | None = None
    finish_reason: str | None = None
    generated_tokens: int = 0
    parent_sample: int | None = None
    branch_step: int | None = None
    seed_applied: bool = False
    prefill: str = ""
    """Text already placed in the prompt for the current turn (the forced "<answer>" when unstructured)."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.phase == "done"

    def branch(self, step: int, sample_id: int, toolbox: Toolbox) -> Rollout:
        """A new rollout that keeps this one's steps before `step` and resamples from there, starting
        from the token-identical prompt prefix of that step's turn."""
        turn = self.step_turn[step]
        keep = [i for i, t in enumerate(self.step_turn) if t < turn]
        steps = [copy.deepcopy(self.steps[i]) for i in keep]
        return Rollout(
            question_id=self.question_id, question=self.question, golden_answers=list(self.golden_answers),
            sample_id=sample_id, prompt_ids=self.prompt_ids[: self.turn_starts[turn]],
            session=toolbox.session(steps), seed=None, turns=turn, steps=steps,
            step_turn=[self.step_turn[i] for i in keep], turn_starts=self.turn_starts[:turn],
            generated_tokens=sum(len(s.logprobs or []) for s in steps),
            parent_sample=self.sample_id, branch_step=step, extra=copy.deepcopy(self.extra),
        )

    def to_trajectory(self, style: str = "webqa") -> Trajectory:
        extra = dict(self.extra)
        extra["turns"] = self.turns
        extra["seed_applied"] = self.seed_applied
        return Trajectory(
            question_id=self.question_id, question=self.question, sample_id=self.sample_id,
            answer=self.answer, steps=self.steps, golden_answers=list(self.golden_answers),
            style=style, final_text=self.final_text, final_logprobs=self.final_logprobs,
            final_token_conf=self.final_token_conf,
            confidence=self.confidence, finish_reason=self.finish_reason,
            parent_sample=self.parent_sample, branch_step=self.branch_step,
            seed=self.seed if self.seed_applied else None, generated_tokens=self.generated_tokens,
            extra=extra,
        )


def char_to_token(engine: Engine, token_ids: list[int], offset: int) -> int:
    """Index of the token containing character `offset` of ``decode(token_ids)`` (binary search on
    decoded prefix lengths: about log2(n) decodes)."""
    lo, hi = 0, len(token_ids)
    while lo < hi:  # smallest m with len(decode(ids[:m])) > offset
        mid = (lo + hi) // 2
        if len(engine.decode(token_ids[:mid])) > offset:
            hi = mid
        else:
            lo = mid + 1
    return max(lo - 1, 0)


# --- the agent --------------------------------------------------------------------------------------


class Agent:
    """Runs rollouts of one agent kind against one engine and toolbox, all in lockstep batches."""

    def __init__(self, engine: Engine, toolbox: Toolbox, config: AgentConfig | None = None,
                 accounting: Accounting | None = None, eos_token_ids: set[int] | None = None):
        self.engine = engine
        self.toolbox = toolbox
        self.cfg = config or AgentConfig()
        self.kind = toolbox.kind
        self.actions = prompts.ACTIONS[self.kind]
        self.accounting = accounting or Accounting()
        if eos_token_ids is None:  # the EOS of an HF tokenizer, when the engine exposes one
            eos = getattr(getattr(engine, "tokenizer", None), "eos_token_id", None)
            eos_token_ids = {eos} if isinstance(eos, int) else set()
        self.eos_ids = set(eos_token_ids)
        self._pool: ThreadPoolExecutor | None = None
        self._system_ids: dict[str, list[int]] = {}

    # building prompts ------------------------------------------------------------------------------

    def prompt_ids(self, question: str, system_suffix: str = "") -> list[int]:
        """Chat-templated prompt (system + question), ready for the first assistant turn."""
        system = prompts.system_prompt(self.kind, self.cfg.prompt)
        if self.cfg.max_parallel > 1:
            system += prompts.PARALLEL_HINT.format(n=self.cfg.max_parallel)
        messages = [
            {"role": "system", "content": system + system_suffix},
            {"role": "user", "content": prompts.USER_TEMPLATE.format(question=question)},
        ]
        return self.engine.chat_token_ids(messages, add_generation_prompt=True)

    def start(self, question_id: str, question: str, golden_answers: list[str], sample_id: int,
              system_suffix: str = "", seed: int | None = None) -> Rollout:
        """A fresh rollout of one question."""
        return Rollout(question_id=str(question_id), question=question, golden_answers=list(golden_answers),
                       sample_id=sample_id, prompt_ids=self.prompt_ids(question, system_suffix),
                       session=self.toolbox.session([]), seed=seed)

    def inject(self, rollout: Rollout, action: str, content: str) -> None:
        """Play a given tool call as the rollout's next turn (DivInit's chosen first query): the text
        is encoded and handled exactly like a sampled turn, with no log-probabilities."""
        text = f"<{action}>{content}</{action}>"
        ids = self.engine.encode(text)
        fake = GenResult(text=text, token_ids=ids, logprobs=None, prompt_tokens=len(rollout.prompt_ids),
                         cached_tokens=None, finish_reason="stop")
        self._consume(rollout, fake)

    def _request(self, r: Rollout) -> GenRequest:
        cfg = self.cfg
        if r.phase == "confidence":
            return GenRequest(prompt_token_ids=r.prompt_ids, max_tokens=4, temperature=cfg.temperature,
                              top_p=cfg.top_p, seed=r.seed,
                              regex=prompts.confidence_regex() if cfg.structured else None)
        if r.phase == "forced":
            regex = prompts.action_regex(("answer",), cfg.think) if cfg.structured else None
            return GenRequest(prompt_token_ids=r.prompt_ids, max_tokens=cfg.max_tokens,
                              temperature=cfg.temperature, top_p=cfg.top_p, stop=["</answer>"],
                              seed=r.seed, regex=regex, top_logprobs=cfg.top_logprobs)
        if cfg.max_parallel > 1:  # several searches may follow each other: cut only at other tags
            stop = [f"</{t}>" for t in self.actions if t != "search"] + ["<information>"]
        else:
            stop = [f"</{t}>" for t in self.actions]
        regex = prompts.action_regex(self.actions, cfg.think, cfg.max_parallel) if cfg.structured else None
        return GenRequest(prompt_token_ids=r.prompt_ids, max_tokens=cfg.max_tokens,
                          temperature=cfg.temperature, top_p=cfg.top_p, stop=stop, seed=r.seed, regex=regex,
                          top_logprobs=cfg.top_logprobs)

    # the loop --------------------------------------------------------------------------------------

    def run(self, rollouts: list[Rollout], on_batch: Callable[[list[GenResult]], None] | None = None,
            on_finish: Callable[[list[Rollout]], list[Rollout]] | None = None) -> None:
        """Advance every rollout to completion: one batched `engine.generate` call per turn, or, with
        `AgentConfig.continuous` on an engine that offers it, each rollout's next turn submitted the
        moment its previous one finishes.

        `on_finish` (optional) gets the rollouts that finished since its last call (after every turn
        batch; with continuous batching, each as it ends) and returns new rollouts, which join the run:
        their first turn goes into the next batch, or into the running one at once. Adaptive sampling
        starts a question's next wave this way (rollout/waves.py)."""
        if self.cfg.continuous and hasattr(self.engine, "generate_continuous"):
            self._run_continuous(rollouts, on_batch, on_finish)
            return
        live = list(rollouts)
        while True:
            active = [r for r in live if not r.done]
            for r in active:
                self._check_room(r)
            if on_finish is not None:
                live = self._joined(live, on_finish)
            active = [r for r in live if not r.done]
            if not active:
                return
            requests = [self._request(r) for r in active]
            t0 = time.perf_counter()
            results = self.engine.generate(requests)
            self.accounting.add_results(results, time.perf_counter() - t0)
            for r, res in zip(active, results):
                self._consume(r, res)
            if on_batch is not None:
                on_batch(results)

    def _joined(self, live: list[Rollout], on_finish: Callable[[list[Rollout]], list[Rollout]]) -> list[Rollout]:
        """The unfinished rollouts of `live` plus those `on_finish` adds for its finished ones (repeated
        while added rollouts finish at once, e.g. a prompt too long for any turn)."""
        while True:
            finished = [r for r in live if r.done]
            if not finished:
                return live
            added = on_finish(finished)
            for r in added:
                if not r.done:
                    self._check_room(r)
            live = [r for r in live if not r.done] + list(added)

    def _run_continuous(self, rollouts: list[Rollout], on_batch: Callable[[list[GenResult]], None] | None,
                        on_finish: Callable[[list[Rollout]], list[Rollout]] | None = None) -> None:
        def submit(rs: list[Rollout]) -> list[tuple[Rollout, GenRequest]]:
            # First turns of `rs`; a rollout that cannot take one is finished, and on_finish may add more.
            out, queue = [], list(rs)
            while queue:
                r = queue.pop(0)
                if not r.done:
                    self._check_room(r)
                if not r.done:
                    out.append((r, self._request(r)))
                elif on_finish is not None:
                    queue.extend(on_finish([r]))
            return out

        def follow(r: Rollout, res: GenResult) -> list[tuple[Rollout, GenRequest]]:
            self.accounting.add_results([res], 0.0)
            self._consume(r, res)
            if on_batch is not None:
                on_batch([res])
            if not r.done:
                self._check_room(r)
            if not r.done:
                return [(r, self._request(r))]
            return submit(on_finish([r])) if on_finish is not None else []

        first = submit(list(rollouts))
        t0 = time.perf_counter()
        self.engine.generate_continuous(first, follow)
        self.accounting.add_results([], time.perf_counter() - t0)

    def _check_room(self, r: Rollout) -> None:
        # A prompt that cannot fit another turn is forced to answer; if even that cannot fit, stop.
        room = self.cfg.max_context - len(r.prompt_ids)
        if room < self.cfg.max_tokens + 64 and r.phase == "act":
            self._force(r)
            room = self.cfg.max_context - len(r.prompt_ids)
        if room < self.cfg.max_tokens and r.phase in ("act", "forced"):
            r.phase, r.finish_reason = "done", "context"

    def _force(self, r: Rollout) -> None:
        # Only the answer action is allowed now: a grammar enforces it, or (unstructured) the prompt
        # already opens the <answer> tag so the model can only fill it in.
        self._append(r, prompts.observation(prompts.FORCE_ANSWER))
        if not self.cfg.structured:
            r.prefill = "<answer>"
            self._append(r, r.prefill)
        r.phase = "forced"

    def _append(self, r: Rollout, text: str) -> None:
        r.prompt_ids = r.prompt_ids + self.engine.encode(text)

    def _consume(self, r: Rollout, res: GenResult) -> None:
        r.seed_applied = r.seed_applied or res.seed_applied
        ids = list(res.token_ids)
        if res.logprobs is not None:
            r.generated_tokens += len(ids)
        if r.phase == "confidence":
            r.confidence = prompts.parse_confidence(res.text)
            r.extra["confidence_text"] = res.text
            r.phase = "done"
            return
        forced = r.phase == "forced"
        if res.finish_reason == "length":
            # A grammar cannot stop an action that is cut off by max_tokens (a 40-character "word" is
            # still one word); such turns are counted apart from actions the model got wrong.
            r.extra["truncated_turns"] = r.extra.get("truncated_turns", 0) + 1
        actions = ("answer",) if forced else self.actions
        parsed = parse_turn(r.prefill + res.text, actions, self.cfg.max_parallel)
        if parsed.tool_start is not None:
            parsed.tool_start = max(parsed.tool_start - len(r.prefill), 0)
        r.prefill = ""
        turn_start = len(r.prompt_ids)
        # A trailing EOS would end the assistant message in the middle of the trajectory; keep it in
        # the recorded log-probabilities but not in the prompt that continues.
        if ids and ids[-1] in self.eos_ids:
            ids = ids[:-1]
        r.prompt_ids = r.prompt_ids + ids
        tool_start = None
        if parsed.tool_start is not None and res.token_ids:
            tool_start = char_to_token(self.engine, list(res.token_ids), parsed.tool_start)

        if parsed.kind == "answer":
            r.answer = parsed.answer
            r.final_text = res.text
            r.final_logprobs = res.logprobs
            r.final_token_conf = res.token_conf
            r.finish_reason = "forced" if forced else "answer"
            r.extra["final_tool_start"] = tool_start
            r.turns += 1
            if self.cfg.ask_confidence:
                self._append(r, prompts.CONFIDENCE_PROMPT)
                r.phase = "confidence"
            else:
                r.phase = "done"
            return
        if forced:  # no answer even when only answering was allowed
            r.final_text = res.text
            r.final_logprobs = res.logprobs
            r.final_token_conf = res.token_conf
            r.finish_reason = "no_answer" if res.finish_reason != "length" else "length"
            r.turns += 1
            r.phase = "done"
            return

        r.turn_starts.append(turn_start)
        common = dict(raw_text=res.text, logprobs=res.logprobs, token_conf=res.token_conf,
                      prompt_tokens=res.prompt_tokens,
                      cached_tokens=res.cached_tokens)
        if parsed.kind == "invalid":
            body = prompts.invalid_action(self.kind)
            r.steps.append(Step(action="invalid", content="", search_result=body, tool_start=None, **common))
            r.step_turn.append(r.turns)
            self._append(r, prompts.observation(body))
        else:
            outcomes, seconds = self._call_tools(r.session, parsed.calls)
            self.accounting.tool_calls += len(parsed.calls)
            self.accounting.tool_seconds += seconds
            text = ""
            for i, ((action, content), out) in enumerate(zip(parsed.calls, outcomes)):
                step_fields = common if i == 0 else {}
                r.steps.append(Step(action=action, content=content, search_result=out.body,
                                    documents=out.documents, tool_start=tool_start if i == 0 else None,
                                    **step_fields))
                r.step_turn.append(r.turns)
                text += prompts.observation(out.body)
            if len(parsed.calls) > 1:
                mode = "concurrent" if self.cfg.concurrent_tools else "sequential"
                r.extra.setdefault("parallel_turns", []).append(
                    {"turn": r.turns, "calls": len(parsed.calls), "mode": mode, "seconds": round(seconds, 6)})
            self._append(r, text)
        r.turns += 1
        if r.turns >= self.cfg.max_turns:
            self._force(r)

    def _call_tools(self, session: ToolSession, calls: list[tuple[str, str]]) -> tuple[list[ToolResult], float]:
        t0 = time.perf_counter()
        if len(calls) > 1 and self.cfg.concurrent_tools:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.cfg.max_parallel)
            outs = list(self._pool.map(lambda c: safe_call(session, *c), calls))
        else:
            outs = [safe_call(session, a, c) for a, c in calls]
        return outs, time.perf_counter() - t0

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
