"""The serving front end's own costs: what a client waits for outside the engine's steps.

A benchmark client (``vllm bench serve``, inference-perf, GuideLLM) times a request from its send to the first and
last streamed bytes. Between those and the engine's stamps (vLLM's ``RequestStateStats``: queued, scheduled, first
token, last token) lie:

* **before the engine** (``request_delay``): the HTTP request parsed and validated (``request_fixed``), the prompt
  rendered and tokenised (``per_prompt_token``, a text prompt's tokens; 0 where the client sends token ids), the
  request handed to the engine core over ZMQ (``handoff``). The wait for the engine step in flight (vLLM's engine
  core reads new requests between steps) is the simulator's, not a term here.
* **after the engine** (``output_delay``): each step's outputs go to the front end over ZMQ, the output processor
  walks every request that got a token (detokenisation where the prompt was text), and each stream's chunk is
  formatted and written (server-sent events over HTTP). The front end does this for one request after another,
  so a token reaches its client ``output_fixed + output_per_request × B`` after the engine's stamp, B being the
  requests that got a token in that step (the delays of a step's requests spread from ``output_fixed`` to
  ``output_fixed + 2·output_per_request·B``; this is their mean).

Every figure is measured, never fitted to a target, and says where (``scripts/front_end_terms.py`` prints them):

``vllm-async-llm`` (llmsched's GPU captures, ``scripts/vllm_gpu_replay.py``: vLLM 0.26's ``AsyncLLM`` with its
  engine core in its own process, prompts as token ids, ``skip_tokenizer_init``, no detokenisation, no HTTP).
  Measured on the H100 host of ``tests/data/gpu_runs/h100-*`` (its CPU model not recorded), whose requests.jsonl
  carry the client's ``client_sent``/``client_first``/``client_last`` beside the engine's stamps on one monotonic
  clock: ``handoff`` 1.08 ms, the median over the three runs of the least ``queued_ts − client_sent`` (0.76, 1.08,
  1.33 ms: a request that found the engine between steps; the others waited for the step in flight too);
  ``output_fixed`` 1.12 ms and ``output_per_request`` 29.6 µs, the least-squares line of ``client_first −
  first_token_ts`` and ``client_last − last_token_ts`` against the generation tokens of the step (the stat
  logger's steps.csv), over the 1,800 stamps of the three runs (correlation 0.79: the front end walks a step's
  requests one after another).
``vllm-serve`` (``vllm serve`` + ``vllm bench serve``: OpenAI ``/v1/completions``, streamed, a text prompt
  tokenised by the server, detokenised output). Measured on this project's GPU capture
  (``tests/data/gpu_runs/h200-llama-3.1-8b-serve-sharegpt-8``, ``scripts/client_capture.py --engine gpu``: vLLM
  0.26.0's API server with its defaults for an H200, Llama-3.1-8B, 150 ShareGPT-length requests at 8 req/s, the
  bench client on the same 16-core host), whose requests.jsonl carry the client's send and receipts, the API
  server's ``http_ts``/``rendered_ts``/``added_ts``/``first_out_ts``/``last_out_ts`` and the engine's stamps on one
  monotonic clock. The host served nothing else, so the figures are medians and least-squares lines, not lower
  envelopes: ``request_fixed`` 7.36 ms (the median client send to the request handed to the engine client: HTTP,
  FastAPI, validation, rendering, less the tokenisation's per-token part), ``per_prompt_token`` 1.51 µs (the slope
  of the server's rendering time on the prompt's tokens, 2.72 µs a token of the capture's 7.2-byte words: 0.378 µs
  a byte, 2.5 MiB/s, beside the 2.7 MiB/s published for Hugging Face ``tokenizers``' Python binding on an AMD EPYC,
  github gist benvanik/9090b155a3102b333896c1d92c451cbc; times 4 bytes a token of English text, OpenAI's tokenizer
  guide), ``handoff`` 0.74 ms (the least ``queued_ts − added_ts``), ``output_fixed`` 1.31 ms and
  ``output_per_request`` 53.6 µs (the line of ``client_last − last_token_ts`` on the step's generation tokens,
  correlation 0.75), and a stream's first chunk apart, ``first_output_fixed`` 2.02 ms and
  ``first_output_per_request`` 114 µs (``client_first − first_token_ts``, correlation 0.85: the server opens the
  response and sends its first event). The API server walks a step's requests one by one, so the output path
  grows with the batch: at that run's median of 45 requests a step, 6.7 ms to the first chunk and 3.7 ms to the
  last. Before this capture the terms came from a CPU capture (tests/data/cpu_client_run, a shared 2-core EPYC:
  ``request_fixed`` 5.17, ``handoff`` 0.59, ``output_fixed`` 3.45 ms as 10th percentiles, ``output_per_request``
  30.3 µs borrowed from the AsyncLLM runs; ``scripts/front_end_terms.py`` still prints them).
``none``: no front end (the client boundary adds only the wait for the step in flight).

A GPU server's host CPU is a server core like the captures' (EPYC or Xeon); the terms are used as measured, not
scaled: the model does not know the user's host, and a term per host would be a fit. They are one host's and one
vLLM release's (0.26); a load far from that run's moves the request path too (the same event loop streams every
running request), which a fixed ``request_fixed`` does not follow.
"""
from __future__ import annotations

