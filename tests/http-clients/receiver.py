"""A webhook receiver for claij serve's tests: every POST is verified with the Standard
Webhooks reference library (standardwebhooks) and logged as a JSON line; the answers
follow a plan.

  receiver.py PORT_FILE LOG_FILE SECRET [--plan 500,503] [--delay SECONDS] [--port N]

PORT_FILE gets the port bound (127.0.0.1; --port, else a free one). Each request is answered with the
next status of --plan, then 204 once the plan is used up, after --delay seconds. Each log
line: {"verified", "error", "id", "timestamp", "traceparent", "payload", "answered"} (written before the
answer is sent).
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook


def main() -> None:
    port_file, log_file, secret = sys.argv[1:4]
    rest = sys.argv[4:]
    plan: list[int] = []
    delay = 0.0
    port = 0
    while rest:
        flag, value, rest = rest[0], rest[1], rest[2:]
        if flag == "--plan":
            plan = [int(s) for s in value.split(",") if s]
        elif flag == "--delay":
            delay = float(value)
        elif flag == "--port":
            port = int(value)
    webhook = Webhook(secret)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                webhook.verify(body, headers)
                verified, error = True, None
            except Exception as e:  # the library's verification error, or any other
                verified, error = False, f"{type(e).__name__}: {e}"
            time.sleep(delay)
            with lock:
                answer = plan.pop(0) if plan else 204
                try:
                    payload = json.loads(body)
                except ValueError:
                    payload = None
                line = {
                    "verified": verified,
                    "error": error,
                    "id": headers.get("webhook-id"),
                    "timestamp": headers.get("webhook-timestamp"),
                    "traceparent": headers.get("traceparent"),
                    "payload": payload,
                    "answered": answer,
                }
                with open(log_file, "a") as log:
                    log.write(json.dumps(line) + "\n")
            self.send_response(answer)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    ThreadingHTTPServer.allow_reuse_address = True
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os

    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
