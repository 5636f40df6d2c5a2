"""The ask engine: ``ask PROMPT -> Type`` as a multi-turn flow with native tool calls
(MODELS.md §2).

::

    1 request  → messages + tools + tool_choice "auto" (or the forced tool), no response format
    2 response → assistant message + tool calls
    3 runtime  → each call through the tool pipeline (RUNTIME.md §3), mode "native"
    4 messages ← assistant(tool calls) + one tool-result message per call, in the model's order
    5 request  → messages + tools + the strict response format
    6 response → the final JSON → local validation (and ``retries`` when it does not fit)

With no tools the first request already carries the response format; ``-> string`` with no
tools asks for plain text. Every request and response is a telemetry event.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, Any

from luma.models.answer import AnswerProblem, AnswerShape, answer_shape, read_answer
from luma.models.ask_setup import AskSetup, register_api_keys
from luma.models.base import (
    ChatRequest,
    ChatResponse,
    Message,
    ModelSettings,
    Provider,
    ResponseFormat,
    ToolCall,
    ToolSpec,
)
from luma.models.resolve import api_key_env, require_api_key
from luma.runtime.errors import LumaError
from luma.runtime.values import compact_json, type_name
from luma.syntax.constants import constant_value
from luma.syntax import ast

if TYPE_CHECKING:
    from luma.models.http import ModelHttp
    from luma.models.test import ScriptedTurns
    from luma.runtime.engine import Runtime
    from luma.runtime.calls import MethodCall

TOOL_LIMIT_TEXT = "Tool call limit reached; answer with what you have."
NOT_PERMITTED_TEXT = ("You are not permitted to use that tool in this context. Continue with the "
                      "tools you have been given.")
TRUNCATION_NOTICE = ("[truncated: {n} more characters were omitted. Narrow the query or request "
                     "a specific section.]")
FEEDBACK_LIMIT = 4096
REPLAY_PLACEHOLDER_KEY = "luma-replay-no-key"   # stands in for an unset key under --replay
OFFLINE_WARNING = ("No model is configured, so the built-in offline model 'test' answered with "
                   "synthesized values; give the agent a model, set default_model in "
                   "luma.config.json, or pass --model NAME.")

DEFAULT_TOOL_RATE_LIMIT = 5
DEFAULT_TOOL_CONCURRENCY = 1
DEFAULT_TOOL_RESULT_MAX_CHARS = 20000
DEFAULT_RETRIES = 0

ProviderWrapper = Callable[[Provider], Provider]


@dataclass(frozen=True, slots=True)
class AskSettings:
    """The ``ask``-related keys of an agent (LANGUAGE.md §6), defaults filled in."""

    system: str | None = None
    tool_rate_limit: int = DEFAULT_TOOL_RATE_LIMIT
    tool_concurrency: int = DEFAULT_TOOL_CONCURRENCY
    tool_result_max_chars: int = DEFAULT_TOOL_RESULT_MAX_CHARS
    retries: int = DEFAULT_RETRIES


def ask_settings(agent: ast.AgentDecl | None) -> AskSettings:
    if agent is None:
        return AskSettings()

    def integer(key: str, default: int, minimum: int) -> int:
        entry = agent.entry(key)
        if entry is None:
            return default
        ok, value = constant_value(entry.value)
        return value if ok and type(value) is int and value >= minimum else default

    entry = agent.entry("system")
    system = None
    if entry is not None:
        ok, value = constant_value(entry.value)
        system = value if ok and isinstance(value, str) and value else None
    return AskSettings(system=system,
                       tool_rate_limit=integer("tool_rate_limit", DEFAULT_TOOL_RATE_LIMIT, 1),
                       tool_concurrency=integer("tool_concurrency", DEFAULT_TOOL_CONCURRENCY, 1),
                       tool_result_max_chars=integer("tool_result_max_chars",
                                                     DEFAULT_TOOL_RESULT_MAX_CHARS, 1),
                       retries=integer("retries", DEFAULT_RETRIES, 0))


@dataclass(frozen=True, slots=True)
class VisibleTools:
    """The tools offered to an agent's model, sorted by name, and their side-effect classes."""

    specs: tuple[ToolSpec, ...]
    side_effects: dict[str, str]

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specs]


