"""A local model directory that needs no download: a Llama config and a locally trained tokenizer.

vLLM loads it with ``load_format="dummy"`` (random weights), which is all a scheduler test or a timing profile
needs: the cost of a forward pass depends on the shape, not on the weights. ``tiny`` is a 4-layer model that runs
fast on a CPU; any preset of ``llmsched presets`` gives that model's shape (too big for a CPU in most cases).
"""
from __future__ import annotations

from pathlib import Path

TINY = dict(vocab_size=4096, hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=4096)
# Text to train the byte-level BPE on: any text works, the tokenizer only has to exist and be deterministic.
_CORPUS = ("the quick brown fox jumps over the lazy dog while a scheduler decides which prompt chunks and "
           "which decode tokens share the next batch of a serving engine; requests arrive, wait, run, and "
           "leave with their tokens. ") * 40
# A plain role-tagged template (the Llama-2 chat models' [INST] style is not needed by a random-weight model):
# every message as "<role>: <content>", then "assistant:" when a reply is asked for.
CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant:{% endif %}")


# What vLLM reads from a model directory before it loads anything: Hugging Face's config.json (or a Mistral
# params.json) and a tokenizer in one of transformers' forms (fast, SentencePiece, byte-level BPE, WordPiece).
CONFIG_FILES = ("config.json", "params.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model", "spiece.model", "vocab.txt")


def model_dir_problem(path: str | Path) -> str | None:
    """Why vLLM cannot start on the model directory ``path`` (vLLM says it after importing itself, tens of
    seconds in, as a pydantic dump or a tokenizer message naming no file), or None."""
    import json
    path = Path(path)
    config = next((path / f for f in CONFIG_FILES if (path / f).is_file()), None)
    if config is None:
        return f"{path} has no config.json (nor a Mistral params.json), which vLLM reads the model's shape from"
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        return f"{config} is not JSON ({e})"
    if not isinstance(data, dict):
        return f"{config} is not a JSON object"
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        return f"{path} has no tokenizer (none of {', '.join(TOKENIZER_FILES)}), which vLLM loads at start-up"
    return None


def shape_of(name: str) -> dict:
    """LlamaConfig keyword arguments for ``tiny`` or a model preset."""
    if name == "tiny":
        return dict(TINY)
    from ..hardware.models import model as model_preset
    m = model_preset(name)
    return dict(vocab_size=m.vocab, hidden_size=m.hidden, intermediate_size=m.ffn, num_hidden_layers=m.layers,
                num_attention_heads=m.heads, num_key_value_heads=m.kv_heads, head_dim=m.head_dim,
                max_position_embeddings=m.max_model_len, tie_word_embeddings=m.tied_embeddings)


def write_model(out_dir: str | Path, shape: str = "tiny", vocab_size: int | None = None) -> Path:
    """Write ``config.json`` and a tokenizer trained here into ``out_dir``; returns the directory."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, PreTrainedTokenizerFast

    kwargs = shape_of(shape)
    if vocab_size is not None:
        kwargs["vocab_size"] = vocab_size
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = LlamaConfig(**kwargs, torch_dtype="bfloat16", architectures=["LlamaForCausalLM"],
                         bos_token_id=1, eos_token_id=2)
    config.save_pretrained(out)

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    # A small vocabulary is enough: prompts are token ids; the model's embedding table may be larger.
    trainer = trainers.BpeTrainer(vocab_size=min(kwargs["vocab_size"], 1024),
                                  special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([_CORPUS], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.chat_template = CHAT_TEMPLATE  # /v1/chat/completions needs one (saved in tokenizer_config.json)
    fast.save_pretrained(out)
    return out
