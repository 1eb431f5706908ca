"""Tools: plain functions become model tools, a tool batch runs, and the built-in tools.

A tool's schema comes from its signature (pydantic, which also validates the model's
arguments) and its docstring (``docstring-parser``). A failing tool or a refusal is an
error result, never a crash: only ``KeyboardInterrupt`` interrupts the turn. The built-in
``run_python`` and ``remember`` follow the approval policy; the variable and notebook
tools send what ``context_privacy`` allows.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import inspect
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import docstring_parser
import pydantic
from IPython import get_ipython
from IPython.core.error import StdinNotImplementedError

from jupyter_agent import notebook
from jupyter_agent.agent.config import ApprovalPolicy
from jupyter_agent.agent.conversation import Conversation
from jupyter_agent.agent.events import (
    ApprovalAnswered,
    EventCallback,
    Notice,
    ToolCallEnd,
    ToolCallStart,
    ignore_event,
)
from jupyter_agent.agent.pyexec import (
    ApprovalInterrupted,
    FigureKeeper,
    ToolInterrupted,
    format_outcome,
)
from jupyter_agent.agent.working_context import synthetic_result
from jupyter_agent.store import SessionState, TodoItem, to_message_dict
from jupyter_agent.store.messages import clean_text
from jupyter_agent.store.records import TodoStatus
from jupyter_agent.text import shorten, truncate


class ToolError(Exception):
    """Raised by a tool to report a failure as a plain message (no traceback)."""


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one tool call: the text the model sees, whether it worked, and the
    references of the figures it made (a tool returns one to report figures)."""

    text: str
    ok: bool
    figures: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    func: Callable[..., Any]
    args_model: type[pydantic.BaseModel]

    def schema(self) -> dict[str, Any]:
        """The Chat Completions ``tools`` entry for this tool."""
        parameters = self.args_model.model_json_schema()
        parameters.pop("title", None)
        for prop in parameters.get("properties", {}).values():
            prop.pop("title", None)
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": parameters}}

    def invoke(self, arguments: str) -> ToolResult:
        """Call the function with the model's JSON ``arguments``; only Ctrl-C propagates."""
        try:  # not JSON, not an object or nested too deeply: a ValidationError too
            parsed = self.args_model.model_validate_json(arguments or "{}")
        except pydantic.ValidationError as exc:
            errors = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(arguments)'}: {e['msg']}"
                               for e in exc.errors())
            return ToolResult(f"error: invalid arguments for {self.name}: {errors}", ok=False)
        try:
            value = self.func(**{name: getattr(parsed, name) for name in type(parsed).model_fields})
            return value if isinstance(value, ToolResult) else ToolResult(str(value), ok=True)
        except ToolError as exc:
            return ToolResult(f"error: {exc}", ok=False)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit, CancelledError, ...: the tool failed
            return ToolResult(f"error: {type(exc).__name__}: {exc}", ok=False)


