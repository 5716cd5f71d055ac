"""The dashboard's pages, one folder each (``PAGES``' key in :mod:`attnkit.app.navigation`): ``page.py``, the
script ``st.navigation`` runs (the page's wiring: its inputs, library calls, charts), and the modules only
that page uses. What two or more pages share sits in ``shared/``; what every page uses is the frame,
:mod:`attnkit.app`. A page's folder holds at most 600 lines (tests/test_pages_rules.py)."""
