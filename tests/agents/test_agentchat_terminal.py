"""A `UserProxyAgent` left with agentchat's default input is a person at the terminal: a real process,
its standard input fed by the test as a person types."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Seconds the person has for each question: long enough that the test's answers, typed as soon as a
#: prompt shows, are in time on a loaded machine; the second question is left unanswered for it.
INPUT_TIMEOUT = 5
#: Seconds the test waits for any one thing the program prints (it fails rather than hang).
WAIT = 60


class Screen:
    """What the program has printed so far, read as it comes."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        self._out = process.stdout
        self.text = ""
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while chunk := os.read(self._out.fileno(), 4096):
            with self._changed:
                self.text += chunk.decode()
                self._changed.notify_all()

    def wait_for(self, text: str, *, after: int = 0) -> int:
        """Wait until `text` is on the screen past position `after`; where it ends."""
        with self._changed:
            if not self._changed.wait_for(lambda: text in self.text[after:], timeout=WAIT):
                raise AssertionError(f"never printed {text!r}; the screen:\n{self.text}")
            return self.text.index(text, after) + len(text)


def test_a_person_answers_at_the_terminal_and_a_late_line_answers_the_next_question() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.agents.agentchat_terminal", str(INPUT_TIMEOUT)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdin is not None
    try:
        screen = Screen(process)
        # The person sees who asked what, then agentchat's prompt, and types an answer.
        at = screen.wait_for("ops.local: Deploy now?\nEnter your response: ")
        process.stdin.write(b"yes, deploy\n")
        process.stdin.flush()
        at = screen.wait_for("[ops.local was told ['yes, deploy']]", after=at)

        # Nobody answers the second question in time: silence, and the program goes on.
        at = screen.wait_for("ops.local: Tag the release?\nEnter your response: ", after=at)
        at = screen.wait_for(f"(no answer within {INPUT_TIMEOUT} s: said nothing)", after=at)
        at = screen.wait_for("[ops.local was told ['yes, deploy']]", after=at)

        # A line typed after that wait was given up on is not lost: it answers the next question.
        process.stdin.write(b"v1.2 is tagged\n")
        process.stdin.flush()
        at = screen.wait_for("ops.local: Close the ticket?\nEnter your response: ", after=at)
        at = screen.wait_for("[ops.local was told ['yes, deploy', 'v1.2 is tagged']]", after=at)

        # The last question goes unanswered, and the program ends while its read of standard input
        # is still waiting for a line: nothing holds the program's end.
        at = screen.wait_for("ops.local: Anything else?\nEnter your response: ", after=at)
        at = screen.wait_for(f"(no answer within {INPUT_TIMEOUT} s: said nothing)", after=at)
        screen.wait_for("[done]", after=at)
        assert process.wait(timeout=WAIT) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        process.stdin.close()
