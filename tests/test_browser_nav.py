"""In Chromium, on a server that has served nothing yet: a page's address as the very first request gets
the frame (the links drawn by attnkit, the page's inputs written into the link), never shows Streamlit's own
list of pages, not even for a moment, and no "Page not found" box (the first request is served in Streamlit's
old pages/ mode: pages/<address>.py, a copy of app.py, is what it runs)."""
import pytest

from attnkit.app.navigation import PAGES
from browser import chromium, need_browser, open_page, streamlit_server
from helpers import make_checkpoint

pytestmark = pytest.mark.browser

#: Records, from the first byte of the page on, whether Streamlit's own page list or a dialog ever appeared.
WATCH = """
window.__stNavSeen = false;
window.__dialogSeen = false;
new MutationObserver(() => {
  if (document.querySelector("[data-testid='stSidebarNav'], [data-testid='stSidebarNavItems']"))
    window.__stNavSeen = true;
  if (document.querySelector("[role='dialog']")) window.__dialogSeen = true;
}).observe(document, {childList: true, subtree: true});
"""


@pytest.mark.parametrize("packaged", [False, True], ids=["streamlit-run-app.py", "attnkit-app"])
def test_a_page_address_first_on_a_fresh_server_gets_the_frame_without_a_flash(tmp_path, packaged):
    """Both ways of starting the dashboard: a checkout's ``streamlit run app.py`` (its pages/ folder: Streamlit's old
    mode runs pages/Compare_heads.py, a copy of app.py) and ``attnkit app`` (the package's script, with no pages/
    folder beside it: st.navigation from the first request)."""
    need_browser()
    model = make_checkpoint(tmp_path / "model", seed=3, n_layer=2, n_head=2, n_embd=32, n_positions=64,
                            vocab_size=1000)
    with streamlit_server(model, packaged=packaged) as (url, _proc), chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.add_init_script(WATCH)
        open_page(page, url, "Compare heads", heading="Compare heads", timeout=120_000)
        links = page.locator("[data-testid='stSidebar'] [data-testid='stPageLink']")
        assert links.count() == len(PAGES)
        assert all(s.title in t for s, t in zip(PAGES, links.all_inner_texts())), links.all_inner_texts()
        assert "model=" in page.url, page.url            # the frame's url_save ran on this request
        assert page.evaluate("window.__stNavSeen") is False
        assert page.evaluate("window.__dialogSeen") is False, "a dialog (Streamlit's Page not found) was shown"
        # the frame's links work: Heatmaps, then back to Home
        links.filter(has_text="Heatmaps").first.click()
        page.get_by_role("heading", name="Heatmaps").first.wait_for(timeout=60_000)
        assert page.url.split("?")[0].endswith("/Heatmaps")
        assert page.evaluate("window.__stNavSeen") is False
