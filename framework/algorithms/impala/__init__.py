"""IMPALA: actors and learners around a shared trajectory buffer, V-trace targets (plugin in `plugin`)."""
