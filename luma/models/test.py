"""The offline ``test`` provider (MODELS.md §4–§5): deterministic, no network, no dependency.

- On the first turn of an ``ask`` (no assistant message yet), when tools are offered and
  ``call_tools`` selects any of them — or a tool is forced with ``using tool`` — it calls them,
  each once, all in that one turn, in name order, with arguments synthesized from each tool's
  input schema.
- Arguments and answers prefer what the conversation showed: values of tool results and of the
  prompt under a field's name, and the prompt's numbers (``luma.models.seen``).
- Otherwise it answers with a value synthesized from the response schema; when the request
  carries none (tools were offered, or plain text is wanted) from the answer shape the ask
  engine gave it, or with plain text.
- With ``responses: "turns.json"`` it plays the scripted turns instead, in order, across the run.

Usage is always zero tokens.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from luma.models.base import ChatRequest, ChatResponse, ModelSettings, ToolCall, Usage
from luma.models.seen import Seen
from luma.models.synthesize import synthesize
from luma.runtime.errors import LumaError

PLAIN_TEXT_SCHEMA: dict[str, Any] = {"type": "string"}


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    name: str
    arguments: Any          # an object, or JSON text sent as it is (a test of bad arguments)
    id: str | None = None


@dataclass(frozen=True, slots=True)
class ScriptedTurn:
    content: str | None
    tool_calls: tuple[ScriptedCall, ...]


class ScriptedTurns:
    """The turns of a ``responses`` file, served in order for the whole run."""

    def __init__(self, model: str, path: str, turns: list[ScriptedTurn]) -> None:
        self.model = model
        self.path = path
        self.turns = turns
        self.next_index = 0

    @classmethod
    def load(cls, model: str, path: str) -> ScriptedTurns:
        """Read and check a turns file; a problem is a ``MODEL_CONFIG`` error naming the file."""
        shown = Path(path).name
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise LumaError("MODEL_CONFIG", f"Model '{model}' cannot read its scripted turns "
                            f"{path}: {exc.strerror or exc}.") from None
        except ValueError as exc:
            raise LumaError("MODEL_CONFIG", f"Model '{model}': the scripted turns {shown} are "
                            f"not valid JSON: {exc}.") from None
        if not isinstance(document, list):
            raise _bad_script(model, shown, "the file must hold a list of turns")
        return cls(model, path, [_turn(model, shown, i, raw) for i, raw in enumerate(document)])

    @classmethod
    def of(cls, model: str, turns: list[Any]) -> ScriptedTurns:
        """Turns given as values (``luma.testing``), checked as a file's are."""
        return cls(model, "the script", [_turn(model, "given to luma.testing", i, raw)
                                         for i, raw in enumerate(turns)])

    def fresh(self) -> ScriptedTurns:
        """The same turns from the first one: each run plays the script from its start."""
        return ScriptedTurns(self.model, self.path, self.turns)

    def next(self) -> ScriptedTurn:
        if self.next_index >= len(self.turns):
            count = len(self.turns)
            raise LumaError("MODEL_SCRIPT_EXHAUSTED",
                            f"Model '{self.model}' has no scripted turn left: "
                            f"{Path(self.path).name} holds {count} "
                            f"turn{'' if count == 1 else 's'} and the run asked for turn "
                            f"{count + 1}.")
        turn = self.turns[self.next_index]
        self.next_index += 1
        return turn


def _turn(model: str, shown: str, index: int, raw: Any) -> ScriptedTurn:
    where = f"turn {index + 1}"
    if not isinstance(raw, dict) or not ({"content", "tool_calls"} & raw.keys()):
        raise _bad_script(model, shown, f'{where} must be an object with "content" or '
                          '"tool_calls"')
    unknown = sorted(set(raw) - {"content", "tool_calls"})
    if unknown:
        raise _bad_script(model, shown, f"{where} has an unknown key '{unknown[0]}'")
    content = raw.get("content")
    if content is not None and not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False, separators=(",", ":"))
    calls = raw.get("tool_calls") or []
    if not isinstance(calls, list):
        raise _bad_script(model, shown, f'{where}: "tool_calls" must be a list')
    scripted = []
    for j, call in enumerate(calls):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise _bad_script(model, shown, f'{where}, tool call {j + 1} needs a "name"')
        call_id = call.get("id")
        scripted.append(ScriptedCall(call["name"], call.get("arguments", {}),
                                     call_id if isinstance(call_id, str) else None))
    return ScriptedTurn(content, tuple(scripted))


def _seen(request: ChatRequest) -> Seen:
    """What the conversation showed: the results of tool calls that succeeded (the latest
    first) and the prompt (the first user message; later ones are the runtime's own)."""
    results = [m.content for m in reversed(request.messages)
               if m.role == "tool" and not m.is_error and m.content]
    prompt = next((m.content for m in request.messages if m.role == "user"), None)
    return Seen.of(results, prompt)


def _bad_script(model: str, shown: str, what: str) -> LumaError:
    return LumaError("MODEL_CONFIG", f"Model '{model}': the scripted turns {shown} are not "
                     f"usable: {what}.")


class TestProvider:
    """The offline model for one ``ask`` flow.

    ``answer`` is the schema of the value the ask wants (None: plain text). A real model reads
    that from the prompt; the offline model needs it for the requests that carry no response
    format. ``turns`` are the model's scripted turns, shared by every ask of the run.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, settings: ModelSettings, *, answer: dict[str, Any] | None,
                 turns: ScriptedTurns | None = None) -> None:
        self.settings = settings
        self.answer = answer
        self.turns = turns

    async def complete(self, request: ChatRequest) -> ChatResponse:
        earlier_calls = sum(len(m.tool_calls) for m in request.messages)
        if self.turns is not None:
            return self._scripted(self.turns.next(), earlier_calls)
        first_turn = not any(m.role == "assistant" for m in request.messages)
        seen = _seen(request)
        if first_turn and request.tools:
            chosen = self._chosen_tools(request)
            if chosen:
                calls = tuple(
                    ToolCall(f"call_{earlier_calls + i + 1}", spec.name,
                             synthesize(spec.parameters, spec.name, seen))
                    for i, spec in enumerate(chosen))
                return ChatResponse(None, calls, "tool_calls", Usage(0, 0))
        fmt = request.response_format
        schema = fmt.schema if fmt is not None else self.answer
        if schema is None:
            text = synthesize(PLAIN_TEXT_SCHEMA)
        else:
            text = json.dumps(synthesize(schema, seen=seen), ensure_ascii=False,
                              separators=(",", ":"))
        return ChatResponse(text, (), "stop", Usage(0, 0))

    def _chosen_tools(self, request: ChatRequest) -> list[Any]:
        offered = sorted(request.tools, key=lambda t: t.name)
        choice = request.tool_choice
        if choice not in ("auto", "none", "required"):
            return [t for t in offered if t.name == choice]
        if choice == "none":
            return []
        selection = self.settings.call_tools
        if selection == "all" or choice == "required":
            return offered
        if selection == "none":
            return []
        return [t for t in offered if t.name in selection]

    @staticmethod
    def _scripted(turn: ScriptedTurn, earlier_calls: int) -> ChatResponse:
        calls = tuple(ToolCall(c.id or f"call_{earlier_calls + i + 1}", c.name, c.arguments)
                      for i, c in enumerate(turn.tool_calls))
        return ChatResponse(turn.content, calls, "tool_calls" if calls else "stop", Usage(0, 0))

    async def aclose(self) -> None:
        """Nothing to release."""
