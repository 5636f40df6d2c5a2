"""The tool execution pipeline (RUNTIME.md §3): every tool call, direct or native, runs here.

    1 registry lookup        5 approval               9 idempotency
    2 credential             6 input validation      10 handler (timeout, Signal, retries)
    3 scope                  7 needs resolution      11 output validation
    4 deny_write             8 cache / single-flight 12 cache/idempotency write, telemetry

Everything that does not depend on the input is worked out once per tool (schemas, validators,
the handler's signature, the retry policy) and once per tool and agent (refusals, timeout,
which contexts may be used), so the path a call takes is short. A failure in steps 6–11
counts against the agent method call's ``tool_failure_limit`` (the circuit breaker).
"""

from __future__ import annotations

import asyncio
import math
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, Any

from luma.runtime import policy
from luma.runtime.cache import CACHE_OFF, ResultCache, copy_error
from luma.runtime.contexts import Need, NeedsResolver
from luma.runtime.errors import LumaError, LumaToolError
from luma.runtime.handlers import HandlerInvoker, HandlerTimeout
from luma.runtime.process_errors import RemoteFailure, RemoteOutputInvalid
from luma.runtime.signal import Signal
from luma.runtime.settings import (
    AgentSettings,
    ToolSettings,
    agent_settings,
    any_idempotent,
    effective_timeout_ms,
    tool_settings,
)
from luma.runtime.values import canonical_json, json_problem, plain_json, python_type_name
from luma.schema.compile import tool_input_name, tool_result
from luma.schema.validate import SchemaValidator, Violation, validator_for
from luma.schema.violations import join_path
from luma.syntax import ast

if TYPE_CHECKING:
    from luma.runtime.calls import CallContext, ToolHost
    from luma.runtime.stores import IdempotencyStore

TOOL_NOT_FOUND = "TOOL_NOT_FOUND"
TOOL_INPUT_INVALID = "TOOL_INPUT_INVALID"
TOOL_OUTPUT_INVALID = "TOOL_OUTPUT_INVALID"
TOOL_ERROR_INVALID = "TOOL_ERROR_INVALID"
TOOL_TIMEOUT = "TOOL_TIMEOUT"
TOOL_FAILED = "TOOL_FAILED"
TOOL_CIRCUIT_OPEN = "TOOL_CIRCUIT_OPEN"
TOOL_CONFIG_INVALID = "TOOL_CONFIG_INVALID"


