"""Scheduled reaper of idle per-user TensorBoard apps (they bill per hour; platform facts A2)."""
