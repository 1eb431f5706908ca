"""Drive a real Jupyter kernel from a test: start it, run cells, collect what they show.

:class:`RealKernel` wraps a ``jupyter_client.KernelManager`` and its blocking client.
:meth:`RealKernel.run` executes one cell and returns a :class:`CellOutput` with the
cell's stdout, stderr, rich displays (``update_display_data`` applied by ``display_id``,
as a Jupyter front end does) and its error, if any. Every message is matched to the cell
by its parent ``msg_id`` (iopub and the shell reply alike), never by arrival order.
Nothing here knows about jupyter-agent.
"""

from __future__ import annotations

import os
import queue
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client import KernelManager

__all__ = ["CellOutput", "KernelCellError", "RealKernel", "kernel_env"]

#: Environment variables a test kernel must not inherit from the test process.
_SCRUBBED = ("JUPYTER_AGENT_MEMORY_DIR", "OPENAI_API_KEY", "OPENAI_BASE_URL")


def kernel_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without the agent's variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env.update(extra or {})
    return env


class KernelCellError(AssertionError):
    """A cell that was expected to succeed raised an error in the kernel."""


@dataclass
class CellOutput:
    """What one executed cell produced.

    Attributes
    ----------
    stdout, stderr : str
        The cell's streams, concatenated.
    displays : list of dict
        The ``data`` bundle of each ``display_data`` / ``execute_result``, in order.
    error : dict or None
        ``{"ename", "evalue", "traceback"}`` when the cell raised (from the ``error``
        message, else from the ``execute_reply``: IPython reports a ``UsageError`` as a
        line on stderr and an error reply, without an ``error`` message).
    payloads : list of dict
        The ``execute_reply``'s payloads (e.g. ``set_next_input``: a new cell for the
        front end).
    """

    stdout: str = ""
    stderr: str = ""
    displays: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    payloads: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        """stdout plus the Markdown (else plain text) of every display."""
        parts = [self.stdout]
        for data in self.displays:
            parts.append(str(data.get("text/markdown", data.get("text/plain", ""))))
        return "\n".join(p for p in parts if p)

    def ok(self) -> CellOutput:
        """Return self, or raise :class:`KernelCellError` if the cell raised."""
        if self.error is not None:
            raise KernelCellError(
                f"{self.error['ename']}: {self.error['evalue']}\nstdout:\n{self.stdout}"
            )
        return self


class RealKernel:
    """A ``python3`` kernel in its own process, started in ``cwd`` with ``env``.

    Parameters
    ----------
    cwd : path
        The kernel's working directory.
    env : mapping
        Its whole environment (see :func:`kernel_env`).
    timeout : float
        Seconds to wait for the kernel to start and for each cell.
    """

    def __init__(self, cwd: str | os.PathLike[str], env: Mapping[str, str], *,
                 timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.manager = KernelManager(kernel_name="python3")
        self.manager.start_kernel(cwd=str(Path(cwd)), env=dict(env))
        self.client: Any = None
        self._connect()

    def _connect(self) -> None:
        if self.client is not None:
            self.client.stop_channels()
        self.client = self.manager.blocking_client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=self.timeout)

    def run(self, code: str) -> CellOutput:
        """Execute ``code`` as a cell and return everything it output (errors included)."""
        msg_id = self.client.execute(code, allow_stdin=False, store_history=True)
        out = CellOutput()
        by_display_id: dict[str, int] = {}
        deadline = time.monotonic() + self.timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"cell did not finish within {self.timeout} s:\n{code}")
            try:
                msg = self.client.get_iopub_msg(timeout=remaining)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            display_id = (content.get("transient") or {}).get("display_id")
            if kind == "status" and content["execution_state"] == "idle":
                break
            if kind == "stream":
                if content["name"] == "stdout":
                    out.stdout += content["text"]
                else:
                    out.stderr += content["text"]
            elif kind in ("display_data", "execute_result"):
                if display_id is not None:
                    by_display_id[display_id] = len(out.displays)
                out.displays.append(dict(content["data"]))
            elif kind == "update_display_data" and display_id in by_display_id:
                out.displays[by_display_id[display_id]] = dict(content["data"])
            elif kind == "error":
                out.error = {k: content[k] for k in ("ename", "evalue", "traceback")}
        reply = self._reply_to(msg_id, deadline)
        out.payloads = list(reply.get("payload") or [])
        if reply["status"] == "error" and out.error is None:
            # e.g. a magic's one-line error: printed to stderr, no "error" message
            out.error = {k: reply.get(k, "") for k in ("ename", "evalue", "traceback")}
        return out

    def _reply_to(self, msg_id: str, deadline: float) -> dict[str, Any]:
        """The content of the shell reply whose parent is ``msg_id``.

        Other replies are dropped: ``wait_for_ready`` (after a start or a restart) may
        send several ``kernel_info_request`` and leave their replies queued.
        """
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no shell reply to {msg_id} within {self.timeout} s")
            try:
                msg = self.client.get_shell_msg(timeout=remaining)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                content: dict[str, Any] = msg["content"]
                return content

    def pid(self) -> int:
        """The kernel process's pid, as the kernel itself reports it."""
        return int(self.run("import os; print(os.getpid())").ok().stdout)

    def restart(self) -> None:
        """Restart the kernel now (the process is killed; a new one starts)."""
        self.manager.restart_kernel(now=True)
        self._connect()

    def is_alive(self) -> bool:
        """Whether the kernel process is running."""
        return bool(self.manager.is_alive())

    def shutdown(self) -> None:
        """Stop the client and the kernel (also fine after the kernel was killed)."""
        if self.client is not None:
            self.client.stop_channels()
        if self.manager.has_kernel:
            self.manager.shutdown_kernel(now=True)
        self.manager.cleanup_resources()
