"""Lambda entry point: the provider's onEvent (entry.py runs provider.on_event)."""

from lambdas.tensorboard_app import provider
from lambdas.tensorboard_app.entry import entry_point
from lambdas.tensorboard_app.env import ProviderEnv

# Cold start: a bad deployment fails here, loudly.
handler = entry_point(provider.on_event, ProviderEnv.from_environ())