from dataclasses import dataclass

DEFAULT = "vllm-serve"


@dataclass(frozen=True)
class FrontEnd:
    """One front end's costs in seconds (see the module docstring for what each is and where it was measured), and
    the ``source`` of its figures, as every hardware preset says its own (a link's, a GPU's)."""

    name: str
    source: str
    request_fixed: float = 0.0
    per_prompt_token: float = 0.0
    handoff: float = 0.0
    output_fixed: float = 0.0
    output_per_request: float = 0.0
    first_output_fixed: float | None = None  # a request's first token, where it was measured apart; else as any
    first_output_per_request: float | None = None

    def __post_init__(self):
        for key in ("request_fixed", "per_prompt_token", "handoff", "output_fixed", "output_per_request",
                    "first_output_fixed", "first_output_per_request"):
            value = getattr(self, key)
            if value is None and key.startswith("first_"):
                continue
            if not (isinstance(value, (int, float)) and value >= 0 and value < 60):
                raise ValueError(f"front end {self.name!r}: {key} must be seconds in [0, 60), got {value!r}")

    def request_delay(self, prompt_len: int) -> float:
        """Seconds from the client's send until the engine core can queue a request of ``prompt_len`` tokens."""
        return self.request_fixed + self.per_prompt_token * prompt_len + self.handoff

    def output_delay(self, batch):
        """Seconds from the engine's stamp of a token until its client has it, ``batch`` requests having got a
        token in that step (a number or a numpy array)."""
        return self.output_fixed + self.output_per_request * batch

    def first_output_delay(self, batch):
        """As ``output_delay``, for a request's first token (its stream's first chunk)."""
        fixed = self.output_fixed if self.first_output_fixed is None else self.first_output_fixed
        per = self.output_per_request if self.first_output_per_request is None else self.first_output_per_request
        return fixed + per * batch

    def describe(self) -> dict:
        return {"name": self.name, "request_fixed": self.request_fixed, "per_prompt_token": self.per_prompt_token,
                "handoff": self.handoff, "output_fixed": self.output_fixed,
                "output_per_request": self.output_per_request, "source": self.source,
                **{k: getattr(self, k) for k in ("first_output_fixed", "first_output_per_request")
                   if getattr(self, k) is not None}}


# measured: see the module docstring and scripts/front_end_terms.py
ASYNC_LLM = FrontEnd("vllm-async-llm", handoff=1.08e-3, output_fixed=1.12e-3, output_per_request=29.6e-6,
                     source="H100 host, vLLM 0.26 AsyncLLM, tests/data/gpu_runs/h100-* client stamps")
SERVE = FrontEnd("vllm-serve", request_fixed=7.36e-3, per_prompt_token=1.51e-6, handoff=0.74e-3,
                 output_fixed=1.31e-3, output_per_request=53.6e-6, first_output_fixed=2.02e-3,
                 first_output_per_request=114e-6,
                 source="vLLM 0.26 vllm serve on the H200 host, tests/data/gpu_runs/h200-llama-3.1-8b-serve-sharegpt-8 "
                        "(medians and least-squares lines over its 150 requests)")
NONE = FrontEnd("none", source="no front end")
FRONT_ENDS = {f.name: f for f in (SERVE, ASYNC_LLM, NONE)}


def front_end(name: str) -> FrontEnd:
    try:
        return FRONT_ENDS[name]
    except KeyError:
        raise ValueError(f"unknown front end {name!r}; known: {', '.join(FRONT_ENDS)}") from None
