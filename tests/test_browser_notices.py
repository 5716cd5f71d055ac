"""In Chromium at 1280×800: the notices about the prompt sit above the fold — the Chinese-prompt notice with its
one-click switch to the Chinese model (round five found it below the fold, at the sidebar's foot)."""
import pytest

from attnkit import cjk
from browser import chromium, need_browser, open_page, streamlit_server

pytestmark = pytest.mark.browser

PROMPT = "猫坐在垫子上。我昨天在北京吃了烤鸭，今天在上海吃了小笼包。"


def test_the_cjk_notice_and_its_button_are_above_the_fold_at_1280x800():
    need_browser()
    with streamlit_server() as (url, _proc), chromium() as browser:       # the shipped attnkit-tiny
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        for name in ("Home", "Heatmaps"):
            open_page(page, url, name, {"prompt": PROMPT}, timeout=180_000)
            note = page.locator("[data-testid='stMain'] [data-testid='stAlert']", has_text=cjk.CHINESE_MODEL).first
            button = page.get_by_role("button", name=f"Load {cjk.CHINESE_MODEL}").first
            for what, el in (("notice", note), ("button", button)):
                box = el.bounding_box()
                assert box is not None, (name, what)
                assert 0 <= box["y"] and box["y"] + box["height"] <= 800, (name, what, box)
