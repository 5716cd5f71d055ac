"""Verify: can the numbers on the other pages be trusted? attnkit against HuggingFace, layer by layer."""
