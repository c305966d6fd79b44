"""Tests for obs.vllm_plugin: off unless OBS_VLLM is true; on, it routes vLLM's logging
configuration to obs and configures obs (the real-vLLM processes are in
tests/integration/test_vllm_logging.py)."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import obs.testing
from obs import vllm_plugin
from obs._config import STATE
from obs.stdlib import ObsHandler


@pytest.fixture
def clean_vllm_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """No VLLM_ logging variables set; whatever the plugin sets is undone afterwards."""
    for name in ("VLLM_LOGGING_CONFIG_PATH", "VLLM_CONFIGURE_LOGGING"):
        monkeypatch.delenv(name, raising=False)
    vllm_logger = sys.modules.get("vllm.logger")  # loaded by another test: unwrap after
    if vllm_logger is not None:
        setup = vllm_logger._configure_vllm_root_logger  # type: ignore[attr-defined]
        monkeypatch.setattr(vllm_logger, "_configure_vllm_root_logger", setup)
        table = vllm_logger._METHODS_TO_PATCH  # type: ignore[attr-defined]
        for name, method in list(table.items()):  # vLLM's own *_once, back afterwards
            monkeypatch.setitem(table, name, method)
    yield monkeypatch
    obs.testing.reset()


class TestRegister:
    def test_entry_point_is_installed(self) -> None:
        """vLLM finds the plugin under vllm.general_plugins."""
        points = importlib.metadata.entry_points(group="vllm.general_plugins")
        assert ["obs.vllm_plugin:register"] == [p.value for p in points if p.name == "obs"]

    @pytest.mark.parametrize("value", [None, "", "0", "false"])
    def test_off_has_no_effect(self, clean_vllm_env: pytest.MonkeyPatch, value: str | None) -> None:
        """Installed but not enabled: no variable set, obs not configured, no handler."""
        if value is not None:
            clean_vllm_env.setenv("OBS_VLLM", value)
        roots = list(logging.getLogger().handlers)
        vllm_plugin.register()
        assert (None, None, roots) == (
            os.environ.get("VLLM_LOGGING_CONFIG_PATH"),
            STATE.runtime,
            list(logging.getLogger().handlers),
        )

    def test_on_routes_and_configures(self, clean_vllm_env: pytest.MonkeyPatch) -> None:
        """OBS_VLLM=1: vLLM's config path names obs' dictConfig; obs is configured from the
        env with its root handler installed."""
        clean_vllm_env.setenv("OBS_VLLM", "1")
        clean_vllm_env.setenv("OBS_FORMAT", "json")
        vllm_plugin.register()
        vllm_plugin.register()  # vLLM may load plugins more than once
        assert (vllm_plugin.CONFIG_PATH, "json", 1) == (
            os.environ.get("VLLM_LOGGING_CONFIG_PATH"),
            STATE.runtime.settings.format if STATE.runtime else None,
            sum(isinstance(h, ObsHandler) for h in logging.getLogger().handlers),
        )

    @pytest.mark.parametrize(
        ("var", "value"),
        [("VLLM_CONFIGURE_LOGGING", "0"), ("VLLM_LOGGING_CONFIG_PATH", "/etc/mine.json")],
    )
    def test_user_choice_is_kept(
        self, clean_vllm_env: pytest.MonkeyPatch, var: str, value: str
    ) -> None:
        """vLLM's logging turned off, or the user's own config file: the path is left be
        (vLLM refuses a config file with its logging off)."""
        clean_vllm_env.setenv("OBS_VLLM", "1")
        clean_vllm_env.setenv(var, value)
        vllm_plugin.register()
        expected = value if var == "VLLM_LOGGING_CONFIG_PATH" else None
        assert (expected, True) == (
            os.environ.get("VLLM_LOGGING_CONFIG_PATH"),
            STATE.runtime is not None,
        )

    def test_bad_value_is_reported_and_off(
        self, clean_vllm_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """OBS_VLLM=maybe: the plugin stays off and says which variable is wrong."""
        clean_vllm_env.setenv("OBS_VLLM", "maybe")
        clean_vllm_env.setenv("OBS_FORMAT", "json")
        vllm_plugin.register()
        err = capsys.readouterr().err
        assert (None, True) == (os.environ.get("VLLM_LOGGING_CONFIG_PATH"), "OBS_VLLM" in err)

    def test_adopts_a_console_handler_vllm_already_set(
        self, clean_vllm_env: pytest.MonkeyPatch
    ) -> None:
        """A worker that applied vLLM's text config before the plugin loaded: the plugin
        takes that console handler over, so vllm records go through obs."""
        logger = logging.getLogger("vllm")
        console = logging.StreamHandler()
        logger.addHandler(console)
        logger.propagate = False
        try:
            clean_vllm_env.setenv("OBS_VLLM", "1")
            vllm_plugin.register()
            with obs.testing.capture_events() as events:
                logging.getLogger("vllm.worker").warning("after adoption")
            assert ([], True, ["after adoption"]) == (
                [h for h in logger.handlers if h is console],
                logger.propagate,
                [e["body"] for e in events],
            )
        finally:
            obs.testing.reset()
            logger.removeHandler(console)
            logger.propagate = True

    @pytest.mark.parametrize("applied", [True, False])
    def test_users_config_applied_before_the_plugin_is_left_be(
        self, clean_vllm_env: pytest.MonkeyPatch, applied: bool
    ) -> None:
        """A spawned worker that applied the user's own ``VLLM_LOGGING_CONFIG_PATH`` (a
        console handler on ``vllm``) before its plugins load keeps it, as the main process
        does (its plugins load first): the user's file is authoritative. The plugin took it
        over there only. No file applied yet (``applied`` false, an engine-less process
        whose console handler is vLLM's text one): taken over as before."""
        logger = logging.getLogger("vllm")
        console = logging.StreamHandler()
        logger.addHandler(console)
        logger.propagate = False
        config = SimpleNamespace(pylogging_config_file="/mine.json", log_level="INFO")
        module = SimpleNamespace(_last_configured_logging_config=config if applied else None)
        try:
            clean_vllm_env.setitem(sys.modules, "vllm.logger", module)
            clean_vllm_env.setenv("OBS_VLLM", "1")
            clean_vllm_env.setenv("VLLM_LOGGING_CONFIG_PATH", "/mine.json")
            vllm_plugin.register()
            assert ([console] if applied else [], not applied) == (
                [h for h in logger.handlers if h is console],
                logger.propagate,
            )
        finally:
            obs.testing.reset()
            logger.removeHandler(console)
            logger.propagate = True

    @settings(max_examples=15)
    @given(
        trees=st.dictionaries(
            st.sampled_from(["vllm", "vllm.engine", "vllm.engine.core", "vllm.worker"]),
            st.booleans(),
            min_size=1,
        )
    )
    def test_users_config_stands_for_every_logger_it_set(self, trees: dict[str, bool]) -> None:
        """Whatever ``vllm.*`` loggers the user's file gave console handlers (and whatever
        ``propagate``), a worker's plugin load leaves each as the file set it."""
        config = SimpleNamespace(pylogging_config_file="/mine.json", log_level="INFO")
        module = SimpleNamespace(_last_configured_logging_config=config)
        consoles = {name: logging.StreamHandler() for name in trees}
        for name, propagate in trees.items():
            logging.getLogger(name).addHandler(consoles[name])
            logging.getLogger(name).propagate = propagate
        with pytest.MonkeyPatch.context() as mp:
            mp.setitem(sys.modules, "vllm.logger", module)
            mp.setenv("OBS_VLLM", "1")
            mp.setenv("VLLM_LOGGING_CONFIG_PATH", "/mine.json")
            try:
                vllm_plugin.register()
                assert {n: ([consoles[n]], p) for n, p in trees.items()} == {
                    n: (logging.getLogger(n).handlers, logging.getLogger(n).propagate)
                    for n in trees
                }
            finally:
                obs.testing.reset()
                for name, console in consoles.items():
                    logging.getLogger(name).removeHandler(console)
                    logging.getLogger(name).propagate = True


class TestCarryConfigPath:
    """A text config vLLM applied before the plugin loaded names obs' dictConfig after it
    (the processes it is handed to apply it first thing: a spawned worker writes through
    obs from its start); a config of the user's, or vLLM's logging off, is left be."""

    @settings(max_examples=25, deadline=None)
    @given(
        path=st.sampled_from([None, "", "/mine.json", vllm_plugin.CONFIG_PATH]),
        configure=st.booleans(),
        level=st.sampled_from(["DEBUG", "INFO", "WARNING"]),
        formatter=st.sampled_from(["text", "json"]),
    )
    def test_real_logging_configs(
        self, path: str | None, configure: bool, level: str, formatter: str
    ) -> None:
        """vLLM's real ``LoggingConfig``: only an enabled config without a file changes,
        and only its file; the level and formatter stay (the level is applied by
        ``_readopt`` when the config is)."""
        from vllm.config.logging import LoggingConfig

        config = LoggingConfig(
            log_level=level,  # type: ignore[arg-type]
            formatter=formatter,  # type: ignore[arg-type]
            configure_logging=configure,
            pylogging_config_file=path,
        )
        changed = vllm_plugin.carry_config_path(config)
        expected = vllm_plugin.CONFIG_PATH if configure and not path else path
        assert (configure and not path, expected, level, formatter) == (
            changed,
            config.pylogging_config_file,
            config.log_level,
            config.formatter,
        )

    def test_register_changes_the_applied_config(self, clean_vllm_env: pytest.MonkeyPatch) -> None:
        """``OBS_VLLM=1``: the config applied before the plugin loaded names obs' file; with
        the user's ``VLLM_LOGGING_CONFIG_PATH`` set it is not touched."""
        from vllm.config.logging import LoggingConfig

        configs = [LoggingConfig(configure_logging=True, pylogging_config_file=None)]
        configs.append(LoggingConfig(configure_logging=True, pylogging_config_file=None))
        clean_vllm_env.setenv("OBS_VLLM", "1")
        for config, user_path in zip(configs, (None, "/mine.json"), strict=True):
            module = SimpleNamespace(_last_configured_logging_config=config)
            clean_vllm_env.setitem(sys.modules, "vllm.logger", module)
            if user_path:
                clean_vllm_env.setenv("VLLM_LOGGING_CONFIG_PATH", user_path)
            vllm_plugin.register()
            obs.testing.reset()
        assert [vllm_plugin.CONFIG_PATH, None] == [c.pylogging_config_file for c in configs]

    @pytest.mark.parametrize("routed", [True, False])
    def test_a_config_built_before_and_applied_after_names_obs_file(
        self, clean_vllm_env: pytest.MonkeyPatch, routed: bool
    ) -> None:
        """A text ``LoggingConfig`` built before the plugin loaded and applied after it (an
        engine built from it): vLLM applies obs' dictConfig, and so do the processes it is
        handed to. An application that configured obs itself (``OBS_VLLM`` unset, obs not
        routing vLLM's config) keeps its config as built."""
        from vllm.config.logging import LoggingConfig

        config = LoggingConfig(configure_logging=True, pylogging_config_file=None)
        calls: list[Any] = []
        module = TestWrapVllmConfigure.fake_vllm_logger(calls)
        if routed:
            clean_vllm_env.setenv("OBS_VLLM", "1")
            vllm_plugin.register()
        else:
            obs.configure()
        logger = logging.getLogger("vllm")
        try:
            vllm_plugin.wrap_vllm_configure(module)
            module._configure_vllm_root_logger(config)
            expected = vllm_plugin.CONFIG_PATH if routed else None
            assert ([expected], expected) == (
                [c.pylogging_config_file for c in calls],
                config.pylogging_config_file,
            )
        finally:
            obs.testing.reset()
            for h in list(logger.handlers):
                logger.removeHandler(h)
            logger.propagate = True

    def test_a_config_that_refuses_the_change_is_left_be(self) -> None:
        """A frozen config: False, nothing raised (the wrapper covers this process)."""

        @dataclasses.dataclass(frozen=True)
        class Frozen:
            configure_logging: bool = True
            pylogging_config_file: str | None = None

        config = Frozen()
        assert (False, None) == (
            vllm_plugin.carry_config_path(config),
            config.pylogging_config_file,
        )


class TestWrapVllmConfigure:
    @staticmethod
    def fake_vllm_logger(calls: list[Any]) -> SimpleNamespace:
        """A stand-in for ``vllm.logger`` whose set-up does what vLLM's default config does:
        a console handler on ``vllm``, no propagation."""

        def setup(config: Any = None) -> None:
            calls.append(config)
            if getattr(config, "pylogging_config_file", None) == "bad":
                raise RuntimeError("vLLM's own error")
            logger = logging.getLogger("vllm")
            logger.addHandler(logging.StreamHandler())
            logger.propagate = False

        return SimpleNamespace(_configure_vllm_root_logger=setup)

    def test_readopts_after_each_run_and_wraps_once(
        self, clean_vllm_env: pytest.MonkeyPatch
    ) -> None:
        """Each run of vLLM's set-up with no config file (a config built before the plugin
        loaded) is followed by adoption: vllm records come out once, through obs; wrapping
        twice keeps one wrapper."""
        calls: list[Any] = []
        module = self.fake_vllm_logger(calls)
        logger = logging.getLogger("vllm")
        clean_vllm_env.setenv("OBS_VLLM", "1")
        vllm_plugin.register()
        try:
            assert (True, True) == (
                vllm_plugin.wrap_vllm_configure(module),
                vllm_plugin.wrap_vllm_configure(module),
            )
            config = SimpleNamespace(pylogging_config_file=None)
            module._configure_vllm_root_logger(config)
            module._configure_vllm_root_logger(config)
            with obs.testing.capture_events() as events:
                logging.getLogger("vllm.worker").warning("after vllm configured")
            assert ([config, config], [], True, ["after vllm configured"]) == (
                calls,
                [h for h in logger.handlers if type(h) is logging.StreamHandler],
                logger.propagate,
                [e["body"] for e in events],
            )
        finally:
            obs.testing.reset()  # first: it gives back what it adopted, cleaned below
            for h in list(logger.handlers):
                logger.removeHandler(h)
            logger.propagate = True

    def test_users_config_file_and_vllms_errors_are_left_be(
        self, clean_vllm_env: pytest.MonkeyPatch
    ) -> None:
        """A config naming the user's own file is authoritative (no adoption); an error of
        vLLM's set-up reaches its caller unchanged."""
        module = self.fake_vllm_logger([])
        logger = logging.getLogger("vllm")
        clean_vllm_env.setenv("OBS_VLLM", "1")
        vllm_plugin.register()
        try:
            vllm_plugin.wrap_vllm_configure(module)
            module._configure_vllm_root_logger(SimpleNamespace(pylogging_config_file="/mine"))
            kept = [h for h in logger.handlers if type(h) is logging.StreamHandler]
            with pytest.raises(RuntimeError, match="vLLM's own error"):
                module._configure_vllm_root_logger(SimpleNamespace(pylogging_config_file="bad"))
            assert (1, False) == (len(kept), logger.propagate)
        finally:
            for h in list(logger.handlers):
                logger.removeHandler(h)
            logger.propagate = True

    @settings(max_examples=15)
    @given(
        level=st.sampled_from(["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]),
        lower=st.booleans(),
        mine=st.booleans(),
    )
    def test_config_applied_before_the_plugin_gets_vllms_level(
        self, level: str, lower: bool, mine: bool
    ) -> None:
        """A spawned worker applies the config its parent built (obs' dictConfig, INFO in
        the file) before its plugins load: loading them gives ``vllm`` the config's level,
        as every later run does (it kept INFO: DEBUG records lost, INFO let through under
        WARNING); a config naming the user's own file keeps the file's level."""
        logger = logging.getLogger("vllm")
        path = "/mine.json" if mine else vllm_plugin.CONFIG_PATH
        config = SimpleNamespace(
            pylogging_config_file=path, log_level=level.lower() if lower else level
        )
        module = SimpleNamespace(_last_configured_logging_config=config)
        with pytest.MonkeyPatch.context() as mp:
            mp.setitem(sys.modules, "vllm.logger", module)
            mp.setenv("OBS_VLLM", "1")
            mp.setenv("VLLM_LOGGING_CONFIG_PATH", path)
            logger.setLevel(logging.INFO)  # what the file (obs' or the user's) set
            try:
                vllm_plugin.register()
                assert (logging.INFO if mine else logging.getLevelName(level)) == logger.level
            finally:
                obs.testing.reset()
                logger.setLevel(logging.NOTSET)

    def test_readopt_applied_without_a_config(self) -> None:
        """Nothing applied yet (the main process: plugins before the config): nothing done."""
        assert (False, False) == (
            vllm_plugin.readopt_applied(SimpleNamespace()),
            vllm_plugin.readopt_applied(SimpleNamespace(_last_configured_logging_config=None)),
        )

    def test_nothing_to_wrap(self) -> None:
        """No vLLM set-up function: nothing is wrapped."""
        assert (False, False) == (
            vllm_plugin.wrap_vllm_configure(SimpleNamespace()),
            vllm_plugin.wrap_vllm_configure(SimpleNamespace(_configure_vllm_root_logger=1)),
        )


class TestCountVllmRepeats:
    def test_table_and_made_loggers_take_obs_once(self) -> None:
        """vLLM's method table takes obs' drop-in ``*_once`` (its later ``init_logger``
        binds them); loggers bound with vLLM's before are bound again, others are left;
        a second call changes nothing; a module without the table is left alone."""
        from types import MethodType

        from obs.stdlib import once_methods

        def vllm_warning_once(self: logging.Logger, msg: str, *args: Any) -> None:
            return None

        made = logging.getLogger("vllm.test_count.made")
        made.warning_once = MethodType(vllm_warning_once, made)  # type: ignore[attr-defined]
        plain = logging.getLogger("vllm.test_count.plain")
        module = SimpleNamespace(_METHODS_TO_PATCH={"warning_once": vllm_warning_once})
        try:
            assert vllm_plugin.count_vllm_repeats(module)
            assert vllm_plugin.count_vllm_repeats(module)
            ours = once_methods()
            assert module._METHODS_TO_PATCH == ours
            assert made.warning_once.__func__ is ours["warning_once"]  # type: ignore[attr-defined]
            assert "warning_once" not in vars(plain)
            assert not vllm_plugin.count_vllm_repeats(SimpleNamespace())
        finally:
            for name in once_methods():
                vars(made).pop(name, None)

    @settings(max_examples=20)
    @given(value=st.sampled_from(["1", "true", " On ", "YES", "0", "false", "", "maybe"]))
    def test_obs_handler_built_by_vllm_takes_the_table(self, value: str) -> None:
        """A spawned worker applies the handed config (obs' dictConfig) before its plugins
        load, and vLLM logs with ``*_once`` right after (its platform warnings): building
        obs' handler there gives vLLM's table obs' methods at once, so a key logged then is
        not logged again by obs' once after the plugins load (it was: two lines). Without
        ``OBS_VLLM`` true vLLM's own methods stay (a bad value: off, nothing raised)."""
        from types import MethodType

        from obs.stdlib import Handler, once_methods

        def vllm_warning_once(self: logging.Logger, msg: str, *args: Any) -> None:
            return None

        made = logging.getLogger("vllm.test_early.made")
        made.warning_once = MethodType(vllm_warning_once, made)  # type: ignore[attr-defined]
        module = SimpleNamespace(_METHODS_TO_PATCH={"warning_once": vllm_warning_once})
        with pytest.MonkeyPatch.context() as mp:
            mp.setitem(sys.modules, "vllm.logger", module)
            mp.setenv("OBS_VLLM", value)
            on = value.strip().lower() in {"1", "true", "on", "yes"}
            try:
                Handler()
                ours = once_methods()["warning_once"]
                want = ours if on else vllm_warning_once
                assert (want, want) == (
                    module._METHODS_TO_PATCH["warning_once"],
                    made.warning_once.__func__,  # type: ignore[attr-defined]
                )
            finally:
                vars(made).pop("warning_once", None)


def test_packaged_config_is_the_example() -> None:
    """The dictConfig the plugin points vLLM at is examples/vllm-logging.json."""
    example = Path(__file__).resolve().parents[1] / "examples" / "vllm-logging.json"
    assert json.loads(example.read_text()) == json.loads(Path(vllm_plugin.CONFIG_PATH).read_text())
