"""Polls the dashboard like an open run page refreshed HZ times a second (its two requests each time) until killed."""
import sys
import time
import urllib.request

base, hz = sys.argv[1], float(sys.argv[2])
paths = ["/api/runs/1", "/api/runs/1/attempts"]
n = 0
while True:
    t = time.time()
    for p in paths:
        try:
            urllib.request.urlopen(base + p, timeout=5).read()
        except Exception:
            pass
    n += 1
    time.sleep(max(0.0, 1.0 / hz - (time.time() - t)))
