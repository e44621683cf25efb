"""Tiny Hugging Face models with random weights, saved to a local folder the way optimum-executorch
reads a model: config, weights, and the tokenizer or processor a task loads. No hub access.

Each ``MODELS`` entry is (task, builder); ``save(name, folder)`` writes the model and returns its folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

SEED = 0


def _word_tokenizer(folder: Path, vocab_size: int, **special) -> None:
    """A word-level tokenizer of ``vocab_size`` ids (w0, w1, ...), built locally with ``tokenizers``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    names = list(special.values())
    vocab = {name: i for i, name in enumerate(names)}
    for i in range(len(names), vocab_size):
        vocab[f"w{i}"] = i
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=special.get("unk_token", names[0])))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, **special).save_pretrained(folder)


def _llama(folder: Path):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).eval().save_pretrained(folder)
    _word_tokenizer(folder, 256, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def _bert(folder: Path):
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=33,
        pad_token_id=0,
    )
    BertForMaskedLM(config).eval().save_pretrained(folder)
    _word_tokenizer(
        folder, 256, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]"
    )


def _vit(folder: Path):
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(
        image_size=32,
        patch_size=8,
        num_channels=3,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_labels=10,
    )
    ViTForImageClassification(config).eval().save_pretrained(folder)


def _t5(folder: Path):
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(
        vocab_size=256,
        d_model=64,
        d_kv=16,
        d_ff=128,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
    )
    T5ForConditionalGeneration(config).eval().save_pretrained(folder)
    _word_tokenizer(folder, 256, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


def _whisper(folder: Path):
    """Whisper with 1 s of audio (100 frames; optimum takes the frame count from the processor)."""
    from transformers import (
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )

    specials = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"]
    vocab_size = 128
    config = WhisperConfig(
        vocab_size=vocab_size,
        num_mel_bins=80,
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_source_positions=50,
        max_target_positions=64,
        pad_token_id=0,
        bos_token_id=0,
        eos_token_id=0,
        decoder_start_token_id=1,
        suppress_tokens=[],
        begin_suppress_tokens=[],
    )
    WhisperForConditionalGeneration(config).eval().save_pretrained(folder)
    # a byte-level BPE vocabulary of the special tokens and single characters, no merges
    words = [chr(c) for c in range(ord("!"), ord("!") + vocab_size - len(specials))]
    vocab = {token: i for i, token in enumerate(specials + words)}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = WhisperTokenizer(
        str(folder / "vocab.json"),
        str(folder / "merges.txt"),
        unk_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    extractor = WhisperFeatureExtractor(feature_size=80, chunk_length=1)
    WhisperProcessor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(folder)


MODELS = {
    "llama": ("text-generation", _llama),
    "bert": ("fill-mask", _bert),
    "vit": ("image-classification", _vit),
    "t5": ("text2text-generation", _t5),
    "whisper": ("automatic-speech-recognition", _whisper),
}


def save(name: str, folder: str | Path) -> Path:
    """Build the tiny model ``name`` (random weights, seeded) into ``folder`` (created); returns it."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; expected one of {', '.join(MODELS)}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(SEED)
    MODELS[name][1](folder)
    return folder
