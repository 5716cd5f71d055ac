"""The page context: what the sidebar resolved (model, device, prompts, BOS) and how a prompt is encoded."""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import prompts as prompt_lib
from ..loading import CHINESE_MODEL, Loaded

LOCAL = "Local folder…"
DEFAULT_PROMPT = "The animal didn't cross the street because it was too tired."
#: The prompt a session starts with on a model trained on another language than English (else DEFAULT_PROMPT).
DEFAULT_PROMPTS = {CHINESE_MODEL: "猫坐在垫子上，看着窗外的小鸟。上海是一个很大的城市。"}


def default_prompt(model_name) -> str:
    """The prompt a session starts with on ``model_name``: in the language the model was trained on."""
    return DEFAULT_PROMPTS.get(str(model_name), DEFAULT_PROMPT)
# Session keys kept across pages (Streamlit forgets widget state when a page does not draw it).
KEPT_KEYS = ("ak_model", "ak_folder", "ak_device", "ak_source", "ak_text", "ak_column", "ak_pick", "ak_csv_header")


@dataclass
class Context:
    """What the sidebar resolved: the model and the prompt(s) to run on."""

    model: Loaded
    model_name: str
    device: str
    prompts: list[str]
    index: int | None              # the chosen prompt, None for "all prompts"
    notices: list[str] = field(default_factory=list)
    prepend_bos: bool = False      # put the tokenizer's <|endoftext|> (BOS) before every prompt

    @property
    def all_selected(self) -> bool:
        return self.index is None

    @property
    def text(self) -> str:
        return self.prompts[self.index or 0]

    def encode(self, text: str) -> tuple[list[int], int]:
        """(token ids cut to the model's context, number of tokens dropped); with ``prepend_bos`` the
        tokenizer's BOS token comes first (as TransformerLens does by default)."""
        ids = _encode(self.model, text)
        if self.prepend_bos and self.bos_id is not None:
            ids = [self.bos_id] + ids
        return prompt_lib.truncate(ids, self.model.config.n_ctx)

    @property
    def bos_id(self) -> int | None:
        tok = self.model.tokenizer
        return tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id

    @property
    def ids(self) -> list[int]:
        return self.encode(self.text)[0]

    @property
    def dropped(self) -> int:
        return self.encode(self.text)[1]

    @property
    def tokens(self) -> list[str]:
        """Readable tokens (a piece of a character split over tokens reads e.g. ``床[1/2]``)."""
        return self.model.token_texts(self.ids)

    @property
    def key(self) -> tuple[str, str]:
        return (self.model_name, self.device)


def _encode(model: Loaded, text: str) -> list[int]:
    return model.encode(text[: prompt_lib.MAX_PROMPT_CHARS])