class ToolPipeline:
    """Runs tool calls for one :class:`~luma.runtime.engine.Runtime`."""

    def __init__(self, runtime: ToolHost) -> None:
        self.runtime = runtime
        shared = runtime.shared  # what every run of the program shares
        self._shared = shared
        self.cache: ResultCache = shared.cache
        self.stdin = sys.stdin  # where the approval prompt reads its answer
        self._tools: dict[str, _ToolPlan] = shared.tool_plans
        self._plans: dict[tuple[str, str | None], _CallPlan] = {}
        self._agents: dict[str, AgentSettings] = shared.agent_settings
        self._secrets = runtime.secrets
        self._approval_lock: asyncio.Lock | None = None
        config = runtime.config
        self._contexts: Mapping[str, Any] = getattr(config, "tool_contexts", None) or {}
        if shared.has_idempotent_tools is None:
            shared.has_idempotent_tools = any_idempotent(runtime.program.tools)
        if shared.store is None and shared.has_idempotent_tools:
            shared.store = self._open_store()  # a store that cannot open stops the program

    # ------------------------------------------------------------------------------- public
    @property
    def idempotency_store(self) -> IdempotencyStore:
        """The store of idempotent calls (``idempotency_store`` in the config; memory by
        default). It may be replaced before the first call."""
        shared = self._shared
        if shared.store is None:
            shared.store = self._open_store()
        return shared.store

    @idempotency_store.setter
    def idempotency_store(self, store: IdempotencyStore) -> None:
        self._shared.store = store

    async def call(self, name: str, raw_input: Any, ctx: CallContext) -> Any:
        """Run one tool call through steps 1–12; return the validated result or raise
        :class:`LumaError`. A ``tool.call`` telemetry event is emitted either way."""
        started = perf_counter()
        stats = _Stats(threaded=ctx.mode == "native")
        agent = ctx.agent
        if self.runtime.tracer is not None or self.runtime.telemetry.watching:
            self._started(name, raw_input, ctx, stats)
        try:
            method = ctx.method
            if method is not None and method.open_error is not None:
                raise copy_error(method.open_error)
            plan = self._plans.get((name, agent.name if agent is not None else None))
            if plan is None:
                plan = self._plan(name, agent)
            if plan.tool.datasource is not None:
                stats.datasource = plan.tool.datasource
            result = await self._run(plan, raw_input, stats)
            if stats.datasource is not None:
                stats.rows = _row_count(result)
        except LumaError as err:
            if self._secrets:
                err = self._redact_error(err)
            final = self._count_failure(name, err, stats, ctx)
            self._emit(name, ctx, started, stats, final)
            if self.runtime.call_observer is not None:
                self.runtime.call_observer(name, raw_input, None, final, ctx.mode)
            raise final from None
        except asyncio.CancelledError:
            self._emit(name, ctx, started, stats, None, outcome="cancelled")
            raise
        self._emit(name, ctx, started, stats, None, result=result)
        if self.runtime.call_observer is not None:
            self.runtime.call_observer(name, raw_input, result, None, ctx.mode)
        return result

    def _started(self, name: str, raw_input: Any, ctx: CallContext, stats: _Stats) -> None:
        """A call starts while someone watches: its span, and the ``tool.start`` event for
        ``-v`` and ``--trace``. A query's or command's parameters are never recorded."""
        runtime = self.runtime
        tool = runtime.tools.get(name)
        stats.values = tool is None or tool.kind == "tool"
        tracer = runtime.tracer
        if tracer is not None:
            from luma.runtime import otel

            arguments = None
            if runtime.capture_content and stats.values:
                arguments = otel.content_text(raw_input, self.runtime.secrets.redact)
            plan = self._tools.get(name)  # before its first call the plan is not made yet
            side_effects = (plan.settings.side_effects if plan is not None
                            else tool_settings(tool).side_effects if tool is not None
                            else "unknown")
            stats.span = otel.start_tool_span(tracer, name, ctx.call_id, side_effects,
                                              arguments)
        telemetry = runtime.telemetry
        if telemetry.watching:
            stats.input = raw_input
            agent = ctx.agent
            fields: dict[str, Any] = {"tool": name,
                                      "agent": None if agent is None else agent.name,
                                      "mode": ctx.mode}
            if ctx.call_id is not None:
                fields["call_id"] = ctx.call_id
            if stats.values and telemetry.values:
                fields["input"] = raw_input
            telemetry.emit("tool.start", **fields)

    def forget(self) -> None:
        """Drop every precomputed plan (after handlers or the environment's contexts change)."""
        self._tools.clear()
        self._plans.clear()

    # ------------------------------------------------------------------------------- steps
    async def _run(self, plan: _CallPlan, raw_input: Any, stats: _Stats) -> Any:
        tool = plan.tool
        settings = tool.settings
        env = self.runtime.env
        # 2 credential
        if settings.credential is not None:
            secret = env.get(settings.credential)
            if not secret:
                raise LumaError(policy.PERMISSION_DENIED, f"Tool '{tool.name}' is missing "
                                f"credential: {settings.credential}.", tool=tool.name)
            self._keep_secret(secret)
        # 3, 4 scope and deny_write depend only on the tool and the agent
        if plan.refusal is not None:
            raise LumaError(policy.PERMISSION_DENIED, plan.refusal, tool=tool.name)
        # 5 approval
        if plan.needs_approval:
            await self._approve(settings, raw_input)
        stats.counts = True
        # 6 input validation: defaults, int coercion, union tags; soft rules are hard here
        value, violations = tool.input.validate_and_fill(raw_input, soft_rules=False,
                                                         infer_tags=True)
        if violations:
            raise LumaError(TOOL_INPUT_INVALID, _message(TOOL_INPUT_INVALID,
                                                         tool.input_prefix, violations),
                            tool=tool.name)
        # 7 needs
        needs = plan.resolver.resolve(env, self._keep_secret) if plan.resolver is not None \
            else None
        # 8 cache and single-flight
        if tool.cached:
            try:
                key = canonical_json(_numbers_by_value(value))
            except (TypeError, ValueError):
                key = None  # not JSON (a host caller's value): not cacheable
            if key is not None:
                result, use, shared = await self.cache.get_or_run(
                    tool.name, key, lambda: self._after_cache(plan, value, needs, stats))
                stats.cache = use
                stats.shared = shared
                return result
        if tool.key_path is None:
            return await self._execute(plan, value, needs, stats)
        return await self._idempotent(plan, value, needs, stats)

    async def _after_cache(self, plan: _CallPlan, value: Any, needs: Any, stats: _Stats) -> Any:
        if plan.tool.key_path is None:
            return await self._execute(plan, value, needs, stats)
        return await self._idempotent(plan, value, needs, stats)

    async def _idempotent(self, plan: _CallPlan, value: Any, needs: Any, stats: _Stats) -> Any:
        # 9 idempotency: the store runs steps 10–11 at most once per key and stores the result
        tool = plan.tool
        assert tool.key_path is not None
        key = _idempotency_key(value, tool.key_path)
        if key is None:
            return await self._execute(plan, value, needs, stats)
        from luma.runtime.stores import StoreError, input_fingerprint

        store = self.idempotency_store
        try:
            outcome = await store.run_once(
                tool.name, key, input_fingerprint(_numbers_by_value(value)),
                tool.settings.idempotency_ttl_ms,
                lambda: self._execute(plan, value, needs, stats),
                revalidate=tool.revalidate if store.persistent else None,
                wait_timeout_ms=plan.timeout_ms)
        except StoreError as err:
            raise LumaError(err.code, err.message, retryable=err.retryable,
                            tool=tool.name) from None
        stats.replayed = outcome.replayed
        return outcome.value

    async def _execute(self, plan: _CallPlan, value: Any, needs: Any, stats: _Stats) -> Any:
        # 10 the handler, with its timeout and retries
        tool = plan.tool
        invoker = tool.invoker
        limit = self.runtime.concurrency_limits.get(tool.name)  # the run's own
        while True:
            stats.attempts += 1
            if limit is not None:
                await limit.acquire()  # tool_module_policy.max_concurrency of the module
            try:
                if plan.timeout_s is None and not invoker.is_async and not stats.threaded:
                    runtime = self.runtime
                    runtime.inline_handler = tool.name  # what a Ctrl-C waits for
                    try:
                        raw = invoker.call(value, Signal() if invoker.wants_signal else None,
                                           needs)
                    finally:
                        runtime.inline_handler = None
                    if type(raw) is not dict and hasattr(raw, "__await__"):
                        raw = await raw
                    elif (tool.key_path is not None or tool.cached) and _cancel_requested():
                        # interrupted while the handler ran on this thread: its result is
                        # dropped, so a cancelled call stores nothing (a call that stores
                        # nothing meets the cancellation at its next await)
                        raise asyncio.CancelledError()
                else:
                    raw = await invoker.run(value, needs, plan.timeout_s,
                                            threaded=stats.threaded)
                break
            except HandlerTimeout as timeout:
                err = LumaError(TOOL_TIMEOUT, f"Tool '{tool.name}' timed out after "
                                f"{plan.timeout_ms} ms{timeout.detail}.", retryable=True,
                                tool=tool.name)
            except BaseException as exc:  # whatever a handler raises is its failure...
                if isinstance(exc, asyncio.CancelledError) and _cancel_requested():
                    raise  # ...except the cancellation of this call itself
                err = self._handler_error(tool, exc, stats)
            finally:
                if limit is not None:
                    limit.release()
            if not err.retryable or stats.attempts > tool.settings.retries:
                raise err
            delay = retry_delay(tool.settings, stats.attempts)
            if delay > 0:
                await asyncio.sleep(delay)
        # the boundary: what comes back must be JSON before anything else looks at it
        subclasses = [False]
        problem = json_problem(raw, subclasses)
        if problem is not None:
            raise LumaError(TOOL_OUTPUT_INVALID, f"[{TOOL_OUTPUT_INVALID}] "
                            f"{join_path(tool.output_prefix, problem[0])}: {problem[1]}",
                            tool=tool.name)
        if subclasses[0]:
            raw = plain_json(raw)  # an enum member, a numpy float: from here on, plain values
        # 11 output validation: a tagged union must carry its tag; soft rules warn
        result, violations = tool.output.validate_and_fill(raw, soft_rules=True)
        if violations:
            violations = self._shown(tool.output, raw, violations)
            hard = [v for v in violations if not v.soft]
            if hard:
                raise LumaError(TOOL_OUTPUT_INVALID, _message(TOOL_OUTPUT_INVALID,
                                                              tool.output_prefix, hard),
                                tool=tool.name)
            for v in violations:
                self.runtime.soft_warning(tool.output_prefix, v)
        return result

    def _handler_error(self, tool: _ToolPlan, exc: BaseException, stats: _Stats) -> LumaError:
        """What a handler raised, as a Luma error."""
        if isinstance(exc, LumaToolError):
            return self._typed_error(tool, exc)
        if isinstance(exc, RemoteOutputInvalid):  # a process module's output that is not JSON
            return LumaError(TOOL_OUTPUT_INVALID, f"[{TOOL_OUTPUT_INVALID}] "
                             f"{join_path(tool.output_prefix, exc.path)}: {exc.text}",
                             tool=tool.name)
        if isinstance(exc, LumaError):
            invalid = self._error_fields_problem(tool, exc.code, exc.message, exc.details,
                                                 exc.extra)
            if invalid is not None:
                return invalid
            if exc.tool is None:
                exc.tool = tool.name
            return exc
        try:
            stats.traceback = self._redact("".join(traceback.format_exception(exc)))
        except Exception:  # a traceback that cannot be formatted is not worth a crash
            stats.traceback = None
        name = type(exc).__name__
        # secrets out before the whitespace is collapsed: one with a newline still matches
        text = " ".join(self._redact(_exception_text(exc)).split())
        if isinstance(exc, RemoteFailure):  # raised in a process module's child, or its end
            name, text = exc.exception, " ".join(self._redact(exc.text).split())
            stats.traceback = None
        elif isinstance(exc, SystemExit):
            text = f"the handler called exit({_safe_repr(exc.code)})"
        elif isinstance(exc, KeyboardInterrupt):
            text = "the handler raised KeyboardInterrupt"
        elif not text:
            text = name
        elif isinstance(exc, LookupError) or not isinstance(exc, Exception):
            text = f"{name}: {text}"  # KeyError's message is just the key
        return LumaError(TOOL_FAILED, f"Tool '{tool.name}' failed: {self._redact(text)}",
                         retryable=False, tool=tool.name, details={"exception": name})

    def _error_fields_problem(self, tool: _ToolPlan, code: Any, message: Any, details: Any,
                              extra: dict[str, Any]) -> LumaError | None:
        """A typed error whose code or message is not a string, or whose fields are not JSON
        values, is ``TOOL_ERROR_INVALID``: it would reach a ``catch``, a model and the output."""
        where = tool.error_prefix
        reason: str | None = None
        if not isinstance(code, str) or not code:
            got = "an empty string" if isinstance(code, str) else python_type_name(code)
            reason = f"{where}.code: expected a non-empty string, got {got}"
        elif not isinstance(message, str):
            reason = f"{where}.message: expected string, got {python_type_name(message)}"
        else:
            for field, value in (("code", code), ("message", message), ("details", details),
                                 *extra.items()):
                problem = json_problem(value)
                if problem is not None:
                    reason = f"{join_path(f'{where}.{field}', problem[0])}: {problem[1]}"
                    break
        if reason is None:
            return None
        return LumaError(TOOL_ERROR_INVALID, f"[{TOOL_ERROR_INVALID}] {reason}",
                         retryable=False, tool=tool.name)

    def _typed_error(self, tool: _ToolPlan, exc: LumaToolError) -> LumaError:
        invalid = self._error_fields_problem(tool, exc.code, exc.message, exc.details,
                                             exc.extra)
        if invalid is not None:
            return invalid
        fields = exc.fields()
        if tool.error is not None:
            checked, violations = tool.error.validate_and_fill(fields, soft_rules=True)
            violations = self._shown(tool.error, fields, violations)
            hard = [v for v in violations if not v.soft]
            if hard:
                return LumaError(TOOL_ERROR_INVALID, _message(TOOL_ERROR_INVALID,
                                                              tool.error_prefix, hard),
                                 retryable=False, tool=tool.name,
                                 details={"code": exc.code, "message": self._redact(exc.message)})
            for v in violations:
                self.runtime.soft_warning(tool.error_prefix, v)
            if isinstance(checked, dict):
                fields = checked
        extra = {k: v for k, v in fields.items()
                 if k not in ("code", "message", "retryable", "details", "tool")}
        return LumaError(exc.code, exc.message, retryable=exc.retryable is True, tool=tool.name,
                         details=fields.get("details"), extra=extra)

    async def _approve(self, tool: ToolSettings, raw_input: Any) -> None:
        approve = self.runtime.approve
        if approve is not None:  # the caller's callback alone decides
            if not await policy.ask_callback(approve, tool.name,
                                             self._secrets.redact_value(raw_input)):
                raise policy.declined(tool.name)
            return
        if tool.name in policy.approved_tools(self.runtime.env):
            return
        if not self.runtime.interactive:
            raise policy.not_in_approved_list(tool.name)
        if self._approval_lock is None:
            self._approval_lock = asyncio.Lock()
        async with self._approval_lock:  # one question on the terminal at a time
            approved = await asyncio.to_thread(
                # the input without its secrets before the prompt cuts it short
                policy.ask_approval, tool, self._secrets.redact_value(raw_input),
                stdin=self.stdin,
                stderr=self.runtime.stderr, redact=self._redact)
        if not approved:
            raise policy.declined(tool.name)

    # -------------------------------------------------------------------- circuit, telemetry
    def _count_failure(self, name: str, err: LumaError, stats: _Stats,
                       ctx: CallContext) -> LumaError:
        """Steps 6–11 count against the agent method call; at ``tool_failure_limit`` the error
        becomes ``TOOL_CIRCUIT_OPEN`` and the method call's later tool calls fail the same way."""
        method = ctx.method
        if not stats.counts or method is None or method.open_error is not None:
            return err
        method.failures += 1
        agent = ctx.agent
        if agent is None:
            return err
        limit = self._agent(agent).tool_failure_limit
        if limit is None or method.failures < limit:
            return err
        circuit = LumaError(TOOL_CIRCUIT_OPEN, f"Tool '{name}' failed {method.failures} times "
                            f"in agent '{agent.name}'; the circuit is open.", retryable=False,
                            tool=name, details={"code": err.code, "message": err.message})
        method.open_error = circuit
        return copy_error(circuit)

    def _emit(self, name: str, ctx: CallContext, started: float, stats: _Stats,
              err: LumaError | None, outcome: str | None = None, result: Any = None) -> None:
        agent = ctx.agent
        duration_ms = round((perf_counter() - started) * 1000, 3)
        if outcome is None:
            outcome = "ok" if err is None else err.code
        if ctx.call_id is None:
            fields: dict[str, Any] = {
                "tool": name, "agent": None if agent is None else agent.name, "mode": ctx.mode,
                "duration_ms": duration_ms, "attempts": stats.attempts, "cache": stats.cache,
                "single_flight": stats.shared, "idempotent_replay": stats.replayed,
                "outcome": outcome}
        else:
            fields = {
                "tool": name, "agent": None if agent is None else agent.name, "mode": ctx.mode,
                "call_id": ctx.call_id, "duration_ms": duration_ms, "attempts": stats.attempts,
                "cache": stats.cache, "single_flight": stats.shared,
                "idempotent_replay": stats.replayed, "outcome": outcome}
        if err is not None:
            fields["error"] = err.message
        if stats.traceback is not None:
            fields["traceback"] = stats.traceback
        if stats.datasource is not None:  # never the parameters' values
            fields["datasource"] = stats.datasource
            fields["rows"] = stats.rows
        telemetry = self.runtime.telemetry
        if stats.values and telemetry.values:  # -v or --trace: what went in and came out
            fields["input"] = stats.input
            if outcome == "ok":
                fields["result"] = result
        telemetry.emit("tool.call", **fields)
        if stats.span is not None:
            from luma.runtime import otel

            content = None
            if outcome == "ok" and stats.values and self.runtime.capture_content:
                content = otel.content_text(result, self.runtime.secrets.redact)
            otel.end_tool_span(stats.span, attempts=stats.attempts, cache=stats.cache,
                               single_flight=stats.shared, replayed=stats.replayed,
                               error_code=None if outcome == "ok" else outcome,
                               message=None if err is None else err.message, result=content)

    # ------------------------------------------------------------------------------ secrets
    def _keep_secret(self, value: str) -> None:
        # A value shorter than secrets.MIN_SECRET_LENGTH would match ordinary words ("app" in
        # "approved"); it is still never written by the runtime, only not scrubbed from what a
        # handler writes.
        self._secrets.add(value)

    def _redact_error(self, err: LumaError) -> LumaError:
        """The error with every known secret taken out of every field: its code, message, tool,
        details (keys and values) and extra fields (a handler may put one anywhere; the error
        reaches stderr, the trace, a model's prompt and ``catch``)."""
        redact = self._secrets.redact_value
        fields = (err.code, err.message, err.tool, err.details, err.extra)
        redacted = redact(fields)
        if redacted is fields:
            return err
        code, message, tool, details, extra = redacted
        return LumaError(code, message, retryable=err.retryable, tool=tool, details=details,
                         extra=extra, span=err.span)

    def _redact(self, text: str) -> str:
        return self._secrets.redact(text)

    def _shown(self, validator: SchemaValidator, value: Any,
               violations: list[Violation]) -> list[Violation]:
        """The violations to show for ``value``: with a secret in it, those of the value with its
        secrets replaced, as a message cuts a long value short and could cut a secret in half
        (the text edge would no longer recognise it). The original ones when replacing changes
        what breaks (a rule the secret itself breaks)."""
        if not violations or not self._secrets:
            return violations
        redacted = self._secrets.redact_value(value)
        if redacted is value:
            return violations
        _, shown = validator.validate_and_fill(redacted, soft_rules=True)
        same = [(v.path, v.rule, v.soft) for v in shown] == \
            [(v.path, v.rule, v.soft) for v in violations]
        return shown if same else violations

    # -------------------------------------------------------------------------------- plans
    def _plan(self, name: str, agent: ast.AgentDecl | None) -> _CallPlan:
        tool = self._tools.get(name)
        if tool is None:
            tool = self._tool_plan(name)
        a = self._agent(agent) if agent is not None else None
        refusal = policy.scope_refusal(tool.settings, a) or \
            policy.deny_write_refusal(tool.settings, a)
        timeout_ms = effective_timeout_ms(tool.settings, a)
        resolver = None
        if tool.needs:
            resolver = NeedsResolver(name, tool.needs, self._contexts,
                                     a.tool_contexts if a is not None else None,
                                     a.name if a is not None else None)
        plan = _CallPlan(tool, refusal.message if refusal is not None else None,
                         policy.needs_approval(tool.settings, a), timeout_ms,
                         _seconds(timeout_ms) if timeout_ms is not None else None, resolver)
        self._plans[(name, agent.name if agent is not None else None)] = plan
        return plan

    def _agent(self, agent: ast.AgentDecl) -> AgentSettings:
        found = self._agents.get(agent.name)
        if found is None:
            found = self._agents[agent.name] = agent_settings(agent)
        return found

    def _tool_plan(self, name: str) -> _ToolPlan:
        runtime = self.runtime
        decl = runtime.tools.get(name)
        if decl is None:
            raise LumaError(TOOL_NOT_FOUND, f"Unknown tool '{name}'.", tool=name)
        handler = runtime.handlers.get(name)
        if handler is None:
            raise LumaError(TOOL_NOT_FOUND, f"'{name}' is not registered in the tool registry.",
                            tool=name)
        settings = tool_settings(decl, data_timeout_ms(decl, runtime.program))
        problem = consistency_problem(decl, settings)
        if problem is not None:
            raise LumaError(TOOL_CONFIG_INVALID, problem, tool=name)
        schemas = runtime.schemas
        output = validator_for(schemas.standalone(tool_result(decl)))
        error = (validator_for(schemas.standalone(settings.error_schema))
                 if settings.error_schema is not None else None)
        needs = tuple(Need(n.name, validator_for(schemas.standalone(n.type)))
                      for n in decl.needs)

        def revalidate(value: Any) -> None:
            _, violations = output.validate_and_fill(value, soft_rules=True)
            hard = [v for v in violations if not v.soft]
            if hard:
                raise ValueError(_message(TOOL_OUTPUT_INVALID, f"{name}.output", hard))

        plan = _ToolPlan(
            name=name, settings=settings, invoker=HandlerInvoker(handler, name),
            input=validator_for(schemas.standalone(tool_input_name(name))), output=output,
            error=error, needs=needs, cached=settings.cache,
            key_path=settings.idempotency_key if settings.idempotent else None,
            revalidate=revalidate,
            input_prefix=f"{name}.input", output_prefix=f"{name}.output",
            error_prefix=f"{name}.error", datasource=data_source_name(decl))
        self._tools[name] = plan
        return plan

    def _open_store(self) -> IdempotencyStore:
        from luma.runtime.store_config import open_idempotency_store
        from luma.runtime.stores import StoreError

        runtime = self.runtime
        config = getattr(runtime.config, "idempotency_store", None)
        try:
            return open_idempotency_store(
                getattr(config, "backend", "memory"), getattr(config, "path", None),
                getattr(config, "encryption", None), base_dir=runtime.base_dir,
                environ=runtime.env, warn=lambda message: runtime.warn("IDEMPOTENCY_STORE",
                                                                       message),
                url_env=getattr(getattr(config, "url", None), "env", None),
                table=getattr(config, "table", None), prefix=getattr(config, "prefix", None),
                lease_ms=getattr(config, "lease_ms", None))
        except StoreError as err:
            raise LumaError(err.code, err.message) from None


