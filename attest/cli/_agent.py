"""`attest review agent -- CMD...`: run an agent CLI inside the reviewer's confinement, print its checked result (docs/review-agent.md).

Registered by ``attest.cli._review`` (``review.command("agent", ...)(agent_command)``). Its
standard output is the provider-neutral result and nothing else, which ``attest review exec``
reads: on any failure it prints nothing there, only the reason on standard error.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

import typer

from ..errors import AttestError
from ._app import argument, error_text, flag, option
from ._streams import write_stdout

# The library modules are imported in the command that needs them (each `# lazy`): building the whole app (`attest`
# alone, a usage error, a stale help cache, every in-process main) imports every command module, and would import them
# too: attest.review.agent +0.16 s, over the app's own 60 ms (-X importtime after build_app(), median of 5).


def agent_command(
    command: Optional[list[str]] = argument(None, metavar="CMD...", help="The agent CLI and its arguments (after --). A word "
                                            "{prompt} is replaced by the prompt, a word {prompt_file} by the path of a file "
                                            "in $TMPDIR holding it; with neither, the prompt is its standard input. It must "
                                            "print one findings block (docs/review-agent.md) on standard output."),
    timeout: float = option(900.0, "--timeout", metavar="SECONDS", help="After SECONDS, kill CMD's whole process group: the run "
                            "fails (AGENT_TIMEOUT)."),
    print_prompt: bool = flag("--print-prompt", help="Only print the prompt CMD would get (CMD is not needed and nothing runs)."),
) -> None:
    """Run an agent CLI on the review the confinement gives and print its provider-neutral result (exit 0), or nothing (exit 1, 2)."""
    from ..review.agent import read_inputs, render_prompt, result_json, review_agent  # lazy

    try:
        if print_prompt:
            text = render_prompt(read_inputs(os.environ))
        else:
            text = result_json(review_agent(command or [], environ=os.environ, timeout=timeout)) + "\n"
    except AttestError as err:
        # Not the one handler: it prints --json errors on stdout when any word (CMD's own too) is --json,
        # and this command's stdout is the result that `review exec` reads, or nothing.
        sys.stderr.write(error_text(err))
        raise typer.Exit(err.exit_code) from None
    write_stdout(text.encode("utf-8"))


__all__ = ["agent_command"]
