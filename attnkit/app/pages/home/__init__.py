"""Home: which model is loaded (its card and parameters), how it reads the prompt (its tokens and next-token
guess), and where to start."""
