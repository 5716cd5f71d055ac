from helpers import apptest


def test_home_shows_model_card_and_tokens(odd_dir):
    at = apptest("home", odd_dir, text="Hello <b>world</b> 🙂").run()
    assert not at.exception
    assert not at.error
    assert any("tokens" in m.value for m in at.markdown)
    card = at.dataframe[0].value
    assert "layers" in list(card.iloc[:, 0])
    tokens = at.dataframe[2].value
    shown = "".join(t.replace("␣", " ") for t in tokens["token"])
    assert shown.startswith("Hello <b>world</b> ")          # HTML shown as text, spaces visible
    assert "\\x" in shown or "🙂" in shown                    # an emoji split over tokens shows its bytes


def test_token_bytes_rebuild_the_text(odd):
    text = "Hello <b>world</b> 🙂 注意力 مرحبا"
    ids = odd.encode(text)
    assert b"".join(odd.token_bytes(ids)).decode("utf-8") == text


def test_empty_prompt_is_a_message_not_a_traceback(odd_dir):
    at = apptest("home", odd_dir, text="   ").run()
    assert not at.exception
    assert any("empty" in e.value for e in at.error)


def test_missing_folder_is_a_message(tmp_path):
    at = apptest("home", tmp_path / "nope").run()
    assert not at.exception
    assert any("not found" in e.value for e in at.error)
