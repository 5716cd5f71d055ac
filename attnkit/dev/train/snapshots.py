"""Snapshots of a training run, written as a *series* (a folder of ordinary checkpoints plus
``series.json``): the loop keeps a float16 copy of the model at every evaluation, and at the end
``N`` of them are chosen evenly spaced along the curve (step, best induction score), so the snapshots
fall densest where the training log's induction score changes fastest (a phase change)."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import torch

from ...series import SERIES_FILE, STEP_DIR
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json")


def save_snapshot(model, pool: Path, step: int) -> Path:
    """A float16 copy of ``model`` (config + model.safetensors) in ``pool/step-NNNNNN``."""
    folder = pool / STEP_DIR.format(step)
    state = {k: v.detach().to(torch.float16).clone() for k, v in model.state_dict().items()}
    model.save_pretrained(str(folder), state_dict=state, safe_serialization=True)
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    cfg["dtype"] = "float16"
    cfg.pop("torch_dtype", None)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2), encoding="utf-8")
    return folder


def pick_along_curve(points: list[tuple[int, float]], n: int) -> list[int]:
    """Indices of ``n`` of ``points`` (step, score), the first and last included, evenly spaced in arc
    length along the curve with steps scaled to [0, 1] and scores as they are ([0, 1]): where the score
    moves fast the arc is long, so more of the picks fall there."""
    if n >= len(points):
        return list(range(len(points)))
    s0, s1 = points[0][0], points[-1][0]
    span = max(s1 - s0, 1)
    arc = [0.0]
    for (a, ya), (b, yb) in zip(points, points[1:]):
        arc.append(arc[-1] + math.hypot((b - a) / span, yb - ya))
    picked: list[int] = []
    for k in range(n):
        target = arc[-1] * k / (n - 1)
        i = min(range(len(points)), key=lambda j: abs(arc[j] - target))
        if i not in picked:
            picked.append(i)
    for i in range(len(points)):        # two targets fell on one point: fill with the earliest points not picked
        if len(picked) >= n:
            break
        if i not in picked:
            picked.append(i)
    return sorted(picked[:n])


def write_series(pool: Path, out: Path, history: list[dict], n: int, tokens_per_step: int, log,
                 train_block: int | None = None) -> dict:
    """Choose ``n`` of the snapshots in ``pool`` (one per entry of ``history`` with a folder there),
    move them into ``out/steps/`` with the tokenizer beside each, and write ``series.json`` (with
    ``train_block``, the training window when it was shorter than the context: the ICL score stays in it)."""
    have = [h for h in history if (pool / STEP_DIR.format(h["step"])).is_dir()]
    if not have:
        return {}
    keep = [have[i] for i in pick_along_curve([(h["step"], h["best_induction"]) for h in have], n)]
    steps_dir = out / "steps"
    steps_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for h in keep:
        name = STEP_DIR.format(h["step"])
        shutil.move(str(pool / name), str(steps_dir / name))
        for f in TOKENIZER_FILES:
            if (out / f).is_file():
                shutil.copy2(out / f, steps_dir / name / f)
        rows.append({"step": h["step"], "folder": name, "tokens_seen": h["step"] * tokens_per_step,
                     "train_loss": h.get("train_loss"), "val_loss": h.get("val_loss"),
                     "best_induction": h.get("best_induction"), "best_prev": h.get("best_prev")})
    series = {"about": "snapshots of one training run (float16), chosen along the induction-score curve",
              "checkpoints": rows}
    if train_block:
        series["train_block"] = int(train_block)
    (steps_dir / SERIES_FILE).write_text(json.dumps(series, indent=1), encoding="utf-8")
    shutil.rmtree(pool, ignore_errors=True)
    log(f"series: {len(rows)} snapshots in {steps_dir} (steps {', '.join(str(r['step']) for r in rows)})")
    return series
