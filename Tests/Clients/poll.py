"""Polls the dashboard's API like an open page at HZ requests per second until killed (urllib, keep-alive free)."""
import sys
import time
import urllib.request

base, hz = sys.argv[1], float(sys.argv[2])
paths = ["/api/farm", "/api/runs?limit=200", "/api/workers", "/api/runs/1", "/api/runs/1/attempts"]
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