def tool_from_function(func: Callable[..., Any]) -> Tool:
    """Build a :class:`Tool` from a function's signature and docstring; TypeError for a
    name not 1-64 of ``[A-Za-z0-9_-]``, ``*args``/``**kwargs`` or an unannotated parameter."""
    name = str(getattr(func, "__name__", ""))
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
        raise TypeError(f"tool name {name!r} must be 1-64 letters, digits, '_' or '-'")
    doc = docstring_parser.parse(func.__doc__ or "")  # numpydoc or Google style
    described = {p.arg_name: " ".join((p.description or "").split()) for p in doc.params}
    hints = typing.get_type_hints(func)
    fields: dict[str, Any] = {}
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {name!r}: *args/**kwargs are not supported")
        if param.name not in hints:
            raise TypeError(f"tool {name!r}: parameter {param.name!r} needs a type annotation")
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hints[param.name], pydantic.Field(
            default, description=described.get(param.name) or None))
    model = pydantic.create_model(f"{name}_arguments",
                                  __config__=pydantic.ConfigDict(extra="forbid"), **fields)
    return Tool(name, (doc.description or "").strip() or f"Call {name}.", func, model)


def short_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions tool schema with a one-sentence description and no parameter
    descriptions (the names, types and required fields stay)."""
    function, parameters = schema["function"], schema["function"]["parameters"]
    first = function["description"].strip().split("\n\n", 1)[0].replace("\n", " ")
    end = first.find(". ")
    properties = {name: {k: v for k, v in prop.items() if k != "description"}
                  for name, prop in parameters["properties"].items()}
    description = first[:end + 1] if end >= 0 else first
    return {**schema, "function": {**function, "description": description,
                                   "parameters": {**parameters, "properties": properties}}}


DECLINED_BY_INTERRUPT = ("error: refused: the user pressed Ctrl-C at the approval question "
                         "(declined); the code did not run")


def describe_stop(exc: BaseException) -> str:
    """How a turn was stopped, for synthetic results and markers."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted by the user"
    return f"stopped by an error ({exc})" if str(exc) else "stopped by an unexpected error"


def run_batch(calls: list[dict[str, Any]], tools: Mapping[str, Tool], state: SessionState,
              results: list[dict[str, Any]], *, emit: EventCallback, max_output_chars: int,
              asks: Callable[[str], bool]) -> None:
    """Run every call, counting each in ``state.tool_calls`` as it starts, its ``tool``
    message appended to ``results`` (caller-owned, so they survive an interrupt). When
    interrupted, every call without a result is answered first, in call order."""
    running = None
    try:
        for call in calls:
            call_id, function = call["id"], call.get("function") or {}
            name, arguments = str(function.get("name", "")), str(function.get("arguments", ""))
            emit(ToolCallStart(call_id, name, arguments, asks=asks(name)))
            running = call_id
            state.tool_calls += 1
            tool = tools.get(name)
            try:
                outcome = tool.invoke(arguments) if tool is not None else ToolResult(
                    f"error: there is no tool named {name!r}; available: {', '.join(tools)}",
                    False)
            except (ApprovalInterrupted, ToolInterrupted) as exc:
                if isinstance(exc, ApprovalInterrupted):  # declined at the question: never ran
                    kept = {"role": "tool", "tool_call_id": call_id,
                            "content": DECLINED_BY_INTERRUPT}
                elif exc.output:  # keep what it printed: on screen and for the model
                    kept = synthetic_result(call_id, "interrupted by the user while this tool "
                                            "call was running; it had printed:\n"
                                            f"{truncate(exc.output, max_output_chars)}")
                else:
                    raise
                results.append(to_message_dict(kept))
                running = None
                with contextlib.suppress(Exception):  # the interrupt is what propagates
                    emit(ToolCallEnd(call_id, name, results[-1]["content"], False))
                raise
            result: dict[str, Any] = {"role": "tool", "tool_call_id": call_id,
                                      "content": truncate(outcome.text, max_output_chars)}
            if outcome.figures:  # references of the figures it made
                result["figures"] = list(outcome.figures)
            results.append(to_message_dict(result))
            running = None
            emit(ToolCallEnd(call_id, name, results[-1]["content"], outcome.ok))
    except BaseException as exc:
        how, answered = describe_stop(exc), {r["tool_call_id"] for r in results}
        results.extend(synthetic_result(call["id"], (
            f"{how} while this tool call was running" if call["id"] == running
            else f"not executed: the tool batch was {how}"))
            for call in calls if call["id"] not in answered)
        raise


BUILTIN_TOOL_NAMES = (
    "run_python", "list_variables", "describe_variable", "notebook_cells", "notebook_cell",
    "last_error", "read_scratchpad", "write_scratchpad", "add_todo", "update_todo",
    "list_todos", "write_summary", "remember",
)
# A small window is offered only these of them (and the user's tools).
SMALL_WINDOW_TOOLS = ("run_python", "list_variables", "describe_variable")

NO_STDIN_REFUSAL = ("refused: the approval policy is 'ask' but there is no stdin to ask the "
                    "user on (headless run). The user can allow code with "
                    '`%config AgentMagics.approve = "auto"` or `--approve auto`.')
PRIVACY_REFUSAL = ("refused: context_privacy is 'none': nothing from the kernel is sent to "
                   "the model (the user can change it with %config AgentMagics.context_privacy)")
# Each question: (intro, question, refusal under "deny", refusal when the user declines).
RUN_QUESTION = ("The agent asks to run this code", "Run this code? [y/N] ",
                "refused: running code is disabled by the approval policy ('deny').",
                "refused: the user declined to run this code.")
VALUES_QUESTION = ("The agent asks to send these values to the model (context_privacy is "
                   "'schema')", "Send them? [y/N] ",
                   "refused: context_privacy is 'schema' and the approval policy is 'deny': "
                   "values are not sent; ask the user to paste what you need.",
                   "refused: the user declined to send these values.")
NOTE_QUESTION = ("The agent asks to add this line to {file}, read by every later session",
                 "Save this note? [y/N] ", "refused: writing notes is disabled by the approval "
                 "policy ('deny'); the user can add it to {file} themselves.",
                 "refused: the user declined to save this note.")

ShowQuestion = Callable[[str, str], object]


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e"
                      "\u2060-\u206f\ufeff\ufff9-\ufffb]")


def visible_controls(text: str) -> str:
    """``text`` with every control character except newline and tab shown as an escape
    (``\\x1b``, ``\\r``, ``\\u202e``): nothing in it can move the cursor, erase a line,
    reorder what is shown (bidirectional overrides) or hide itself (zero-width)."""
    return _CONTROL.sub(lambda match: match.group().encode("unicode_escape").decode(), text)


def question_text(intro: str, text: str) -> str:
    """An approval question as plain text: ``intro (N lines, M characters):`` then the
    whole ``text``, indented, its control characters made visible (:func:`visible_controls`).
    """
    body = visible_controls(text.rstrip("\n")).split("\n")
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    size = (f"{lines:,} line{'s' if lines != 1 else ''}, "
            f"{len(text):,} character{'s' if len(text) != 1 else ''}")
    return f"{intro} ({size}):\n" + "\n".join("    " + line for line in body)


def ask_on_stdin(code: str, *, show: ShowQuestion | None = None,
                 question: tuple[str, ...] = RUN_QUESTION) -> bool:
    """Show ``code`` whole and ask ``question``; ``EOFError`` when stdin cannot be asked."""
    if not notebook.can_ask(get_ipython()):
        raise EOFError("no usable stdin to ask the user on")
    if show is None:
        print(question_text(question[0], code), flush=True)
    else:
        show(question[0], code)
    return builtins.input(question[1]).strip().lower() in ("y", "yes")


class BuiltinTools:
    """The built-in tools over one kernel (``shell``; ``None``: the running IPython, or a
    private namespace without one); under ``approval`` "ask" a call is put to ``ask``."""

    def __init__(self, get_state: Callable[[], SessionState], *, shell: Any = None,
                 approval: ApprovalPolicy = "ask", ask: Callable[[str], bool] | None = None,
                 show_question: ShowQuestion | None = None, privacy: notebook.Privacy = "schema",
                 cells: notebook.CellLog | None = None) -> None:
        self._get_state, self.shell, self._cells = get_state, shell, cells
        self.privacy: notebook.Privacy = privacy
        self.approval: ApprovalPolicy = approval
        self.show_question = show_question
        self.ask = ask or functools.partial(ask_on_stdin, show=show_question)
        self.conversation: Conversation | None = None  # where summaries and notes go
        self.emit: EventCallback = ignore_event
        self._private_ns: dict[str, Any] = {"__name__": "__main__"}
        self.figures = FigureKeeper(get_state)

    def tools(self) -> list[Tool]:
        """The built-in tools, in :data:`BUILTIN_TOOL_NAMES` order."""
        return [replace(tool, func=getattr(self, tool.name)) for tool in _builtin_tools()]

    def namespace(self) -> dict[str, Any]:
        """The shell's ``user_ns`` (without a shell, a private namespace)."""
        shell = self._shell()
        return self._private_ns if shell is None else shell.user_ns

    def _shell(self) -> Any:
        return self.shell if self.shell is not None else get_ipython()

    def will_ask(self, name: str) -> bool:
        """Whether a call of tool ``name`` will wait for the user's answer now (the
        policy is "ask", the tool needs approval, and stdin can be asked on)."""
        return (name in ("run_python", "remember") and self.approval == "ask"
                and notebook.can_ask(get_ipython()))

    def _decide(self, name: str, text: str, question: tuple[str, ...]) -> None:
        """Raise the refusal as a ToolError unless the call is allowed (asked under "ask")."""
        if self.approval == "auto":
            return
        refusal, declined = question[2:]
        if self.approval == "ask":
            try:
                approved = (self.ask(text) if question is RUN_QUESTION else
                            ask_on_stdin(text, show=self.show_question, question=question))
            except KeyboardInterrupt:
                self._get_state().tool_calls -= 1  # declined before anything ran
                raise ApprovalInterrupted() from None
            except (EOFError, StdinNotImplementedError, OSError, RuntimeError, ValueError):
                # no usable stdin (headless, closed, lost): refuse, never error or hang
                approved, declined = False, NO_STDIN_REFUSAL
            else:
                self.emit(ApprovalAnswered(approved))
            if approved:
                return
            refusal = declined
        self._get_state().tool_calls -= 1  # a refused call never ran: it does not count
        self.emit(Notice(f"{name} {refusal}"))
        raise ToolError(refusal)

    def run_python(self, code: str) -> ToolResult:
        """Run Python code in the user's IPython kernel namespace and return its output.

        ``code`` runs like a notebook cell; variables persist and are shared with the user's
        notebook. Returns stdout, stderr, the repr of a final expression and any exception;
        long output is cut. Figures are shown to the user and named, e.g. [figure 1: PNG,
        640×480 px, ...].
        """
        self._decide("run_python", code, RUN_QUESTION)
        outcome, figures = self.figures.run(self._shell(), code, self.namespace())
        ok = outcome.error is None
        return ToolResult(("" if ok else "error: ") + format_outcome(outcome), ok, figures)

    @property
    def cells(self) -> notebook.CellLog:
        """The user's cells (without a given log, errors come from ``sys.last_value``)."""
        if self._cells is None:
            self._cells = notebook.CellLog(self._shell())
        elif self._cells.shell is None:
            self._cells.shell = self._shell()
        return self._cells

    def _check_privacy(self) -> None:
        if self.privacy == "none":
            raise ToolError(PRIVACY_REFUSAL)

    def _values(self, name: str, text: str, values: bool) -> str:
        if values and self.privacy == "schema":
            self._decide(name, text, VALUES_QUESTION)
        return text

    def list_variables(self) -> str:
        """List the user's kernel variables: name, type and shape (and a short preview
        under context_privacy="preview")."""
        self._check_privacy()
        out = []
        for name, value in notebook.visible_namespace(self.namespace(), self._shell()).items():
            head = f"{name}: {type(value).__name__}"
            shape = getattr(value, "shape", None)
            if isinstance(shape, tuple):
                out.append(f"{head}, shape={shape}")
            elif self.privacy == "preview":
                preview = " ".join(notebook.preview_text(value).split())
                out.append(f"{head} = {shorten(preview, 100)}")
            else:
                out.append(", ".join([head, *notebook.brief_schema(value)[1:2]]))
        return "\n".join(out) or "(no user variables)"

    def describe_variable(self, name: str, values: bool = False) -> str:
        """Describe one variable: type, shape, dtypes, columns, row count, memory.

        ``name`` is its name in the kernel namespace; with ``values``, its first rows or
        repr are sent too (the user is asked unless allowed).
        """
        self._check_privacy()
        ns = self.namespace()
        if name not in ns:
            raise ToolError(f"no variable named {name!r}")
        return self._values("describe_variable", notebook.describe_value(
            name, ns[name], self.privacy, values=values), values)

    def notebook_cells(self, last: int = 10, values: bool = False) -> str:
        """The cells the user ran in this kernel, oldest first: each input with its
        execution count, its output (type and shape) and its error if it failed.

        ``last``: how many of the latest cells; with ``values``, the outputs' values are
        sent too (the user is asked unless allowed).
        """
        self._check_privacy()
        count = len(self.cells.inputs())
        return self._values("notebook_cells", "\n\n".join(
            notebook.format_cell(self.cells, n, self.privacy, values=values,
                                 input_chars=notebook.CELL_CHARS)
            for n in range(max(1, count - max(1, min(last, 200))), count)
        ) or "(no cells have run in this kernel)", values)

    def notebook_cell(self, n: int, values: bool = False) -> str:
        """One cell the user ran: In [n], its output and its error if it failed.

        ``n`` is the execution count shown in the notebook, e.g. 12 for In [12]; with
        ``values``, the output's value is sent too (the user is asked unless allowed).
        """
        self._check_privacy()
        try:
            text = notebook.format_cell(self.cells, n, self.privacy, values=values)
        except KeyError:
            raise ToolError(f"no cell In [{n}] in this kernel") from None
        return self._values("notebook_cell", text, values)

    def last_error(self) -> str:
        """The traceback of the last cell of the user's that failed, with its number."""
        self._check_privacy()
        return self.cells.last_error() or "(no cell has failed in this kernel)"

    def read_scratchpad(self) -> str:
        """Read the session's scratchpad (your working notes for this session)."""
        return self._get_state().scratchpad or "(the scratchpad is empty)"

    def write_scratchpad(self, text: str, append: bool = False) -> str:
        """Replace the session's scratchpad with ``text`` (``append``: add it on a new line)."""
        state = self._get_state()
        state.scratchpad = (state.scratchpad.rstrip("\n") + "\n" + text
                            if append and state.scratchpad else text)
        return f"scratchpad saved ({len(state.scratchpad):,} characters)"

    def add_todo(self, text: str) -> str:
        """Add a "pending" item to the session's todo list; ``text`` says what needs doing."""
        todos = self._get_state().todos
        todos.append(TodoItem(id=max((t.id for t in todos), default=0) + 1, text=text))
        return f"added todo #{todos[-1].id}"

    def update_todo(self, id: int, status: TodoStatus) -> str:
        """Set the ``status`` of todo item ``id`` (its number in list_todos); moving it to
        "failed" counts one more retry."""
        todos = self._get_state().todos
        for index, item in enumerate(todos):
            if item.id == id:
                retries = item.retries + (1 if status == "failed" else 0)
                todos[index] = item.model_copy(update={"status": status, "retries": retries})
                return f"todo #{id} is now {status} (retries: {retries})"
        raise ToolError(f"no todo #{id}")

    def list_todos(self) -> str:
        """List the session's todo items with their status and retry counts."""
        return "\n".join(f"#{t.id} [{t.status}] {t.text} (retries: {t.retries})"
                         for t in self._get_state().todos) or "(no todos)"

    def write_summary(self, goal: str, completed: str, decisions: str, remaining: str) -> str:
        """Write the session's summary, shown when the user lists sessions to resume: what
        the user wants to achieve in this session (``goal``), the work ``completed`` so far,
        important ``decisions`` and their reasons, and what is ``remaining`` to do."""
        conversation = self.conversation
        if conversation is None or conversation.store is None:
            raise ToolError("no session store: the summary cannot be saved")
        conversation.update(summary=f"Goal: {goal.strip()}\nCompleted: {completed.strip()}\n"
                            f"Decisions: {decisions.strip()}\nRemaining: {remaining.strip()}")
        conversation.has_summary = True
        return "summary saved"

    def remember(self, note: str, kind: Literal["project", "user"] = "project") -> str:
        """Remember a note for future sessions (it goes into their system prompt).

        ``note``: one fact, convention or preference worth keeping; ``kind``: "project" for
        facts about this project (project.md), "user" for the user's preferences (user.md).
        """
        store, file = self.conversation.store if self.conversation else None, f"{kind}.md"
        if store is None:
            raise ToolError("no memory store: the note cannot be saved")
        line = "- " + " ".join(clean_text(note).split())  # exactly what Notes.append writes
        self._decide("remember", line, tuple(part.format(file=file) for part in NOTE_QUESTION))
        store.notes.append(kind, note)
        return f"noted in {file}"


@functools.cache
def _builtin_tools() -> tuple[Tool, ...]:  # once a process: their schemas cost ~6 ms
    probe = BuiltinTools(SessionState)
    return tuple(tool_from_function(getattr(probe, name)) for name in BUILTIN_TOOL_NAMES)
