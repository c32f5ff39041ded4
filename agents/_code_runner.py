"""Running a program for real: autogen-ext's local command-line executor in a fresh temporary directory.

Each run gets its own directory, deleted afterwards, and a timeout. The executor is asked to run a
tiny shell script that starts the interpreter on the program with stderr sent to a file, because the
executor itself returns stderr and stdout mixed in one string, and a Reviewer needs them apart.
The temporary directory's path is taken out of what the program prints, so tracebacks read
`File "solution.py"` on every run (traces stay reproducible). Variables holding
model API keys are removed from its environment: generated code has no business with them.

This is a working directory, not a sandbox: the program runs as the current user. Run the Executor in
a container or a throwaway VM when the code comes from a model you do not control.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock

from protocols.reflection import clip_output

__all__ = ["DEFAULT_TIMEOUT", "SECRET_VARIABLES", "RunOutcome", "run_program"]

#: Seconds a program may run. Generated solutions to small tasks finish in well under a second; an
#: endless loop must not hold the Executor's mailbox for longer than this.
DEFAULT_TIMEOUT = 30
#: Environment variables unset before the program starts.
SECRET_VARIABLES = ("AUN_MODEL_API_KEY", "OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "ANTHROPIC_API_KEY")

_TIMEOUT_EXIT = 124  # what the executor reports for a timeout
_STDERR_FILE = ".stderr"
_PROGRAMS = {
    "python": (shlex.quote(sys.executable) + " -B", "solution.py"),
    "sh": ("sh", "solution.sh"),
    "bash": ("bash", "solution.sh"),
}


@dataclass(frozen=True)
class RunOutcome:
    """What a run did."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool


async def run_program(code: str, language: str, *, timeout: int = DEFAULT_TIMEOUT) -> RunOutcome:
    """Run `code` in a fresh temporary directory and report exit code, stdout and stderr (clipped).

    An unsupported language is reported as a failed run (exit code 127) rather than raised, so that the
    Reviewer sees it like any other failure.
    """
    if language not in _PROGRAMS:
        return RunOutcome(127, "", f"cannot run {language!r}: supported are {', '.join(_PROGRAMS)}", False)
    # Imported here: the executor module is not needed by anything that does not run code.
    from autogen_ext.code_executors.local import LocalCommandLineCodeExecutor

    interpreter, filename = _PROGRAMS[language]
    with tempfile.TemporaryDirectory(prefix="aun-run-") as work:
        work_dir = Path(work)
        (work_dir / filename).write_text(code, encoding="utf-8")
        script = f"unset {' '.join(SECRET_VARIABLES)}\nexec {interpreter} {filename} 2> {_STDERR_FILE}\n"
        with warnings.catch_warnings():
            # It warns that local execution is unsafe on every construction; the module docstring
            # says so once, where it matters.
            warnings.simplefilter("ignore", UserWarning)
            executor = LocalCommandLineCodeExecutor(work_dir=work_dir, timeout=timeout)
        result = await executor.execute_code_blocks(
            [CodeBlock(code=script, language="sh")], CancellationToken()
        )
        stderr_path = work_dir / _STDERR_FILE
        stderr = stderr_path.read_text(encoding="utf-8", errors="replace") if stderr_path.exists() else ""
        output = _relative(result.output, work_dir)
        stderr = _relative(stderr, work_dir)
    timed_out = result.exit_code == _TIMEOUT_EXIT and output.endswith("\nTimeout")
    if timed_out:
        output = output[: -len("\nTimeout")]
        stderr += f"\n(stopped after the {timeout} s time limit)"
    return RunOutcome(result.exit_code, clip_output(output), clip_output(stderr.strip("\n")), timed_out)


def _relative(text: str, work_dir: Path) -> str:
    for prefix in {str(work_dir.resolve()) + "/", str(work_dir) + "/"}:
        text = text.replace(prefix, "")
    return text
