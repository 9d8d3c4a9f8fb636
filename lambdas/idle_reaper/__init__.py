"""Scheduled reaper of idle per-user TensorBoard apps (they bill per hour; docs/platform-facts.md A2)."""
