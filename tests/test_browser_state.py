"""Real-browser tests of the page state (issue 25): `streamlit run app.py` on the shipped attnkit-tiny,
driven by Playwright in Debian's Chromium.

* a dependent choice reset with a one-line notice (Head effects' read position when the example changes);
* no stale label: random runs of layer / head / view changes, every shown selection equals what the chart used;
* shared links: a page's inputs set in the UI open the same view in a fresh browser context;
* a long prompt travels by its hash (``prompt_sha``), and a link whose hash is not stored says so;
* 床 and 🙂 drawn as characters in the token views;
* nothing overflows or is cut off at 1280×800 and 1440×900 on any page and any of its tabs — charts' titles,
  legends and axis labels included: none cut, shortened or hidden by Vega (screenshots of every page and tab at
  both widths under ``artifacts/screenshots/``).

One server for the module (its prompt store in a temporary ``XDG_CACHE_HOME``); each test opens its own
browser context. Script runs are followed through Streamlit's websocket messages (``browser.track_runs``).
"""
from __future__ import annotations

import random
import re
import shutil

import pytest

from browser import (chromium, PAGES, act, layout_problems, need_browser, open_page, screenshot,
                     streamlit_server, track_runs, wait_idle, wait_run)

pytestmark = pytest.mark.browser

MODEL = "attnkit-tiny"
IO, REPEAT = "Indirect object, names swapped", "A repeated phrase"
PROMPT = "The animal didn't cross the street because it was too tired."
SIZES = [(1280, 800), (1440, 900)]


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The server's XDG_CACHE_HOME: long prompts are stored under attnkit/prompts/<sha256>.txt here."""
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(scope="module")
def server(store):
    need_browser()
    with streamlit_server(env={"ATTNKIT_MODEL": MODEL, "XDG_CACHE_HOME": str(store)}, timeout=120) as (url, _):
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def tiny():
    from attnkit.loading import load

    return load(MODEL, "cpu")


class Fresh:
    """Opens pages in browser contexts of their own (no cookies, no storage, a new Streamlit session each);
    page errors (JavaScript exceptions) are collected and fail the test."""

    def __init__(self, browser):
        self.browser, self.contexts, self.errors = browser, [], []

    def __call__(self, width: int = 1280, height: int = 800):
        ctx = self.browser.new_context(viewport={"width": width, "height": height})
        self.contexts.append(ctx)
        pg = ctx.new_page()
        pg.on("pageerror", lambda e: self.errors.append(str(e)))
        track_runs(pg)
        return pg


@pytest.fixture
def fresh(browser):
    f = Fresh(browser)
    yield f
    for c in f.contexts:
        c.close()
    assert not f.errors, f.errors


# ----------------------------------------------------------------------------- reading and driving a page

def main(page):
    return page.locator("[data-testid='stMain']")


def combo(page, label: str, where=None):
    return (where or main(page)).get_by_role("combobox", name=label, exact=True)


def value(page, label: str, where=None) -> str:
    return combo(page, label, where).input_value()


def pick(page, label: str, option: str, *, prefix: bool = False, timeout: float = 120_000, settle: bool = True):
    """Choose ``option`` (its shown text; ``prefix``: the text it starts with) in the select box ``label``;
    ``settle``: wait for the run it starts (else return at once, as a quick user goes on clicking)."""
    pattern = re.compile("^" + re.escape(option) + ("" if prefix else "$"))

    def go():
        for attempt in range(3):              # a list opened just as the page redrew or scrolled closes: reopen it
            box = combo(page, label)
            box.scroll_into_view_if_needed()
            box.click()
            opt = page.get_by_role("option").filter(has_text=pattern).first
            try:
                opt.wait_for(timeout=5_000)
                opt.click(timeout=5_000)
                return
            except Exception:
                if attempt == 2:
                    raise
                page.keyboard.press("Escape")
                page.wait_for_timeout(500)

    act(page, go, timeout) if settle else go()


def radio(page, group: str, option: str, timeout: float = 120_000, settle: bool = True):
    """Click ``option`` of the radio group labelled ``group`` (main area); ``settle`` as for :func:`pick`."""
    grp = main(page).locator("[data-testid='stRadio']").filter(has=page.get_by_text(group, exact=True)).first
    click = lambda: grp.get_by_text(option, exact=True).click(timeout=timeout)   # noqa: E731
    act(page, click, timeout) if settle else click()