# -------------------------------------------------------------------------------- the plans


@dataclass(slots=True)
class _ToolPlan:
    """Everything about one tool that does not depend on the input or the agent."""

    name: str
    settings: ToolSettings
    invoker: HandlerInvoker
    input: SchemaValidator
    output: SchemaValidator
    error: SchemaValidator | None
    needs: tuple[Need, ...]
    cached: bool
    key_path: tuple[str, ...] | None
    revalidate: Any
    input_prefix: str
    output_prefix: str
    error_prefix: str
    datasource: str | None = None  # a query's or command's datasource


@dataclass(slots=True)
class _CallPlan:
    """A tool as one agent (or the top level) calls it."""

    tool: _ToolPlan
    refusal: str | None  # the scope or deny_write refusal, which never changes
    needs_approval: bool
    timeout_ms: int | None
    timeout_s: float | None
    resolver: NeedsResolver | None


class _Stats:
    """What one call did, for its telemetry event and the circuit breaker."""

    __slots__ = ("attempts", "cache", "shared", "replayed", "counts", "traceback", "threaded",
                 "datasource", "rows", "span", "values", "input")

    def __init__(self, threaded: bool = False) -> None:
        self.threaded = threaded  # native calls: sync handlers in worker threads, side by side
        self.attempts = 0
        self.cache = CACHE_OFF
        self.shared = False
        self.replayed = False
        self.counts = False  # reached step 6: a failure now counts for the circuit breaker
        self.traceback: str | None = None
        self.datasource: str | None = None  # a query's or command's (DATA.md)
        self.rows: int | None = None  # the rows it returned, or a command's rows affected
        self.span: Any = None  # its OpenTelemetry span (luma.runtime.otel), when tracing
        self.values = False  # watched (-v, --trace, OTel) and not a query: values recorded
        self.input: Any = None  # the input as given, kept for its tool.call event


