"""A disaggregation proxy in front of one prefill and one decode vLLM instance, as vLLM's own examples drive a 1P1D
pair (``examples/online_serving/disaggregated_serving``; NIXL's ``toy_proxy_server.py``): a completion request goes
to the prefill instance with ``max_tokens=1`` and no streaming, then, as the client sent it, to the decode
instance, whose response streams back. With NIXL the prefill request asks for a remote decode
(``kv_transfer_params.do_remote_decode``) and the decode request carries the ``kv_transfer_params`` the prefill
response returned (the blocks to read and where); ``ExampleConnector`` needs neither (the decode instance finds the
prompt's KV in the shared folder by the prompt's tokens).

Run it where the client reaches it (``llmsched pd-proxy``, cli/real_engine.py), and point ``vllm bench serve
--base-url`` at it::

    llmsched pd-proxy --port 8000 --prefill http://127.0.0.1:8100 --decode http://127.0.0.1:8200 --connector nixl

A prefill that fails is answered with its own status and body; the decode request is then not sent. The proxy adds
two local HTTP hops to each request's TTFT, which a client-side capture measures with the rest.
"""
from __future__ import annotations

import json

CONNECTORS = ("nixl", "example")
PATHS = ("/v1/completions", "/v1/chat/completions")
REMOTE_DECODE = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                 "remote_block_ids": None, "remote_host": None, "remote_port": None}


def prefill_body(body: dict, connector: str) -> dict:
    """The request the prefill instance gets: the prompt, one token, no stream (its KV is what the proxy wants)."""
    out = {k: v for k, v in body.items() if k not in ("stream", "stream_options", "max_completion_tokens")}
    out.update(max_tokens=1, stream=False)
    if connector == "nixl":
        out["kv_transfer_params"] = dict(REMOTE_DECODE)
    return out


def decode_body(body: dict, prefilled: dict, connector: str) -> dict:
    """The client's own request, with where to read the prompt's KV (NIXL: the prefill response's
    ``kv_transfer_params``)."""
    out = dict(body)
    if connector == "nixl":
        params = prefilled.get("kv_transfer_params")
        if not isinstance(params, dict):
            raise ValueError("the prefill instance returned no kv_transfer_params: start it with "
                             "--kv-transfer-config '{\"kv_connector\": \"NixlConnector\", \"kv_role\": \"kv_both\"}'")
        out["kv_transfer_params"] = params
    return out


def make_app(prefill: str, decode: str, connector: str):
    from aiohttp import ClientSession, ClientTimeout, web

    async def session_of(app):
        app["session"] = ClientSession(timeout=ClientTimeout(total=None))
        yield
        await app["session"].close()

    async def complete(request: web.Request) -> web.StreamResponse:
        session = request.app["session"]
        body = await request.json()
        async with session.post(prefill + request.path, json=prefill_body(body, connector)) as r:
            text = await r.text()
            if r.status != 200:
                return web.Response(status=r.status, text=text, content_type="application/json")
        try:
            forward = decode_body(body, json.loads(text), connector)
        except ValueError as e:
            return web.json_response({"error": {"message": str(e), "type": "proxy"}}, status=502)
        async with session.post(decode + request.path, json=forward) as r:
            out = web.StreamResponse(status=r.status, headers={"Content-Type": r.headers.get("Content-Type",
                                                                                             "application/json")})
            await out.prepare(request)
            async for chunk in r.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out

    async def models(request: web.Request) -> web.Response:
        async with request.app["session"].get(decode + "/v1/models") as r:
            return web.Response(status=r.status, text=await r.text(), content_type="application/json")

    async def health(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.cleanup_ctx.append(session_of)
    for path in PATHS:
        app.router.add_post(path, complete)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    return app


def serve(port: int, prefill: str, decode: str, connector: str, host: str = "127.0.0.1") -> None:
    """Serve the proxy until interrupted."""
    if connector not in CONNECTORS:
        raise ValueError(f"--connector {connector!r}: give one of {', '.join(CONNECTORS)}")
    from aiohttp import web
    web.run_app(make_app(prefill.rstrip("/"), decode.rstrip("/"), connector), host=host, port=port, print=None)
