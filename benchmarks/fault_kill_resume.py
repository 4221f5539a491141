"""1,000 dialogues under injected server errors, a SIGKILL half-way, and a resume.

    python benchmarks/fault_kill_resume.py [--dialogues 1000] [--fault-rate 0.1] [--concurrency 32]

A child process runs the simulation through the kit's anthropic backend (the anthropic SDK) against
`llm.fake_server.FakeLLMServer`, which runs in its own process for the whole benchmark: 50 ms per
answer, 10 % of attempts answered 429 (with retry-after), 529 or 500. The server's reply function
plays both parties (the user agent ends after one to four turns with TERMINATE) and appends a hash
of every request it answers to a log. When half the dialogues are stored, the child is killed with
SIGKILL (no cleanup); after the server has answered what was in flight, a second child resumes.

Printed: lost (planned dialogues missing from the store, or stored as errors), duplicated (store
lines beyond one per id) and re-requested after restart (requests the resumed run sent that belong
to a dialogue stored before the kill: each stored dialogue's requests are rebuilt from its turns
with the kit's prompt builders and looked up in the server's log; the check first confirms the
rebuilt requests are found among those answered before the kill). Acceptance: 0, 0, 0.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the `support` package

from support.fake_server import FakeLLMServer

from personalens_utils.data import Benchmark, load_benchmark
from personalens_utils.generation import GenerationConfig, generate_benchmark
from personalens_utils.llm import LLMClient, Request
from personalens_utils.prompt_templates.dialogue import USER_SYSTEM
from personalens_utils.simulation import AssistantSetting, ScenarioContext, assistant_request, user_request

LOG_ENV = "FAULT_BENCHMARK_REQUEST_LOG"
MODEL = "claude-haiku-4-5"
LATENCY_S = 0.05

CHILD = """
import json, sys
from personalens_utils.data import Benchmark, load_benchmark
from personalens_utils.llm import LLMClient
from personalens_utils.simulation import SimulationConfig, run_simulation
bench_dir, run_dir, cache_dir, n, concurrency, model = sys.argv[1:7]
full = load_benchmark(bench_dir)
bench = Benchmark(full.users, full.tasks, full.scenarios.iloc[: int(n)].reset_index(drop=True), full.root)
with LLMClient("anthropic", max_concurrency=int(concurrency), cache_dir=cache_dir, retry_base_s=0.1,
               retry_cap_s=2.0, progress=False) as client:
    config = SimulationConfig(user_model=model, assistant_model=model)
    summary = run_simulation(bench, run_dir, client, config)
print(json.dumps({"planned": summary.planned, "skipped": summary.already_done,
                  "statuses": dict(summary.statuses), "retries": summary.retries}))
"""


def _text(content: Any) -> str:
    """Message or system content as plain text, whether a string or a list of content blocks."""
    if isinstance(content, list):
        return "".join(block.get("text", "") for block in content if isinstance(block, dict))
    return str(content or "")


def request_key(system: Any, messages: list[dict[str, Any]]) -> str:
    """What identifies a call: its system text and messages, however the backend split them into blocks."""
    parts = [_text(system), *(f"{m['role']}:{_text(m['content'])}" for m in messages)]
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def scripted_reply(api: str, body: dict[str, Any]) -> str:
    """Both parties, short and unique per request; each answered request is logged (runs in the server)."""
    messages = body.get("messages") or []
    key = request_key(body.get("system"), messages)
    with open(os.environ[LOG_ENV], "a") as log:
        log.write(key + "\n")
    last = _text(messages[-1]["content"]) if messages else ""
    if _text(body.get("system")) != USER_SYSTEM:
        return f"Here is what I found (ref {key[:10]})."
    profile, _, rest = last.partition("# The conversation so far")
    seen = rest.partition("# Your next message")[0].count("ASSISTANT:")
    profile = profile.partition("# Your first message")[0]
    wanted = 1 + int(hashlib.sha256(profile.encode()).hexdigest(), 16) % 4  # per scenario: 1 to 4 turns
    if seen >= wanted:
        return "That's all I needed, thanks. TERMINATE"
    return f"Could you check that too? ({key[:8]})"


def rebuilt_keys(record: dict[str, Any], bench: Benchmark) -> list[str]:
    """The keys of every request a stored dialogue sent, rebuilt from its turns with the kit's builders."""
    scenario = bench.scenario(record["scenario_id"])
    ctx = ScenarioContext.of(scenario, bench.user(scenario.user_id))
    setting = AssistantSetting.parse(record["assistant_setting"])
    turns = record["turns"]
    requests: list[Request] = []
    for k in range(record["n_turns"]):
        requests.append(user_request(ctx, turns[: 2 * k], record["user_model"]))
        requests.append(assistant_request(setting, ctx, turns[: 2 * k + 1], record["assistant_model"]))
    return [request_key(r.system, [m.as_dict() for m in r.messages]) for r in requests]


