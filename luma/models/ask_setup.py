"""What every run of one program shares for its ``ask`` flows (:class:`AskSetup`): the models
with their settings, the offline model's scripted turns and the recording. Built at start-up;
each run's :class:`~luma.models.ask.AskEngine` uses it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from luma.models.resolve import ModelConfigError, ModelResolver, api_key_env
from luma.runtime.errors import LumaError, StartError
from luma.syntax import ast

if TYPE_CHECKING:
    from luma.models.recording import Recording
    from luma.models.test import ScriptedTurns


@dataclass(slots=True)
class AskSetup:
    """What every run of one program shares for its ``ask`` flows: the models, the offline
    model's scripted turns and the recording. :meth:`build` is start-up: a problem is a
    :class:`~luma.runtime.errors.StartError`."""

    models: ModelResolver
    scripts: dict[str, ScriptedTurns]
    recording: Recording | None

    @classmethod
    def build(cls, program: ast.Program, config: Any, *, base_dir: str, secrets: Any,
              env: Mapping[str, str], default_model: str | None = None,
              record: str | None = None, replay: str | None = None,
              script: Sequence[Any] | None = None) -> AskSetup:
        """``script``: turns (as a ``responses`` file holds them) that every model of the
        program plays instead of answering, in order across each run (``luma.testing``)."""
        try:
            models = ModelResolver(
                program, overrides=getattr(config, "models", None),
                default_model=default_model,
                config_default=getattr(config, "default_model", None),
                base_dir=base_dir,
                config_name=getattr(config, "source", "luma.config.json"))
        except ModelConfigError as exc:
            raise StartError(exc.messages) from None
        register_api_keys(models, secrets, env)
        recording: Recording | None = None
        try:
            scripts = _load_scripts(models) if script is None else _script_every_model(models,
                                                                                       script)
            if record is not None and replay is not None:
                raise StartError(["--record and --replay cannot be used together"])
            if record is not None or replay is not None:
                from luma.models.recording import Recording

                recording = (Recording.record_to(record, secrets=secrets)
                             if record is not None
                             else Recording.replay_from(replay or "", secrets=secrets))
        except LumaError as exc:
            raise StartError([exc.message]) from None
        except OSError as exc:
            raise StartError([f"cannot write the recording {record}: "
                              f"{exc.strerror or exc}"]) from None
        return cls(models, scripts, recording)


def register_api_keys(models: ModelResolver, secrets: Any, env: Mapping[str, str]) -> None:
    """Every API key a run may use is a secret from the start."""
    for model in models.models.values():
        key_env = api_key_env(model)
        if key_env is not None:
            secrets.add(env.get(key_env, "").strip())


def _script_every_model(models: ModelResolver, script: Sequence[Any]) -> dict[str, ScriptedTurns]:
    """Every model becomes the offline one, playing ``script``: one list of turns for the
    run, whichever model an ``ask`` uses."""
    from dataclasses import replace

    from luma.models.test import ScriptedTurns

    turns = ScriptedTurns.of("scripted", list(script))
    for name, settings in list(models.models.items()):
        models.models[name] = replace(settings, provider="test", api_key_env=None,
                                      responses=None)
    models.default_is_fallback = False  # the script answers: no values are synthesized
    return {name: turns for name in models.models}


def _load_scripts(models: ModelResolver) -> dict[str, ScriptedTurns]:
    scripts: dict[str, ScriptedTurns] = {}
    for settings in models.models.values():
        if settings.provider == "test" and settings.responses is not None:
            from luma.models.test import ScriptedTurns

            scripts[settings.name] = ScriptedTurns.load(settings.name, settings.responses)
    return scripts
