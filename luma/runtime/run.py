"""The old name of :mod:`luma.cli_run` (the command line's run of a program), for code that
still imports it from here."""

from luma.cli_run import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_START,
    RunOptions,
    Target,
    choose_target,
    codegen_inputs,
    describe_error,
    prepare,
    run_checked,
    start_program,
)
from luma.runtime.errors import StartError

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_START", "RunOptions", "StartError", "Target",
           "choose_target", "codegen_inputs", "describe_error", "prepare", "run_checked",
           "start_program"]
