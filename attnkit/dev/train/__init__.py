"""Retrain the shipped ``attnkit-tiny`` model (a developer tool outside the library; its command is
``python -m attnkit train-default``, in :mod:`attnkit.cli.train_default`).

attnkit-tiny is a 4-layer, 8-head, 256-wide GPT-2 (``transformers.GPT2LMHeadModel``)
with 1,024 positions and a byte-level BPE tokenizer (vocab 8192) trained from
scratch on text that ships with Debian packages, so the dashboard works fully
offline. It is *not* OpenAI's GPT-2: no OpenAI weights or tokenizer files are used.

Corpus (Debian 12 "bookworm" packages, read from the local file system)
-----------------------------------------------------------------------
``SOURCES`` (:mod:`.sources`) lists each package, the paths read and its licence (see
/usr/share/doc/<pkg>/copyright); the model card records the versions and the
characters taken from each. Mostly English prose: the full ``fortunes`` set
(without the offensive one and ``ascii-art``), The Devil's Dictionary
(``dict-devil``), the Jargon File (``jargon-text``), WordNet's glosses that carry an
example sentence (``wordnet-base``); then documentation (Debian Handbook, FAQ and
Reference; the Python tutorial, FAQ and HOWTOs only) and Chinese (``fortunes-zh``).
Install them with::

    apt-get install fortunes fortunes-min fortunes-zh dict-devil jargon-text wordnet-base \
        debian-handbook debian-faq debian-reference-en python3.11-doc

Long files are cut into documents of at most ~4000 characters at paragraph
boundaries; every fortune is one document, 40 WordNet synsets are one document.
The documents are shuffled with the seed and every 50th document is held out as
the validation split. Documents are joined with ``<|endoftext|>`` like GPT-2.

Pipeline (modules: :mod:`.sources` text sources, :mod:`.tokenizer`, :mod:`.mixture` the training rows,
:mod:`.loop` model, loop and time box, :mod:`.evaluate`, :mod:`.card` the model card)
------------------------------------------------------------------------------------------------------
1. build the corpus (above), 2. train a byte-level BPE tokenizer with the
``tokenizers`` library (GPT-2 ByteLevel pre-tokenizer, ``<|endoftext|>`` as
bos/eos/unk; the words of ``REQUIRED_TOKENS`` boosted so they are single tokens)
and save it so ``AutoTokenizer.from_pretrained`` gives a GPT-2 fast tokenizer,
3. train ``GPT2LMHeadModel`` with AdamW, linear warmup + cosine (or
warmup-stable-decay) schedule, batches of random windows from the training stream,
optionally mixed with induction-friendly rows (``--text-repeat``: a span of natural
text repeated; ``--random-repeat``: a span of random tokens repeated), trained on
short windows (``--train-block``) with some rows at random position offsets
(``--pos-shift``) and on full-context windows from ``--long-start`` on,
4. save with ``save_pretrained(safe_serialization=True)``, evaluate on the whole
validation split (nats/token and bits per UTF-8 byte, optionally for an older model
too: ``--compare-with``) next to an add-one-smoothed unigram baseline, measure the
heads with attnkit's own metrics, and write ``MODEL_CARD.md``.

Everything is seeded (Python, NumPy-free, torch), so the same command on the same
machine and library versions reproduces the same weights. Examples::

    python -m attnkit train-default --out attnkit/models/attnkit-tiny --overwrite-shipped --steps 1800
    python -m attnkit train-default --tiny-test --out /tmp/tiny   # seconds, for tests

``--minutes M`` makes a time-boxed run (warmup-stable-decay schedule whose decay
start, long-window start and length are chosen from the measured speed, with a
hard stop at M minutes); the model card then records the equivalent fixed command
(``--schedule wsd --decay-start D [--long-start S] --steps T [--stop-after N]``),
which replays the run exactly. SIGUSR1 stops training after the current step
(recorded the same way).
"""
from __future__ import annotations

from .card import HEAD_TARGETS, HEADS_CMD, formation_text, head_report, reproduce_argv, write_card
from .evaluate import bits_per_byte, format_head_table, full_loss, prev_induction_scores, unigram_baseline
from .loop import (DEFAULT_OUT, Options, check_out, lr_at, probe_saved, rewrite_card, sinusoid_positions, train)
from .mixture import sample_batch, sample_mixed_batch
from .sources import EOT, SOURCES, TrainError, build_corpus, chunk, collect_documents, html_to_text, wordnet_lines
from .tokenizer import REQUIRED_TOKENS, encode_stream, load_tokenizer, train_tokenizer

__all__ = ["HEAD_TARGETS", "HEADS_CMD", "formation_text", "head_report", "reproduce_argv", "write_card",
           "bits_per_byte", "format_head_table", "full_loss", "prev_induction_scores", "unigram_baseline",
           "DEFAULT_OUT", "Options", "check_out", "lr_at", "probe_saved", "rewrite_card", "sinusoid_positions", "train",
           "sample_batch", "sample_mixed_batch", "EOT", "SOURCES", "TrainError", "build_corpus", "chunk",
           "collect_documents", "html_to_text", "wordnet_lines", "REQUIRED_TOKENS", "encode_stream",
           "load_tokenizer", "train_tokenizer"]
