"""PERSONA Bench runs on the kit's client and engine: two fake servers with 10% faults answer every
item once; a run killed with SIGKILL resumes with nothing repeated and nothing lost; a missing key
stops before anything is written; malformed data is reported with its file and place."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
from support.fake_server import FakeLLMServer

from personalens_utils.llm import LLMClient
from personalens_utils.llm.client import PreflightError
from personalens_utils.persona_bench.data import PersonaDataError, load_users
from personalens_utils.persona_bench.items import iter_items
from personalens_utils.persona_bench.runner import run_items
from personalens_utils.persona_bench.synthetic import write_synthetic
from personalens_utils.runstore.records import PersonaPrediction
from personalens_utils.runstore.store import RunStore
from personalens_utils.session.persona_bench import PersonaRun


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("persona-data"), 6, seed=11)


def _prompt(api: str, body: dict) -> str:
    last = body["messages"][-1]["content"]
    return last if isinstance(last, str) else " ".join(block["text"] for block in last)


@pytest.mark.parametrize(
    ("backend", "model", "key"),
    [
        ("openai", "gpt-4.1", "OPENAI_API_KEY"),
        ("anthropic", "Claude 3.5 Sonnet", "ANTHROPIC_API_KEY"),
    ],
)
def test_two_fake_servers_with_faults_answer_every_item_once(
    data, tmp_path, monkeypatch, backend, model, key
):
    items = list(iter_items(data))
    answered: Counter[str] = Counter()

    def reply(api: str, body: dict) -> str:
        answered[_prompt(api, body)] += 1
        return "positive"

    monkeypatch.setenv(key, "test-key")
    with FakeLLMServer(fault_rate=0.1, seed=4, reply=reply) as server:
        base = f"{server.url}/v1" if backend == "openai" else server.url
        client = LLMClient(
            backend,
            base_url=base,
            max_concurrency=8,
            progress=False,
            use_cache=False,
            retry_base_s=0.001,
            retry_cap_s=0.01,
        )
        store = RunStore(tmp_path / "store")
        report = run_items(client, items, store, model)
        again = run_items(client, items, store, model)
        client.close()
        injected = server.total("injected")
    assert injected > 0, "the fake server injected no fault"
    assert report.errors == 0 and report.stored == len(items)
    assert again.planned == 0 and again.already_done == len(items)
    assert sorted(answered.values()) == [1] * len(items)
    records = store.read(PersonaPrediction)
    assert len(records) == len({r.id for r in records}) == len(items)
    assert {r.item for r in records} == {i.key for i in items}
    assert all(r.backend == backend and r.model == model for r in records)


SCRIPT = r"""
import asyncio, hashlib, sys
from personalens_utils.llm.client import LLMClient
from personalens_utils.llm.offline import OfflineBackend
from personalens_utils.persona_bench.items import iter_items
from personalens_utils.persona_bench.runner import run_items
from personalens_utils.runstore.store import RunStore

data, run_dir, log = sys.argv[1:4]

class SlowOffline(OfflineBackend):
    async def acomplete(self, request, model):
        await asyncio.sleep(0.01)
        with open(log, "a") as fh:
            fh.write(hashlib.sha256(request.messages[-1].content.encode()).hexdigest() + "\n")
        return self.respond(request, model)

client = LLMClient(SlowOffline(), max_concurrency=4, progress=False)
report = run_items(client, iter_items(data), RunStore(run_dir))
print(report.stored, report.already_done)
"""


def _launch(data: Path, run_dir: Path, log: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(data), str(run_dir), str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [
        orjson.loads(line) for line in path.read_bytes().splitlines(keepends=True) if line.endswith(b"\n")
    ]


def test_a_run_killed_with_sigkill_resumes_with_nothing_repeated_and_nothing_lost(data, tmp_path):
    items = list(iter_items(data))
    store_file = tmp_path / "store" / "persona_bench.jsonl"
    log = tmp_path / "calls.log"
    first = _launch(data, tmp_path / "store", log)
    deadline = time.monotonic() + 240
    while len(_lines(store_file)) < 30 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first.poll() is None, f"the run ended before it could be killed: {first.communicate()}"
    first.send_signal(signal.SIGKILL)
    first.wait()
    kept = {line["id"] for line in _lines(store_file)}
    assert 0 < len(kept) < len(items)
    second = _launch(data, tmp_path / "store", log)
    out, err = second.communicate(timeout=600)
    assert second.returncode == 0, err
    lines = _lines(store_file)
    ids = [line["id"] for line in lines]
    assert len(ids) == len(set(ids)) == len(items), "a record was written twice or is missing"
    asked = Counter(log.read_text(encoding="utf-8").splitlines())
    twice = sum(n - 1 for n in asked.values() if n > 1)
    assert twice <= 4, f"{twice} calls repeated; only the 4 in flight at the kill may be"
    assert int(out.split()[1]) == len(kept)


def test_a_missing_key_stops_with_a_short_error_and_writes_nothing(data, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    store = RunStore(tmp_path / "store")
    run = PersonaRun(data, "synthetic", store, tmp_path, LLMClient("openai", progress=False), "gpt-4.1")
    with pytest.raises(PreflightError) as caught:
        run.run(iter_items(data))
    message = str(caught.value)
    assert "OPENAI_API_KEY" in message and len(message) < 600 and "Traceback" not in message
    assert not store.path(PersonaPrediction).exists()


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"alice": [{"title": "t"', "line 1 column"),
        ('["not", "an", "object"]', "$: must be a JSON object"),
        ('{"alice": {"title": "t"}}', '$["alice"]: must be a list of posts'),
        (
            '{"alice": [{"title": "t", "__sub__": "x", "author": "alice", '
            '"timestamp": "2023-01-01T00:00:00Z", '
            '"comments": [{"body": "b", "author": "bob", "timestamp": "2023", "score": "high"}]}]}',
            '$["alice"][0].comments[0].score: must be int or float or null',
        ),
        (
            '{"alice": [{"title": "t", "__sub__": "x", "author": "alice", '
            '"timestamp": "2023-01-01T00:00:00Z"}]}',
            '$["alice"][0].comments: is missing',
        ),
    ],
)
def test_malformed_data_names_the_file_and_the_place(tmp_path, text, where):
    bad = tmp_path / "merged_posts_remapped.json"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(PersonaDataError) as caught:
        load_users(tmp_path)
    assert str(bad) in str(caught.value) and where in str(caught.value)


def _fault(data: Path, user: str, old: bytes, new: bytes, stop: int) -> tuple[int, int, int, str]:
    """Replace the first match of `old` in the line of the user named `user` (one user a line, as
    `write_synthetic` writes them) by `new`; returns the offset, line and column of the byte where the
    parser stops (`stop` bytes into `new`) and the JSON path of the post it is in."""
    text = data.read_bytes()
    line_start = text.index(f'\n"{user}"'.encode()) + 1
    found = re.compile(old).search(text, line_start)
    assert found is not None
    text = text[: found.start()] + new + text[found.end() :]
    data.write_bytes(text)
    post = text[line_start : found.start()].count(b'{"title"') - 1
    offset = found.start() + stop
    column = len(text[line_start:offset].decode()) + 1
    return offset, text.count(b"\n", 0, offset) + 1, column, f'$["{user}"][{post}]'


UTF8 = (rb'"content": "', b'"content": "caf\xc3\xa9 \xff', 18)
"""A 0xff byte in a post's text, after a two-byte character: the place is the 0xff byte."""
SYNTAX = (rb'"score": \d+', b'"score" 1234', 12)
"""A key without its colon: the parser stops at the end of the value it finds instead."""


