"""Fixtures of the framework tests."""
import pytest

from framework import compiler


@pytest.fixture
def fresh_compiler():
    """framework.compile's caches, counters and settings as new, before and after the test."""
    compiler.reset()
    yield
    compiler.reset()
    compiler.config.cache_size_limit = 8
