"""Every prompt of the LLM aggregation baselines, and the structured-output regexes that go with them.

Kept in one module so wording changes are reviewed in one place and no prompt text is duplicated
in the method code (STYLE, "what to avoid" 4). Placeholders use `str.format`.

- SolAgg: all final answers with a short solution each, one integrate call.
- SummAgg (ParallelMuse, Tongyi DeepResearch 2025, "compressed reasoning
  aggregation"): one structured report per trajectory (Solution Planning / Solution Methods with only
  the essential tool-result fragments / Final Reasoning), then one integrate call over the reports that
  weighs reasoning rather than agreement, uses no tools and must not merge answers.
- AggAgent: an aggregator agent with tools over the trajectories.
- TIPEX judge: a 0-2 rubric on answer definiteness, evidence strength and reasoning consistency.
"""

from __future__ import annotations

SOLAGG = """You are given several candidate solutions to the same question, each found by a search agent.
Pick the candidate answer that is best supported by its solution. Reply with the chosen answer, copied
exactly, inside <answer></answer>.

Question: {question}

{candidates}

Which answer is correct?"""

SOLAGG_CANDIDATE = """Candidate {i}
Solution: {solution}
Answer: {answer}
"""

SUMMAGG_REPORT = """Below is the full record of a search agent answering a question. Write a short structured report
of how it solved the question, with exactly these three sections:

Solution Planning: how the agent decomposed the question and what it decided to look for.
Solution Methods: the searches it made and, for each, only the essential fragment of the search result
that it relied on (quote a few words; leave out everything irrelevant).
Final Reasoning: how those fragments lead to its final answer, and any gap or contradiction.

Do not judge whether the answer is right and do not add new facts.

Question: {question}

Record:
{transcript}

Report:"""

SUMMAGG_INTEGRATE = """Several search agents answered the same question independently. Below is a structured report of each
agent's reasoning and its final answer.

Judge the quality of each report's reasoning and evidence; do not prefer an answer because more reports
give it. Do not search or call any tool: use only the reports. Choose exactly one of the reports' final
answers; never combine or rewrite answers. Reply with the chosen answer, copied exactly, inside
<answer></answer>.

Question: {question}

{reports}"""

SUMMAGG_ENTRY = """Report {i}
{report}
Final answer of report {i}: {answer}
"""

AGGAGENT_SYSTEM = """You check the work of {k} search agents that answered the same question, and choose the best answer.
Candidates (number: final answer, tool calls):
{candidates}

Tools (call exactly one per reply, nothing else):
read_solution(i)        show candidate i's final reasoning and answer
read_steps(i, a, b)     show steps a to b of candidate i
search("text")          find "text" in all candidates' searches and results
finish(i)               choose candidate i's answer and stop

You have {turns} tool calls; the last one must be finish."""

AGGAGENT_QUESTION = "Question: {question}\nYour first tool call:"

AGGAGENT_OBSERVATION = "Result:\n{observation}\n\n{remaining}"

AGGAGENT_REMAINING = "{left} tool call(s) left. Your next tool call:"

AGGAGENT_LAST = "This is your last tool call: call finish(i) now."

AGGAGENT_INVALID = "Invalid tool call. Use read_solution(i), read_steps(i, a, b), search(\"text\") or finish(i)."

JUDGE = """Rate how trustworthy a search agent's answer is. Score each criterion 0, 1 or 2:

Definiteness: 2 = one specific, complete answer; 1 = vague or hedged; 0 = no real answer.
Evidence: 2 = a search result states the answer; 1 = results only hint at it; 0 = no supporting result.
Consistency: 2 = reasoning follows from the results without contradiction; 1 = small gaps; 0 = contradicts them.

Question: {question}

Record:
{transcript}

Reply in exactly this form:
Definiteness: <0-2>
Evidence: <0-2>
Consistency: <0-2>"""

# Structured outputs for small models; `LLMConfig.constrained` turns them off. No bounded repeats of
# character classes: xgrammar expands {m,n} into states and vLLM abandons a regex after 5 s of
# compiling, which a loaded 2-core box reaches (SmolLM2 tokenizer: "[^<\n]{1,300}" 10.2 s,
# "[^<\n]{0,80}" 1.9 s, a literal alternation or "[^<\n]*" < 0.01 s).
JUDGE_REGEX = r"Definiteness: [0-2]\nEvidence: [0-2]\nConsistency: [0-2]"

_REGEX_SPECIAL = set("\\^$.|?*+()[]{}/")


def _literal(text: str) -> str:
    """`text` as a regex literal (escaping only the metacharacters xgrammar knows)."""
    return "".join("\\" + ch if ch in _REGEX_SPECIAL else ch for ch in " ".join(text.split()))


def choice_regex(answers: list[str]) -> str:
    """``<answer>(a|b|...)</answer>`` over the candidate answers: the output is always one of them.

    With a free pattern ("[^<\\n]*<answer>[^<\\n]+</answer>") SmolLM2-135M's outputs matched no
    candidate for 4 of 4 SolAgg and 2 of 4 SummAgg questions of the synthetic benchmark pool.
    """
    return "<answer>(" + "|".join(_literal(a) for a in answers) + ")</answer>"


def aggagent_regex(k: int, last: bool) -> str:
    """Allowed actions for k candidates (numbers 1..k); only finish on the last turn."""
    idx = "(" + "|".join(str(i) for i in range(1, k + 1)) + ")"
    finish = rf"finish\({idx}\)"
    if last:
        return finish
    return rf"(read_solution\({idx}\)|read_steps\({idx}, ?[0-9]+, ?[0-9]+\)|search\(\"[^\"\n]+\"\)|{finish})"
