"""The vLLM general plugin: obs in every vLLM process, enabled by ``OBS_VLLM=1``.

vLLM loads ``vllm.general_plugins`` entry points in the main process (before it applies
its ``LoggingConfig``), in the engine core and in every worker, fork or spawn (after the
worker applied the config it was handed). With ``OBS_VLLM`` unset or false the plugin does
nothing. Enabled, in each process it:

- points ``VLLM_LOGGING_CONFIG_PATH`` at obs' dictConfig (the ``vllm`` logger's only
  handler is :class:`obs.stdlib.Handler`) unless the user set one or turned vLLM's logging
  configuration off, so every later ``configure_logging(LoggingConfig())`` of vLLM, here and
  in the processes it starts (they inherit the environment and the config), installs obs
  rather than its text handler (vLLM's documented hook); a ``LoggingConfig`` built before
  the plugin loaded is made to name that file too (:func:`carry_config_path`), so the
  spawned processes it is handed to write through obs from their first record;
- configures obs from the environment if nothing did, which also takes over a console
  handler vLLM already put on ``vllm`` in this process (a worker's, configured before the
  plugin loaded);
- wraps vLLM's logging set-up (``vllm.logger._configure_vllm_root_logger``, which every
  ``configure_logging`` calls) so that right after each run that applied vLLM's own text
  config (no config file, obs not routing: an application that configured obs itself)
  obs takes the console handler over again. A forked child
  inherits the wrapper: there vLLM never runs the plugin again (its plugins count as
  loaded), but applies the config it was handed;
- applies the same to the config vLLM applied before the plugins loaded (a spawned
  worker's: obs' dictConfig from its parent, whose file level must become vLLM's);
- gives vLLM's own ``*_once`` methods obs' drop-in ones (:func:`count_vllm_repeats`), so
  their repeats are counted and their scope follows obs' ranks.

Records of ``vllm.*`` then go through obs exactly once: the obs handler marks what it wrote
and the root bridge skips it. The plugin never raises into vLLM.

.. versionadded:: unreleased
"""

from __future__ import annotations

__all__ = [
    "CONFIG_PATH",
    "ENABLE_VAR",
    "carry_config_path",
    "count_vllm_repeats",
    "enabled",
    "follow_vllm",
    "readopt_applied",
    "register",
    "wrap_vllm_configure",
]

import functools
import logging
import os
import sys
from pathlib import Path
from typing import Any

from obs.errors import ConfigError
from obs.settings import read_variable

#: The variable that turns the plugin on (``1``/``true``); anything else leaves vLLM as is.
ENABLE_VAR = "OBS_VLLM"
#: obs' dictConfig for vLLM (the same as ``examples/vllm-logging.json``).
CONFIG_PATH = str(Path(__file__).with_name("vllm-logging.json"))


def enabled(var: str = ENABLE_VAR) -> bool:
    """Whether ``var`` is set true; a bad value counts as off (reported by :func:`register`)."""
    try:
        return bool(read_variable(var))
    except ConfigError:
        return False


def _vllm_configures_logging() -> bool:
    """``VLLM_CONFIGURE_LOGGING`` as vLLM reads it (default on): through ``vllm.envs``
    when vLLM loaded it (it may cache values), else as its parser does."""
    envs = sys.modules.get("vllm.envs")
    try:
        if envs is not None:
            return bool(envs.VLLM_CONFIGURE_LOGGING)
        return bool(int(os.environ.get("VLLM_CONFIGURE_LOGGING", "1")))
    except Exception:
        return True


def route_vllm_logging() -> bool:
    """Make vLLM's later logging configuration install obs' handler; False if the user
    chose otherwise (their own ``VLLM_LOGGING_CONFIG_PATH``, or vLLM's logging off: then
    ``vllm`` records propagate to obs' root handler)."""
    if os.environ.get("VLLM_LOGGING_CONFIG_PATH") or not _vllm_configures_logging():
        return False
    os.environ["VLLM_LOGGING_CONFIG_PATH"] = CONFIG_PATH
    return True


