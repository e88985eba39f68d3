"""Progress: a tqdm bar on a terminal, plain status lines otherwise, nothing when disabled."""
import io

from framework.progress import Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_when_not_a_terminal():
    stream = io.StringIO()
    progress = Progress(1000, enabled=True, stream=stream, line_every_s=0.0)
    progress.update(500, 1234.5, 7, 42.25)
    progress.update(600, 1000.0, 8, None)
    progress.close()
    assert stream.getvalue().splitlines() == ["steps 500  steps/s 1,234  updates 7  mean return 42.2",
                                              "steps 600  steps/s 1,000  updates 8  mean return n/a"]


def test_plain_lines_are_rate_limited():
    stream = io.StringIO()
    progress = Progress(1000, enabled=True, stream=stream, line_every_s=3600)
    progress.update(500, 1.0, 1, None)
    assert stream.getvalue() == ""


def test_bar_on_a_terminal():
    stream = _Terminal()
    progress = Progress(1000, initial_steps=100, enabled=True, stream=stream)
    progress.update(400, 1.0, 3, 12.5)
    progress.close()
    text = stream.getvalue()
    assert "40%" in text and "400/1.00k" in text and "return 12.5, updates 3" in text


def test_disabled_prints_nothing():
    stream = _Terminal()
    progress = Progress(1000, enabled=False, stream=stream)
    progress.update(400, 1.0, 3, 12.5)
    progress.close()
    assert stream.getvalue() == ""