# ---------------------------------------------------------------------------------- helpers


def data_source_name(tool: ast.ToolDecl) -> str | None:
    if tool.kind == "tool":
        return None
    from luma.data.bridges import datasource_of

    return datasource_of(tool)


def _row_count(result: Any) -> int | None:
    """The rows a query or command returned (1 for exactly one), or its rows affected."""
    if isinstance(result, list):
        return len(result)
    if isinstance(result, dict):
        affected = result.get("rows_affected")
        if len(result) == 1 and type(affected) is int:
            return affected
        return 1
    return None


def data_timeout_ms(tool: ast.ToolDecl, program: ast.Program) -> int | None:
    """A query's or command's default timeout: its datasource's (DATA.md §1)."""
    if tool.kind == "tool":
        return None
    from luma.data.bridges import datasource_timeout_ms

    return datasource_timeout_ms(tool, program)


MAX_RETRY_DELAY_S = 3600.0
"""The longest wait before one retry: an exponential backoff stops growing here."""


def retry_delay(settings: ToolSettings, attempt: int) -> float:
    """The wait in seconds before retry number ``attempt`` (1 is the first retry): ``none`` 0;
    ``fixed`` d, d, d; ``exponential`` d, 2d, 4d, ... up to :data:`MAX_RETRY_DELAY_S`. Worked out
    when it is needed, so a huge ``retries`` costs nothing until it is used."""
    d = _seconds(settings.retry_delay_ms)
    if settings.retry_backoff == "fixed":
        return min(d, MAX_RETRY_DELAY_S)
    if settings.retry_backoff == "exponential":
        if d <= 0:
            return 0.0
        # 2 ** (attempt - 1) overflows a float for a large attempt: compare exponents first
        if attempt - 1 >= math.log2(MAX_RETRY_DELAY_S / d) + 1:
            return MAX_RETRY_DELAY_S
        return min(d * 2.0 ** (attempt - 1), MAX_RETRY_DELAY_S)
    return 0.0


