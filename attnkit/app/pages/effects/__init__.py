"""Head effects: which heads carry the answer on a clean/corrupted prompt pair? Activation patching, direct
logit attribution, the contribution graph and the logit lens."""
