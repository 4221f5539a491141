"""The run card: what a run was, kept in its store, extended, merged, and refused when damaged."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import orjson
import pytest
from support.tiny_benchmark import tiny_benchmark

from personalens_utils.assistants.prompted import PromptedAssistant
from personalens_utils.judging import JudgingConfig, benchmark_contexts, run_judging
from personalens_utils.llm import CallKind, LLMClient, Request, Response, Usage
from personalens_utils.llm.ledger import Ledger, RoleCalls
from personalens_utils.llm.offline import OfflineBackend
from personalens_utils.llm.specs import ModelSpec
from personalens_utils.outputs.tables import Source
from personalens_utils.prompt_sets import OfficialPromptSet
from personalens_utils.prompt_sets.official.templates import load_official_prompts
from personalens_utils.reproduce.index import card_line
from personalens_utils.runstore import run_card
from personalens_utils.runstore.records import Dialogue, Judgment
from personalens_utils.runstore.store import RunStore, merge_stores
from personalens_utils.simulation import SimulationConfig, run_simulation

SD_ONLY = {"task_types": ("SD",), "user_model": "user-sim", "assistant_model": "Claude 3 Sonnet"}


@pytest.fixture(scope="module")
def official(official_code: Path) -> OfficialPromptSet:
    return OfficialPromptSet(load_official_prompts(official_code))


def _client() -> LLMClient:
    return LLMClient("offline", progress=False, use_cache=False)


def test_extended_run_keeps_one_entry_and_adds_up(tmp_path: Path) -> None:
    bench = tiny_benchmark(1)
    with _client() as client:
        first = run_simulation(bench, tmp_path, client, SimulationConfig(**SD_ONLY, limit=1))
        created = run_card.read_card(tmp_path)["created"]
        again = run_simulation(bench, tmp_path, client, SimulationConfig(**SD_ONLY, limit=1))
    card = run_card.read_card(tmp_path)
    assert len(card["simulations"]) == 1
    entry = card["simulations"][0]
    assert entry["user"]["model"] == "user-sim" and entry["user"]["backend"] == "offline"
    assert entry["assistant"]["model_id"] and entry["user"]["parameters"]["temperature"] is not None
    assert entry["prompt_set"] == "kit" and entry["prompt_digests"]
    assert card["counts"]["dialogues"] and sum(card["counts"]["dialogues"].values()) == 2
    assert card["usage"]["simulation"]["calls"] == first.calls + again.calls
    assert card["created"] == created
    assert card["benchmark"]["users"] == 1 and card["kit"][0]["python_version"]
    assert card["protocol"]["kind"] == "custom"
    assert "simulation prompt_set 'kit'" in card["protocol"]["differs"]


SECONDS = {CallKind.ASSISTANT_TURN: 2.0, CallKind.JUDGE: 0.5}
"""How long `Timed` takes to answer each kind of call."""


class Timed(OfflineBackend):
    """The offline answers, as a served model on the openai backend would give them, in fixed times."""

    name = "openai"

    async def acomplete(self, request: Request, model: str) -> Response:
        answer = await super().acomplete(request, model)
        return replace(answer, backend=self.name, latency_s=SECONDS[request.kind])


def _real_model_run(folder: Path, limit: int) -> None:
    """The offline user agent beside an assistant and a judge on a (timed) real backend."""
    bench = tiny_benchmark(1)
    with _client() as user, LLMClient(Timed(), progress=False, use_cache=False) as real:
        assistant = PromptedAssistant(real, ModelSpec("openai", "small-model"))
        run_simulation(bench, folder, user, SimulationConfig(**SD_ONLY, assistant=assistant, limit=limit))
        run_judging(RunStore(folder), real, benchmark_contexts(bench),
                    JudgingConfig(judge_model="small-judge", offline_dialogues=True))


def test_each_role_of_a_real_model_run_has_its_calls_tokens_and_seconds_per_call(tmp_path: Path) -> None:
    _real_model_run(tmp_path, limit=1)
    card = run_card.read_card(tmp_path)
    [simulation], [judge] = card["simulations"], card["judges"]
    assistant, user, judged = (simulation["calls"]["assistant"], simulation["calls"]["user"],
                               judge["calls"]["judge"])
    assert assistant["calls"] == assistant["timed_calls"] > 0
    assert assistant["seconds"] == 2.0 * assistant["calls"]
    assert assistant["per_call"]["output_tokens"] == round(assistant["output_tokens"] / assistant["calls"], 1)
    assert assistant["per_call"]["seconds"] == 2.0
    assert 2.0 <= assistant["per_call"]["seconds_p50"] == assistant["per_call"]["seconds_p90"] < 2.0 * 1.13
    assert judged["per_call"]["seconds"] == 0.5 and judged["timed_calls"] == judged["calls"] > 0
    assert user["calls"] > 0 and user["timed_calls"] == 0 and "seconds" not in user["per_call"]  # offline
    assert card["usage"]["simulation"]["calls"] == user["calls"] + assistant["calls"]
    line = card_line(tmp_path)
    assert f"assistant small-model: {assistant['calls']} calls" in line and "2.00 s per call" in line
    assert "user agent" not in line  # no time is reported for an offline role
    shown = run_card.summary(card)
    assert shown.loc[shown["field"] == "calls", "value"].str.contains("0.50 s per call").any()

    _real_model_run(tmp_path, limit=2)  # one dialogue more: its calls add up
    more = run_card.read_card(tmp_path)["simulations"][0]["calls"]["assistant"]
    assert more["calls"] > assistant["calls"] and more["seconds"] == 2.0 * more["calls"]
    assert sum(more["seconds_histogram"].values()) == more["timed_calls"]


def test_only_calls_a_backend_answered_there_and_then_are_timed() -> None:
    ledger = Ledger("openai")
    request = Request(CallKind.JUDGE, ())
    answer = Response("ok", Usage(10, 2), "openai", "m", latency_s=3.0)
    for response in (answer, replace(answer, cached=True), replace(answer, batch=True)):
        ledger.book("judging", request, "m", response, None)
    before = ledger.calls_by_kind()
    ledger.book("judging", request, "m", replace(answer, latency_s=1.0), None)
    made = ledger.calls_by_kind()[CallKind.JUDGE].since(before[CallKind.JUDGE])
    assert before[CallKind.JUDGE] == RoleCalls(3, 30, 6, (3.0,)) and made == RoleCalls(1, 10, 2, (1.0,))
    offline = Ledger("offline")
    offline.book("judging", request, "m", answer, None)
    assert offline.calls_by_kind()[CallKind.JUDGE].seconds == ()


def test_merging_counts_a_shards_calls_once_and_a_card_without_calls_still_reads(tmp_path: Path) -> None:
    _real_model_run(tmp_path / "shard", limit=1)
    calls = run_card.read_card(tmp_path / "shard")["simulations"][0]["calls"]
    for _ in range(2):
        merge_stores([tmp_path / "shard"], tmp_path / "merged")
        merged = run_card.read_card(tmp_path / "merged")["simulations"][0]
        assert merged["calls"] == calls and list(merged["calls_from"].values()) == [calls]
    before = run_card.read_card(tmp_path / "shard")
    for entry in [*before["simulations"], *before["judges"]]:
        del entry["calls"]  # as a card written before calls were counted
    assert run_card.check_card(before, "old card") == before
    assert "calls" not in set(run_card.summary(before)["field"])
    hostile = {**before, "judges": [{**before["judges"][0], "calls": {"judge": {"calls": "many"}}}]}
    with pytest.raises(run_card.RunCardError, match=r"'judges\[0\]\.calls\[\.\.\.\]\.calls' is not what"):
        run_card.check_card(hostile, "imported card")


def test_official_prompts_on_the_authors_protocol_are_official(tmp_path: Path,
                                                               official: OfficialPromptSet) -> None:
    bench = tiny_benchmark(1)
    with _client() as client:
        run_simulation(bench, tmp_path / "a", client, SimulationConfig(**SD_ONLY, prompts=official, limit=1))
        run_judging(RunStore(tmp_path / "a"), client, benchmark_contexts(bench),
                    JudgingConfig(judge_model="judge-1", prompts=official))
        run_simulation(bench, tmp_path / "b", client,
                       SimulationConfig(**SD_ONLY, prompts=official, limit=1, max_turns=3))
    card = run_card.update_card(tmp_path / "a", scoring="official")
    assert card["protocol"] == {"kind": "official", "differs": []}
    assert card["judges"][0]["prompt_set"] == "official"
    capped = run_card.read_card(tmp_path / "b")["protocol"]
    assert capped["kind"] == "custom"
    assert capped["differs"] == ["turn cap max_turns=3 (official: 20 SD, 30 MD)"]
    assert run_card.update_card(tmp_path / "a", scoring="strict")["protocol"]["differs"] == [
        "scoring rule 'strict'"]


def test_rejudging_records_both_judges(tmp_path: Path) -> None:
    bench = tiny_benchmark(1)
    store = RunStore(tmp_path)
    with _client() as client:
        run_simulation(bench, store, client, SimulationConfig(**SD_ONLY, limit=1))
        for judge in ("judge-1", "judge-2"):
            run_judging(store, client, benchmark_contexts(bench), JudgingConfig(judge_model=judge))
    card = run_card.read_card(tmp_path)
    assert [j["model"] for j in card["judges"]] == ["judge-1", "judge-2"]
    assert set(card["usage"]) == {"simulation", "judging (judge-1)", "judging (judge-2)"}
    assert sum(card["counts"]["judgments"].values()) == len(store.records(Judgment))


def test_a_stores_counts_from_its_index_equal_the_counts_read_from_its_files(tmp_path: Path) -> None:
    bench = tiny_benchmark(1)
    store = RunStore(tmp_path)
    with _client() as client:
        run_simulation(bench, store, client, SimulationConfig(**SD_ONLY, limit=2))
        run_judging(store, client, benchmark_contexts(bench), JudgingConfig(judge_model="judge-1"))
    line = orjson.loads(store.path(Judgment).read_bytes().splitlines()[0])
    with store.path(Judgment).open("ab") as fh:  # another process replaced a judgment, and tore a line
        fh.write(orjson.dumps({**line, "status": "error", "error": "replaced"}) + b"\n" + b'{"id": "torn')
    assert store.status_counts(Judgment.table)["error"] == 1
    card = run_card.update_card(store, scoring="strict")
    assert card["counts"] == run_card._counts(tmp_path, (Dialogue, Judgment))
    assert card["counts"]["judgments"]["error"] == 1 and store.status_counts("no_such_table") is None


def test_merging_shards_merges_cards_and_refuses_another_judge_prompt_set(
        tmp_path: Path, official: OfficialPromptSet) -> None:
    bench = tiny_benchmark(2)
    with _client() as client:
        for name, shard, prompts in (("1of2", "1/2", None), ("2of2", "2/2", None),
                                     ("2of2-official", "2/2", official)):
            folder = tmp_path / name
            run_simulation(bench, folder, client, SimulationConfig(**SD_ONLY, shard=shard))
            judging = JudgingConfig(judge_model="judge-1", shard=shard,
                                    **({"prompts": prompts} if prompts else {}))
            run_judging(RunStore(folder), client, benchmark_contexts(bench), judging)
    parts = [run_card.read_card(tmp_path / name) for name in ("1of2", "2of2")]
    merge_stores([tmp_path / "1of2", tmp_path / "2of2"], tmp_path / "merged")
    merged = run_card.read_card(tmp_path / "merged")
    assert len(merged["simulations"]) == 1 and len(merged["judges"]) == 1
    for table in ("dialogues", "judgments"):
        assert sum(merged["counts"][table].values()) == sum(sum(p["counts"][table].values()) for p in parts)
    assert merged["usage"]["simulation"]["calls"] == sum(p["usage"]["simulation"]["calls"] for p in parts)
    merge_stores([tmp_path / "1of2", tmp_path / "2of2"], tmp_path / "merged")  # again: counted once
    assert run_card.read_card(tmp_path / "merged")["usage"] == merged["usage"]

    with pytest.raises(run_card.RunCardError, match=r"judges\.prompt_set \('kit' vs 'official'\)"):
        merge_stores([tmp_path / "1of2", tmp_path / "2of2-official"], tmp_path / "refused")
    assert not (tmp_path / "refused").exists()


def test_a_run_with_one_more_assistant_takes_in_an_earlier_copy_only_when_told_it_extends_it(
        tmp_path: Path) -> None:
    bench = tiny_benchmark(1)
    with _client() as client:
        run_simulation(bench, tmp_path / "earlier", client, SimulationConfig(**SD_ONLY, limit=1))
        merge_stores([tmp_path / "earlier"], tmp_path / "wider")
        run_simulation(bench, tmp_path / "wider", client,
                       SimulationConfig(**{**SD_ONLY, "assistant_model": "Claude 3 Haiku"}, limit=1))
        run_simulation(bench, tmp_path / "other", client,
                       SimulationConfig(**{**SD_ONLY, "assistant_model": "Claude 3 Opus"}, limit=1))
    with pytest.raises(run_card.RunCardError, match=r"simulations \(1 vs 2\)"):
        merge_stores([tmp_path / "earlier"], tmp_path / "wider")
    held = len(RunStore(tmp_path / "wider").records(Dialogue))
    merge_stores([tmp_path / "earlier"], tmp_path / "wider", extending=True)
    assert len(RunStore(tmp_path / "wider").records(Dialogue)) == held
    assert len(run_card.read_card(tmp_path / "wider")["simulations"]) == 2
    with pytest.raises(run_card.RunCardError, match="simulations \\(one the target lacks\\)"):
        merge_stores([tmp_path / "other"], tmp_path / "wider", extending=True)


def test_damaged_card_is_a_named_error_and_keeps_the_records(tmp_path: Path) -> None:
    bench = tiny_benchmark(1)
    with _client() as client:
        run_simulation(bench, tmp_path, client, SimulationConfig(**SD_ONLY, limit=1))
        (tmp_path / run_card.CARD_FILE).write_text("{not json", encoding="utf-8")
        with pytest.raises(run_card.RunCardError, match=r"run_card\.json: the run card is not valid JSON"):
            run_simulation(bench, tmp_path, client, SimulationConfig(**SD_ONLY, limit=1))
    assert len(RunStore(tmp_path).records(Dialogue)) == 2  # the dialogues are stored before the card
    (tmp_path / run_card.CARD_FILE).write_bytes(orjson.dumps({"schema": "personalens-run-card",
                                                              "schema_version": 1, "judges": {}}))
    with pytest.raises(run_card.RunCardError, match="field 'simulations' must be a list"):
        run_card.read_card(tmp_path)


def test_card_is_written_by_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = tiny_benchmark(1)
    with _client() as client:
        run_simulation(bench, tmp_path, client, SimulationConfig(**SD_ONLY, limit=1))
    before = (tmp_path / run_card.CARD_FILE).read_bytes()

    def killed(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(run_card.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        run_card.update_card(tmp_path, scoring="official")
    assert (tmp_path / run_card.CARD_FILE).read_bytes() == before


def test_index_and_captions_point_to_the_card(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert "none" in card_line(store)
    with _client() as client:
        run_simulation(tiny_benchmark(1), store, client, SimulationConfig(**SD_ONLY, limit=1, max_turns=2))
    line = card_line(store)
    assert line.startswith("Run card `store/run_card.json`") and "protocol **custom**" in line
    assert "max_turns=2" in line
    shown = run_card.summary(run_card.read_card(store))
    assert shown.loc[shown["field"] == "protocol", "value"].tolist() == ["custom"]
    (store / run_card.CARD_FILE).write_text("[]", encoding="utf-8")
    assert "unreadable" in card_line(store) and "not a run card" in card_line(store)
    caption = Source.of("run store store/", 1, "dialogues").describe()
    assert caption.endswith("; run card store/run_card.json.")


def test_a_styled_user_agent_is_its_own_entry_shown_and_checked_a_cooperative_card_unchanged(
        tmp_path: Path) -> None:
    bench = tiny_benchmark(1)
    with _client() as client:
        run_simulation(bench, tmp_path / "plain", client, SimulationConfig(**SD_ONLY, limit=1))
        run_simulation(bench, tmp_path / "named", client,
                       SimulationConfig(**SD_ONLY, limit=1, user_style="cooperative"))
        for style in ("reticent", "terse"):
            run_simulation(bench, tmp_path / "styled", client, SimulationConfig(**SD_ONLY, limit=1,
                                                                                user_style=style))
    plain, named = (run_card.read_card(tmp_path / name) for name in ("plain", "named"))
    assert "style" not in plain["simulations"][0]["user"]
    assert plain["simulations"] == named["simulations"] and plain["protocol"] == named["protocol"]
    card = run_card.read_card(tmp_path / "styled")
    assert [entry["user"].get("style") for entry in card["simulations"]] == ["reticent", "terse"]
    assert "user-agent style 'reticent' (official: cooperative)" in card["protocol"]["differs"]
    shown = run_card.summary(card)
    simulations = list(shown.loc[shown["field"] == "simulation", "value"])
    assert ["style reticent" in v for v in simulations] == [True, False]
    assert ["style terse" in v for v in simulations] == [False, True]
    card["simulations"][1]["user"]["style"] = "grumpy"
    with pytest.raises(run_card.RunCardError, match=r"simulations\[1\]\.user\.style' is 'grumpy'"):
        run_card.check_card(card, "imported")
