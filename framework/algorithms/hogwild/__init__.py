"""Hogwild!: supervised training of a classifier by workers updating one shared model lock-free (plugin in `plugin`)."""
