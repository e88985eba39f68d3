"""Progress: a tqdm bar on a terminal; nothing when disabled or when stderr is not a terminal; output that stops
quietly once its reader is gone, and whose lines other processes' writes cannot split."""
import io
import os
import subprocess
import sys
import textwrap

from framework.train.progress import Progress
from train_cli import cli_env


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


def test_output_to_a_closed_pipe_stops_quietly_and_python_exits_cleanly():
    """A run's stderr whose reader went away (EPIPE; a hung-up terminal gives EIO): writes stop, the descriptor
    points at /dev/null, and Python's flush at exit does not fail (which would make the exit code 120)."""
    script = textwrap.dedent("""
        import sys
        from framework.train.progress import Output
        out = Output(sys.stdout)
        for n in range(100_000):
            print("line", n, file=out, flush=True)
        assert out.lost and not out.isatty()
        print("still running", file=sys.stderr)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=cli_env())
    proc.stdout.readline()
    proc.stdout.close()  # the reader goes away
    assert proc.wait(60) == 0, proc.stderr.read()
    assert proc.stderr.read() == b"still running\n"


def test_lines_from_processes_sharing_one_stderr_never_split():
    """A worker's warning and the trainer's message on the same pipe: each Output.line arrives whole."""
    script = textwrap.dedent("""
        import sys
        from framework.train.progress import Output
        out = Output(sys.stderr)
        for _ in range(5000):
            out.line(sys.argv[1] * 150)
    """)
    read_end, write_end = os.pipe()
    writers = [subprocess.Popen([sys.executable, "-c", script, letter], stderr=write_end, env=cli_env())
               for letter in "ab"]
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        lines = pipe.read().splitlines()
    assert [writer.wait(60) for writer in writers] == [0, 0]
    assert sorted(set(lines)) == ["a" * 150, "b" * 150] and len(lines) == 10_000