class AskEngine:
    """Runs every ``ask`` of one run. Owns the run's model providers; the HTTP client is the
    run's own (created only when an HTTP provider is first used), or the program's shared one
    when the runtime has a shared client. :meth:`aclose` releases what the run owns."""

    def __init__(self, runtime: Runtime, *, default_model: str | None = None,
                 record: str | None = None, replay: str | None = None,
                 wrap_provider: ProviderWrapper | None = None,
                 setup: AskSetup | None = None, shared_http: bool = False) -> None:
        self.runtime = runtime
        if setup is None:
            setup = AskSetup.build(runtime.program, runtime.config, base_dir=runtime.base_dir,
                                   secrets=runtime.secrets, env=runtime.env,
                                   default_model=default_model, record=record, replay=replay)
        else:  # a run with its own environment has its own keys
            register_api_keys(setup.models, runtime.secrets, runtime.env)
        self.models = setup.models
        self.wrap_provider = wrap_provider
        self._recording = setup.recording.for_run() if setup.recording is not None else None
        # the scripted turns are served in order within each run
        fresh: dict[int, ScriptedTurns] = {}  # models that share a script share its cursor
        self._scripts = {name: fresh.setdefault(id(turns), turns.fresh())
                         for name, turns in setup.scripts.items()}
        self._shared_http = shared_http
        self._http: ModelHttp | None = None
        self._providers: dict[str, Provider] = {}
        self._visible: dict[str | None, VisibleTools] = {}
        self._shapes: dict[ast.TypeExpr, AnswerShape] = runtime.shared.answer_shapes
        self._offline_warned = False

    @property
    def _replaying(self) -> bool:
        return self._recording is not None and self._recording.replaying

    # ------------------------------------------------------------------------------ public
    async def ask(self, agent: ast.AgentDecl | None, method: MethodCall | None, prompt: str,
                  type_: ast.TypeExpr, using_tool: str | None) -> Any:
        """Run one ``ask`` flow and return its validated value."""
        resolved = self.models.for_agent(agent)
        settings = resolved.settings
        if not self._replaying:   # a replay answers from the recording: no key is needed
            key = require_api_key(settings, self.runtime.env)
            if key is not None:
                self.runtime.secrets.add(key)
        tools = self.visible_tools(agent)
        if using_tool is not None and using_tool not in tools.side_effects:
            raise self._cannot_force(agent, using_tool)
        shape = self._shape(type_)
        plain = shape.is_string and not tools.specs
        provider = self._provider(settings, None if plain else shape.wire)
        flow = _Flow(self.runtime, provider, settings, agent, method, ask_settings(agent), tools,
                     shape, plain, using_tool)
        try:
            return await flow.run(prompt)
        finally:
            if resolved.offline_default and not self._offline_warned:
                self._offline_warned = True
                self.runtime.warn("OFFLINE_MODEL", OFFLINE_WARNING)

    def visible_tools(self, agent: ast.AgentDecl | None) -> VisibleTools:
        """The agent's tools minus those the static policy refuses (a write tool under
        ``deny_write``, a scope not granted, a missing credential, an approval that cannot be
        given), sorted by name. A model never learns of a tool it may not use."""
        key = agent.name if agent is not None else None
        found = self._visible.get(key)
        if found is not None:
            return found
        if agent is None:
            found = VisibleTools((), {})
        else:
            from luma.models.export import tool_specs
            from luma.runtime import policy
            from luma.runtime.calls import agent_tools
            from luma.runtime.settings import tool_settings

            runtime = self.runtime
            decls = []
            for name in agent_tools(agent):
                decl = runtime.tools.get(name)
                if decl is not None and policy.offer_refusal(
                        decl, agent, runtime.env, interactive=runtime.interactive) is None:
                    decls.append(decl)
            specs = tuple(tool_specs(runtime.program, decls, runtime.schemas))
            found = VisibleTools(specs, {d.name: tool_settings(d).side_effects for d in decls})
        self._visible[key] = found
        return found

    async def aclose(self) -> None:
        """Release the providers and the HTTP client."""
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.aclose()
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()

    # ------------------------------------------------------------------------------ parts
    def _cannot_force(self, agent: ast.AgentDecl | None, tool: str) -> LumaError:
        """``using tool X`` where X cannot be offered: the refusal, in the user's words."""
        from luma.runtime import policy
        from luma.runtime.calls import agent_tools

        if agent is None:
            return LumaError("TOOL_PERMISSION_DENIED", f"A top-level ask has no tools, so it "
                             f"cannot use the tool '{tool}' required by using tool.", tool=tool)
        decl = self.runtime.tools.get(tool)
        if decl is None or tool not in agent_tools(agent):
            return LumaError("TOOL_PERMISSION_DENIED", f"Agent '{agent.name}' does not allow "
                             f"the tool '{tool}' required by using tool.", tool=tool)
        refusal = policy.offer_refusal(decl, agent, self.runtime.env,
                                       interactive=self.runtime.interactive)
        assert refusal is not None
        return refusal

    def _shape(self, type_: ast.TypeExpr) -> AnswerShape:
        shape = self._shapes.get(type_)
        if shape is None:
            shape = self._shapes[type_] = answer_shape(type_,
                                                       self.runtime.schemas.standalone(type_))
        return shape

    def _provider(self, settings: ModelSettings, answer: dict[str, Any] | None) -> Provider:
        provider: Provider
        if settings.provider == "test":
            from luma.models.test import TestProvider

            provider = TestProvider(settings, answer=answer,
                                    turns=self._scripts.get(settings.name))
        else:
            found = self._providers.get(settings.name)
            if found is None:
                from luma.models.http import ModelHttp
                from luma.models.providers import make_provider

                if self._http is None:
                    client = self.runtime.shared.http_client() if self._shared_http else None
                    self._http = ModelHttp(client, self._recording, secrets=self.runtime.secrets)
                env: Mapping[str, str] = self.runtime.env
                key_env = api_key_env(settings)
                if self._replaying and key_env is not None and not env.get(key_env):
                    env = {**env, key_env: REPLAY_PLACEHOLDER_KEY}
                found = make_provider(settings, client=self._http, env=env,
                                      recorder=self._recording)
                self._providers[settings.name] = found
            provider = found
        return self.wrap_provider(provider) if self.wrap_provider is not None else provider


