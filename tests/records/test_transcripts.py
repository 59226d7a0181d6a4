"""Chat transcripts: pairing tool calls with replies (OpenAI and harmony), final-answer extraction."""

from __future__ import annotations

import json

import pytest

from trace_selector.records.transcripts import (
    TranscriptError,
    extract_answer,
    extract_confidence,
    final_message,
    message_text,
    tool_calls,
)


def _call(cid, name, args):
    return {"id": cid, "function": {"name": name, "arguments": json.dumps(args)}}


def test_openai_calls_pair_by_id_then_by_order():
    messages = [
        {"role": "assistant", "tool_calls": [_call("x", "browser.search", {"query": "a"}), _call("y", "browser.open", {"url": "u"})]},
        {"role": "tool", "tool_call_id": "y", "content": "page"},
        {"role": "tool", "content": "hits"},  # no id: the oldest call still waiting
        {"role": "assistant", "tool_calls": [_call("z", "functions.find", {"pattern": "p"})]},  # never answered
    ]
    calls = tool_calls(messages)
    assert [(c.name, c.short_name, c.arguments, c.output) for c in calls] == [
        ("browser.search", "search", {"query": "a"}, "hits"),
        ("browser.open", "open", {"url": "u"}, "page"),
        ("functions.find", "find", {"pattern": "p"}, ""),
    ]
    assert [c.message for c in calls] == [0, 0, 3]


def test_harmony_calls_pair_with_the_tool_author():
    messages = [
        {"role": "assistant", "recipient": "browser.search", "content": '{"query": "q1"}'},
        {"role": "assistant", "recipient": "browser.open", "content": "not json"},
        {"role": "browser.open", "content": "opened"},  # author named after the tool
        {"author": {"role": "tool", "name": "browser.search"}, "content": [{"type": "text", "text": "found"}]},
        {"role": "assistant", "recipient": "all", "content": "not a call"},
    ]
    calls = tool_calls(messages)
    assert [(c.name, c.arguments, c.raw_arguments, c.output) for c in calls] == [
        ("browser.search", {"query": "q1"}, '{"query": "q1"}', "found"),
        ("browser.open", None, "not json", "opened"),
    ]


@pytest.mark.parametrize(
    "messages, field",
    [
        ("not a list", "messages"),
        ([{"role": "user", "content": 5}], "messages[0].content"),
        ([{"content": "who am I"}], "messages[0].role"),
        ([{"role": "assistant", "tool_calls": {"id": "x"}}], "messages[0].tool_calls"),
        ([{"role": "assistant", "tool_calls": [{"function": {"name": "s", "arguments": 3}}]}], "messages[0].tool_calls[0].function.arguments"),
        ([{"role": "user", "content": [{"type": "text", "text": 1}]}], "messages[0].content[0].text"),
    ],
)
def test_malformed_messages_name_the_field(messages, field):
    with pytest.raises(TranscriptError) as err:
        tool_calls(messages)
    assert err.value.field == field


def test_message_text_joins_parts():
    assert message_text({"content": [{"type": "text", "text": "a"}, {"type": "image"}, "b"]}) == "ab"
    assert message_text({"content": None}) == ""


def test_final_message_skips_calls_and_prefers_final_channel():
    messages = [
        {"role": "assistant", "content": "Exact Answer: early"},
        {"role": "assistant", "content": "", "tool_calls": [_call("a", "browser.search", {"query": "q"})]},
        {"role": "tool", "tool_call_id": "a", "content": "Exact Answer: from a tool"},
        {"role": "assistant", "content": "  "},
    ]
    assert final_message(messages) == "Exact Answer: early"
    harmony = [
        {"role": "assistant", "channel": "final", "content": "the final"},
        {"role": "assistant", "channel": "analysis", "content": "afterthought"},
    ]
    assert final_message(harmony) == "the final"
    assert final_message([{"role": "user", "content": "q"}]) is None


@pytest.mark.parametrize(
    "text, answer",
    [
        ("Explanation: x\nExact Answer: HMS Beagle\nConfidence: 90%", "HMS Beagle"),
        ("**Exact Answer:** **Paris**", "Paris"),
        ("<answer>first</answer> then <answer> second </answer>", "second"),
        ("<answer>tag</answer>\nExact Answer: line", "tag"),  # the tag outranks the line
        ("so the result is \\boxed{42}.", "42"),
        ("I could not find it.", ""),
        (None, ""),
    ],
)
def test_extract_answer(text, answer):
    assert extract_answer(text) == answer


@pytest.mark.parametrize(
    "text, confidence",
    [("Confidence: 85%", 0.85), ("**Confidence:** 0.6", 0.6), ("Confidence: 70", 0.7), ("Confidence: 250%", 1.0), ("no figure", None)],
)
def test_extract_confidence(text, confidence):
    assert extract_confidence(text) == (pytest.approx(confidence) if confidence is not None else None)
