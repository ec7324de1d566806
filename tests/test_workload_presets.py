"""Shipped length presets: metadata, fidelity to their recorded file statistics, and (with the data) to the files."""
import json

import numpy as np
import pytest
from conftest import shared_data_dir

from llmsched.workload import LENGTH_PRESETS, QuantileTable, length_preset, named_workload, read_trace
from llmsched.workload.lengths.length_presets import PRESET_DIR

NAMES = ["sharegpt", "azure-conv", "azure-code", "arxiv-summarization", "lmsys"]


DATA = shared_data_dir()
needs_data = pytest.mark.skipif(DATA is None, reason="shared data folder not found (set LLMSCHED_DATA)")


def meta(name):
    return json.loads((PRESET_DIR / f"{name}.json").read_text())


@pytest.fixture(scope="module")
def samples():
    return {name: length_preset(name).sample(400_000, np.random.default_rng(0)) for name in NAMES}


def test_catalogue():
    assert sorted(LENGTH_PRESETS) == sorted(NAMES)
    for name, info in LENGTH_PRESETS.items():
        assert info["description"] and info["source"].endswith(".csv") and info["rows"] > 1000 and info["licence"]
        assert (PRESET_DIR / f"{name}.json").stat().st_size < 40_000
    assert meta("sharegpt")["source"]["rows"] == 30_731


def test_unknown_preset_lists_valid_names():
    valid = "arxiv-summarization, azure-code, azure-conv, lmsys, sharegpt"
    with pytest.raises(ValueError, match=f"unknown length preset 'shargpt'; valid names: {valid}"):
        length_preset("shargpt")


@pytest.mark.parametrize("name", NAMES)
def test_samples_match_recorded_file_statistics(name, samples):
    p, o = samples[name]
    stats = meta(name)["file_stats"]
    for side, values in (("prompt", p), ("output", o)):
        assert np.median(values) == pytest.approx(stats[side]["median"], rel=0.03), side
        assert np.percentile(values, 90) == pytest.approx(stats[side]["p90"], rel=0.03), side
        assert values.min() >= 1


def test_sharegpt_table_reproduces_seed000_table1(samples):
    p, o = samples["sharegpt"]
    assert np.median(p) == pytest.approx(1730, rel=0.02)
    assert np.percentile(p, 90) == pytest.approx(5696, rel=0.02)
    assert np.median(o) == pytest.approx(415, rel=0.02)
    assert np.percentile(o, 90) == pytest.approx(834, rel=0.02)


def test_arxiv_keeps_its_negative_dependence(samples):
    p, o = samples["arxiv-summarization"]
    assert np.corrcoef(np.log(p), np.log(o))[0, 1] == pytest.approx(meta("arxiv-summarization")["file_stats"]
                                                                   ["log_corr"], abs=0.05)


def test_named_workload():
    w = named_workload("sharegpt", rate=2.0, num_requests=500, max_total_tokens=8192, seed=42,
                       tiers="paid:tbt=0.1:share=0.05,free:tbt=0.5")
    reqs = w.requests()
    assert len(reqs) == 500 and all(r.prompt_len + r.output_len <= 8192 for r in reqs)
    assert [r.prompt_len for r in reqs] == [r.prompt_len for r in w.requests()]
    lengths = w.describe()["lengths"]
    assert lengths["kind"] == "capped" and lengths["max_total"] == 8192 and lengths["dist"]["name"] == "sharegpt"


def test_sharegpt_samples_respect_the_source_files_8k_cap():
    prompts, outputs = length_preset("sharegpt").sample(200_000, np.random.default_rng(1))
    assert (prompts + outputs).max() <= 8192
    g = named_workload("lmsys", rate=1.0, duration=100.0, arrival="gamma", cv=3.0)
    assert g.describe()["arrivals"] == {"kind": "gamma", "rate": 1.0, "cv": 3.0}
    c = named_workload("azure-code", rate=4.0, num_requests=5, arrival="constant").requests()
    assert [r.arrival for r in c] == [0, 0.25, 0.5, 0.75, 1.0]


@pytest.mark.parametrize("kwargs, match", [
    (dict(arrival="bursty"), "unknown arrival process 'bursty'; valid: poisson, gamma, constant"),
    (dict(arrival="gamma"), "need cv"),
    (dict(cv=2.0), "cv applies only to gamma"),
    (dict(rate=-1.0), "Poisson rate"),
])
def test_named_workload_bad_input(kwargs, match):
    args = dict(name="sharegpt", rate=1.0, num_requests=10) | kwargs
    with pytest.raises(ValueError, match=match):
        named_workload(**args)


@pytest.mark.shared_data
@needs_data
@pytest.mark.parametrize("name", NAMES)
def test_recorded_statistics_match_the_file(name):
    info = meta(name)
    trace = read_trace(DATA / "traces" / info["source"]["file"], zero_lengths=info["source"]["zero_lengths"])
    assert len(trace) + trace.dropped == info["source"]["rows"]
    for side, values in (("prompt", trace.prompt_lens), ("output", trace.output_lens)):
        assert np.median(values) == info["file_stats"][side]["median"]
        assert np.percentile(values, 90) == pytest.approx(info["file_stats"][side]["p90"], abs=0.01)
    refit = QuantileTable.fit(trace.prompt_lens, trace.output_lens).to_dict()
    assert refit["prompt"] == info["prompt"] and refit["output"] == info["output"]


@pytest.mark.shared_data
@needs_data
def test_sharegpt_file_is_table1():
    trace = read_trace(DATA / "traces" / "sharegpt_8k_lengths_llama2_tokenizer.csv")
    assert len(trace) == 30_731
    assert np.median(trace.prompt_lens) == 1730 and np.percentile(trace.prompt_lens, 90) == 5696
    assert np.median(trace.output_lens) == 415 and np.percentile(trace.output_lens, 90) == 834
    assert (trace.prompt_lens + trace.output_lens).max() <= 8192  # SLAI's 8192 cap never binds on this file
