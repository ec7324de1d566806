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

Every figure is measured, never fitted to a target, and says where:

``vllm-async-llm`` (llmsched's GPU captures, ``scripts/vllm_gpu_replay.py``: vLLM 0.26's ``AsyncLLM`` in its own
  process, prompts as token ids, ``skip_tokenizer_init``, no detokenisation, no HTTP). Measured on the H100 host of
  ``tests/data/gpu_runs/h100-*`` (CPU model not recorded), whose requests.jsonl carry the client's own
  ``client_sent``/``client_first``/``client_last`` beside the engine's stamps, on one monotonic clock:
  ``handoff`` is the least ``queued_ts − client_sent`` of the three runs (0.76, 1.08, 1.33 ms: a request that
  found the engine between steps; larger gaps include the step in flight); ``output_fixed`` and
  ``output_per_request`` are the least-squares line of ``client_first − first_token_ts`` and ``client_last −
  last_token_ts`` against the step's generation tokens (the stat logger's ``generation_tokens`` in steps.csv), over
  the 1,800 stamps of the three runs (``scripts/front_end_terms.py``).
``vllm-serve`` (``vllm serve`` + ``vllm bench serve``: OpenAI ``/v1/completions``, streamed, a text prompt
  tokenised by the server, detokenised output). The engine-client terms are ``vllm-async-llm``'s; the API server's
  own are measured on this project's CPU capture (``tests/data/cpu_client_run``, ``scripts/client_capture.py``:
  vLLM 0.32.0's API server on one core of an AMD EPYC (Zen 4) machine, the bench client on the same machine):
  ``request_fixed`` (client send to the completion handler: HTTP, FastAPI, request validation), ``per_prompt_token``
  (handler to the engine client: rendering and tokenisation, per prompt token) and the API server's share of each
  chunk (the output processor's detokenisation and the SSE write: client receipt minus the engine client's
  receipt), each the median over the capture's requests. The tokeniser there is ``make-model``'s byte-level BPE (Hugging
  Face ``tokenizers``, a 1,024-token vocabulary), the same library and algorithm as Llama-3's and Qwen's fast
  tokenisers.
``none``: no front end (the client boundary adds only the wait for the step in flight).

A GPU server's host CPU is a server core like this capture's (EPYC or Xeon); the terms are used as measured, not
scaled: the model does not know the user's host, and a term per host would be a fit.
"""
from __future__ import annotations

from dataclasses import dataclass

DEFAULT = "vllm-serve"


@dataclass(frozen=True)
class FrontEnd:
    """One front end's costs in seconds (see the module docstring for what each is and where it was measured)."""

    name: str
    request_fixed: float = 0.0
    per_prompt_token: float = 0.0
    handoff: float = 0.0
    output_fixed: float = 0.0
    output_per_request: float = 0.0
    source: str = ""

    def __post_init__(self):
        for key in ("request_fixed", "per_prompt_token", "handoff", "output_fixed", "output_per_request"):
            value = getattr(self, key)
            if not (isinstance(value, (int, float)) and value >= 0 and value < 60):
                raise ValueError(f"front end {self.name!r}: {key} must be seconds in [0, 60), got {value!r}")

    def request_delay(self, prompt_len: int) -> float:
        """Seconds from the client's send until the engine core can queue a request of ``prompt_len`` tokens."""
        return self.request_fixed + self.per_prompt_token * prompt_len + self.handoff

    def output_delay(self, batch):
        """Seconds from the engine's stamp of a token until its client has it, ``batch`` requests having got a
        token in that step (a number or a numpy array)."""
        return self.output_fixed + self.output_per_request * batch

    def describe(self) -> dict:
        return {"name": self.name, "request_fixed": self.request_fixed, "per_prompt_token": self.per_prompt_token,
                "handoff": self.handoff, "output_fixed": self.output_fixed,
                "output_per_request": self.output_per_request, "source": self.source}


# measured: see the module docstring and scripts/front_end_terms.py
ASYNC_LLM = FrontEnd("vllm-async-llm", handoff=0.76e-3, output_fixed=1.0e-3, output_per_request=29e-6,
                     source="H100 host, vLLM 0.26 AsyncLLM, tests/data/gpu_runs/h100-* client stamps")
SERVE = FrontEnd("vllm-serve", request_fixed=2.2e-3, per_prompt_token=4e-6, handoff=ASYNC_LLM.handoff,
                 output_fixed=ASYNC_LLM.output_fixed + 0.8e-3, output_per_request=ASYNC_LLM.output_per_request,
                 source="vllm-async-llm's engine-client terms + the API server's measured on tests/data/"
                        "cpu_client_run (vLLM 0.32 CPU, AMD EPYC)")
NONE = FrontEnd("none", source="no front end")
FRONT_ENDS = {f.name: f for f in (SERVE, ASYNC_LLM, NONE)}


def front_end(name: str) -> FrontEnd:
    try:
        return FRONT_ENDS[name]
    except KeyError:
        raise ValueError(f"unknown front end {name!r}; known: {', '.join(FRONT_ENDS)}") from None
