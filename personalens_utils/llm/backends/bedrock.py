"""Claude on Amazon Bedrock, through the anthropic SDK's Bedrock client.

Credentials come from the standard AWS chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
AWS_SESSION_TOKEN, AWS_PROFILE, instance roles) or a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK;
the region from AWS_REGION or AWS_DEFAULT_REGION. Only Anthropic models are served this way.
"""

from __future__ import annotations

import os
from typing import Any

import anthropic
import httpx2

from ..types import FatalError, Request, Response
from .anthropic import _ClaudeBackend

BEDROCK_TEMPERATURE_VERSION = "bedrock-2023-05-31"
"""The body-level API version under which Bedrock's Claude models accept `temperature`."""


class BedrockBackend(_ClaudeBackend):
    name = "bedrock"
    key_hint = (
        "Configure AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or a "
        "Bedrock API key in AWS_BEARER_TOKEN_BEDROCK) and a region (AWS_REGION) with access to the model."
    )

    def __init__(
        self,
        *,
        region: str | None = None,
        base_url: str | None = None,
        timeout: float = 120.0,
        http_client: httpx2.AsyncClient | None = None,
    ):
        super().__init__(timeout=timeout, http_client=http_client)
        self.region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        self.base_url = base_url

    def __repr__(self) -> str:
        return f"BedrockBackend(region={self.region!r}, timeout={self.timeout})"

    def endpoint(self) -> str:
        return self.base_url or f"Bedrock runtime in region {self.region!r} (set by AWS_REGION)"

    def _new_client(self) -> anthropic.AsyncAnthropicBedrock:
        return anthropic.AsyncAnthropicBedrock(
            aws_region=self.region,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=0,
            http_client=self._http_client,
        )

    def _temperature_fields(self, request: Request, model: str) -> tuple[dict[str, Any], dict[str, str]]:
        body, _ = super()._temperature_fields(request, model)
        if body:
            body["anthropic_version"] = BEDROCK_TEMPERATURE_VERSION
        return body, {}

    def _check_credentials(self, client: Any) -> None:
        """Credentials are resolved when the request is signed; a failure there is reported in acomplete."""

    async def acomplete(self, request: Request, model: str) -> Response:
        try:
            return await super().acomplete(request, model)
        except RuntimeError as err:
            if not _about_credentials(err):
                raise
            raise self._no_credentials(err) from err

    async def preflight(self, model: str) -> None:
        try:
            await super().preflight(model)
        except RuntimeError as err:
            if not _about_credentials(err):
                raise
            raise self._no_credentials(err) from err

    def _no_credentials(self, err: RuntimeError) -> FatalError:
        return FatalError(f"bedrock backend: {err}. {self.key_hint}")


def _about_credentials(err: RuntimeError) -> bool:
    """The SDK's signer fails with a RuntimeError when the AWS chain finds no credentials."""
    return "credentials" in str(err).lower()