#: The attribute that marks vLLM's logging set-up as wrapped by obs (wrapped once).
_WRAPPED = "_obs_wrapped"
#: vLLM's function that every ``configure_logging`` (and the config-less path) calls; it
#: is looked up as a module global at call time, so callers that imported
#: ``configure_logging`` by name go through the wrapper too.
_VLLM_SETUP = "_configure_vllm_root_logger"


def _readopt(config: Any) -> None:
    """After vLLM applied ``config``: adopt ``vllm``'s console handler unless the config
    named a file of the user's (authoritative); where it was obs' dictConfig, give the
    ``vllm`` logger the level vLLM was asked for (its text config would have); never
    raises."""
    try:
        if config is None:
            path = os.environ.get("VLLM_LOGGING_CONFIG_PATH")
        else:
            path = getattr(config, "pylogging_config_file", None)
        if path and path != CONFIG_PATH:
            return
        if path == CONFIG_PATH:
            logging.getLogger("vllm").setLevel(_vllm_level(config))
        from obs.stdlib import adopt_loggers  # noqa: PLC0415 - obs is configured by now

        adopt_loggers(["vllm"])
    except Exception as exc:
        _report(exc)


def _vllm_level(config: Any) -> str:
    """The level vLLM applies with its own config: the config's ``log_level``, else
    ``VLLM_LOGGING_LEVEL`` (default INFO), upper-cased as vLLM does."""
    level = getattr(config, "log_level", None) if config is not None else None
    if not level:
        envs = sys.modules.get("vllm.envs")
        level = getattr(envs, "VLLM_LOGGING_LEVEL", None) if envs is not None else None
    return str(level or os.environ.get("VLLM_LOGGING_LEVEL") or "INFO").upper()


def follow_vllm() -> bool:
    """For an application that configured obs itself (``OBS_VLLM`` unset): when vLLM is
    loaded and ``vllm`` is among the adopted trees, wrap vLLM's logging set-up so each
    later ``configure_logging`` (building an engine runs one) is taken over again rather
    than putting vLLM's text handler back. True when wrapped; never raises."""
    try:
        from obs._config import STATE  # noqa: PLC0415

        runtime = STATE.runtime
        if runtime is None or STATE.bridge is None or "vllm" not in runtime.settings.adopt_loggers:
            return False
        return wrap_vllm_configure()
    except Exception as exc:
        _report(exc)
        return False


def wrap_vllm_configure(module: Any = None) -> bool:
    """Wrap ``module._configure_vllm_root_logger`` (default: ``vllm.logger``, when loaded)
    so obs re-adopts vLLM's console handler after each run; idempotent. False when there
    is nothing to wrap (vLLM not loaded, or a vLLM without that function)."""
    if module is None:
        module = sys.modules.get("vllm.logger")
    original = getattr(module, _VLLM_SETUP, None)
    if not callable(original):
        return False
    if getattr(original, _WRAPPED, False):
        return True

    @functools.wraps(original)
    def configure(config: Any = None, *args: Any, **kwargs: Any) -> Any:
        if os.environ.get("VLLM_LOGGING_CONFIG_PATH") == CONFIG_PATH:  # the plugin routes
            carry_config_path(config)  # built before it loaded: obs' file from now on
        result = original(config, *args, **kwargs)  # vLLM's errors are vLLM's: raised
        _readopt(config)
        return result

    setattr(configure, _WRAPPED, True)
    setattr(module, _VLLM_SETUP, configure)
    return True


def count_vllm_repeats(module: Any = None) -> bool:
    """vLLM's own ``*_once`` methods become obs' drop-in ones: the scope is decided by
    obs' rank resolver and a repeat is counted (``log_repeats_suppressed``) instead of
    swallowed by vLLM's ``lru_cache``. vLLM's method table (``_METHODS_TO_PATCH``, which
    its ``init_logger`` binds from) takes them, and the loggers vLLM made already are
    bound again. Idempotent; False when ``module`` (default: ``vllm.logger``, when loaded)
    has no such table."""
    if module is None:
        module = sys.modules.get("vllm.logger")
    from obs.stdlib import take_vllm_once  # noqa: PLC0415 - with vLLM only

    return take_vllm_once(module)