def checked(page, group: str) -> str:
    grp = main(page).locator("[data-testid='stRadio']").filter(has=page.get_by_text(group, exact=True)).first
    return grp.locator("label:has(input:checked)").inner_text().strip()


def notices(page) -> list[str]:
    """The texts of the page's notices (info boxes) in the main area."""
    return [t.strip() for t in main(page).locator("[data-testid='stAlertContentInfo'] [data-testid='stMarkdownContainer']")
            .all_inner_texts()]


def chart_titles(page) -> list[str]:
    """The title of every Vega chart drawn (SVG text), in page order."""
    return page.evaluate("""() => [...document.querySelectorAll("[data-testid='stVegaLiteChart'] svg.marks")]
        .map(s => [...s.querySelectorAll('.role-title-text text, .role-title text')].map(t => t.textContent).join(' '))""")


def svg_text(page) -> list[str]:
    return page.evaluate("""() => [...document.querySelectorAll("[data-testid='stVegaLiteChart'] svg.marks text")]
        .map(t => t.textContent)""")


def sidebar_text(page):
    return page.locator("[data-testid='stSidebar']").get_by_role("textbox", name="Text", exact=True)


def enter_prompt(page, text: str):
    box = sidebar_text(page)
    box.fill(text)
    act(page, lambda: box.press("Control+Enter"), 180_000)


def go_to(page, name: str, timeout: float = 180_000):
    """Follow the sidebar's link to another page (the session and its state are kept)."""
    act(page, lambda: page.locator("[data-testid='stSidebar']").get_by_role("link", name=name).click(), timeout)
    page.get_by_role("heading", name=name).first.wait_for(timeout=timeout)
    wait_idle(page, timeout)


def pair_labels(model, name: str) -> list[str]:
    """Axis labels 'position:token' of an example's clean prompt, computed here from the library."""
    from attnkit import app as ui
    from attnkit import examples as EX
    from attnkit import patching as P

    ex = EX.EXAMPLES[name]
    pair = P.make_pair(model, ex["clean"], ex["corrupt"], ex["answer"], ex["distractor"])
    return ui.token_labels(model.token_texts(pair.clean))


def n_tokens(model, text: str) -> int:
    return len(model.encode(text))


# ----------------------------------------------------------------------------- 1. a dependent choice is reset

def test_changing_the_example_resets_the_read_position_with_a_one_line_notice(server, fresh, tiny):
    page = fresh()
    open_page(page, server, "Head effects", charts=1, timeout=180_000)
    io, rep = pair_labels(tiny, IO), pair_labels(tiny, REPEAT)
    assert value(page, "Example") == REPEAT                # attnkit-tiny's default: the example it solves
    assert value(page, "Read the logits at") == rep[-1]

    # the default (the last token) follows the new pair, and the page says so
    pick(page, "Example", IO, prefix=True)
    assert value(page, "Example").startswith(IO)
    # the frame wrote the choice into the link, also when a page's address was a fresh server's first request
    assert "example=Indirect" in page.url, page.url
    assert value(page, "Read the logits at") == io[-1]
    said = [n for n in notices(page) if n.startswith("Read position")]
    assert len(said) == 1 and "\n" not in said[0], notices(page)
    assert io[-1] in said[0] and rep[-1] in said[0] and "prompt pair changed" in said[0], said

    # a position the user chose, whose token the next pair does not have there: reset to the new last token
    k = next(i for i in range(1, len(io) - 1) if i >= len(rep) or io[i].split(":", 1)[1] != rep[i].split(":", 1)[1])
    pick(page, "Read the logits at", io[k])
    assert value(page, "Read the logits at") == io[k]
    assert f"at {io[k]}" in main(page).inner_text()       # the attribution reads the logits there
    pick(page, "Example", REPEAT)
    shown = value(page, "Read the logits at")
    assert shown in rep and shown == rep[-1], (shown, rep)
    said = [n for n in notices(page) if n.startswith("Read position")]
    assert len(said) == 1 and "\n" not in said[0], notices(page)
    assert said[0].startswith(f"Read position changed from {io[k]} to {rep[-1]}: the prompt pair changed"), said
    text = main(page).inner_text()
    assert f"final residual stream at {shown}" in text and f"at {io[k]}" not in text

    # prompts edited away from the example's: the Example box no longer names it
    clean = main(page).get_by_role("textbox", name="Clean prompt")
    clean.fill(clean.input_value().replace("python", "java"))
    act(page, lambda: clean.press("Enter"), 180_000)
    assert value(page, "Example") == "Your own"


