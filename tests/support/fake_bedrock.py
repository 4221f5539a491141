"""A loopback fake of the Amazon Bedrock Runtime API, for boto3 clients: no network, no AWS account.

It serves the two operations the kit and the official PersonaLens scripts call, as botocore sends them:

- InvokeModel, ``POST /model/{modelId}/invoke``, with the native body of the model's family:
  Anthropic (``anthropic_version``/``messages``/``system``/``max_tokens``) answered with ``content``,
  Meta Llama (``prompt``/``max_gen_len``) answered with ``generation``, Mistral (``prompt``/``max_tokens``)
  answered with ``outputs[0].text``;
- Converse, ``POST /model/{modelId}/converse`` (messages of content blocks, ``system``,
  ``inferenceConfig``), answered with ``output.message``, ``stopReason`` and ``usage``.

Answers come from a responder, `reply(call) -> text`; the default, `keyword_reply`, picks short fixed
text by keywords of the prompt, in the labels both the kit's and the official parsers read. Faults
(429 ThrottlingException, 503 ServiceUnavailableException, 500 InternalServerException, ...) are drawn
at `fault_rate` exactly as `FakeLLMServer` draws them. SigV4 signatures are not checked; the access
key and region named in the signature are recorded. Every request is logged (model id, operation,
body, status) for assertions, also from a server in a child process.

    with FakeBedrock() as bedrock:   # AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_REGION set to anything
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock.url)
        boto3.client("bedrock-runtime").converse(modelId=..., messages=[...])
        bedrock.requests(operation="Converse")
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
import urllib.parse
from collections.abc import Callable, Collection, Sequence
from typing import Any, NamedTuple

from .fake_server import FakeLLMServer, RouteResult, content_text, word_tokens


class BedrockCall(NamedTuple):
    """What a responder sees of one request: the text a model would read, and the raw body."""

    model_id: str
    operation: str
    """"InvokeModel" or "Converse"."""
    system: str
    prompt: str
    """Every message's text in order (a native Llama or Mistral body: its whole `prompt`)."""
    body: dict[str, Any]


BedrockReplyFn = Callable[[BedrockCall], str]
"""Must be a module-level function for a server in a child process."""

ASSISTANT_REPLY = "Sure. Based on what you usually like, here is a suggestion with the details."
USER_OPENING = "Hi, can you help me with this?"
USER_FOLLOW_UP = "What other options are there?"
USER_CLOSING = "That works for me, thanks! TERMINATE"
USER_TURNS_BEFORE_CLOSING = 2
"""The fake user ends the dialogue once it has read this many fake assistant replies."""

SCORE_LABELS = {"Personalization Score": 4, "Naturalness Score": 5, "Coherence Score": 5}
"""Score labels a judge prompt may ask for, with the top of each scale."""

ERROR_CODES = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}
"""The error code Bedrock Runtime sends with each status (403 may also be UnrecognizedClientException)."""

_PATH = re.compile(r"/model/(?P<model>[^/]+)/(?P<op>invoke|converse)")
_CREDENTIAL = re.compile(r"Credential=(?P<key>[^/]+)/\d{8}/(?P<region>[^/]+)/")


