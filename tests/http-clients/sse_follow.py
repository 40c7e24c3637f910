"""Follows a run's events with httpx-sse, as any SSE client would: on a dropped connection
it reconnects with Last-Event-ID (waiting for the server to come back), until the `end`
event. Prints a line per entry as it arrives (`entry SEQ`), then a JSON summary.

  sse_follow.py EVENTS_URL [TOKEN]
"""

import json
import sys
import time

import httpx
from httpx_sse import connect_sse


def main() -> None:
    url = sys.argv[1]
    headers = {"Authorization": f"Bearer {sys.argv[2]}"} if len(sys.argv) > 2 else {}
    seqs: list[int] = []
    reconnects = 0
    last_id = None
    ended = None
    deadline = time.monotonic() + 120
    while ended is None and time.monotonic() < deadline:
        h = dict(headers)
        if last_id is not None:
            h["Last-Event-ID"] = last_id
        try:
            with httpx.Client(timeout=httpx.Timeout(5.0, read=60.0)) as client:
                with connect_sse(client, "GET", url, headers=h) as source:
                    source.response.raise_for_status()
                    for event in source.iter_sse():
                        if event.event == "entry":
                            seqs.append(int(event.id))
                            last_id = event.id
                            print(f"entry {event.id}", flush=True)
                        elif event.event == "end":
                            ended = event.data
                            break
        except (httpx.TransportError, httpx.HTTPStatusError):
            pass
        if ended is None:
            reconnects += 1
            time.sleep(0.2)
    print(json.dumps({"seqs": seqs, "reconnects": reconnects, "end": ended}), flush=True)


if __name__ == "__main__":
    main()
