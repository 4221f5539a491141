"""The loopback fake Bedrock endpoint answers real boto3 calls the way Bedrock Runtime does."""

from __future__ import annotations

import json
import re

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.retries import standard
from support.fake_bedrock import (
    ASSISTANT_REPLY,
    SCORE_LABELS,
    USER_CLOSING,
    USER_FOLLOW_UP,
    USER_OPENING,
    BedrockCall,
    FakeBedrock,
    judge_score,
)

CLAUDE = "anthropic.claude-3-sonnet-20240229-v1:0"
LLAMA = "us.meta.llama3-1-8b-instruct-v1:0"
MISTRAL = "mistral.mistral-7b-instruct-v0:2"


@pytest.fixture
def aws(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFAKEBEDROCK")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")  # boto3 reads this one, not AWS_REGION
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def runtime(attempts: int = 1):
    """A bedrock-runtime client as the endpoint variable configures it; botocore's own retries off."""
    return boto3.Session().client("bedrock-runtime", config=Config(
        retries={"total_max_attempts": attempts, "mode": "standard"}))


def converse(client, model_id: str, text: str, **extra):
    messages = [{"role": "user", "content": [{"text": text}]}]
    return client.converse(modelId=model_id, messages=messages, **extra)


def test_converse_and_native_invoke_bodies_are_answered_and_logged(aws):
    with FakeBedrock() as bedrock:
        aws.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock.url)
        client = runtime()
        answer = converse(client, LLAMA, "Recommend a book.", system=[{"text": "Be brief."}],
                          inferenceConfig={"maxTokens": 100, "temperature": 0.7})
        assert answer["output"]["message"] == {"role": "assistant", "content": [{"text": ASSISTANT_REPLY}]}
        assert answer["stopReason"] == "end_turn"
        usage = answer["usage"]
        assert usage["outputTokens"] == len(ASSISTANT_REPLY.split())
        assert usage["inputTokens"] == 5  # "Be brief." and "Recommend a book."
        assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
        claude_body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 512, "temperature": 0.0,
                       "system": "You judge.", "messages": [{"role": "user", "content": [
                           {"type": "text", "text": "Rate it. Personalization Score: [1-4]"}]}]}
        claude = json.loads(client.invoke_model(modelId=CLAUDE, body=json.dumps(claude_body))["body"].read())
        score = judge_score("Personalization Score", "You judge.\nRate it. Personalization Score: [1-4]")
        assert claude["content"][0]["text"].startswith(f"Personalization Score: {score}\n")
        assert re.search(r"Personalization Score: (\d+)", claude["content"][0]["text"]).group(1) == str(score)
        llama_body = {"prompt": "<|begin_of_text|>hi", "max_gen_len": 512, "temperature": 0.5, "top_p": 0.9}
        llama = json.loads(client.invoke_model(modelId=LLAMA, body=json.dumps(llama_body))["body"].read())
        assert llama["generation"] == ASSISTANT_REPLY and llama["stop_reason"] == "stop"
        mistral = json.loads(client.invoke_model(modelId=MISTRAL, body=json.dumps(
            {"prompt": "<s>[INST]hello[/INST]", "max_tokens": 3}))["body"].read())
        cut = " ".join(ASSISTANT_REPLY.split()[:3])
        assert mistral["outputs"][0] == {"text": cut, "stop_reason": "length"}
        log = bedrock.requests()
    assert [(e["model_id"], e["operation"], e["status"]) for e in log] == [
        (LLAMA, "Converse", 200), (CLAUDE, "InvokeModel", 200), (LLAMA, "InvokeModel", 200),
        (MISTRAL, "InvokeModel", 200)]
    assert log[0]["body"]["inferenceConfig"] == {"maxTokens": 100, "temperature": 0.7}
    assert log[1]["body"] == claude_body
    assert {(e["access_key"], e["region"]) for e in log} == {("AKIDFAKEBEDROCK", "us-west-2")}


