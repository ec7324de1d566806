"""validate-serving's one-line errors name what is wrong where the user wrote it: a kv_link of the wrong type is
not "missing", a request's stamps print as numbers (no numpy reprs), a request the replay cannot serve is named by
its line and id, and a decode instance too small for a request names meta.json's field, not simulate's flags."""
import json
import shutil
from pathlib import Path

from llmsched.cli import main

DATA = Path(__file__).parent / "data"
CPU_PD = DATA / "cpu_pd_run"
H200 = DATA / "gpu_runs" / "h200-llama-3.1-8b"
CPU_ARGS = ["--gpu", "l4", "--batch-time", "linear", "--bt-param", "const=0.010333", "--bt-param",
            "per_token=7.2984e-05"]


def copy_with(tmp_path: Path, source: Path, edit_meta=None, edit_line=None) -> Path:
    """A copy of the run ``source`` with its meta.json edited by ``edit_meta`` and its requests.jsonl line
    (``edit_line``: (line number, function of the row))."""
    out = tmp_path / source.name
    shutil.copytree(source, out)
    if edit_meta:
        meta = json.loads((out / "meta.json").read_text())
        edit_meta(meta)
        (out / "meta.json").write_text(json.dumps(meta))
    if edit_line:
        n, edit = edit_line
        lines = (out / "requests.jsonl").read_text().splitlines()
        row = json.loads(lines[n - 1])
        edit(row)
        lines[n - 1] = json.dumps(row)
        (out / "requests.jsonl").write_text("\n".join(lines) + "\n")
    return out


def one_line_error(capsys, args) -> str:
    code = main(["validate-serving", *map(str, args)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    return err


def test_a_kv_link_of_the_wrong_type_is_not_called_missing(tmp_path, capsys):
    run = copy_with(tmp_path, CPU_PD, edit_meta=lambda m: m["disaggregation"].update(kv_link=5))
    err = one_line_error(capsys, [run, *CPU_ARGS])
    assert "disaggregation.kv_link: 5 is not a link name; write the link" in err and "missing" not in err, err
    run = copy_with(tmp_path / "empty", CPU_PD, edit_meta=lambda m: m["disaggregation"].update(kv_link=" "))
    assert "disaggregation.kv_link: empty;" in one_line_error(capsys, [run, *CPU_ARGS])


def test_stamps_out_of_order_print_as_plain_numbers(tmp_path, capsys):
    def early(row):
        row["first_token_ts"] = row["queued_ts"] - 5
    run = copy_with(tmp_path, H200, edit_line=(4, early))
    err = one_line_error(capsys, [run])
    assert (f"{run}/requests.jsonl:4: needs queued_ts <= first_token_ts <= last_token_ts, got queued_ts = "
            f"319.460548715, first_token_ts = 314.460548715, last_token_ts = 326.249880991") in err, err
    assert "np." not in err


def test_inference_perf_stamps_out_of_order_print_as_plain_numbers(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "per_request_lifecycle_metrics.json").write_text(json.dumps([{
        "start_time": 1.0, "end_time": 2.0, "request": "{}", "response": None, "error": None,
        "info": {"input_tokens": 100, "output_tokens": 20, "output_token_times": [0.5, 1.9]}}]))
    (run / "meta.json").write_text(json.dumps({
        "model": "meta-llama/Llama-3.1-8B", "vllm_version": "0.19.0", "engine_kwargs": {
            "model": "meta-llama/Llama-3.1-8B", "tensor_parallel_size": 1, "data_parallel_size": 1,
            "max_num_seqs": 128, "max_num_batched_tokens": 2048}}))
    err = one_line_error(capsys, [run, "--gpu", "h200"])
    assert ("[0] needs start_time <= output_token_times[0] <= end_time, got start_time = 1.0, "
            "output_token_times[0] = 0.5, end_time = 2.0") in err and "np." not in err, err


def test_a_request_the_replay_cannot_serve_is_named_by_its_line(tmp_path, capsys):
    run = copy_with(tmp_path, H200, edit_line=(7, lambda row: row.update(input_toks=10_000_000)))
    err = one_line_error(capsys, [run])
    assert err.startswith(f"llmsched validate-serving: error: {run}/requests.jsonl:7 (request bench-6): the replay "
                          f"left it unfinished or rejected: prompt 10000000 + output"), err
    assert "exceed max_model_len 131072; the recorded run served it" in err


def test_a_decode_instance_too_small_names_meta_json_s_field(tmp_path, capsys):
    def small(meta):
        meta["disaggregation"]["decode"]["engine_defaults_seen"]["num_gpu_blocks"] = 5
    run = copy_with(tmp_path, CPU_PD, edit_meta=small)
    err = one_line_error(capsys, [run, *CPU_ARGS])
    field = "disaggregation.decode.engine_defaults_seen.num_gpu_blocks"
    assert f"{run}/meta.json: {field} gives the decode instance 5 KV blocks of 32 tokens, but " in err, err
    assert "the recorded run served it" in err and f"fix {field}" in err and "--decode-pool" not in err
