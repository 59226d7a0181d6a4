"""Browsing agent: search / open / find over a three-page store, session replay for branches."""

from __future__ import annotations

from tests.conftest import FakeEngine, turn_of

from trace_selector.rollout import prompts
from trace_selector.rollout.agent import Agent, AgentConfig
from trace_selector.rollout.browser_agent import BrowserTools
from trace_selector.search.pages import Page, PageStore

PAGES = [
    Page("https://wiki.local/budapest", "Budapest", "Budapest is the capital of Hungary.\nIt lies on the Danube."),
    Page("https://wiki.local/vienna", "Vienna", "Vienna is the capital of Austria."),
    Page("https://wiki.local/nile", "Nile", "The Nile is a river in Africa."),
]
SCRIPT = [
    "<think>s</think><search>Budapest Hungary</search>",
    "<think>o</think><open>https://WIKI.local/budapest</open>",
    "<think>f</think><find>danube</find>",
    "<think>a</think><answer>Danube</answer>",
]


def _run(script, **cfg):
    engine = FakeEngine(lambda text, req: script[min(turn_of(text), len(script) - 1)])
    tools = BrowserTools(PageStore(PAGES), top_k=2)
    agent = Agent(engine, tools, AgentConfig(**cfg))
    r = agent.start("b1", "Which river flows through Budapest?", ["Danube"], 0)
    agent.run([r])
    return engine, agent, r


def test_search_open_find_answer():
    engine, agent, r = _run(SCRIPT)
    assert [s.action for s in r.steps] == ["search", "open", "find"]
    search, opened, found = r.steps
    assert search.documents[0].url == "https://wiki.local/budapest" and search.documents[0].rank == 1
    assert search.search_result.startswith("[1] Budapest (https://wiki.local/budapest)")
    assert opened.documents[0].url == "https://wiki.local/budapest" and "L1: It lies on the Danube." in opened.search_result
    assert found.documents[0].title == "Budapest" and "L1: It lies on the Danube." in found.search_result
    assert "L0:" not in found.search_result
    assert (r.answer, r.finish_reason) == ("Danube", "answer")
    assert "<open>" in engine.requests[0].regex and "<find>" in engine.requests[0].regex
    assert r.to_trajectory("browsing").style == "browsing"


def test_failed_tools_are_observations():
    script = ["<think>f</think><find>danube</find>", "<think>o</think><open>Atlantis</open>",
              "<think>a</think><answer>none</answer>"]
    _, _, r = _run(script)
    assert r.steps[0].search_result == "No page is open. Use <open> first." and r.steps[0].documents == []
    assert r.steps[1].search_result == "Page not found: Atlantis" and r.steps[1].documents == []


def test_branch_replays_the_open_page():
    _, agent, r = _run(SCRIPT)
    child = r.branch(2, 1, agent.toolbox)  # resample the find step
    assert child.session.current == "https://wiki.local/budapest"
    assert child.prompt_ids == r.prompt_ids[: r.turn_starts[2]]
    assert prompts.ACTIONS["browsing"] == ("search", "open", "find", "answer")
