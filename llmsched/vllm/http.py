"""Checks in vLLM's API server process: ``--middleware llmsched.vllm.http.TierCheck``.

The plug-in itself runs in vLLM's engine core, which can only end a request with a finish reason (it rejects with
``finish_reason="abort"`` and the reason in ``stop_reason``). A request naming a tier the operator did not
configure is a client error known before any scheduling, so this ASGI middleware answers it in the API server
with an OpenAI-style **400** naming the valid tiers. It reads the same ``LLMSCHED_TIERS`` / ``LLMSCHED_CONFIG``
settings as the plug-in, and only looks at ``vllm_xargs.tier`` of JSON bodies posted to the completion endpoints.
"""
from __future__ import annotations

import json

from .settings import TIER_KEY, load_settings

ENDPOINTS = ("/v1/completions", "/v1/chat/completions")


def tier_error(body: bytes, tiers: list[str]) -> str | None:
    """The message for a body that asks for an unknown tier, or None."""
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        return None  # vLLM reports malformed JSON itself
    xargs = data.get("vllm_xargs") if isinstance(data, dict) else None
    name = xargs.get(TIER_KEY) if isinstance(xargs, dict) else None
    if name is None or name in tiers:
        return None
    return f"unknown tier {name!r}; valid tiers: {', '.join(tiers)} (extra_body={{\"vllm_xargs\": {{\"tier\": NAME}}}})"


class TierCheck:
    """ASGI middleware: 400 for an unknown ``vllm_xargs.tier`` on the completion endpoints."""

    def __init__(self, app):
        self.app = app
        self.tiers = [t.name for t in load_settings().tiers]

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") not in ENDPOINTS:
            return await self.app(scope, receive, send)
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return await self.app(scope, _replay([message]), send)
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        error = tier_error(body, self.tiers)
        if error is None:
            return await self.app(scope, _replay([{"type": "http.request", "body": body, "more_body": False}],
                                                 receive), send)
        payload = json.dumps({"error": {"message": error, "type": "BadRequestError", "param": "vllm_xargs.tier",
                                        "code": 400}}).encode()
        await send({"type": "http.response.start", "status": 400,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})


def _replay(messages, then=None):
    async def receive():
        if messages:
            return messages.pop(0)
        if then is not None:
            return await then()
        return {"type": "http.disconnect"}
    return receive