@pytest.mark.parametrize(
    ("fault", "problem"),
    [(UTF8, "not valid UTF-8 (byte 0xff)"),
     (SYNTAX, "not valid JSON (parse error: object key and value must be separated by a colon")],
)
def test_invalid_utf8_or_json_names_the_file_line_column_byte_and_item(tmp_path, fault, problem):
    data = write_synthetic(tmp_path, 40, seed=3)
    offset, line, column, post = _fault(data, "synth_user_00033", *fault)
    assert offset > 2 * 2**16  # past the parser's first reads: the second pass starts at the user
    with pytest.raises(PersonaDataError) as caught:
        load_users(data)
    message = str(caught.value)
    assert message.startswith(f"{data}: line {line} column {column} (byte {offset}), in {post}.")
    assert problem in message and len(message) < 400


LOCATE = """
import sys
import psutil
from personalens_utils.persona_bench.data import PersonaDataError, load_users
def peak():  # this process's own high-water mark (ru_maxrss would count the parent's, kept across exec)
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:"))
base = max(peak(), psutil.Process().memory_info().rss)
try:
    load_users(sys.argv[1])
except PersonaDataError as exc:
    print(exc)
print(peak() - base)
"""


def test_a_malformed_file_is_located_in_bounded_memory(tmp_path):
    """A syntax error in a 24 MB file is located a chunk at a time: the error path's peak memory stays a
    small part of the file (read whole as JSON, the file alone would take more than its size)."""
    data = write_synthetic(tmp_path, 40, seed=3)
    users = data.read_bytes()[2:-3].split(b",\n")
    with data.open("wb") as fh:
        fh.write(b"{")
        for n in range(48):
            renamed = (user.replace(b"synth_user", b"copy%d" % n) for user in users)
            fh.write(b"," * bool(n) + b"\n" + b",\n".join(renamed))
        fh.write(b"\n}\n")
    size = data.stat().st_size
    offset, line, column, post = _fault(data, "copy0_00007", *SYNTAX)  # early: a quick test
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", LOCATE, str(data)], capture_output=True, text=True,
                          env=env, check=True)
    message, extra = done.stdout.splitlines()
    assert size > 20 * 2**20 and int(extra) < size / 4, f"{int(extra) / 2**20:.1f} MiB of {size / 2**20:.0f}"
    assert message.startswith(f"{data}: line {line} column {column} (byte {offset}), in {post}.score:")


def test_missing_data_says_where_it_looked_and_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PERSONA_BENCH_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(PersonaDataError, match=r"PERSONA_BENCH_DATA.*write_synthetic"):
        load_users()


def test_synthetic_data_is_byte_identical_for_a_seed_and_spans_ten_domains(tmp_path):
    a = write_synthetic(tmp_path / "a", 15, seed=2)
    b = write_synthetic(tmp_path / "b", 15, seed=2)
    c = write_synthetic(tmp_path / "c", 15, seed=3)
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    users = load_users(a)
    assert len(users) == 15 and {p.subreddit for u in users for p in u.posts} <= set(
        json.loads(
            json.dumps(
                [
                    "worldnews",
                    "gaming",
                    "technology",
                    "science",
                    "movies",
                    "sports",
                    "politics",
                    "books",
                    "music",
                    "personalfinance",
                ]
            )
        )
    )
    many = load_users(write_synthetic(tmp_path / "d", 60, seed=0))
    assert len({p.subreddit for u in many for p in u.posts}) == 10
