"""The head atlas: every head of the model over a corpus on a scatter of two chosen metrics, a head's card (its
verdicts, effect, examples, pairs and Q/K view), a head finder, a model view of every head on the sidebar's prompt,
and the atlas's offline bundle to download (the logic is in source.py and card.py beside this file)."""
from dataclasses import dataclass

import streamlit as st

from attnkit import app as ui
from attnkit.app.exports import zip_bytes
from attnkit.app.pages.atlas import card
from attnkit.app.pages.atlas import source as atlas_source
from attnkit.app.pages.shared.labels import shown
from attnkit.atlas import ROLE_NAMES, stat_column, stat_names
from attnkit.atlas_result import roles
from attnkit.charts import heatmaps as heatmap_charts
from attnkit.charts.atlas import SELECT, axis_title, scatter, scatter_frame
from attnkit.i18n import msg, t
from attnkit.standard import head_name

SOURCES = {"run": msg("Run it on this model"), "folder": msg("Open an atlas folder")}
COLOURS = {"verdict": msg("verdict of a role"), "layer": msg("layer")}
#: The model view draws at most this many heads at once (a larger model: a block of layers at a time).
MAX_PANELS = 96
#: …and at most this many a row (wider models wrap a layer over rows), so that it fits at 1280 px.
MAX_COLUMNS = 12


@dataclass
class Inputs(ui.PageState):
    """The page's inputs (session keys at_*, URL parameters by field name; the atlas folder is ``atlas``)."""

    prefix = "at"
    source: str = "run"
    corpus: str = atlas_source.SHIPPED
    docs: int = atlas_source.DEFAULT_DOCS
    exclude: bool = False
    folder: str = ui.param("", url="atlas")
    x: str = "previous-token"
    y: str = "induction"
    color: str = "verdict"
    role: str = "induction"
    head: str = ""                       # the head whose card is open (the link reopens it)
    rank: str = "effect"


ctx = ui.page("atlas")
cfg = ctx.model.config
state = Inputs.load()
state.fit("source", list(SOURCES), "run", what=t("Atlas"), because=t("not one of the choices"))
state.fit("docs", range(1, 100_001), atlas_source.DEFAULT_DOCS, what=t("Documents"), because=t("1 to 100,000"))
st.caption(t("Every head of the model over a corpus: where it looks (its statistics, top examples, token pairs, its "
             "queries and keys in 2-D) and what removing it does to the loss — with a verdict per role that says "
             "whether the role holds by its pattern, by its effect, both, or neither."))
st.radio(t("Atlas"), list(SOURCES), key="at_source", format_func=shown(SOURCES), horizontal=True)


def where_from():
    """The atlas: run on this model (corpus, documents, position 0) or read from a folder."""
    if state.source == "folder":
        return atlas_source.from_folder(ctx, state)
    a, b = st.columns([1, 1])
    with a:
        st.number_input(t("Documents (the first N of the corpus)"), 1, 100_000, key="at_docs", help=t(
            "The atlas of attnkit-tiny over the first {n} documents of {name} (8,818 tokens) took 59 s of CPU time.",
            n=atlas_source.DEFAULT_DOCS, name=atlas_source.SHIPPED))
    with b:
        st.checkbox(t("Verdicts without position 0"), key="at_exclude", help=t(
            "The verdicts and the pairs read the statistics computed without position 0 (a sink on the first token "
            "dominates several); both are computed and shown either way."))
    return atlas_source.from_run(ctx, state)


def head_choice(df) -> str:
    """The open head: a click on the scatter or on the model view (last run), else the box; one with the largest
    effect at first."""
    heads = list(df["head"])
    for key, param in (("at_scatter", SELECT), ("at_model", "open")):
        for head in ui.new_click(key, param, "head")[-1:]:
            if head in heads:
                state.set("head", head)
    best = df.sort_values("effect", ascending=False, na_position="last")["head"].iloc[0]
    state.fit("head", heads, best, what=t("Head"), because=t("not a head of this atlas"))
    return state.head


