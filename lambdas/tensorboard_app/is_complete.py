"""Lambda entry point: the provider's isComplete (entry.py runs provider.is_complete)."""

from lambdas.tensorboard_app import provider
from lambdas.tensorboard_app.entry import entry_point
from lambdas.tensorboard_app.env import ProviderEnv

# Cold start: a bad deployment fails here, loudly.
handler = entry_point(provider.is_complete, ProviderEnv.from_environ())