# ----------------------------------------------------------------------------- 2. no stale labels

VIEWS = ["One head", "All heads of a layer", "One head through all layers", "Tokens"]
KINDS = {"pattern (after softmax)": "pattern", "scores (before softmax)": "scores"}


def _heatmaps_shown(page, L: int, H: int) -> dict:
    """What the Heatmaps page shows: its boxes and what its charts were drawn for."""
    view, kind = checked(page, "View"), checked(page, "Values")
    return {"view": view, "kind": KINDS[kind], "layer": value(page, "Layer"), "head": value(page, "Head"),
            "titles": chart_titles(page),
            "cells": page.evaluate("""() => [...new Set([...document.querySelectorAll(
                "[data-testid='stVegaLiteChart'] svg.marks path[aria-label]")].map(p =>
                ((p.getAttribute('aria-label').match(/head: (L\\d+H\\d+)/) || [])[1])).filter(Boolean))]""")}


def _check_heatmaps(s: dict, want: dict, L: int, H: int):
    l, h, view = want["layer"], want["head"], want["view"]
    assert s["view"] == view and s["layer"] == str(l), (s, want)
    assert s["head"] == f"{h} (L{l}H{h})", ("the Head box names another layer's head", s, want)
    if view == "One head":
        assert s["titles"] == [f"L{l}H{h} (layer {l}, head {h}): {want['kind']}"], s
        assert s["cells"] == [f"L{l}H{h}"], s                    # every cell's tooltip names the head
    elif view == "All heads of a layer":
        assert sorted(s["titles"][0].split()) == sorted(f"L{l}H{x}" for x in range(H)), s
    elif view == "One head through all layers":
        assert sorted(s["titles"][0].split()) == sorted(f"L{x}H{h}" for x in range(L)), s
    else:
        assert s["titles"] == [f"head L{l}H{h}: what the chosen token attends to"], s


def test_random_layer_head_and_view_changes_never_leave_a_stale_label(server, fresh, tiny):
    """30 seeded random bursts of 1–2 quick changes (the next click before the page has finished the last
    run); once it settles, every box shows what was chosen and the chart was drawn for exactly that."""
    L, H = tiny.config.n_layers, tiny.config.n_heads
    page = fresh(1440, 900)
    open_page(page, server, "Heatmaps", query={"prompt": "Mary and John went to the store."}, charts=1)
    rng = random.Random(25)
    want = {"view": "One head", "kind": "pattern", "layer": 0, "head": 0}
    _check_heatmaps(_heatmaps_shown(page, L, H), want, L, H)
    changes = 0
    for _ in range(30):
        runs = page._ak_runs
        since = (runs.started, runs.finished)
        for _ in range(rng.randint(1, 2)):
            ops = ["view"] + (["layer"] if want["view"] != VIEWS[2] else []) + \
                  (["head"] if want["view"] != VIEWS[1] else []) + (["kind"] if want["view"] != VIEWS[3] else [])
            op = rng.choice(ops)
            if op == "view":
                want["view"] = rng.choice([v for v in VIEWS if v != want["view"]])
                radio(page, "View", want["view"], settle=False)
            elif op == "kind":
                want["kind"] = "scores" if want["kind"] == "pattern" else "pattern"
                radio(page, "Values", next(k for k, v in KINDS.items() if v == want["kind"]), settle=False)
            elif op == "layer":
                want["layer"] = rng.choice([x for x in range(L) if x != want["layer"]])
                pick(page, "Layer", str(want["layer"]), settle=False)
            else:
                want["head"] = rng.choice([x for x in range(H) if x != want["head"]])
                pick(page, "Head", f"{want['head']} (", prefix=True, settle=False)
            changes += 1
        wait_run(page, since, 120_000)
        _check_heatmaps(_heatmaps_shown(page, L, H), want, L, H)
    assert changes >= 30