# ---------------------------------------------------------------------------------- a flow


@dataclass(slots=True)
class _Result:
    """The tool-result message for one call, and what the trace records about it."""

    text: str
    outcome: str = "ok"
    is_error: bool = False
    fatal: LumaError | None = None
    full: Any = None          # the whole result, when the text was truncated
    omitted: int = 0


class _Flow:
    """One ``ask``: its conversation, turns, attempts and tool-call budget."""

    def __init__(self, runtime: Runtime, provider: Provider, settings: ModelSettings,
                 agent: ast.AgentDecl | None, method: MethodCall | None, conf: AskSettings,
                 tools: VisibleTools, shape: AnswerShape, plain: bool,
                 forced: str | None) -> None:
        self.runtime = runtime
        self.provider = provider
        self.settings = settings
        self.agent = agent
        self.method = method
        self.conf = conf
        self.tools = tools
        self.shape = shape
        self.plain = plain
        self.forced = forced
        self.turn = 0
        self.attempt = 0
        self.called_tools = False   # once a tool has been called, every request is strict
        self.calls_used = 0
        fn = method.fn if method is not None else None
        self.where = f"{agent.name}.{fn}.ask" if agent is not None and fn else (
            f"{agent.name}.ask" if agent is not None else "ask")

    # ------------------------------------------------------------------------------ loop
    async def run(self, prompt: str) -> Any:
        messages: list[Message] = []
        if self.conf.system:
            messages.append(Message("system", self.conf.system))
        messages.append(Message("user", prompt))
        attempts = self.conf.retries + 1
        problem: AnswerProblem | None = None
        answer: str | None = None
        for self.attempt in range(1, attempts + 1):
            self.calls_used = 0            # tool_rate_limit counts per attempt
            offer = bool(self.tools.specs)
            while True:
                response = await self._complete(self._request(messages, offer))
                if response.tool_calls:
                    if not offer and self.calls_used >= self.conf.tool_rate_limit:
                        raise self._tool_limit()
                    results = await self._run_calls(response.tool_calls)
                    messages.append(Message("assistant", response.content,
                                            tuple(response.tool_calls)))
                    messages.extend(
                        Message("tool", r.text, tool_call_id=c.id, tool_name=c.name,
                                is_error=r.is_error)
                        for c, r in zip(response.tool_calls, results))
                    fatal = next((r.fatal for r in results if r.fatal is not None), None)
                    if fatal is not None:
                        raise fatal
                    self.called_tools = True
                    if self.calls_used >= self.conf.tool_rate_limit:
                        offer = False
                    continue
                answer = response.content
                value, soft, problem = read_answer(self.shape, answer, plain=self.plain)
                if problem is None:
                    for violation in soft:
                        self.runtime.soft_warning(self.where, violation)
                    return value
                self.runtime.telemetry.emit(
                    "ask.invalid_answer", model=self.settings.name, agent=self._agent_name,
                    turn=self.turn, attempt=self.attempt,
                    errors=problem.lines(self._model_prefix))
                if self.attempt < attempts:
                    messages.append(Message("assistant", answer))
                    messages.append(Message("user", self._feedback(problem)))
                break
        assert problem is not None
        raise self._output_invalid(problem, answer, attempts)

    def _request(self, messages: Sequence[Message], offer: bool) -> ChatRequest:
        choice = "auto"
        if self.forced is not None and offer:
            choice, self.forced = self.forced, None     # forced on the first request only
        fmt = None
        if not self.plain and (not self.tools.specs or self.called_tools):
            fmt = ResponseFormat(self.shape.name, self.shape.wire)
        return ChatRequest(self.settings, tuple(messages),
                           self.tools.specs if offer else (), choice, fmt)

    async def _complete(self, request: ChatRequest) -> ChatResponse:
        self.turn += 1
        telemetry = self.runtime.telemetry
        common = {"model": self.settings.name, "provider": self.settings.provider,
                  "agent": self._agent_name, "turn": self.turn, "attempt": self.attempt}
        telemetry.emit("ask.request", **common, model_id=self.settings.model,
                       messages=len(request.messages), tools=[t.name for t in request.tools],
                       tool_choice=request.tool_choice,
                       response_format=(request.response_format.name
                                        if request.response_format is not None else None))
        started = perf_counter()
        span = None
        tracer = self.runtime.tracer
        if tracer is not None:
            from luma.runtime import otel

            content = self.runtime.capture_content
            span = otel.start_chat_span(
                tracer, self.settings.name, self.settings.provider,
                self.settings.model or self.settings.name,
                otel.input_messages(request.messages, self.runtime.secrets.redact)
                if content else None)
        try:
            response = await self.provider.complete(request)
        except LumaError as err:
            telemetry.emit("ask.response", **common, latency_ms=_ms(started), outcome=err.code)
            if span is not None:
                otel.end_chat_span(span, finish_reason=None, input_tokens=None,
                                   output_tokens=None, response_model=None,
                                   error_code=err.code,
                                   message=self.runtime.secrets.redact(err.message))
            raise
        except BaseException:
            if span is not None:
                span.end()
            raise
        usage = response.usage
        if span is not None:
            otel.end_chat_span(span, finish_reason=response.finish_reason,
                               input_tokens=usage.input_tokens,
                               output_tokens=usage.output_tokens, response_model=response.model,
                               output=otel.output_messages(response, self.runtime.secrets.redact)
                               if content else None)
        telemetry.emit("ask.response", **common, tokens_in=usage.input_tokens,
                       tokens_out=usage.output_tokens, cached_tokens=usage.cached_tokens,
                       reasoning_tokens=usage.reasoning_tokens,
                       latency_ms=_ms(started), finish_reason=response.finish_reason,
                       tool_calls=len(response.tool_calls),
                       outcome="refusal" if response.refusal else
                       "MODEL_OUTPUT_TRUNCATED" if response.truncated else "ok")
        if response.truncated:
            raise self._truncated(response)
        if response.refusal:
            reason = self.runtime.secrets.redact(response.refusal)  # before the cut
            raise LumaError("MODEL_REFUSAL", f"Model '{self.settings.name}' refused to answer: "
                            f"{' '.join(reason.split())[:200]}",
                            details={"refusal": response.refusal})
        return response

    # ------------------------------------------------------------------------- tool calls
    async def _run_calls(self, calls: Sequence[ToolCall]) -> list[_Result]:
        """Run one turn's calls: reads concurrently (at most ``tool_concurrency``), then writes
        one at a time in the model's order. Results come back in the model's order."""
        results: list[_Result | None] = [None] * len(calls)
        reads: list[tuple[int, ToolCall, dict[str, Any]]] = []
        writes: list[tuple[int, ToolCall, dict[str, Any]]] = []
        limit = self.conf.tool_rate_limit
        for i, call in enumerate(calls):
            self.calls_used += 1
            if self.calls_used > limit:
                results[i] = _Result(TOOL_LIMIT_TEXT, "limit", is_error=True)
                continue
            side_effects = self.tools.side_effects.get(call.name)
            if side_effects is None:
                results[i] = _Result(self._unknown_tool(call.name), "unknown_tool",
                                     is_error=True)
                continue
            arguments, problem = _arguments(call)
            if problem is not None:
                results[i] = _Result(problem, "bad_arguments", is_error=True)
                continue
            assert arguments is not None
            (writes if side_effects == "write" else reads).append((i, call, arguments))

        gate = asyncio.Semaphore(self.conf.tool_concurrency)

        async def read(i: int, call: ToolCall, arguments: dict[str, Any]) -> None:
            async with gate:
                results[i] = await self._call(call, arguments)

        outcomes = await asyncio.gather(*(read(*r) for r in reads), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        stopped = any(r is not None and r.fatal is not None for r in results)
        for i, call, arguments in writes:
            if stopped:
                break      # a call that ends the ask stops the writes after it
            results[i] = await self._call(call, arguments)
            stopped = results[i].fatal is not None    # type: ignore[union-attr]
        done = []
        for call, result in zip(calls, results):
            if result is None:   # a write that never ran because the ask is ending
                result = _Result("The call was not run because the ask ended.", "not_run",
                                 is_error=True)
            self._trace_result(call, result)
            done.append(result)
        return done

    async def _call(self, call: ToolCall, arguments: dict[str, Any]) -> _Result:
        from luma.runtime.calls import CallContext

        ctx = CallContext(self.agent, self.method, "native", call.id)
        try:
            value = await self.runtime.pipeline.call(call.name, arguments, ctx)
        except LumaError as err:
            return self._failure(call.name, arguments, err)
        text = value if isinstance(value, str) else compact_json(value)
        # secrets out before the cut, which could leave half of one behind
        text = self.runtime.secrets.redact(text)
        cap = self.conf.tool_result_max_chars
        if len(text) <= cap:
            return _Result(text)
        omitted = len(text) - cap
        return _Result(text[:cap] + "\n" + TRUNCATION_NOTICE.format(n=omitted), full=value,
                       omitted=omitted)

    def _failure(self, tool: str, arguments: dict[str, Any], err: LumaError) -> _Result:
        """A failed native call: a tool result the model can act on, or the end of the ask."""
        if err.code == "TOOL_INPUT_INVALID":
            return _Result(self._invalid_input(tool, arguments, err), err.code, is_error=True)
        if err.retryable:
            return _Result(err.message, err.code, is_error=True)
        text = NOT_PERMITTED_TEXT if err.code == "TOOL_PERMISSION_DENIED" else err.message
        return _Result(text, err.code, is_error=True, fatal=err)

    def _invalid_input(self, tool: str, arguments: dict[str, Any], err: LumaError) -> str:
        from luma.schema.compile import tool_input_name
        from luma.schema.validate import validator_for

        schema = self.runtime.schemas.standalone(tool_input_name(tool))
        _, violations = validator_for(schema).validate_and_fill(arguments, soft_rules=False,
                                                                infer_tags=True)
        lines = [f"- {v.render('')}" for v in violations if not v.soft]
        if not lines:
            lines = [f"- {err.message}"]
        return (f"The arguments for '{tool}' do not fit its input schema:\n" + "\n".join(lines)
                + "\nFix those fields and call the tool again.")

    def _unknown_tool(self, name: str) -> str:
        names = self.tools.names
        if not names:
            return f"There is no tool named '{name}'. No tools are available; answer without a tool."
        return (f"There is no tool named '{name}'. Available tools: {', '.join(names)}. Pick one "
                "of those or answer without a tool.")

    def _trace_result(self, call: ToolCall, result: _Result) -> None:
        fields: dict[str, Any] = {"model": self.settings.name, "agent": self._agent_name,
                                  "turn": self.turn, "tool": call.name, "call_id": call.id,
                                  "outcome": result.outcome, "chars": len(result.text)}
        if result.outcome != "ok":
            fields["content"] = result.text
        if result.omitted:
            fields["truncated"] = result.omitted
            fields["result"] = result.full
        self.runtime.telemetry.emit("ask.tool_result", **fields)

    # ---------------------------------------------------------------------------- errors
    @property
    def _agent_name(self) -> str | None:
        return self.agent.name if self.agent is not None else None

    @property
    def _model_prefix(self) -> str:
        return "value" if self.shape.wrapped else ""

    def _feedback(self, problem: AnswerProblem) -> str:
        """The message that tells the model why its answer was not accepted."""
        if problem.reason is not None:
            listing = f"Your answer was not accepted: {problem.reason}."
        else:
            listing = "Your answer does not fit the required schema:\n" + "\n".join(
                f"- {line}" for line in problem.lines(self._model_prefix))
        if len(listing) > FEEDBACK_LIMIT:
            listing = listing[:FEEDBACK_LIMIT - 3] + "..."
        return listing + "\nAnswer again with only the corrected JSON."

    def _output_invalid(self, problem: AnswerProblem, answer: str | None,
                        attempts: int) -> LumaError:
        tried = f"{attempts} attempt{'' if attempts == 1 else 's'}"
        detail = "; ".join(problem.lines(""))
        message = (f"The model's answer to {self.where} does not fit {self._type_text()} after "
                   f"{tried}: {detail}")
        excerpt = answer if answer is None or len(answer) <= 500 else answer[:497] + "..."
        return LumaError("ASK_OUTPUT_INVALID", message,
                         details={"attempts": attempts, "errors": problem.lines(""),
                                  "answer": excerpt})

    def _type_text(self) -> str:
        return self.shape.name if self.shape.name != "answer" else "the requested type"

    def _truncated(self, response: ChatResponse) -> LumaError:
        """``MODEL_OUTPUT_TRUNCATED``: the answer stopped at the output limit. Not retried: the
        same request with the same limit would stop at the same place."""
        limit = self.settings.max_tokens
        usage = response.usage
        spent = ""
        if usage.reasoning_tokens:
            spent = (f" ({usage.reasoning_tokens} of its {usage.output_tokens} output tokens "
                     "went to reasoning)")
        if response.truncated == "context_window":
            where = "the end of its context window"
            advice = "shorten the prompt, or lower tool_result_max_chars"
        elif limit is not None:
            where = f"its output limit (max_tokens: {limit})"
            advice = "raise max_tokens"
        else:
            where = "the provider's default output limit"
            advice = "set max_tokens higher"
        if spent and self.settings.provider in ("openai", "azure"):
            advice += " or lower reasoning_effort"
        return LumaError("MODEL_OUTPUT_TRUNCATED",
                         f"Model '{self.settings.name}' stopped at {where} before its answer "
                         f"to {self.where} was complete{spent}; {advice}.",
                         details={"max_tokens": limit, "output_tokens": usage.output_tokens,
                                  "finish_reason": response.finish_reason})

    def _tool_limit(self) -> LumaError:
        limit = self.conf.tool_rate_limit
        owner = f"agent '{self.agent.name}'" if self.agent is not None else "the ask"
        return LumaError("ASK_TOOL_LIMIT",
                         f"The model asked for another tool after {owner} reached its "
                         f"tool_rate_limit of {limit} native call{'' if limit == 1 else 's'} "
                         "in one ask.")


def _arguments(call: ToolCall) -> tuple[dict[str, Any] | None, str | None]:
    """The call's arguments as an object, or the tool-result text that says what is wrong."""
    raw = call.arguments
    if isinstance(raw, str):
        if not raw.strip():
            return {}, None
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            return None, (f"The arguments for '{call.name}' are not valid JSON: {exc.msg} at "
                          f"line {exc.lineno}, column {exc.colno}. Send the arguments as one "
                          "JSON object.")
    if raw is None:
        return {}, None
    if not isinstance(raw, dict):
        return None, (f"The arguments for '{call.name}' must be a JSON object, not "
                      f"{_a(type_name(raw))}. Send the arguments as one JSON object.")
    return raw, None


def _a(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word


def _ms(started: float) -> float:
    return round((perf_counter() - started) * 1000, 3)
