"""The built-in demo: a small GPT and the main job that audits its compile."""
