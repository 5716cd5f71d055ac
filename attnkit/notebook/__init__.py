"""attnkit in a notebook: load a model, run a prompt, and get every analysis of the dashboard as a result.

    import attnkit
    m = attnkit.load("attnkit-tiny")                       # a shipped name, a hub name or a folder
    r = m.run("When Mary and John went to the store, John gave a drink to")
    r.tokens, r.logits, r["pattern", 1]                    # every activation, as TransformerLens's run_with_cache
    r.pattern("L1H3")                                      # a result: shows its chart in Jupyter
    m.heads(text).best("induction")                        # head statistics (of the pattern: where heads look)
    m.why(text, "L1H3", query=-1, key=5).explain()         # why that head attends there
    pair = m.pair(clean, corrupt, " Mary", " John")
    m.patch(pair), m.attribute(clean, " Mary", " John"), m.circuit(pair)
    m.sinks(text).heads(), m.eviction(text, sinks=(0, 4), windows=(32, 64)).verdict   # sinks and the KV cache
    m.atlas("debian-man", max_docs=8)                      # every head over a corpus: pattern, effect, verdicts

Every result has ``.to_pandas()`` (the table the page downloads), ``.chart()`` (the page's own Altair chart, from
:mod:`attnkit.charts`), ``.save(path)`` (``.html`` self-contained and offline, ``.png``, ``.svg``, ``.csv``) and a
one-line summary; ``attnkit.load(name, lang="zh")`` gives them in Chinese. A front end like the dashboard and the
command line (it calls the library and computes nothing itself); nothing here imports Streamlit.
"""
from .atlas import Atlas
from .effects import Ablation, Attribution, Circuit, Composition, Patching, Verify, Why
from .model import Model, Run, load
from .patterns import CacheDemo, Entropy, HeadStats, Matrix, Pattern
from .results import Result
from .seeds import softmax_table, seed_matrices
from .sinks import Eviction, Sinks

__all__ = ["load", "Model", "Run", "Result", "Pattern", "HeadStats", "Entropy", "Matrix", "CacheDemo", "Ablation",
           "Patching", "Attribution", "Composition", "Circuit", "Why", "Verify", "Atlas", "softmax_table", "seed_matrices",
           "Sinks", "Eviction"]
