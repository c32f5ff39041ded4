"""``aun-runtime demo`` runs the autonomous scene, the reflection team, the observer chat and a
model-backed agent offline."""

from __future__ import annotations

import os
import subprocess
import sys


def test_the_demo_prints_all_four_scenes_offline() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUN_MODEL")}
    done = subprocess.run(
        [sys.executable, "-m", "aun_runtime", "demo"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "twice.local -> app.local [re #2]: 'I heard: Can you hear me?'" in out  # two replies
    assert "(mention mode: not mentioned; archived)" in out
    assert "round 1 of fib ran: exit 0, stdout '1 1 2 3 5 8 13 21 34 55'" in out  # really executed
    assert "'task fib approved after 2 round(s)'" in out
    assert "ops.local -> #standup" in out and "someone just made that point" in out
    # The model-backed agent: two replies, a thought instead of a reply, and its tool use shown.
    assert "#26 helper.local -> alice.local [re #24]: 'If Dana does not answer" in out
    assert "(helper.local thinks: 'alice.local is telling me something, not asking" in out
    assert "helper.local -> alice.local [re #28]: <tool_call calculate(expression='3 * 120 * 1.2')>" in out
    assert "helper.local -> alice.local [re #28]: <tool_result 432>" in out
    assert "'You need 432 GB of disk in all.'" in out
    assert "0 dead letters · 0 loop stops · 0 budget stops" in out


def test_the_demo_explains_its_transcript_before_it() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUN_MODEL")}
    done = subprocess.run(
        [sys.executable, "-m", "aun_runtime", "demo"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    legend, transcript = out.split("\n#1 ", 1)  # the legend comes before the first message
    assert "#lobby, #standup  a group" in legend
    for mark in ("[re #N]", "thinks", "filtered for", "!! DEAD LETTER", "!! BUDGET STOP", "!! LOOP GUARD"):
        assert mark in legend, mark
    # Each scene is named with the message it starts at, and that message opens it in the transcript.
    assert "1. Autonomous semantics: " in legend and "(from #1)" in legend
    assert "2. A reflection team: Coder, Executor and Reviewer" in legend and "(from #10)" in legend
    assert "3. Observers in a group chat" in legend and "(from #17)" in legend
    assert "4. A model-backed agent" in legend and "(from #24)" in legend
    assert "\n#10 app.local -> coder.local [new conversation]: 'coding task fib" in transcript
    assert "\n#17 alice.local -> #standup [new conversation]" in transcript
    assert "\n#24 alice.local -> helper.local [new conversation]" in transcript
