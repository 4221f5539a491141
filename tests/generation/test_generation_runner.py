"""End to end: generation writes a benchmark that loads, resumes, retries, and reports failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from personalens_utils.data import load_benchmark
from personalens_utils.data.demographics import sample_demographics
from personalens_utils.generation import GenerationConfig, generate_benchmark, load_users
from personalens_utils.generation.parsing import DAYS_OF_WEEK, DEVICES, ENVIRONMENTS, TIMES_OF_DAY
from personalens_utils.generation.runner import MANIFEST
from personalens_utils.llm import FatalError, LLMClient, Request, Response, RetryableError
from personalens_utils.llm.offline import OFFLINE_LABEL, OfflineBackend
from personalens_utils.reference.demographics import FIELDS, DemographicsError
from personalens_utils.reference.schema import load_schema

SMALL = GenerationConfig(n_users=4, seed=2, sd_tasks_per_domain=2, md_tasks=3,
                         domains=("Alarm", "Flights", "Hotels", "Restaurants", "Travel"))


class ScriptedBackend:
    """The offline backend, except that chosen calls first get broken answers.

    `broken(request)` returns a bad answer for a call, or None to let the offline backend answer.
    """

    name = "scripted"

    def __init__(self, broken):
        self.offline = OfflineBackend()
        self.broken = broken
        self.calls: list[Request] = []

    async def acomplete(self, request: Request, model: str) -> Response:
        self.calls.append(request)
        response = self.offline.respond(request, model)
        bad = self.broken(request)
        return response if bad is None else Response(bad, response.usage, self.name, model, 0.0)


def _client(backend=None) -> LLMClient:
    return LLMClient(backend or "offline", progress=False, use_cache=False)


def _generate(tmp_path: Path, config: GenerationConfig = SMALL, backend=None, name: str = "bench"):
    return generate_benchmark(config, client=_client(backend), output_dir=tmp_path / name,
                              run_dir=tmp_path / "run")


def test_generated_benchmark_loads_and_respects_masks(tmp_path: Path) -> None:
    result = _generate(tmp_path)
    bench = load_benchmark(tmp_path / "bench")
    assert bench == result.benchmark
    assert len(bench.users) == 4 and result.failures.empty
    assert result.label == OFFLINE_LABEL
    assert json.loads((tmp_path / "bench" / MANIFEST).read_text())["label"] == OFFLINE_LABEL
    schema = load_schema()
    assert {t.task_type for t in bench.tasks.values()} == {"SD", "MD"}
    for task in bench.tasks.values():
        names = {p.name for d in task.domains for p in schema.domain(d).preferences}
        assert set(task.relevant_preferences) <= names
        assert task.task_type == "SD" or 3 <= len(task.domains) <= 5
    for user in bench.users.values():
        kept = set(user.active_domains)
        assert kept <= set(SMALL.domains)
        assert set(user.preferences) == kept == set(user.interactions)
        assert set(user.demographics) == set(FIELDS)
        eligible = {t.task_id for t in bench.tasks.values() if set(t.domains) <= kept}
        assert set(bench.scenarios.loc[bench.scenarios.user_id == user.user_id, "task_id"]) == eligible
    frame = bench.scenarios
    assert frame["device"].isin(DEVICES).all() and frame["time_of_day"].isin(TIMES_OF_DAY).all()
    assert frame["day_of_week"].isin(DAYS_OF_WEEK).all() and frame["environment"].isin(ENVIRONMENTS).all()


def test_multi_domain_tasks_come_in_chunks_that_see_each_other(tmp_path: Path) -> None:
    backend = ScriptedBackend(lambda request: None)
    config = GenerationConfig(n_users=2, sd_tasks_per_domain=1, md_tasks=19)
    bench = _generate(tmp_path, config, backend=backend).benchmark
    md = [t for t in bench.tasks.values() if t.task_type == "MD"]
    assert [t.task_id for t in md] == [f"MD-task-{n}" for n in range(1, 20)]
    assert len({t.task_description for t in md}) == 19
    chunks = [r for r in backend.calls if r.task == "md_tasks"]
    assert [r.context["n_tasks"] for r in chunks] == [8, 8, 3]
    assert [len(r.context["earlier"]) for r in chunks] == [0, 8, 16]
    assert md[8].task_description in chunks[2].messages[0].content


def test_rerun_reuses_every_step_and_rewrites_the_same_benchmark(tmp_path: Path) -> None:
    first = _generate(tmp_path, backend=ScriptedBackend(lambda request: None))
    backend = ScriptedBackend(lambda request: None)
    second = _generate(tmp_path, backend=backend)
    assert second.steps["generated"].sum() == 0 == second.steps["failed"].sum()
    assert second.steps["reused"].sum() == first.steps["generated"].sum()
    assert backend.calls == []
    assert second.benchmark == first.benchmark


def test_a_rejected_answer_is_sent_back_and_corrected(tmp_path: Path) -> None:
    def broken(request: Request) -> str | None:
        first_try = "attempt" not in request.context
        if request.task == "preferences" and request.context["domain"] == "Alarm" and first_try:
            return '{"Alarm Time Preference": "whenever"}'
        return None

    backend = ScriptedBackend(broken)
    result = _generate(tmp_path, backend=backend)
    assert result.failures.empty
    retries = [r for r in backend.calls if r.context.get("attempt") == 2]
    assert retries and all(r.context["domain"] == "Alarm" for r in retries)
    assert "not among its options" in retries[0].messages[-1].content
    assert retries[0].messages[1].content == '{"Alarm Time Preference": "whenever"}'
    records = [json.loads(line) for line in (tmp_path / "run" / "generation_preferences.jsonl").open()]
    assert {r["attempts"] for r in records if r["domain"] == "Alarm"} == {2}


def test_a_step_that_never_parses_is_reported_not_filled(tmp_path: Path) -> None:
    def broken(request: Request) -> str | None:
        if request.task == "mask" and "User id: user1" in request.messages[0].content:
            return "Sorry, I cannot decide that."
        return None

    result = _generate(tmp_path, backend=ScriptedBackend(broken))
    assert sorted(result.benchmark.users) == [0, 2, 3]
    (failure,) = result.failures.to_dict("records")
    assert failure["step"] == "mask" and failure["user_id"] == "user1" and failure["attempts"] == 3
    assert failure["raw"] == "Sorry, I cannot decide that." and "no JSON object" in failure["error"]
    assert json.loads((tmp_path / "bench" / MANIFEST).read_text())["failed_steps"] == 1
    fixed = _generate(tmp_path, backend=ScriptedBackend(lambda request: None))
    assert fixed.failures.empty and sorted(fixed.benchmark.users) == [0, 1, 2, 3]
    assert fixed.steps.set_index("step").loc["mask", "generated"] == 1


class FailingBackend(ScriptedBackend):
    """Raises `error` for calls `fails(request)` picks, answers the others offline."""

    def __init__(self, fails, error):
        super().__init__(lambda request: None)
        self.fails, self.error = fails, error

    async def acomplete(self, request: Request, model: str) -> Response:
        if self.fails(request):
            raise self.error
        return await super().acomplete(request, model)


def test_a_call_that_keeps_failing_drops_only_its_scenario(tmp_path: Path) -> None:
    backend = FailingBackend(lambda r: r.task == "situation" and r.context["task"]["task_id"] == "MD-task-1",
                             RetryableError("503 from the server"))
    client = LLMClient(backend, progress=False, use_cache=False, max_retries=1, retry_base_s=0.001)
    result = generate_benchmark(SMALL, client=client, output_dir=tmp_path / "bench", run_dir=tmp_path / "run")
    assert len(result.benchmark.users) == 4
    assert not result.failures.empty and set(result.failures["task_id"]) == {"MD-task-1"}
    assert result.failures["error"].str.contains("model call failed").all()
    assert "MD-task-1" not in set(result.benchmark.scenarios["task_id"])


def test_an_authentication_failure_stops_the_run_and_keeps_what_was_done(tmp_path: Path) -> None:
    backend = FailingBackend(lambda r: r.task == "preferences", FatalError("bad key", status=401))
    with pytest.raises(FatalError, match="bad key"):
        _generate(tmp_path, backend=backend)
    masks = (tmp_path / "run" / "generation_mask.jsonl").read_text().splitlines()
    assert len(masks) == 4 and not (tmp_path / "bench").exists()


def test_another_fatal_error_is_stored_as_a_failed_step(tmp_path: Path) -> None:
    def fails(request: Request) -> bool:
        return request.task == "preferences" and request.context["demographics"]["user_id"] == "user0"

    result = _generate(tmp_path, backend=FailingBackend(fails, FatalError("request too large", status=400)))
    assert set(result.failures["step"]) == {"preferences"} and set(result.failures["user_id"]) == {"user0"}
    assert 0 not in result.benchmark.users and result.benchmark.users
    fixed = _generate(tmp_path)  # the errored steps are asked again (the others are reused)
    assert fixed.failures.empty and 0 in fixed.benchmark.users
    assert fixed.steps.set_index("step").loc["preferences", "generated"] > 0
    assert result.failures["error"].str.contains("model call failed: FatalError: request too large").all()


def test_only_generated_folders_are_replaced(tmp_path: Path) -> None:
    (tmp_path / "bench" / "profile").mkdir(parents=True)
    (tmp_path / "bench" / "profile" / "keep.txt").write_text("hand-made")
    with pytest.raises(FileExistsError, match="did not write"):
        _generate(tmp_path)
    assert (tmp_path / "bench" / "profile" / "keep.txt").read_text() == "hand-made"


def test_demographics_from_a_file(tmp_path: Path) -> None:
    rows = sample_demographics(3, seed=9)
    path = tmp_path / "people.jsonl"
    path.write_text("".join(json.dumps({"user_id": f"user{10 + i}", **r}) + "\n" for i, r in enumerate(rows)))
    users = load_users(GenerationConfig(n_users=None, demographics_file=str(path)))
    assert [u["user_id"] for u in users] == ["user10", "user11", "user12"]
    with pytest.raises(ValueError, match="asked for 5 users, the file has 3"):
        load_users(GenerationConfig(n_users=5, demographics_file=str(path)))
    path.write_text(json.dumps({**rows[0], "gender": "Robot"}) + "\n")
    with pytest.raises(DemographicsError, match=r"people.jsonl:1: gender='Robot'"):
        load_users(GenerationConfig(n_users=None, demographics_file=str(path)))


@pytest.mark.parametrize(("config", "expected"), [
    (GenerationConfig(n_users=0), "n_users must be at least 1"),
    (GenerationConfig(n_users=None), "no file was given"),
    (GenerationConfig(domains=("Alarm", "Gardening")), "unknown domain 'Gardening'"),
    (GenerationConfig(domains=("Alarm", "Books")), "need at least 3 domains"),
])
def test_bad_configs_fail_before_any_call(tmp_path: Path, config: GenerationConfig, expected: str) -> None:
    with pytest.raises((ValueError, KeyError), match=expected):
        _generate(tmp_path, config)
    assert not (tmp_path / "run").exists()