def test_default_responder_plays_user_agent_assistant_and_judge():
    def ask(system: str, prompt: str) -> str:
        return FakeBedrock().responder(BedrockCall(CLAUDE, "Converse", system, prompt, {}))

    user = "Write TERMINATE when done.\n"
    assert ask("", user) == USER_OPENING
    assert ask("", user + f"[ASSISTANT]: {ASSISTANT_REPLY}") == USER_FOLLOW_UP
    assert ask("", user + f"[ASSISTANT]: {ASSISTANT_REPLY}\n[ASSISTANT]: {ASSISTANT_REPLY}") == USER_CLOSING
    # an assistant reading the user's closing line is not mistaken for the user agent
    assert ask("You are an assistant.", USER_CLOSING) == ASSISTANT_REPLY
    verdict = ask("", "Give a VERDICT: True or False")
    assert re.fullmatch(r"VERDICT: (True|False)\nEXPLANATION: .+", verdict)
    scores = ask("", "Naturalness Score: [1-5] and Coherence Score: [1-5]")
    for label in ("Naturalness Score", "Coherence Score"):
        assert 1 <= int(re.search(rf"{label}: (\d+)", scores).group(1)) <= SCORE_LABELS[label]
    picked = {judge_score("Personalization Score", f"dialogue {i}") for i in range(200)}
    assert picked == {1, 2, 3, 4}


@pytest.mark.parametrize("process", [False, True], ids=["thread", "child process"])
def test_injected_throttling_is_seen_by_botocore_as_bedrock_errors_and_logged(aws, process):
    with FakeBedrock(fault_rate=1.0, max_faults_per_request=None, process=process) as bedrock:
        aws.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock.url)
        client = runtime()
        codes = set()
        for i in range(12):
            with pytest.raises(ClientError) as caught:
                converse(client, LLAMA, f"question {i}")
            error = caught.value.response
            codes.add((error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"]))
            assert error["Error"]["Message"].startswith("injected fault")
        log = bedrock.requests(model_id=LLAMA)
        assert bedrock.total("injected") == 12
    assert codes == {(429, "ThrottlingException"), (503, "ServiceUnavailableException"),
                     (500, "InternalServerException")}
    assert len(log) == 12 and {e["status"] for e in log} == {429, 503, 500}


def test_faults_are_capped_so_a_retrying_client_gets_through(aws):
    # botocore's retries, only to show the cap; without its backoff (up to seconds a retry) in between
    aws.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, context: 0.0)
    with FakeBedrock(fault_rate=0.5, max_faults_per_request=2, seed=3) as bedrock:
        aws.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock.url)
        client = runtime(attempts=3)
        for i in range(10):
            assert converse(client, CLAUDE, f"q{i}")["output"]["message"]["content"][0]["text"]
        log = bedrock.requests()
    assert sum(e["status"] == 200 for e in log) == 10 and len(log) > 10


def test_model_access_errors_are_bedrocks(aws):
    legacy = "meta.llama3-1-8b-instruct-v1:0"
    with FakeBedrock(known_models={CLAUDE, LLAMA, legacy, "anthropic.claude-v2"}, denied_models={CLAUDE},
                     retired_models={"anthropic.claude-v2"}, profile_only_models={legacy}) as bedrock:
        aws.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock.url)
        client = runtime()
        expected = {
            "no.such-model": (400, "ValidationException", "model identifier is invalid"),
            CLAUDE: (403, "AccessDeniedException", "don't have access"),
            "anthropic.claude-v2": (404, "ResourceNotFoundException", "end of its life"),
            legacy: (400, "ValidationException", "inference profile"),
        }
        for model_id, (status, code, words) in expected.items():
            with pytest.raises(ClientError) as caught:
                converse(client, model_id, "hello")
            error = caught.value.response
            assert (error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"]) == (status, code)
            assert words in error["Error"]["Message"]
        with pytest.raises(ClientError, match="A conversation must alternate"):
            client.converse(modelId=LLAMA, messages=[{"role": "user", "content": [{"text": "a"}]},
                                                     {"role": "user", "content": [{"text": "b"}]}])
        assert converse(client, LLAMA, "hello")["stopReason"] == "end_turn"
    with FakeBedrock(require_access_key="AKIDOTHER") as bedrock:
        aws.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock.url)
        with pytest.raises(ClientError) as caught:
            converse(runtime(), LLAMA, "hello")
    assert caught.value.response["Error"]["Code"] == "UnrecognizedClientException"


def test_fault_statuses_without_a_bedrock_code_are_refused():
    with pytest.raises(ValueError, match=r"fault_statuses \[529\]"):
        FakeBedrock(fault_statuses=(529,))