def test_random_example_and_position_changes_keep_head_effects_consistent(server, fresh, tiny):
    from attnkit import examples as EX

    page = fresh(1440, 900)
    open_page(page, server, "Head effects", charts=1, timeout=180_000)
    rng = random.Random(2025)
    example = REPEAT
    for _ in range(4):
        if rng.random() < 0.5:
            example = rng.choice([n for n in EX.EXAMPLES if n != example])
            pick(page, "Example", example, prefix=True)
        else:
            labels = pair_labels(tiny, example)
            pick(page, "Read the logits at", rng.choice([x for x in labels if x != value(page, "Read the logits at")]))
        labels = pair_labels(tiny, example)
        shown = value(page, "Read the logits at")
        assert value(page, "Example").startswith(example)
        assert combo(page, "Example").count() == 1
        assert main(page).get_by_role("textbox", name="Clean prompt").input_value() == EX.EXAMPLES[example]["clean"]
        assert shown in labels, (shown, labels)
        text = main(page).inner_text()
        assert f"final residual stream at {shown}" in text       # the attribution's position is the box's
        head = value(page, "Head: the tokens it promotes and suppresses")
        assert any(t.startswith(f"Head {head} at {shown}:") for t in chart_titles(page)), chart_titles(page)


# ----------------------------------------------------------------------------- 3. shared links

def _open_link(fresh, link: str, heading: str):
    page = fresh()
    page.goto(link, wait_until="domcontentloaded")
    page.get_by_role("heading", name=heading).first.wait_for(timeout=180_000)
    wait_idle(page, 180_000)
    return page


