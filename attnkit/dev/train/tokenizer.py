"""The shipped model's tokenizer: byte-level BPE trained from scratch on the training text, saved so that
``AutoTokenizer.from_pretrained`` gives a GPT-2 fast tokenizer."""
from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, GPT2TokenizerFast

from .sources import EOT

#: words that must be single tokens with their leading space (the default prompt's words, the
#: names the seeds' examples use). The tokenizer's training texts get each of them
#: ``REQUIRED_BOOST`` extra times, so BPE merges them whatever their count in the corpus.
REQUIRED_TOKENS = ["The", " animal", " didn", "'t", " cross", " the", " street", " because", " it",
                   " was", " too", " tired", " Mary", " John", " store", " went", " to", " gave",
                   " a", " drink", " When", " and"]
REQUIRED_BOOST = 3000
#: attnkit-tiny-zh's words that must be single tokens (no leading space: Chinese is written without
#: spaces): the seeds' examples (猫坐在垫子上, 上海) and their vocabulary (注意力, 查询, 键, 值, 掩码, 多头, 熵)
REQUIRED_ZH = ["猫", "坐", "在", "垫子", "上", "上海", "北京", "中国", "注意力", "查询", "键", "值", "掩码",
               "多头", "熵", "缓存", "模型", "我", "你", "他", "的", "是", "了", "和", "一个"]


def required_tokens(corpus: str | bool = "en") -> list[str]:
    """The words a corpus's tokenizer must keep whole: English for ``"en"`` (or True), English and
    Chinese for ``"zh"``, none for False."""
    if corpus is False:
        return []
    return REQUIRED_TOKENS + (REQUIRED_ZH if corpus == "zh" else [])


def _boost_texts(corpus: str | bool) -> list[str]:
    if corpus is False:
        return []
    texts = [" ".join(REQUIRED_TOKENS)] * REQUIRED_BOOST
    if corpus == "zh":   # one word a line: each is its own pre-token, so BPE merges its bytes
        texts += ["\n".join(REQUIRED_ZH + [" didn't"])] * REQUIRED_BOOST   # 't: rare in Chinese text
    return texts


def train_tokenizer(texts: list[str], vocab_size: int, out: Path, max_len: int = 256, required: str | bool = "en"):
    """Train the byte-level BPE on ``texts`` (the words of ``required_tokens(required)`` boosted), save it
    into ``out`` and return it loaded back as a transformers tokenizer."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    boost = _boost_texts(required)
    tok.train_from_iterator(list(texts) + boost, trainer=trainer, length=len(texts) + len(boost))
    out.mkdir(parents=True, exist_ok=True)
    hf = GPT2TokenizerFast(tokenizer_object=tok, bos_token=EOT, eos_token=EOT, unk_token=EOT,
                           add_prefix_space=False, clean_up_tokenization_spaces=False,
                           model_max_length=max_len)
    hf.save_pretrained(str(out))
    tok.model.save(str(out))  # vocab.json + merges.txt, like the original GPT-2 files
    return load_tokenizer(out)


def load_tokenizer(folder: Path):
    return AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)


def single_tokens(tokenizer, words=REQUIRED_TOKENS) -> list[str]:
    """The words of ``words`` that the tokenizer does *not* keep as one token."""
    return [w for w in words if len(tokenizer.encode(w, add_special_tokens=False)) != 1]


def round_trips(tokenizer, text: str) -> bool:
    ids = tokenizer.encode(text, add_special_tokens=False, verbose=False)
    return tokenizer.decode(ids, clean_up_tokenization_spaces=False) == text


ROUND_TRIP_SAMPLES = ["Attention lets every token look at its context.",
                      "注意力机制让每个词看见上下文", "🙂🚀", "  two  spaces\tand\ttabs\n"]


def encode_stream(tokenizer, docs: list[tuple[str, str]]):
    """One id stream: every document after an ``<|endoftext|>``, and one at the end."""
    eot = tokenizer.convert_tokens_to_ids(EOT)
    enc = [e.ids for e in tokenizer.backend_tokenizer.encode_batch([d for _, d in docs],
                                                                   add_special_tokens=False)]
    ids = []
    for e in enc:
        ids.append(eot)
        ids.extend(e)
    ids.append(eot)
    return torch.tensor(ids, dtype=torch.long)