def scatter_view(atlas) -> None:
    """The scatter of every head on two metrics, the sentence beside it, the head box, and the card."""
    res, df = atlas.result, atlas.result.to_pandas()
    columns = [stat_column(s, nf) for nf in (False, True) for s in stat_names()] + ["effect"]
    for name, what, opts, default in (("x", t("x axis"), columns, "previous-token"),
                                      ("y", t("y axis"), columns, "induction"),
                                      ("color", t("Colour by"), list(COLOURS), "verdict"),
                                      ("role", t("Verdicts of the role"), roles(), "induction")):
        state.fit(name, opts, default if default in opts else opts[0], what=what, because=t("not one of the choices"))
    head = head_choice(df)
    c1, c2, c3, c4 = st.columns(4)
    x = c1.selectbox(t("x axis"), columns, key="at_x", format_func=axis_title)
    y = c2.selectbox(t("y axis"), columns, key="at_y", format_func=axis_title)
    color = c3.selectbox(t("Colour by"), list(COLOURS), key="at_color", format_func=shown(COLOURS))
    role = c4.selectbox(t("Verdicts of the role"), roles(), key="at_role", format_func=shown(ROLE_NAMES),
                        disabled=color != "verdict")
    left, right = st.columns([3, 1])
    left.altair_chart(scatter(scatter_frame(df, role), x, y, color), on_select="rerun", selection_mode=SELECT,
                      key="at_scatter")
    right.info(t("A pattern is not a role: a head can look like a previous-token head and write where nothing "
                 "reads. The verdicts check each role by its effect — the loss when the head is removed — not by its "
                 "pattern."), icon="💡")
    right.selectbox(t("Head"), list(df["head"]), key="at_head", help=t(
        "Or click a point. The page's link names the open head: a copied link reopens this card."))
    card.card(res.card(head), ctx.model)


def finder_view(atlas) -> None:
    st.subheader(t("Head finder"))
    df = atlas.result.to_pandas()
    options = card.rank_options([stat_column(s, nf) for nf in (False, True) for s in stat_names()])
    state.fit("rank", options, "effect", what=t("Rank by"), because=t("not one of the choices"))
    by = st.selectbox(t("Rank by"), options, key="at_rank", format_func=card.rank_label)
    card.finder(df, by)


def downloads(atlas) -> None:
    """The offline bundle: the HTML file (opens with no server and no network) and the folder as a zip."""
    folder, name = atlas.folder, f"atlas-{atlas.result.info['model']['name']}".replace("/", "_")
    a, b = st.columns(2)
    a.download_button(t("The offline HTML file"), lambda: (folder / "atlas.html").read_bytes(), file_name=f"{name}.html",
                      mime="text/html", key="at_html", on_click="ignore", width="stretch")
    b.download_button(t("The atlas folder (zip)"), lambda: zip_bytes(folder, skip=("work",), root=name),
                      file_name=f"{name}.zip", mime="application/zip", key="at_zip", on_click="ignore", width="stretch",
                      help=t("The HTML file, one JSON a head, the index and the manifest (model and corpus with their "
                             "hashes, settings, versions, the float64 check)."))


def model_view() -> None:
    """Every layer × head as a thumbnail of its pattern on the sidebar's prompt; a click opens its card."""
    st.subheader(t("Model view: every head on the sidebar's prompt"))
    ids, L, H = ctx.ids, cfg.n_layers, cfg.n_heads
    if len(ids) < 2:
        st.caption(t("The prompt has one token: nothing to attend over."))
        return
    per = max(1, MAX_PANELS // H)
    layers = list(range(L))
    if L > per:
        first = st.selectbox(t("Layers"), range(0, L, per), key="at_layers",
                             format_func=lambda a: f"{a}–{min(a + per, L) - 1}")
        layers = layers[first:first + per]
    tr = ui.trace(ctx, capture=("pattern",))
    mats = [tr["pattern", l][0, h].float().cpu().numpy().copy() for l in layers for h in range(H)]
    masks = [heatmap_charts.masked_cells(len(ids), window=cfg.window(l)) for l in layers for _ in range(H)]
    columns = min(H, MAX_COLUMNS)
    room = heatmap_charts.CONTENT_WIDTH - heatmap_charts.GRID_LABELS_PX - 20 * (columns - 1) - 10   # the first
    panel = max(40, room // columns)               # column's token labels too: 12 panels of 40 px fit in 800
    chart, _ = heatmap_charts.grid_chart(mats, [head_name(l, h) for l in layers for h in range(H)],
                                         ui.token_labels(ctx.model.token_texts(ids)), masked=masks, columns=columns,
                                         panel=panel, select="open")
    st.caption(t("One panel a head, layer after layer (one row a layer up to {n} heads a layer); each panel its own "
                 "colour range. Click a panel to open its card above (when the atlas holds it).", n=MAX_COLUMNS))
    st.altair_chart(chart, width="content", on_select="rerun", selection_mode="open", key="at_model")


atlas = where_from()
if atlas is not None:
    scatter_view(atlas)
    finder_view(atlas)
    downloads(atlas)
model_view()