def test_a_head_effects_link_opens_the_same_view_in_a_fresh_context(server, fresh, tiny):
    """Example, direction and position from a link's parameters, the attribution's run chosen on the page;
    the address the page then has opens all four in a fresh context."""
    from attnkit import examples as EX

    io = pair_labels(tiny, IO)
    page = fresh()
    open_page(page, server, "Head effects", query={"example": IO, "direction": "noise", "pos": len(io) // 2},
              charts=1, timeout=180_000)
    radio(page, "Run", "corrupted")
    want = {"example": value(page, "Example"), "pos": value(page, "Read the logits at")}
    # the link named the example, not its prompts: the page runs the example's pair (not the default's)
    assert want["example"].startswith(IO) and want["pos"] == io[len(io) // 2], want
    assert main(page).get_by_role("textbox", name="Clean prompt").input_value() == EX.EXAMPLES[IO]["clean"]
    link = page.url
    assert "direction=noise" in link and "example=" in link and "pos=" in link and "run=corrupted" in link, link
    other = _open_link(fresh, link, "Head effects")
    assert value(other, "Example") == want["example"] and value(other, "Read the logits at") == want["pos"]
    assert checked(other, "Direction") == "noise" and checked(other, "Run") == "corrupted"
    assert main(other).get_by_role("textbox", name="Clean prompt").input_value() == \
        main(page).get_by_role("textbox", name="Clean prompt").input_value()
    assert "denoise" not in " ".join(chart_titles(other)) and "noise:" in " ".join(chart_titles(other))


def test_entropy_ablations_and_compare_links_open_the_same_view(server, fresh):
    text = "Links keep the view: the head, the layer and the prompt, in a fresh browser."
    # Entropy: a head, a log axis turned off
    page = fresh()
    open_page(page, server, "Entropy", query={"prompt": text}, heading="Entropy versus context length", charts=1)
    pick(page, "Head", "head 3")
    act(page, lambda: main(page).get_by_text("log scale for n", exact=True).click())
    assert value(page, "Head") == "head 3"
    link = page.url
    assert "head=3" in link and "logx=0" in link, link
    other = _open_link(fresh, link, "Entropy versus context length")
    assert value(other, "Head") == "head 3"
    assert not main(other).get_by_role("checkbox", name="log scale for n").is_checked()
    assert sidebar_text(other).input_value() == text

    # Ablations: a head ablation (from the link) of one head (chosen on the page)
    page = fresh()
    open_page(page, server, "Ablations", query={"prompt": text, "kind": "zero-head"}, timeout=180_000)
    assert value(page, "Intervention") == "Zero-ablate a head"
    pick(page, "Layer", "L2")
    pick(page, "Head", "H5")
    link = page.url
    assert "kind=" in link and "head_layer=2" in link and "head=5" in link, link
    other = _open_link(fresh, link, "Ablations")
    assert value(other, "Intervention") == "Zero-ablate a head"
    assert value(other, "Layer") == "L2" and value(other, "Head") == "H5"
    assert sidebar_text(other).input_value() == text
    assert "L2H5" in main(other).inner_text()

    # Compare heads: a statistic and a pair of tokens
    page = fresh()
    open_page(page, server, "Compare heads", query={"prompt": text, "stat": "previous-token"}, charts=1)
    pick(page, "Query token (attending)", "9:", prefix=True)
    pick(page, "Key token (attended to, at or before the query)", "2:", prefix=True)
    want = [value(page, n) for n in ("Statistic", "Query token (attending)",
                                     "Key token (attended to, at or before the query)")]
    assert want[0] == "previous-token" and want[1].startswith("9:") and want[2].startswith("2:")
    link = page.url
    assert "stat=previous-token" in link and "q=9" in link and "k=2" in link, link
    other = _open_link(fresh, link, "Compare heads")
    assert [value(other, n) for n in ("Statistic", "Query token (attending)",
                                      "Key token (attended to, at or before the query)")] == want
    assert any(t.startswith(f"Weight from {want[1]} to {want[2]}") for t in chart_titles(other)), chart_titles(other)


# ----------------------------------------------------------------------------- 4. a long prompt by its hash

def _long_prompt(n: int = 2000) -> str:
    rng = random.Random(2000)
    words = ("attention key query value token head layer model softmax mask street animal tired the a of and "
             "to in it was because every looks back").split()
    out = ""
    while len(out) < n:
        out += rng.choice(words) + (". " if rng.random() < 0.1 else " ")
    return out[: n - 1] + "."


def test_a_2000_character_prompt_travels_by_its_hash(server, fresh, store, tiny):
    import hashlib

    text = _long_prompt()
    assert len(text) == 2000
    n = n_tokens(tiny, text)
    page = fresh()
    open_page(page, server, "Home")
    enter_prompt(page, text)
    main(page).get_by_text(f"{n} tokens", exact=False).first.wait_for(timeout=60_000)
    go_to(page, "Heatmaps")
    pick(page, "Layer", "2")
    pick(page, "Head", "5 (L2H5)")
    link = page.url
    sha = hashlib.sha256(text.encode()).hexdigest()
    assert f"prompt_sha={sha}" in link and "prompt=" not in link.replace("prompt_sha=", ""), link
    stored = store / "attnkit" / "prompts" / f"{sha}.txt"
    assert stored.read_text(encoding="utf-8") == text

    other = _open_link(fresh, link, "Heatmaps")
    assert sidebar_text(other).input_value() == text
    assert value(other, "Layer") == "2" and value(other, "Head") == "5 (L2H5)"
    assert f"{n} tokens" in main(other).inner_text()

    # the same link on a machine that does not hold the text: one line says so, the rest is kept
    away = stored.with_suffix(".away")
    shutil.move(stored, away)
    try:
        third = _open_link(fresh, link, "Heatmaps")
        said = [t for t in notices(third) if "prompt" in t and "not on this machine" in t]
        assert len(said) == 1 and "\n" not in said[0] and sha[:12] in said[0], notices(third)
        assert value(third, "Layer") == "2" and value(third, "Head") == "5 (L2H5)"
        from attnkit.app import DEFAULT_PROMPT

        assert sidebar_text(third).input_value() == DEFAULT_PROMPT
    finally:
        shutil.move(away, stored)


# ----------------------------------------------------------------------------- 5. characters, not bytes

def test_split_characters_are_drawn_whole_in_the_token_views(server, fresh, tiny):
    text = "A bed 床 and a smile 🙂 in one line."
    pieces = tiny.token_strs(tiny.encode(text))
    assert any("\\x" in p for p in pieces), "the tokenizer splits at least one of the two into byte pieces"
    page = fresh(1440, 900)
    open_page(page, server, "Home", query={"prompt": text})
    tokens = main(page).locator("[data-testid='stText']").all_inner_texts()
    line = next(t for t in tokens if "床" in t)
    assert "🙂" in line and "\\x" not in line, line
    open_page(page, server, "Heatmaps", query={"prompt": text}, charts=1)
    axis = svg_text(page)
    assert any("床" in t for t in axis) and any("🙂" in t for t in axis), axis
    assert not any("\\x" in t for t in axis), [t for t in axis if "\\x" in t]
    radio(page, "View", "Tokens")
    shown = svg_text(page)
    assert any("床" in t for t in shown) and any("🙂" in t for t in shown), shown
    assert not any("\\x" in t for t in shown), [t for t in shown if "\\x" in t]
    assert "\\x" not in main(page).inner_text()


# ----------------------------------------------------------------------------- 6. nothing overflows

@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_nothing_overflows_on_any_page(server, fresh, size):
    width, height = size
    page = fresh(width, height)
    text = PROMPT + " 床 🙂 <b>not bold</b>"
    open_page(page, server, "Home", query={"prompt": text})
    problems, shots = {}, []
    for name in PAGES:
        if name != "Home":
            go_to(page, name)
        heading = "Entropy versus context length" if name == "Entropy" else None
        if heading:
            page.get_by_role("heading", name=heading).first.wait_for(timeout=60_000)
        errors = main(page).locator("[data-testid='stException'], [data-testid='stAlertContentError']")
        assert errors.count() == 0, (name, errors.all_inner_texts())
        stem = name.lower().replace(" ", "_")
        problems[name] = layout_problems(page)
        shots.append(screenshot(page, f"{stem}_{width}"))
        if name == "Heatmaps":                       # the grid of a layer's heads too
            radio(page, "View", "All heads of a layer")
            problems["Heatmaps (grid)"] = layout_problems(page)
            shots.append(screenshot(page, f"{stem}_grid_{width}"))
        if name == "Head effects":                   # the longest Example label: an example tiny does not solve
            pick(page, "Example", IO, prefix=True)
            problems["Head effects (unsolved example)"] = layout_problems(page)
        tabs = main(page).get_by_role("tab")
        for i in range(1, tabs.count()):            # every tab's charts (Step by step's seeds, W_Q ≠ W_K, …)
            label = tabs.nth(i).inner_text().strip()
            act(page, lambda: tabs.nth(i).click(), 180_000)
            problems[f"{name} ({label})"] = layout_problems(page)
            shots.append(screenshot(page, f"{stem}_tab{i}_{width}"))
    assert all(s.stat().st_size > 10_000 for s in shots)
    assert not any(problems.values()), "\n".join(f"{k}: {p}" for k, v in problems.items() for p in v)


# ----------------------------------------------------------------------------- 7. every page's link reopens it

def test_verify_and_step_by_step_links_reopen_the_same_view_after_other_pages(server, fresh):
    """Verify writes its model and prompt into the link before its Run button is pressed; Step by step keeps
    its inputs (and writes them into the link) after the user has visited another page."""
    text = "Verify and Step by step keep the view: the prompt and the head, in a fresh browser."
    page = fresh()
    open_page(page, server, "Verify", query={"prompt": text}, timeout=180_000)
    link = page.url
    assert "prompt=" in link and "model=" in link, link
    other = _open_link(fresh, link, "Verify")
    assert sidebar_text(other).input_value() == text

    page = fresh()
    open_page(page, server, "Step by step", query={"prompt": text, "layer": 1, "head": 2}, timeout=180_000)
    pick(page, "Query token", "5:", prefix=True)
    want = [value(page, n) for n in ("Layer", "Head", "Query token")]
    assert want[:2] == ["1", "2"] and want[2].startswith("5:"), want
    go_to(page, "Heatmaps")
    go_to(page, "Step by step")
    assert [value(page, n) for n in ("Layer", "Head", "Query token")] == want
    link = page.url
    assert "layer=1" in link and "head=2" in link and "query=5" in link and "prompt=" in link, link
    other = _open_link(fresh, link, "Step by step")
    assert [value(other, n) for n in ("Layer", "Head", "Query token")] == want
    assert sidebar_text(other).input_value() == text
