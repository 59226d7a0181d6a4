"""Every prompt of the LLM aggregation baselines, and the structured-output regexes that go with them.

Kept in one module so wording changes are reviewed in one place and no prompt text is duplicated
in the method code (STYLE, "what to avoid" 4). Placeholders use `str.format`.

- SolAgg: every final solution with its answer, one integrate call under ParallelMuse's rules.
- SummAgg (ParallelMuse, Tongyi DeepResearch 2025, "compressed reasoning aggregation"): one structured
  report per trajectory (Solution Planning / Solution Methods with only the essential tool-result
  fragments / Final Reasoning, inside <report>), then one integrate call over the reports: free
  reasoning before <answer>, agreement raises the likelihood but is no guarantee, a report without a
  definite answer is trusted less, exactly one report is chosen, no tools, no merged or broad answers.
- AggAgent: an aggregator agent with tools over the trajectories.
- TIPEX judge: a 0-2 rubric on answer definiteness, evidence strength and reasoning consistency.
"""

from __future__ import annotations

# ParallelMuse's integration rules (compressed_reasoning_aggregation.py, INTEGRATE_PROMPT), in our own
# words; SolAgg uses the same rules over final solutions instead of reports.
_INTEGRATE_RULES = """Some of them may contradict each other, so decide which ones are sound and trustworthy. When several
{items} reach the same answer, that agreement makes the answer more likely to be right, but it is not a
guarantee: check the reasoning and evidence behind it before you accept it.

Rules:
- The question has one definite answer. Do not refuse to answer because you are unsure.
- Trust {an_item} much less if it does not end with a clear, definite answer.
- Choose exactly one {item}: the one whose answer is most likely correct.
- You cannot call tools or look anything up; reason only from what the {items} contain.
- Never combine different answers, and never give a broad answer meant to cover several of them.
- Do not restate the {items}.

Think it through first. Then give the chosen {item}'s short answer, exactly as it states it, inside
<answer></answer>."""

SOLAGG = """You have to answer this question: {question}

Several agents searched for the answer independently; below is each agent's final solution and answer.
You are the final analyst: weigh the solutions and decide which answer is correct.
""" + _INTEGRATE_RULES.format(items="solutions", item="solution", an_item="a solution") + """

{candidates}"""

SOLAGG_CANDIDATE = """[Solution {i}]
{solution}
Final answer of solution {i}: {answer}
"""

SUMMAGG_REPORT = """Below is the full record of a search agent working on a question.

{transcript}

Condense this record into a short but complete report of how the agent solved the problem. Use only
what is in the record; add nothing from elsewhere. The report has three parts:

1. Solution Planning: how the question was split into sub-problems, in what order, and which ones
   depended on which.
2. Solution Methods: for each sub-problem, the tool calls made (with their arguments) and the partial
   answers they gave. Quote only the fragments of tool results that an answer rests on, never whole
   results.
3. Final Reasoning: how the sub-answers lead to the final answer.

Keep it focused: leave out anything unrelated to solving the problem and every tool call that did not
help, so that each step can be traced. Write the report in Markdown inside <report></report>."""

SUMMAGG_INTEGRATE = """You have to answer this question: {question}

Several teams worked on it independently, and each wrote a report of its approach. You are the final
analyst: examine the methods in the reports and the key information each one found.
""" + _INTEGRATE_RULES.format(items="reports", item="report", an_item="a report") + """

{reports}"""

SUMMAGG_ENTRY = """[Report {i}]
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


def choice_regex(answers: list[str], reasoning: bool = True) -> str:
    """Free reasoning (no ``<``), then ``<answer>(a|b|...)</answer>`` over the candidate answers, so
    the output always ends in one of them; ``reasoning=False`` gives only the tail after ``<answer>``
    (for the forced continuation when the reasoning ran out of tokens).

    With a free answer pattern ("[^<\\n]*<answer>[^<\\n]+</answer>") SmolLM2-135M's outputs matched
    no candidate for 4 of 4 SolAgg and 2 of 4 SummAgg questions of the synthetic benchmark pool.
    """
    choice = "(" + "|".join(_literal(a) for a in answers) + ")</answer>"
    return "[^<]*<answer>" + choice if reasoning else choice


def aggagent_regex(k: int, last: bool) -> str:
    """Allowed actions for k candidates (numbers 1..k); only finish on the last turn."""
    idx = "(" + "|".join(str(i) for i in range(1, k + 1)) + ")"
    finish = rf"finish\({idx}\)"
    if last:
        return finish
    return rf"(read_solution\({idx}\)|read_steps\({idx}, ?[0-9]+, ?[0-9]+\)|search\(\"[^\"\n]+\"\)|{finish})"
