"""Where the Atlas page's atlas comes from: run on the sidebar's model over a corpus (the shipped ``debian-man`` or a
local folder or file of texts) as a job — its cost estimated on this machine before it starts, the atlas kept on disk
by model, corpus and settings (:mod:`attnkit.corpus.atlas_cache`: another session gets it at once, a stopped run
resumes) — or an atlas folder written by ``attnkit atlas``, its manifest's model checked against the sidebar's."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from attnkit.atlas_result import AtlasResult
from attnkit.corpus import CorpusError, SHIPPED_CORPORA, load_atlas
from attnkit.corpus import atlas_cache
from attnkit.corpus.atlas import corpus_path
from attnkit.corpus.atlas_summary import model_hash
from attnkit.diskcache import CacheError
from attnkit.i18n import t
from attnkit.app.caches import budgeted
from attnkit.app.context import Context
from attnkit.app.escaping import plain, show_error
from attnkit.app.frame import stop
from attnkit.app.jobs import duration, job_result
from attnkit.app.sidebar import ask_to_load
from attnkit.app.url import confirm_path, link_path_waits

__all__ = ["SLOT", "SHIPPED", "DEFAULT_DOCS", "Atlas", "corpus_choice", "from_run", "from_folder"]

#: The page's job slot.
SLOT = "at_run"
#: The shipped corpus the page offers first.
SHIPPED = next(iter(SHIPPED_CORPORA))
#: The documents a run takes by default: debian-man's first 8 are 8,818 tokens for attnkit-tiny, whose atlas took
#: 59 s of CPU time (one thread; 2.5 min of wall time on the shared 2-core machine under a load of 7–10).
DEFAULT_DOCS = 8


@dataclass
class Atlas:
    """What the page draws: the atlas (as its folder reads back) and its folder."""

    result: AtlasResult
    folder: Path


def _stamp(path: Path) -> tuple:
    """What tells whether a corpus or an atlas folder changed: each file's path, size and modification time."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []
    return tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files[:20_000])


@budgeted
def _corpus(corpus: str, max_docs: int, stamp: tuple, model: str, _encode, n_ctx: int) -> tuple:
    """(documents, digest, window lengths) of the corpus's first ``max_docs`` documents for ``model``."""
    docs, sha = atlas_cache.corpus_digest(corpus, max_docs)
    return len(docs), sha, atlas_cache.window_lengths(_encode, docs, n_ctx)


@budgeted
def _timing(model: str, device: str, _weights) -> tuple[float, float]:
    return atlas_cache.time_window(_weights)


@budgeted
def _load(folder: str, stamp: tuple) -> AtlasResult:
    return load_atlas(folder)


def _waits(key: str, url: str, value: str, local) -> None:
    """A path that came in the link is read only after the user's click (as the sidebar's model folder)."""
    if value and link_path_waits(key, url, value, local):
        ask_to_load(value, key, confirm_path, lambda: st.session_state.update({key: ""}))
        stop()


def corpus_choice(state) -> str:
    """The corpus box (a shipped corpus's name, or a local file or folder of texts; a link's path asks first)."""
    st.text_input(t("Corpus"), key="at_corpus", help=t(
        "{name} (shipped: manual pages attnkit-tiny never saw), or the path of a text file (one document) or of a "
        "folder of them (each .txt/.md file a document; a .jsonl file, one a line)", name=SHIPPED))
    corpus = (state.corpus or "").strip()
    _waits("at_corpus", "corpus", corpus, lambda v: v not in SHIPPED_CORPORA)
    return corpus


def from_run(ctx: Context, state) -> Atlas | None:
    """The atlas of the sidebar's model over the chosen corpus: read from the disk cache when it is there, else
    a job started by a button that says its estimate."""
    corpus, cfg = corpus_choice(state), ctx.model.config
    if not corpus:
        st.info(t("Type a corpus: {name}, or the path of a text file or folder.", name=SHIPPED), icon="📄")
        return None
    try:
        path = corpus_path(corpus)
        n, sha, lengths = _corpus(corpus, int(state.docs), _stamp(path), ctx.model_name, ctx.model.encode, cfg.n_ctx)
        opts = dict(max_docs=int(state.docs), no_first=bool(state.exclude), device=str(ctx.device))
        settings = atlas_cache.settings_of(**opts)
        model_sha = model_hash(ctx.model.source) or f"{ctx.model_name}|{ctx.model.source}"
        folder = atlas_cache.atlas_folder(atlas_cache.atlas_key(model_sha, sha, settings))
    except (CorpusError, CacheError, OSError) as e:
        show_error(str(e))
        return None
    if not lengths:
        show_error(t("The corpus holds no window of 2 tokens or more for this model."))
        return None
    if atlas_cache.complete(folder):
        return Atlas(_load(str(folder), _stamp(folder / "manifest.json")), folder)
    every = atlas_cache.effect_every(lengths, settings["effect_tokens"])
    when = duration(atlas_cache.estimate(ctx.model.weights, lengths, every,
                                         _timing(ctx.model_name, str(ctx.device), ctx.model.weights)))
    sample = t("the effect on every document") if every == 1 else t("the effect on every {k}th document", k=every)
    st.caption(plain(t("{docs} documents, {tokens} tokens in {windows} windows; {sample}. Estimated {when} on this "
                       "machine (the scan and the effect timed on one short window, scaled by each window's "
                       "operations; a busy machine takes longer). A stopped run keeps its finished shards: starting "
                       "it again resumes.", docs=n, tokens=f"{sum(lengths):,}", windows=len(lengths), sample=sample,
                       when=when)))

    def work(progress):
        return atlas_cache.cached_atlas(corpus, ctx.model_name, source=ctx.model.source, progress=progress, **opts)

    got = job_result(SLOT, str(folder), t("Atlas of {model} over {corpus}", model=ctx.model_name, corpus=corpus), work,
                     auto=False, button=t("Start the atlas (about {when})", when=when))
    return None if got is None else Atlas(*got)


def from_folder(ctx: Context, state) -> Atlas | None:
    """An atlas folder written by ``attnkit atlas --out DIR`` (a link's folder asks first); its model against the
    sidebar's, said either way."""
    st.text_input(t("Atlas folder (from {command})", command="python -m attnkit atlas --out DIR"), key="at_folder",
                  placeholder="/path/to/atlas")
    value = (state.folder or "").strip()
    if not value:
        return None
    _waits("at_folder", "atlas", value, bool)
    folder = Path(value).expanduser()
    try:
        res = _load(str(folder), _stamp(folder / "manifest.json"))
    except (OSError, ValueError, KeyError, TypeError) as e:
        show_error(t("could not read the atlas folder {folder}: {error}", folder=value, error=str(e)))
        return None
    _check_model(ctx, res)
    return Atlas(res, folder)


def _check_model(ctx: Context, res: AtlasResult) -> None:
    theirs, ours = (res.info.get("model") or {}).get("sha256"), model_hash(ctx.model.source)
    name = (res.info.get("model") or {}).get("name", "?")
    if theirs and theirs == ours:
        st.caption(plain(t("The atlas's model is the sidebar's: the same files (SHA-256 {sha}…).", sha=ours[:12])))
    else:
        st.warning(plain(t("This atlas is of {theirs} (SHA-256 {a}…); the sidebar's model is {ours} ({b}…): they "
                           "differ. The atlas is shown as it is; the model view and the buttons use the sidebar's "
                           "model.", theirs=name, a=(theirs or "—")[:12], ours=ctx.model_name, b=(ours or "—")[:12])),
                   icon="⚠️")
