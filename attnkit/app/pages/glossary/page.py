"""Glossary: the terms these pages use, in English and in the seeds' Chinese vocabulary (attnkit/glossary.py)."""
import pandas as pd
import streamlit as st

from attnkit import app as ui
from attnkit.app.pages.shared import calculator
from attnkit.glossary import GLOSSARY
from attnkit.i18n import current, t

ui.page("glossary")

st.caption(t("Each term in English and in the Chinese of the seed articles, with a one-line definition in the "
             "language of this page. Switch the language in the sidebar."))
first, second = ("zh", "en") if current() == "zh" else ("en", "zh")
names = {"en": t("English"), "zh": t("Chinese")}
ui.show_table(pd.DataFrame({
    names[first]: [getattr(term, first) for term in GLOSSARY],
    names[second]: [getattr(term, second) for term in GLOSSARY],
    t("Definition"): [str(term.definition) for term in GLOSSARY],
}), hide_index=True, wrap=True)                 # long definitions wrap: none is cut at the column's edge

st.divider()
calculator.softmax_calculator(key="gl_calc")      # the softmax entry, tried: any article's scores and percentages
