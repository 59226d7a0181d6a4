"""Every prompt of the LLM aggregation baselines, and the structured-output regexes that go with them.

Kept in one module so wording changes are reviewed in one place and no prompt text is duplicated
in the method code (STYLE, "what to avoid" 4). Placeholders use `str.format`.

- SolAgg: every final solution with its answer, one integrate call under ParallelMuse's rules.
- SummAgg (ParallelMuse, Tongyi DeepResearch 2025, "compressed reasoning aggregation"): one structured
  report per trajectory (Solution Planning / Solution Methods with only the essential tool-result
  fragments / Final Reasoning, inside <report>), then one integrate call over the reports: free
  reasoning before <answer>, agreement raises the likelihood but is no guarantee, a report without a
  definite answer is trusted less, exactly one report is chosen, no tools, no merged or broad answers.
- AggAgent: an aggregator agent with get_solution / search_trajectory / get_segment over the
  trajectories, finishing with a free-form solution; principles: tool results are ground truth, count
  evidence not trajectories, verify a key claim before finishing.
- TIPEX judge: a 0-2 rubric on answer definiteness, evidence strength and reasoning consistency; the
  judge reasons first, then writes the bare scores inside <scores>.
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

# AggAgent (aggagent/prompts.py of the reference code), in our own words; tool syntax adapted to a
# text protocol that a regex can constrain.
AGGAGENT_SYSTEM = """You are an aggregation agent. Several independent agents tried to answer the same question with
a search tool; you get their trajectories and must work out the most accurate answer from the best
reasoning and evidence among them. Nobody gives you the correct answer.

Tools (write your thoughts, then exactly one call per reply):
<tool>get_solution()</tool>  the final message of every trajectory; get_solution(i) for trajectory i only
<tool>search_trajectory(i, "words")</tool>  the steps of trajectory i that best match the words; add
    , "tool" to search only what the search tool returned, or , "assistant" for the agent's own text
<tool>get_segment(i, a, b)</tool>  steps a to b of trajectory i in full (at most 5 steps)
<finish><explanation>how the evidence leads to the answer</explanation><answer>the exact answer</answer></finish>

How to work:
1. Read the trajectory overview, then get the final solutions.
2. Do not rely on final solutions or on an agent's own reasoning. Where the trajectories disagree, go back
   to what the search tool actually returned, with search_trajectory and get_segment.
3. Check that what an agent claims matches what the tool returned, that its reasoning is not circular and
   that its logic holds.

Principles:
- Tool results are ground truth; agent reasoning is not. What a tool returned is an observation, what an
  agent concluded from it is an interpretation that may be wrong. When they conflict, trust the tool.
- Count evidence, not trajectories. One trajectory with a clear tool result supporting an answer
  outweighs many that reasoned their way to another answer without such a result. Agreement alone is
  not enough.
- Focus on where the agents diverge, and decide which observation was right, not which agent sounded sure.
- An empty or failed tool result supports nothing.
- Verify at least one key claim with search_trajectory or get_segment before you finish when the
  trajectories disagree.

The explanation must stand on its own: do not mention trajectories, agents or tools in it. The answer
is short and exact."""

AGGAGENT_USER = """Question: {question}

Trajectory overview:
{metadata}

There are {k} trajectories; valid trajectory numbers are 1 to {k}. Find the most accurate answer and
finish with it."""

AGGAGENT_OBSERVATION = "Tool result:\n{observation}"

AGGAGENT_FINAL = """You have reached the limit of what you can inspect. Do not call another tool: based on everything
above, finish now with the answer you consider most likely."""

AGGAGENT_INVALID = """No valid tool call found. Write one of <tool>get_solution()</tool>, <tool>search_trajectory(i, "words")</tool>,
<tool>get_segment(i, a, b)</tool>, or <finish><explanation>...</explanation><answer>...</answer></finish>."""

JUDGE = """Rate how trustworthy a search agent's answer is. Score each criterion 0, 1 or 2:

Definiteness: 2 = one specific, complete answer; 1 = vague or hedged; 0 = no real answer.
Evidence: 2 = a search result states the answer; 1 = results only hint at it; 0 = no supporting result.
Consistency: 2 = reasoning follows from the results without contradiction; 1 = small gaps; 0 = contradicts them.

Question: {question}

Record:
{transcript}

First reason briefly about each criterion: what the answer is, which result (if any) states it, and
whether the reasoning follows. Then give the bare scores in exactly this form:
<scores>
Definiteness: <0-2>
Evidence: <0-2>
Consistency: <0-2>
</scores>"""

# Structured outputs for small models; `LLMConfig.constrained` turns them off. No bounded repeats of
# character classes: xgrammar expands {m,n} into states and vLLM abandons a regex after 5 s of
# compiling, which a loaded 2-core box reaches (SmolLM2 tokenizer: "[^<\n]{1,300}" 10.2 s,
# "[^<\n]{0,80}" 1.9 s, a literal alternation or "[^<\n]*" < 0.01 s).
JUDGE_SCORES_REGEX = r"\n?Definiteness: [0-2]\nEvidence: [0-2]\nConsistency: [0-2]\n</scores>"
"""The bare scores after ``<scores>`` (also the forced continuation when the reasoning ran out)."""
JUDGE_REGEX = r"[^<]*<scores>" + JUDGE_SCORES_REGEX
"""Free reasoning (no ``<``), then the scores."""

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


def aggagent_regex(k: int, finish_only: bool) -> str:
    """Free thoughts (no ``<``), then one tool call over trajectories 1..k, or the finish block; only
    the finish block, with no thoughts before it, when `finish_only` (last iteration or context
    full): its explanation is the room to reason, and a small model's free thoughts otherwise run
    past the reply's token cap before the block opens (12 of 12 forced finishes of the 0.5B policy
    on dev questions), losing the answer the agent was asked for."""
    idx = "(" + "|".join(str(i) for i in range(1, k + 1)) + ")"
    finish = "<finish><explanation>[^<]*</explanation><answer>[^<]+</answer></finish>"
    if finish_only:
        return finish
    calls = "|".join([
        rf"get_solution\(({idx})?\)",
        rf'search_trajectory\({idx}, "[^"<]+"(, "(tool|assistant)")?\)',
        rf"get_segment\({idx}, [0-9]+, [0-9]+\)",
    ])
    return rf"[^<]*(<tool>({calls})</tool>|{finish})"
