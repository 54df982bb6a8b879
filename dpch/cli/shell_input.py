"""Line editing for ``dpch shell`` (prompt_toolkit): multi-line statements ended by ``;``,
history persisted per user, Tab completion. Imported only by an interactive shell."""

from __future__ import annotations

import os
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from dpch.cli.completion import Schema, SqlCompleter

HISTORY_ENV = "DPCH_HISTORY"
PROMPT = "dpch> "
CONTINUATION = "   -> "


def history_path() -> Path:
    """``$DPCH_HISTORY``, else ``$XDG_STATE_HOME/dpch/history`` (``~/.local/state/dpch/history``)."""
    if os.environ.get(HISTORY_ENV):
        return Path(os.environ[HISTORY_ENV])
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "dpch" / "history"


def statement_complete(text: str) -> bool:
    """Whether Enter should submit ``text``: a backslash command or quit word, an empty line,
    or SQL whose last character outside quotes and comments is ``;``."""
    stripped = text.strip()
    if not stripped or stripped.startswith("\\") or stripped.lower() in ("quit", "exit"):
        return True
    quote, last = "", ""
    for line in text.splitlines():
        i = 0
        while i < len(line):
            ch = line[i]
            if quote:
                if ch == quote:
                    quote = ""
                last = ch
            elif line.startswith("--", i):
                break  # a comment runs to the end of the line
            elif ch in "'\"`":
                quote = last = ch
            elif not ch.isspace():
                last = ch
            i += 1
    return not quote and last == ";"


def _bindings() -> KeyBindings:
    kb = KeyBindings()

    @kb.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.complete_state is not None:  # Enter picks the highlighted completion
            buffer.complete_state = None
            return
        if statement_complete(buffer.text):
            buffer.validate_and_handle()
        else:
            buffer.insert_text("\n")

    return kb


def make_prompt(schema: Schema) -> PromptSession:
    """A prompt session with the shell's key bindings, completer and persisted history."""
    path = history_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.touch(mode=0o600, exist_ok=True)  # queries may hold literals: readable by the user only
        history: FileHistory | None = FileHistory(str(path))
    except OSError:
        history = None  # an unwritable home does not stop the shell; history is kept in memory
    return PromptSession(
        history=history,
        completer=SqlCompleter(schema),
        complete_while_typing=False,
        multiline=True,
        key_bindings=_bindings(),
        prompt_continuation=lambda width, line_number, soft_wrap: CONTINUATION.rjust(width),
        enable_history_search=False,
    )