def _hash_int(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\0".join(parts).encode()).digest()[:8], "big")


def judge_score(label: str, text: str) -> int:
    """The score the default responder gives under `label` for a prompt `text`: deterministic, in range."""
    return 1 + _hash_int(label, text) % SCORE_LABELS[label]


def judge_verdict(text: str) -> bool:
    """The task-completion verdict the default responder gives for a prompt `text` (True 3 times in 4)."""
    return _hash_int("VERDICT", text) % 4 != 0


def keyword_reply(call: BedrockCall) -> str:
    """Judge prompts get a verdict or scores, user-agent prompts a user turn, anything else an assistant turn.

    A prompt is a judge's when it asks for a VERDICT or a score label, a user agent's when it mentions
    TERMINATE (beyond the fake's own closing line). The user asks, follows up, then closes with
    TERMINATE once the transcript holds `USER_TURNS_BEFORE_CLOSING` fake assistant replies.
    """
    text = f"{call.system}\n{call.prompt}"
    if "VERDICT" in text:
        verdict = judge_verdict(text)
        reason = "Every goal was met." if verdict else "A goal was not met."
        return f"VERDICT: {verdict}\nEXPLANATION: {reason}"
    labels = [label for label in SCORE_LABELS if label in text]
    if labels:
        lines = [f"{label}: {judge_score(label, text)}" for label in labels]
        return "\n".join(lines) + "\nJustification: a fixed answer from the fake Bedrock judge."
    if "TERMINATE" in text.replace(USER_CLOSING, ""):
        seen = text.count(ASSISTANT_REPLY)
        if seen == 0:
            return USER_OPENING
        return USER_CLOSING if seen >= USER_TURNS_BEFORE_CLOSING else USER_FOLLOW_UP
    return ASSISTANT_REPLY


def echo_reply(call: BedrockCall) -> str:
    """The prompt back, after "echo: " (as `support.fake_server.echo_reply` answers one user message)."""
    return f"echo: {call.prompt}"


def _text(content: Any) -> str:
    return content_text(content, sep="\n")


def family(model_id: str) -> str:
    """The family ("anthropic", "meta", "mistral") naming the native body format of a model id or profile."""
    name = model_id.rsplit("/", 1)[-1]
    for prefix in ("us.", "eu.", "apac.", "global."):
        name = name.removeprefix(prefix)
    return name.split(".", 1)[0]


class FakeBedrock(FakeLLMServer):
    """A loopback Bedrock Runtime endpoint; use as a context manager, point boto3 at `url`.

    `known_models`, when given, is every id the fake serves (others: ValidationException, as for a
    misspelled id); `denied_models` answer AccessDeniedException (no model access granted);
    `retired_models` ResourceNotFoundException (end of life); `profile_only_models` the
    ValidationException Bedrock sends when a model is called on demand without its inference profile.
    `require_access_key` answers UnrecognizedClientException to a signature naming another key.
    """

    def __init__(
        self,
        *,
        responder: BedrockReplyFn = keyword_reply,
        known_models: Collection[str] | None = None,
        denied_models: Collection[str] = (),
        retired_models: Collection[str] = (),
        profile_only_models: Collection[str] = (),
        require_access_key: str | None = None,
        fault_statuses: Sequence[int] = (429, 503, 500),
        **server_options: Any,
    ):
        """`server_options` are `FakeLLMServer`'s: latency_s, fault_rate, max_faults_per_request, seed,
        process, ..."""
        super().__init__(fault_statuses=fault_statuses, **server_options)
        unknown = set(self.fault_statuses) - set(ERROR_CODES)
        if unknown:
            raise ValueError(
                f"fault_statuses {sorted(unknown)} have no Bedrock error code; use {sorted(ERROR_CODES)}"
            )
        self.responder = responder
        self.known_models = None if known_models is None else frozenset(known_models)
        self.denied_models = frozenset(denied_models)
        self.retired_models = frozenset(retired_models)
        self.profile_only_models = frozenset(profile_only_models)
        self.require_access_key = require_access_key
        self._config.update(
            responder=responder,
            known_models=self.known_models,
            denied_models=self.denied_models,
            retired_models=self.retired_models,
            profile_only_models=self.profile_only_models,
            require_access_key=require_access_key,
        )
        self._log: list[dict[str, Any]] = []
        self._log_lock = threading.Lock()

    # -- the request log --------------------------------------------------------------------------

    def requests(self, *, model_id: str | None = None, operation: str | None = None) -> list[dict[str, Any]]:
        """Every request so far, oldest first: model_id, operation, body, status, access_key, region."""
        if self._child is not None:
            log = self._remote("GET", "requests")["requests"]
        else:
            with self._log_lock:
                log = list(self._log)
        return [
            entry
            for entry in log
            if (model_id is None or entry["model_id"] == model_id)
            and (operation is None or entry["operation"] == operation)
        ]

    def reset(self) -> None:
        super().reset()
        if self._child is None:
            with self._log_lock:
                self._log.clear()

    def _control(self, method: str, path: str) -> RouteResult:
        if method == "GET" and path == "/_fake/requests":
            with self._log_lock:
                return 200, {"requests": list(self._log)}, {}
        return super()._control(method, path)

    # -- answering --------------------------------------------------------------------------------

    def handle(self, method: str, path: str, raw: bytes, headers: dict[str, str]) -> RouteResult:
        match = _PATH.fullmatch(path)
        if method != "POST" or match is None:
            return self._bedrock_error(
                404, f"no Bedrock Runtime operation {method} {path}", "UnknownOperationException"
            )
        model_id = urllib.parse.unquote(match["model"])
        operation = "Converse" if match["op"] == "converse" else "InvokeModel"
        signed = _CREDENTIAL.search(headers.get("authorization", ""))
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError as err:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
            result = self._bedrock_error(
                400, f"the request body is not JSON: {err}", "SerializationException"
            )
        else:
            result = self._answer(path, model_id, operation, raw, body, signed)
        with self._log_lock:
            self._log.append(
                {
                    "model_id": model_id,
                    "operation": operation,
                    "body": body,
                    "status": result[0],
                    "access_key": signed["key"] if signed else None,
                    "region": signed["region"] if signed else None,
                }
            )
        return result

    def _answer(
        self,
        path: str,
        model_id: str,
        operation: str,
        raw: bytes,
        body: dict[str, Any],
        signed: re.Match[str] | None,
    ) -> RouteResult:
        if self.require_access_key is not None and (
            signed is None or signed["key"] != self.require_access_key
        ):
            return self._bedrock_error(
                403, "The security token included in the request is invalid.", "UnrecognizedClientException"
            )
        if self.known_models is not None and model_id not in self.known_models:
            return self._bedrock_error(400, "The provided model identifier is invalid.")
        if model_id in self.denied_models:
            return self._bedrock_error(403, "You don't have access to the model with the specified model ID.")
        if model_id in self.retired_models:
            return self._bedrock_error(
                404,
                "This model version has reached the end of its life. Please refer to the AWS "
                "documentation for more details.",
            )
        if model_id in self.profile_only_models:
            return self._bedrock_error(
                400,
                f"Invocation of model ID {model_id} with on-demand throughput isn't supported. Retry your "
                "request with the ID or ARN of an inference profile that contains this model.",
            )
        status = self._fault_for(raw)
        if status is not None:
            with self._lock:
                self.counters[path]["injected"] += 1
            return self._bedrock_error(status, f"injected fault {status}")
        try:
            if operation == "Converse":
                return 200, self._converse(model_id, body), {}
            return 200, self._invoke(model_id, body), {}
        except ValueError as err:
            return self._bedrock_error(400, str(err))

    @staticmethod
    def _bedrock_error(status: int, message: str, code: str | None = None) -> RouteResult:
        """An error as Bedrock sends it: the code in x-amzn-errortype (botocore reads it there), a message."""
        code = code or ERROR_CODES[status]
        return status, {"message": message}, {"x-amzn-errortype": f"{code}:http://internal.amazon.com/coral/"}

    def _converse(self, model_id: str, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("1 validation error detected: Value at 'messages' failed to satisfy constraint")
        if messages[0].get("role") != "user":
            raise ValueError(
                "A conversation must start with a user message. Try again with a conversation that starts "
                "with a user message."
            )
        for previous, message in itertools.pairwise(messages):
            if previous.get("role") == message.get("role"):
                raise ValueError("A conversation must alternate between user and assistant roles.")
        for message in messages:
            blocks = message.get("content")
            if not isinstance(blocks, list) or not blocks:
                raise ValueError("The content field in the Message object is empty.")
            if any("text" in block and not str(block["text"]).strip() for block in blocks):
                raise ValueError(
                    "The text field in the ContentBlock object is blank. Add text to the text field, and "
                    "try again."
                )
        config = body.get("inferenceConfig") or {}
        max_tokens = config.get("maxTokens")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise ValueError(f"inferenceConfig.maxTokens must be a positive integer, got {max_tokens!r}")
        system = _text(body.get("system"))
        prompt = "\n".join(_text(m.get("content")) for m in messages)
        text, stop = self._reply(BedrockCall(model_id, "Converse", system, prompt, body), max_tokens)
        usage_in, usage_out = word_tokens(f"{system}\n{prompt}"), word_tokens(text)
        return {
            "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
            "stopReason": "max_tokens" if stop else "end_turn",
            "usage": {
                "inputTokens": usage_in,
                "outputTokens": usage_out,
                "totalTokens": usage_in + usage_out,
            },
            "metrics": {"latencyMs": int(self.latency_s * 1000)},
        }

    def _invoke(self, model_id: str, body: dict[str, Any]) -> dict[str, Any]:
        kind = family(model_id)
        if kind == "anthropic":
            if "anthropic_version" not in body or "max_tokens" not in body or not body.get("messages"):
                raise ValueError(
                    "Malformed input request: anthropic_version, max_tokens and messages are required"
                )
            system = _text(body.get("system"))
            prompt = "\n".join(_text(m.get("content")) for m in body["messages"])
            text, stop = self._reply(
                BedrockCall(model_id, "InvokeModel", system, prompt, body), body["max_tokens"]
            )
            ident = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]
            return {
                "id": f"msg_bdrk_{ident}",
                "type": "message",
                "role": "assistant",
                "model": model_id,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "max_tokens" if stop else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": word_tokens(f"{system}\n{prompt}"),
                          "output_tokens": word_tokens(text)},
            }
        if kind not in ("meta", "mistral"):
            raise ValueError(f"the fake serves anthropic, meta and mistral models, not {model_id!r}")
        if not isinstance(body.get("prompt"), str):
            raise ValueError("Malformed input request: required key [prompt] not found")
        limit = body.get("max_gen_len" if kind == "meta" else "max_tokens")
        text, stop = self._reply(BedrockCall(model_id, "InvokeModel", "", body["prompt"], body), limit)
        reason = "length" if stop else "stop"
        if kind == "meta":
            return {
                "generation": text,
                "prompt_token_count": word_tokens(body["prompt"]),
                "generation_token_count": word_tokens(text),
                "stop_reason": reason,
            }
        return {"outputs": [{"text": text, "stop_reason": reason}]}

    def _reply(self, call: BedrockCall, max_tokens: int | None) -> tuple[str, bool]:
        """The responder's text, cut to `max_tokens` words; True when it was cut."""
        words = self.responder(call).split(" ")
        if max_tokens is not None and len(words) > max_tokens:
            return " ".join(words[:max_tokens]), True
        return " ".join(words), False
