"""APPO: asynchronous PPO, the clipped surrogate on IMPALA's actors, buffer and learners (plugin in `plugin`)."""
