"""`profstack tensorboard --user` defaults to $PROFSTACK_USER, as `profstack reports --user` does."""

from __future__ import annotations

import pytest

from profstack.cli import main


@pytest.mark.parametrize("action", [["url"], ["start"], ["stop", "--apply"]])
def test_without_a_user_it_asks_for_one(
    action: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN no --user and no $PROFSTACK_USER WHEN a tensorboard action runs THEN one line asks, before any AWS call
    monkeypatch.delenv("PROFSTACK_USER", raising=False)
    assert main(["tensorboard", *action]) == 2
    assert capsys.readouterr().err.strip() == (
        "profstack: error: which user? pass --user USER or set PROFSTACK_USER (a user name from the config)"
    )


def test_the_variable_names_the_user(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN $PROFSTACK_USER naming someone the config does not know WHEN a URL is asked for THEN the config says so
    monkeypatch.setenv("PROFSTACK_USER", "zed")
    assert main(["tensorboard", "url", "--config", "config/profstack.yaml"]) == 2
    assert "unknown user 'zed' (users in the config: alice, bob)" in capsys.readouterr().err
