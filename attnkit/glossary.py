"""The glossary, as data: each term in English and in the seeds' own Chinese vocabulary (注意力, 查询/键/值,
掩码, 多头, 熵, KV 缓存 …) with a one-line definition (a catalog message, shown in the reader's language).

The glossary page (phase 2) lists :data:`GLOSSARY`; :func:`term` looks one up by key. The Chinese names
are data, not catalog entries, because the page shows both names side by side in either language.
"""
from __future__ import annotations

from dataclasses import dataclass

from .i18n import Message, msg

__all__ = ["Term", "GLOSSARY", "term"]


@dataclass(frozen=True)
class Term:
    key: str            # stable id (for links: ?term=attention)
    en: str
    zh: str
    definition: Message


GLOSSARY: tuple[Term, ...] = (
    Term("token", "token", "Token（词元）", msg("A piece of text the model reads as one unit: a word, part of a word, a character or a byte.")),
    Term("embedding", "embedding", "嵌入（Embedding）", msg("The vector of d_model numbers a token is turned into before the first layer.")),
    Term("attention", "attention", "注意力", msg("Each position takes a weighted average of earlier positions' values, the weights coming from how well its query matches their keys.")),
    Term("query", "query (Q)", "查询（Query，Q）", msg("The vector a position uses to look for what it needs: q = x·W_Q.")),
    Term("key", "key (K)", "键（Key，K）", msg("The vector a position offers to be matched against queries: k = x·W_K.")),
    Term("value", "value (V)", "值（Value，V）", msg("The vector a position hands over when attended to: v = x·W_V.")),
    Term("score", "attention score", "注意力得分", msg("The match of one query with one key, q·k/√d_head, before the softmax.")),
    Term("scaling", "1/√d scaling", "缩放（除以 √d）", msg("Dividing the scores by √d_head so they do not grow with the head dimension and saturate the softmax.")),
    Term("softmax", "softmax", "softmax 归一化", msg("Turns scores into weights between 0 and 1 that sum to 1: exp(s_i) / Σ_j exp(s_j).")),
    Term("temperature", "temperature", "温度", msg("A divisor of the scores before the softmax: above 1 flattens the weights, below 1 sharpens them.")),
    Term("causal-mask", "causal mask", "因果掩码", msg("Adds −∞ to the scores of later positions so that a token attends only to itself and earlier tokens.")),
    Term("attention-pattern", "attention pattern", "注意力模式（注意力权重）", msg("The softmax weights of one head: row i shows how query i spreads its attention over the keys.")),
    Term("head", "attention head", "注意力头", msg("One set of W_Q, W_K, W_V, W_O inside a layer; named L{layer}H{head}, e.g. L3H0.")),
    Term("multi-head", "multi-head attention", "多头注意力", msg("Several heads in parallel, each with its own smaller Q/K/V, their outputs concatenated and projected back.")),
    Term("entropy", "attention entropy", "注意力熵", msg("−Σ p log p of one attention row, in nats: 0 when all attention is on one key, ln n when it is spread evenly over n keys.")),
    Term("kv-cache", "KV cache", "KV 缓存", msg("The keys and values of earlier tokens kept during generation so each new token computes only its own.")),
    Term("residual-stream", "residual stream", "残差流", msg("The running sum of the embedding and every layer's output that each layer reads from and writes to.")),
    Term("logits", "logits", "logits（未归一化得分）", msg("The model's score for every vocabulary token as the next token; the softmax of the logits gives probabilities.")),
    Term("cross-entropy", "cross-entropy loss", "交叉熵损失", msg("−log of the probability the model gave the actual next token, in nats per token; lower is better.")),
    Term("perplexity", "perplexity", "困惑度", msg("exp of the cross-entropy: the number of equally likely choices the model is as unsure as.")),
    Term("ablation", "ablation", "消融", msg("Switching off or replacing one part of the model and measuring what changes.")),
    Term("previous-token-head", "previous-token head", "前一 token 头", msg("A head whose queries attend mostly to the token just before them.")),
    Term("induction-head", "induction head", "归纳头", msg("A head that finds an earlier copy of the current token and attends to the token after it, to continue a repeated pattern.")),
    Term("logit-lens", "logit lens", "logit 透镜", msg("Reading the residual stream after each layer through the final norm and unembedding, to see the prediction forming.")),
    Term("context-length", "context length", "上下文长度", msg("The number of tokens the model sees at once (1,024 positions for GPT-2).")),
)

_BY_KEY = {t.key: t for t in GLOSSARY}


def term(key: str) -> Term:
    """The glossary entry ``key``; KeyError with the known keys otherwise."""
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"unknown glossary term {key!r}; known: {', '.join(_BY_KEY)}") from None
