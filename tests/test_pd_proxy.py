"""The proxy's two requests (llmsched/vllm/pd_proxy.py) as NIXL's and ExampleConnector's pairs need them: the
prefill instance gets the prompt for one token, no stream (and, for NIXL, a request for a remote decode); the decode
instance gets the client's request as sent (and, for NIXL, the prefill response's kv_transfer_params)."""
import pytest

from llmsched.vllm.pd_proxy import REMOTE_DECODE, decode_body, prefill_body

CLIENT = {"model": "m", "prompt": "hello", "max_tokens": 64, "stream": True,
          "stream_options": {"include_usage": True}, "ignore_eos": True}


def test_the_prefill_request_is_one_token_unstreamed():
    pre = prefill_body(CLIENT, "example")
    assert pre == {"model": "m", "prompt": "hello", "max_tokens": 1, "stream": False, "ignore_eos": True}
    chat = prefill_body({"messages": [], "max_completion_tokens": 9, "stream": True}, "example")
    assert chat == {"messages": [], "max_tokens": 1, "stream": False}
    assert prefill_body(CLIENT, "nixl")["kv_transfer_params"] == REMOTE_DECODE
    assert CLIENT["max_tokens"] == 64 and CLIENT["stream"]  # the client's own request is left as it was


def test_the_decode_request_carries_what_nixl_returned():
    params = {"do_remote_prefill": True, "remote_engine_id": "e0", "remote_block_ids": [3, 4], "remote_host": "h",
              "remote_port": 5600}
    assert decode_body(CLIENT, {"kv_transfer_params": params}, "nixl") == {**CLIENT, "kv_transfer_params": params}
    assert decode_body(CLIENT, {}, "example") == CLIENT
    with pytest.raises(ValueError, match="returned no kv_transfer_params"):
        decode_body(CLIENT, {"choices": []}, "nixl")
