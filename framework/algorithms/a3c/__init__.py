"""A3C: asynchronous n-step advantage actor-critic on gymnasium environments (plugin in `plugin`)."""
