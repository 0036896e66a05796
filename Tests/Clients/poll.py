"""Polls the dashboard like an open run page refreshed HZ times a second (its two requests each time) until killed.

Prints "polling" once its first round is done, so that a measurement can begin with the polling
rather than with Python starting up.

A browser keeps its connection to the page's server open between polls, so this does too
(one HTTP/1.1 keep-alive connection, opened again only when the server closes it)."""
import http.client
import sys
import time
import urllib.parse

base, hz = sys.argv[1], float(sys.argv[2])
url = urllib.parse.urlsplit(base)
prefix = url.path.rstrip("/")
paths = ["/api/runs/1", "/api/runs/1/attempts"]
connection = None
first = True
while True:
    t = time.time()
    for p in paths:
        try:
            if connection is None:
                connection = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
            connection.request("GET", prefix + p + ("?" + url.query if url.query else ""))
            connection.getresponse().read()
        except Exception:
            if connection is not None:
                connection.close()
            connection = None
    if first:
        print("polling", flush=True)
        first = False
    time.sleep(max(0.0, 1.0 / hz - (time.time() - t)))
