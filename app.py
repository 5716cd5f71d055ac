"""attnkit's dashboard: ``streamlit run app.py``.

The frame: page config, the navigation (Home first), the sidebar (model and prompt) drawn once,
then the chosen page, whose body runs under ``ui.guard`` (an error is one line, the session is kept).
"""
import streamlit as st

from attnkit import app as ui

ui.run_frame([
    st.Page("pages/0_Home.py", title="Home", icon="🏠", default=True),
    st.Page("pages/1_Heatmaps.py", title="Heatmaps", icon="🔥"),
    st.Page("pages/2_Compare_heads.py", title="Compare heads", icon="🧭"),
    st.Page("pages/7_Head_effects.py", title="Head effects", icon="🎯"),
    st.Page("pages/8_Circuits.py", title="Circuits", icon="🕸️"),
    st.Page("pages/3_Entropy.py", title="Entropy", icon="📈"),
    st.Page("pages/4_Ablations.py", title="Ablations", icon="✂️"),
    st.Page("pages/5_Step_by_step.py", title="Step by step", icon="🪜"),
    st.Page("pages/6_Verify.py", title="Verify", icon="✅"),
])
