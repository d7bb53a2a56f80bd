"""What the tests of the vLLM server's lifetime (grpo_lambda.launch) share: a free port, whether a process
still runs, and the /health endpoint their fake servers answer in place of `trl vllm-serve`."""

from __future__ import annotations

import os
import socket
from pathlib import Path

# The end of a fake server's script: answer /health on the port in `port` until stopped.
SERVE_HEALTH = """
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass

http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def alive(pid: int) -> bool:
    """Whether the process runs: one that has exited but is not yet reaped by its parent (state Z in
    /proc/PID/stat, the field after the command's closing parenthesis) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    if not stat.exists():
        return True
    return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