def _seconds(ms: int | float) -> float:
    """Milliseconds as seconds; a count too large for a float (``timeout: 1e400`` written out)
    is a thousand years, which no run reaches."""
    return min(ms, 3.2e13) / 1000


def consistency_problem(tool: ast.ToolDecl, settings: ToolSettings) -> str | None:
    """The consistency rules of LANGUAGE.md §4, enforced again when a tool is first used."""
    name = tool.name
    if settings.cache and settings.is_write:
        return f"Write tool '{name}' cannot use cache."
    if settings.cache and settings.needs:
        return f"Cache cannot be used on a tool that uses needs: {name}"
    if settings.idempotent and settings.idempotency_key is None:
        return f"Idempotent tool '{name}' must specify an idempotency_key."
    if settings.is_write and settings.retries > 0 and not settings.idempotent:
        return (f"A write tool '{name}' must be idempotent and specify an idempotency_key to "
                "be retried.")
    if tool.entry("timeout") is not None and settings.timeout_ms is None:
        return f"Tool '{name}' timeout must be greater than zero."
    return None


def _idempotency_key(value: Any, path: tuple[str, ...]) -> str | None:
    """The key at ``path`` in the validated input; None when it is absent or null (the call
    then runs without idempotency). A string is the key itself; another value its JSON."""
    for step in path:
        if not isinstance(value, dict) or step not in value:
            return None
        value = value[step]
    if value is None:
        return None
    return value if isinstance(value, str) else canonical_json(value)


def _numbers_by_value(value: Any) -> Any:
    """``value`` with whole floats written as ints, so that inputs equal as JSON values (``1``
    and ``1.0``) give the same cache key and the same idempotency fingerprint."""
    if isinstance(value, dict):
        return {k: _numbers_by_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers_by_value(v) for v in value]
    if type(value) is float and value.is_integer():
        return int(value)
    return value


def _cancel_requested() -> bool:
    """Whether the running task has been asked to stop (Ctrl-C, or a caller cancelling it)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _exception_text(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # a __str__ that raises
        return f"{type(exc).__name__} (its message could not be read)"
    if not isinstance(text, str):  # a str subclass's __str__ may return anything
        return type(exc).__name__
    if not text.isascii():  # a lone surrogate would break every writer of the message
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__}>"


def _message(code: str, prefix: str, violations: list[Violation]) -> str:
    from luma.schema.validate import format_violations

    return f"[{code}] {format_violations(prefix, violations)}"
