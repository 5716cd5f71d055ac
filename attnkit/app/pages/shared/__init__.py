"""What two or more pages share (and no other page folder holds): the prompt-pair widgets (Head effects,
Circuits), the choice labels (Heatmaps, Compare heads), the next-token table (Home, Step by step) and a
score split run at once or as a job (Heatmaps, Step by step)."""
