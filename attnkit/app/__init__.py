"""The dashboard's frame: what every page uses (a front end: nothing in the library imports it; with
attnkit/charts/, the only place that imports Streamlit). Each page is a folder in :mod:`attnkit.app.pages`
(its script ``page.py`` and the modules only it uses; ``pages/shared/`` what two pages share). Pages stay thin::

    from attnkit import app as ui
    ctx = ui.page("Title")                 # the sidebar's Context (the page stops when there is nothing to run)
    tr = ui.trace(ctx, capture=("pattern",))

context   the page Context (model, device, prompts, BOS)      frame    run_frame (app.py), page, guard
state     PageState (a page's inputs), fit, select, match_choice, notice    url      the link: read once, written back, prompt store
caches    models, TraceCache/trace, cached_result, corpus results
sidebar   model, device and prompt pickers                    escaping plain (THE escaping helper), show_error
tokens    spaces made visible, token labels, show_tokens      exports  csv_bytes, download_buttons, json, tensor CSV
jobs      long work in the background: progress, stale result, Stop
navigation  PAGES (the page list, once), open_page / open_head (the one way to open another page)
clicks    clicked / new_click / forget_click (the one reader of a chart click)
tables    show_table (THE way to show a table: st.dataframe with headers in the session's language), TABLE_TEXT
planted   a planted model's stated circuit, read once      language  the session's language (lang in the link)
opening   app_test: a page opened as its address opens it, under AppTest (tests, bench)
"""
from . import tables
from .caches import TRACE_CACHE_MB, TraceCache, budgeted, cached_model, cached_result, corpus_result, trace, traces_for_all
from .context import DEFAULT_PROMPT, LOCAL, Context
from .escaping import plain, show_error
from .exports import FORMULA_START, csv_bytes, download_buttons, json_bytes, meta_for, neutralise, tensor_csv
from .clicks import clicked, forget_click, new_click
from .frame import guard, page, run_frame, setup_page, stop
from .navigation import PAGES, PageSpec, open_head, open_page, page_spec
from .jobs import Job, Stopped, job, job_result
from .sidebar import sidebar
from .tokens import show_spaces, show_tokens, token_labels, tokens_inline
from .tables import TABLE_TEXT, show_table, shown_frame
from .state import PageState, from_link, match_choice, notice, param, select
from .url import URL_KEYS, URL_PROMPT_MAX, prompt_folder, store_prompt, stored_prompt, url_restore, url_save

__all__ = [
    "tables",
    "TRACE_CACHE_MB", "TraceCache", "budgeted", "cached_model", "cached_result", "corpus_result", "trace", "traces_for_all", "DEFAULT_PROMPT",
    "LOCAL", "Context", "plain", "show_error", "FORMULA_START", "csv_bytes", "download_buttons", "json_bytes",
    "meta_for", "neutralise", "tensor_csv", "Job", "Stopped", "job", "job_result", "guard", "page", "run_frame", "setup_page", "stop", "sidebar", "show_spaces",
    "show_tokens", "token_labels", "tokens_inline", "URL_KEYS", "url_restore", "url_save",
    "clicked", "forget_click", "new_click", "PAGES", "PageSpec", "open_head", "open_page", "page_spec",
    "TABLE_TEXT", "show_table", "shown_frame",
    "PageState", "from_link", "match_choice", "notice", "param", "select", "URL_PROMPT_MAX", "prompt_folder", "store_prompt", "stored_prompt",
]
