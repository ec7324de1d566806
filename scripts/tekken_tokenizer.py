"""Write a real 131,072-token byte-level BPE tokenizer into a model folder, for captures that need every token id
a random-weight model emits to decode to text.

``make-model``'s tokenizer is tiny (a few hundred tokens): a real model's ids above it decode to nothing, and vLLM's
OpenAI server streams no chunk for a token with no text, so a client would see fewer chunks than tokens (its TTFT
would then be a later token's). Mistral's Tekken tokenizer ships with mistral_common (``data/tekken_240911.json``:
1,000 special tokens, then byte-level BPE ranks); this script turns it into a Hugging Face ``tokenizer.json``
(ids = rank + 1,000, the merges recovered from the ranks as tiktoken's BPE applies them, Tekken's split pattern), so
vLLM and ``vllm bench serve`` load it as any fast tokenizer. Mistral Small 24B uses a Tekken tokenizer of this size;
for a model with a smaller vocabulary, ``--max-id`` keeps prompts below it (the capture draws words from ids below).

    python scripts/tekken_tokenizer.py --out .gpu/m-llama [--tekken PATH]
"""
from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path


def byte_chars() -> dict[int, str]:
    """GPT-2's printable stand-in for each byte, which byte-level BPE vocabularies are written in."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    chars, n = list(keep), 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(keep, chars)}


def merge_of(ranks: dict[bytes, int], token: bytes) -> tuple[bytes, bytes]:
    """The last merge tiktoken's BPE makes to build ``token``: merge the lowest-ranked pair below its rank until
    two parts are left."""
    parts = [bytes([b]) for b in token]
    limit = ranks[token]
    while len(parts) > 2:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < limit and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    assert len(parts) == 2, token
    return parts[0], parts[1]


def tekken_path() -> Path:
    import mistral_common
    return Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"


def write_tokenizer(out: Path, tekken: Path) -> int:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    data = json.loads(tekken.read_text())
    special = data["config"]["default_num_special_tokens"]
    size = data["config"]["default_vocab_size"]
    ranks = {base64.b64decode(v["token_bytes"]): v["rank"] for v in data["vocab"][:size - special]}
    chars = byte_chars()
    text = {tok: "".join(chars[b] for b in tok) for tok in ranks}
    vocab = {f"<SPECIAL_{i}>": i for i in range(special)}
    vocab.update({"<unk>": 0, "<s>": 1, "</s>": 2})
    for name in ("<SPECIAL_0>", "<SPECIAL_1>", "<SPECIAL_2>"):
        del vocab[name]
    vocab.update({text[tok]: r + special for tok, r in ranks.items()})
    merges = [(text[a], text[b]) for tok, r in sorted(ranks.items(), key=lambda kv: kv[1]) if len(tok) > 1
              for a, b in [merge_of(ranks, tok)]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(data["config"]["pattern"]), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out)
    return len(vocab)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--tekken", type=Path, help="a tekken.json (default: mistral_common's tekken_240911.json)")
    args = p.parse_args()
    n = write_tokenizer(args.out, args.tekken or tekken_path())
    print(f"wrote a {n:,}-token tokenizer to {args.out}")


if __name__ == "__main__":
    main()
