"""Let vLLM 0.26 run without FlashInfer, which the lent GPU machine's carried vLLM lacks: its
``flashinfer_sampler_supported()`` imports FlashInfer unguarded, so it gets a guarded import that answers False when
FlashInfer is absent (FlashInfer's sampler only serves top-k/top-p; vLLM then uses its Triton or PyTorch one). Run
once on the unpacked tree; a second run leaves a patched file as it is.

    python3 scripts/patch_vllm_flashinfer.py /tmp/site
"""
import sys
from pathlib import Path

GUARD = "    try:\n        import flashinfer  # noqa: F401\n    except ImportError:\n        return False\n"


def main() -> None:
    path = Path(sys.argv[1]) / "vllm" / "v1" / "sample" / "ops" / "topk_topp_sampler.py"
    text = path.read_text()
    start = text.index("def flashinfer_sampler_supported(")
    body = text.index(":\n", start) + 2
    if not text[body:].startswith(GUARD):
        path.write_text(text[:body] + GUARD + text[body:])
    print("patched flashinfer_sampler_supported")


if __name__ == "__main__":
    main()
