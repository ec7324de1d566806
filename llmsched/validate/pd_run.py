"""A disaggregated run's meta.json: one prefill and one decode vLLM instance behind a proxy (1P1D), as a capture of
``vllm bench serve`` through ``llmsched.vllm.pd_proxy`` saves it.

The prefill instance's arguments are meta.json's ``engine_kwargs``, as a colocated run's are; ``disaggregation``
holds the rest::

    "engine_kwargs": {..., "kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}},
    "disaggregation": {
        "decode": {"engine_kwargs": {..., "kv_transfer_config": {...}}, "engine_defaults_seen": {...}},
        "kv_link": "bw=1500GB/s,latency=20us"
    }

``decode`` is the decode instance's own sections (``engine_kwargs`` and, where the capture has them,
``engine_defaults_seen``, ``memory_gib``, ``kv_cache``, ``gpu``); the model, vLLM's version and the rest are the
run's. A decode instance that gives no memory sections of its own takes the run's only where its engine arguments
are the prefill instance's (but for the connector): with another memory share or limits, its KV cache is vLLM's
formula's, not the prefill instance's reported size. Each instance's ``kv_transfer_config`` names the connector (the same on both) and a role that fits its side
(``kv_producer`` or ``kv_both`` prefills, ``kv_consumer`` or ``kv_both`` decodes). ``kv_link`` is the link the
replay prices each prompt's KV on (``hardware/links.py``: a preset, ``same-node``, or its figures): a capture
knows what its connector crossed (two instances on one card: a device-to-device copy), llmsched cannot guess it.

The connectors read are those that move a prompt's KV from the prefill instance to the decode instance after its
prefill, which the replay models as a transfer the decode instance waits for (``kv_connector=nixl``):
``NixlConnector``, ``P2pNcclConnector``, ``MooncakeConnector`` and ``ExampleConnector`` (through files in a shared
folder: its cost is the link given). Another connector, a role that does not fit its side, or a data-parallel
group on either side is an error naming the field.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

CONNECTORS = ("NixlConnector", "P2pNcclConnector", "MooncakeConnector", "ExampleConnector")
ROLES = {"prefill": ("kv_producer", "kv_both"), "decode": ("kv_consumer", "kv_both")}
DECODE_SECTIONS = ("engine_kwargs", "engine_defaults_seen", "memory_gib", "kv_cache", "gpu")
# what an instance reports of its memory; the decode instance takes the run's only where it ran the same arguments
MEASURED = ("engine_defaults_seen", "memory_gib", "kv_cache")


@dataclass(frozen=True)
class Disaggregation:
    """The decode instance of a 1P1D run (its engine arguments, as ``EngineArgs``), the connector both ran and the
    link the replay prices the KV on."""

    decode: object
    connector: str
    kv_link: str
    decode_sections: tuple = ()  # the sections the decode instance wrote itself (the others are the run's)

    def field(self, name: str) -> str:
        """Where meta.json gives the decode instance's ``name`` ("section.key"): its own section, or the run's."""
        own = name.split(".", 1)[0] in self.decode_sections
        return f"disaggregation.decode.{name}" if own else name


def own_args(kwargs) -> dict:
    """An instance's engine arguments but its connector's (the one thing two instances of a pair differ in)."""
    return {k: v for k, v in kwargs.items() if k != "kv_transfer_config"} if isinstance(kwargs, dict) else {}


def split_instances(meta: dict, path) -> tuple[dict, dict, str, str]:
    """The prefill instance's meta and the decode instance's, each as a colocated run's meta.json with its
    ``kv_transfer_config`` read and taken out, the connector, and the link; a one-line error naming the field
    otherwise."""
    pd = meta["disaggregation"]
    where = f"{path}: disaggregation"
    if not isinstance(pd, dict):
        raise ValueError(f"{where} is {json.dumps(pd)}; write an object with the decode instance's sections "
                         f"(\"decode\") and the link its KV crossed (\"kv_link\")")
    unknown = sorted(set(pd) - {"decode", "kv_link"})
    if unknown:
        raise ValueError(f"{where}: {', '.join(unknown)} not read; it holds decode and kv_link")
    decode = pd.get("decode")
    if not isinstance(decode, dict) or not isinstance(decode.get("engine_kwargs"), dict):
        raise ValueError(f"{where}.decode: needs the decode instance's \"engine_kwargs\" object")
    extra = sorted(set(decode) - set(DECODE_SECTIONS))
    if extra:
        raise ValueError(f"{where}.decode: {', '.join(extra)} not read; it holds {', '.join(DECODE_SECTIONS)}")
    link = pd.get("kv_link")
    if not isinstance(link, str) or not link.strip():
        got = "missing" if "kv_link" not in pd else "empty" if isinstance(link, str) else \
            f"{json.dumps(link)[:60]} is not a link name"
        raise ValueError(f"{where}.kv_link: {got}; write the link the replay prices each prompt's KV on as a string "
                         f"(a preset such as \"same-node\", \"nvlink4\" or \"ib-400g\", or its figures "
                         f"\"bw=...,latency=...\")")
    prefill_meta = {k: v for k, v in meta.items() if k != "disaggregation"}
    decode_meta = {**prefill_meta, **{k: v for k, v in decode.items()}}
    if own_args(prefill_meta.get("engine_kwargs")) != own_args(decode["engine_kwargs"]):
        for section in MEASURED:  # the prefill instance's memory is not the decode's: vLLM's formula sizes it
            if section not in decode:
                decode_meta.pop(section, None)
    connectors = []
    for side, one, at in (("prefill", prefill_meta, f"{path}: engine_kwargs"),
                          ("decode", decode_meta, f"{where}.decode.engine_kwargs")):
        kwargs = dict(one["engine_kwargs"])
        config = kwargs.pop("kv_transfer_config", None)
        if not isinstance(config, dict):
            raise ValueError(f"{at}.kv_transfer_config: missing; write the {side} instance's (its kv_connector and "
                             f"kv_role, as vllm serve --kv-transfer-config took them)")
        connector, role = config.get("kv_connector"), config.get("kv_role")
        if connector not in CONNECTORS:
            raise ValueError(f"{at}.kv_transfer_config.kv_connector {json.dumps(connector)}: not one llmsched "
                             f"replays; connectors read: {', '.join(CONNECTORS)}")
        if role not in ROLES[side]:
            raise ValueError(f"{at}.kv_transfer_config.kv_role {json.dumps(role)}: the {side} instance's role is "
                             f"{' or '.join(ROLES[side])}")
        if kwargs.get("data_parallel_size", 1) != 1:
            raise ValueError(f"{at}.data_parallel_size {kwargs['data_parallel_size']}: a 1P1D run is one instance "
                             f"each side; a DP group behind the proxy is not replayed")
        connectors.append(connector)
        one["engine_kwargs"] = kwargs
    if connectors[0] != connectors[1]:
        raise ValueError(f"{where}.decode.engine_kwargs.kv_transfer_config.kv_connector {connectors[1]}: the prefill "
                         f"instance ran {connectors[0]}; both sides of a pair run one connector")
    return prefill_meta, decode_meta, connectors[0], link.strip()
