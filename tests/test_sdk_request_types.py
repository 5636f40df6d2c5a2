"""The SDK request-type check the provider fakes apply to every request can fail: it reports an
unknown key, a missing required key, a wrong literal and a wrong JSON kind, at their path."""

from __future__ import annotations

from providers.sdk_types import (anthropic_problems, azure_problems, gemini_problems,
                                 openai_problems)

OPENAI_OK = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}],
             "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}


def test_a_request_that_fits_has_no_problems():
    assert openai_problems(OPENAI_OK) == []
    assert azure_problems({k: v for k, v in OPENAI_OK.items() if k != "model"}) == []
    assert anthropic_problems({"model": "claude", "max_tokens": 10, "temperature": 0.5,
                               "messages": [{"role": "user", "content": "Hi"}]}) == []
    assert gemini_problems({"contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
                            "generationConfig": {"responseJsonSchema": {"type": "object"},
                                                 "responseMimeType": "application/json"}}) == []


def test_openai_unknown_and_missing_keys_and_wrong_literals():
    body = {**OPENAI_OK, "messages": [{"role": "user", "content": "Hi", "name2": "x"}],
            "tools": [{"type": "function", "function": {"parameters": {}, "strictly": True}}],
            "tool_choice": {"type": "function", "function": {"name": 3}}}
    assert sorted(openai_problems(body)) == [
        "body.messages[0]: unknown key 'name2' (not in ChatCompletionUserMessageParam)",
        "body.tool_choice.function.name: expected a string, got 3",
        "body.tools[0].function: missing required key 'name' (FunctionDefinition)",
        "body.tools[0].function: unknown key 'strictly' (not in FunctionDefinition)",
    ]
    assert openai_problems({"messages": []}) == [
        "body: missing required key 'model' (CompletionCreateParamsNonStreaming)"]


def test_anthropic_blocks_are_checked_by_their_type():
    body = {"model": "claude", "max_tokens": 10, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "ok": 1}]},
        {"role": "robot", "content": "x"}], "top_k": "many"}
    problems = anthropic_problems(body)
    assert problems[0] == \
        "body.messages[0].content[0]: unknown key 'ok' (not in ToolResultBlockParam)"
    assert problems[1].startswith("body.messages[1].role: 'robot' is not one of (")
    assert problems[2:] == ["body.top_k: expected an integer, got 'many'"]


def test_gemini_parts_are_validated_by_google_genai():
    problems = gemini_problems({"contents": [{"role": "user", "parts": [{"txt": "Hi"}]}],
                                "tools": [{"functionDeclarations": [{"name": "f",
                                                                     "parameterz": {}}]}],
                                "safety": []})
    assert problems == [
        "body: unknown key 'safety'",
        "body.contents.0.parts.0.txt: Extra inputs are not permitted",
        "body.tools.0.functionDeclarations.0.parameterz: Extra inputs are not permitted",
    ]
