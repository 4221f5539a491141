"""The offline backend's dispatch: a declared table names each call kind's stand-in by module and
function, beside the stage that defines the behaviour; a name that stops resolving would only fail
when a run first asks that kind, so every entry is resolved here."""

from __future__ import annotations

import importlib

import pytest

from personalens_utils.llm.offline import RESPONDERS, responder
from personalens_utils.llm.types import CallKind, FatalError


def test_every_call_kind_has_a_stand_in_that_resolves() -> None:
    assert set(RESPONDERS) == set(CallKind)
    for kind, (module, name) in RESPONDERS.items():
        assert callable(getattr(importlib.import_module(module), name)), kind
        assert responder(kind) is getattr(importlib.import_module(module), name)


def test_the_stand_ins_live_in_the_stages_not_in_the_model_door() -> None:
    for module, _ in RESPONDERS.values():
        package, stage, leaf = module.split(".")
        assert (package, leaf) == ("personalens_utils", "offline") and stage != "llm", module


def test_a_kind_without_a_stand_in_is_a_fatal_error() -> None:
    with pytest.raises(FatalError, match="no responder"):
        responder.__wrapped__("not a kind")  # type: ignore[arg-type]
