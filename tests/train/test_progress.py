"""Progress: a tqdm bar on a terminal; nothing when disabled or when stderr is not a terminal."""
import io

from framework.train.progress import Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_on_a_terminal():
    stream = _Terminal()
    progress = Progress(1000, initial_steps=100, enabled=True, stream=stream)
    progress.update(400, 3, None)
    progress.close()
    text = stream.getvalue()
    assert "40%" in text and "400/1.00k" in text and "return n/a, updates 3" in text


def test_nothing_when_disabled_or_not_a_terminal():
    for stream, enabled in ((_Terminal(), False), (io.StringIO(), True)):
        progress = Progress(1000, enabled=enabled, stream=stream)
        progress.update(400, 3, 12.5)
        progress.close()
        assert stream.getvalue() == ""