def register() -> None:
    """The ``vllm.general_plugins`` entry point (vLLM may call it more than once)."""
    try:
        if not read_variable(ENABLE_VAR):
            if not os.environ.get(ENABLE_VAR, "").strip():  # unset: follow the app's obs
                _follow_app()
            return
    except ConfigError as exc:  # neither true nor false: say so, stay off
        _report(exc)
        return
    from obs._config import STATE  # noqa: PLC0415 - nothing happens unless enabled
    from obs.stdlib import adopt_loggers  # noqa: PLC0415

    try:
        if route_vllm_logging():
            carry_config_path(_applied_config())
        users = _users_file(_applied_config())  # a spawned worker applied it: it stands
        if STATE.runtime is None:
            STATE.configure_from_env()  # adopts vLLM's console handler if one is there
            if users and STATE.bridge is not None:
                from obs._bridge import give_back_trees  # noqa: PLC0415

                give_back_trees(STATE.bridge, ["vllm"])
        elif not users:
            adopt_loggers(["vllm"])
        wrap_vllm_configure()
        readopt_applied()
        count_vllm_repeats()
    except Exception as exc:
        _report(exc)


def _applied_config(module: Any = None) -> Any:
    """The ``LoggingConfig`` vLLM applied last in this process (None: none yet)."""
    if module is None:
        module = sys.modules.get("vllm.logger")
    return getattr(module, "_last_configured_logging_config", None)


def carry_config_path(config: Any) -> bool:
    """Make a ``LoggingConfig`` vLLM applied before its plugins loaded (its text config,
    built before the plugin set ``VLLM_LOGGING_CONFIG_PATH``) name obs' dictConfig, so the
    processes it is handed to (spawned engine cores and workers apply it first thing)
    write through obs from their start; True when changed, never raises."""
    try:
        if config is None or not getattr(config, "configure_logging", False):
            return False
        if getattr(config, "pylogging_config_file", None):
            return False  # obs' already, or the user's: authoritative
        config.pylogging_config_file = CONFIG_PATH
    except Exception:  # a frozen or foreign config: the wrapper covers this process
        return False
    else:
        return True


def _users_file(config: Any) -> bool:
    """Whether ``config`` names a dictConfig file of the user's (authoritative)."""
    path = getattr(config, "pylogging_config_file", None) if config is not None else None
    return bool(path) and path != CONFIG_PATH


def readopt_applied(module: Any = None) -> bool:
    """Treat the config vLLM applied before its plugins loaded (a spawned worker's or
    engine core's, handed to it) as the wrapper treats a later one: obs' dictConfig gets
    vLLM's level, a text config is taken over. False when none was applied yet."""
    config = _applied_config(module)
    if config is None:
        return False
    _readopt(config)
    return True


def _follow_app() -> None:
    """``OBS_VLLM`` unset: follow vLLM for an application that configures obs itself, now
    if it did, else from its ``obs.configure()`` on (a hook: an engine built before obs
    was configured loaded the plugins then, and without it the next ``configure_logging``
    put vLLM's text handler back, its records bypassing obs, and vLLM's ``*_once``
    repeats went uncounted)."""
    from obs._config import STATE  # noqa: PLC0415
    from obs.stdlib import adopt_loggers  # noqa: PLC0415

    if follow_vllm():
        adopt_loggers(["vllm"])
        count_vllm_repeats()
        return

    def after_configure() -> None:
        if os.environ.get(ENABLE_VAR, "").strip() or not follow_vllm():
            return  # OBS_VLLM set since (the plugin's own path), or vllm not adopted
        count_vllm_repeats()

    if not any(getattr(h, "_obs_vllm", False) for h in STATE.after_configure):
        after_configure._obs_vllm = True  # type: ignore[attr-defined]
        STATE.after_configure.append(after_configure)


def _report(exc: BaseException) -> None:
    """Report a plugin failure through obs (never raising into vLLM)."""
    try:
        from obs._config import STATE  # noqa: PLC0415
        from obs._own_events import ObsInternalError  # noqa: PLC0415

        runtime = STATE.runtime or STATE.ensure()
        runtime.report(
            ObsInternalError(
                where="vllm_plugin", error_type=type(exc).__name__, error_message=str(exc)
            )
        )
    except Exception:
        return