def stored(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_bytes().splitlines(keepends=True)
    return [orjson.loads(line) for line in lines if line.endswith(b"\n")]  # a torn tail is not a record


def launch(args: argparse.Namespace, bench_dir: Path, run_dir: Path, cache_dir: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(bench_dir), str(run_dir), str(cache_dir), str(args.dialogues),
         str(args.concurrency), MODEL],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )


def run(args: argparse.Namespace, tmp: Path) -> bool:
    with LLMClient("offline", progress=False) as offline:
        generate_benchmark(GenerationConfig(n_users=20), client=offline, output_dir=tmp / "bench",
                           run_dir=tmp / "generation")
    full = load_benchmark(tmp / "bench")
    bench = Benchmark(full.users, full.tasks, full.scenarios.iloc[: args.dialogues].reset_index(drop=True))
    log_path = tmp / "requests.log"
    log_path.touch()
    os.environ[LOG_ENV] = str(log_path)
    os.environ.setdefault("ANTHROPIC_API_KEY", "dummy-key-for-the-fake-server")
    table = tmp / "run" / "dialogues.jsonl"
    reply = importlib.import_module(Path(__file__).stem).scripted_reply  # importable by the server process
    faults = {"fault_rate": args.fault_rate, "fault_statuses": (429, 529, 500), "seed": 7}
    with FakeLLMServer(latency_s=LATENCY_S, reply=reply, process=True, **faults) as server:
        os.environ["ANTHROPIC_BASE_URL"] = server.url
        first = launch(args, tmp / "bench", tmp / "run", tmp / "cache")
        while len(stored(table)) < args.dialogues // 2:
            if first.poll() is not None:
                raise RuntimeError(f"the first run ended before the kill: {first.communicate()}")
            time.sleep(0.01)
        first.send_signal(signal.SIGKILL)
        first.wait()
        time.sleep(5 * LATENCY_S + 0.5)  # the server answers what was in flight, to nobody
        before = {"requests": server.total("requests"), "injected": server.total("injected")}
        log_at_kill = len(log_path.read_text().splitlines())
        finished = stored(table)
        second = launch(args, tmp / "bench", tmp / "run", tmp / "cache")
        out, err = second.communicate(timeout=1800)
        if second.returncode != 0:
            raise RuntimeError(f"the resumed run failed: {err[-2000:]}")
        after = {"requests": server.total("requests"), "injected": server.total("injected")}
    resumed = json.loads(out.strip().splitlines()[-1])
    lines = stored(table)
    log = log_path.read_text().splitlines()
    before_kill, after_restart = Counter(log[:log_at_kill]), Counter(log[log_at_kill:])

    planned = set(bench.scenarios["scenario_id"])
    ids = Counter(r["id"] for r in lines)
    current = {r["id"]: r for r in lines}
    kept = {r["scenario_id"] for r in current.values() if r["status"] != "error"}
    lost = len(planned - kept)
    duplicated = sum(ids.values()) - len(ids)
    finished_keys = {key for record in finished for key in rebuilt_keys(record, full)}
    found = sum(1 for key in finished_keys if key in before_kill)
    re_requested = sum(after_restart[key] for key in finished_keys)
    asked_again = sum(n for key, n in after_restart.items() if key in before_kill)

    print(f"{args.dialogues} dialogues, anthropic SDK backend, max_concurrency={args.concurrency}, "
          f"{LATENCY_S * 1000:.0f} ms latency, {args.fault_rate:.0%} injected 429/529/500")
    print(f"before the kill: {len(finished)} dialogues stored; server answered {before['requests']} requests "
          f"({before['injected']} injected faults)")
    answered, injected = after["requests"] - before["requests"], after["injected"] - before["injected"]
    print(f"after the restart: planned {resumed['planned']}, skipped {resumed['skipped']} (already stored), "
          f"statuses {resumed['statuses']}, retries {resumed['retries']}; server answered "
          f"{answered} requests ({injected} injected faults)")
    print(f"check: {found}/{len(finished_keys)} rebuilt requests of the stored dialogues are in the "
          "pre-kill log")
    print(f"requests answered before the kill and sent again by the resumed run (dialogues in flight at the "
          f"kill, whose answers were lost with the process): {asked_again}")
    print(f"lost {lost}, duplicated {duplicated}, re-requested after restart {re_requested}")
    ok = (lost, duplicated, re_requested) == (0, 0, 0) and found == len(finished_keys) > 0
    ok = ok and resumed["skipped"] == len(finished) and len(ids) == args.dialogues
    print(f"acceptance (0, 0, 0): {'met' if ok else 'NOT MET'}")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dialogues", type=int, default=1000)
    parser.add_argument("--fault-rate", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fault-kill-") as tmp:
        ok = run(args, Path(tmp))
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
