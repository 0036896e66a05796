"""Drives Debian's Chromium headless through the DevTools protocol (websocket-client from PyPI).

Used by the dashboard tests: each scenario prints one JSON object of what the browser saw.

    python cdp.py live-run BASE RUN_ID OUT_DIR       watch a run page during a render until it ends
    python cdp.py farm BASE OUT_DIR                  the farm page once
    python cdp.py failed-run BASE RUN_ID OUT_DIR     a failed run's page: its error text
    python cdp.py gantt-time BASE RUN_ID OUT_DIR     seconds from navigation until the Gantt holds every attempt,
                                                     from the farm page and as a fresh browser's first page
    python cdp.py resumed-gantt BASE RUN_ID OUT_DIR  a run resumed 40 minutes after it stopped: its chart
    python cdp.py restart BASE OUT_DIR               the farm page while its server stops and starts again
    python cdp.py running-bars BASE RUN_ID OUT_DIR OFFSET_S
                                                     a running run's page in a browser whose clock is OFFSET_S off
"""
import base64
import ctypes
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket


def _die_with_parent():
    """Chromium is killed with this script, even by SIGKILL (a failing test's cleanup sends that):
    before, each failed browser test left a Chromium and its helpers running."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Browser:
    def __init__(self):
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if not exe:
            raise SystemExit("chromium is not installed (scripts/test-tools installs it)")
        self.profile = tempfile.mkdtemp(prefix="threadline-chromium-")
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--no-default-browser-check", "--mute-audio", "--autoplay-policy=no-user-gesture-required",
             "--remote-debugging-port=0", "--remote-allow-origins=*", f"--user-data-dir={self.profile}",
             "--window-size=1400,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + 30
        while not os.path.exists(port_file) or os.path.getsize(port_file) == 0:
            if time.time() > deadline or self.proc.poll() is not None:
                raise SystemExit("chromium did not start its DevTools endpoint")
            time.sleep(0.05)
        port = int(open(port_file).read().split()[0])
        pages = []
        while not pages:
            pages = [t for t in json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list")) if t["type"] == "page"]
            time.sleep(0.05)
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=60)
        self.next_id = 0
        self.send("Page.enable")
        self.send("Runtime.enable")

    def send(self, method, **params):
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def navigate(self, url):
        self.send("Page.navigate", url=url)

    def eval(self, expression):
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r.get("result", {}).get("value")

    def wait(self, expression, timeout=30.0, every=0.02):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                v = self.eval(expression)
                if v:
                    return v
            except RuntimeError:
                pass
            time.sleep(every)
        return None

    def screenshot(self, path, measure=None):
        """The whole page as a PNG; with `measure` (a selector), where that element is drawn in it:
        [x, y, width, height] in the PNG's pixels, or None."""
        height = self.eval("Math.min(6000, document.documentElement.scrollHeight)") or 1000
        self.send("Emulation.setDeviceMetricsOverride", width=1400, height=int(height), deviceScaleFactor=1, mobile=False)
        box = None
        if measure:
            box = self.eval(f"""(() => {{ const e = document.querySelector({json.dumps(measure)}); if (!e) return null;
                const r = e.getBoundingClientRect(); return [r.left + scrollX, r.top + scrollY, r.width, r.height]; }})()""")
        data = self.send("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        self.send("Emulation.clearDeviceMetricsOverride")
        return box

    def close(self):
        try:
            self.ws.close()
        finally:
            # The whole group: a helper left behind wrote into the profile as it was removed,
            # and each run left a threadline-chromium-* folder in /tmp.
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            for _ in range(50):
                shutil.rmtree(self.profile, ignore_errors=True)
                if not os.path.exists(self.profile):
                    break
                time.sleep(0.1)


def refreshed(b, before, after):
    """Runs the script `before` on the page, then the page's own refresh() once no draw is under
    way, waits for it, and returns what the script `after` returns (`before`'s names are seen)."""
    return b.eval(f"""(async () => {{ const pause = () => new Promise(done => setTimeout(done, 20));
        {before}
        while (drawing) await pause();
        await refresh();
        while (drawing) await pause();
        {after} }})()""")


def live_run(b, base, run, out):
    """Opens the run page once and watches it (no reload) until the run ends."""
    b.navigate(f"{base}/runs/{run}")
    b.wait("!!document.getElementById('status')", 30)
    b.eval("window.__threadlineMarker = 42")    # survives only if the page never reloads
    open(os.path.join(out, "page-open"), "w").close()   # the test submits the run now
    b.wait("!!document.getElementById('run-state')", 60)
    seen_states, progress, bar_rows, max_bars, statuses, etas = [], [], 0, 0, [], []
    gantt_waiting = None
    deadline = time.time() + 300
    while time.time() < deadline:
        s = b.eval("""(() => { const st = document.getElementById('run-state'); const g = document.getElementById('gantt');
            const rows = new Set([...document.querySelectorAll('#gantt text.row')].map(t => t.textContent));
            return { status: document.getElementById('status').textContent, state: st && st.dataset.state, progress: (document.getElementById('run-progress') || {}).textContent,
                     bars: g ? g.querySelectorAll('rect.bar').length : 0, rows: rows.size, marker: window.__threadlineMarker,
                     eta: (document.getElementById('run-eta') || {}).textContent || '',
                     gantt: g ? g.textContent : '' }; })()""")
        if s["marker"] != 42:
            return {"error": "the page reloaded"}
        if not statuses or statuses[-1] != s["status"]:
            statuses.append(s["status"])
        if not seen_states or seen_states[-1] != s["state"]:
            seen_states.append(s["state"])
        if s["progress"] and (not progress or progress[-1] != s["progress"]):
            progress.append(s["progress"])
        if s["eta"] and s["eta"] not in etas:
            etas.append(s["eta"])
        # A run that waits for a worker says so; the test starts one once the page has said it.
        if "waiting for a worker" in s["eta"] and not os.path.exists(os.path.join(out, "waiting")):
            gantt_waiting = s["gantt"]
            b.screenshot(os.path.join(out, "run-waiting.png"))
            open(os.path.join(out, "waiting"), "w").close()
        bar_rows = max(bar_rows, s["rows"])
        max_bars = max(max_bars, s["bars"])
        if s["state"] in ("succeeded", "failed", "cancelled"):
            break
        if len(seen_states) == 1 and s["state"] == "running" and not os.path.exists(os.path.join(out, "run-running.png")):
            b.screenshot(os.path.join(out, "run-running.png"))
        time.sleep(0.1)
    posters = b.wait("""(() => { const imgs = [...document.querySelectorAll('#items img')];
        return imgs.length && imgs.every(i => i.complete && i.naturalWidth > 0) ? imgs.length : 0; })()""", 60)
    duration = b.wait("""new Promise(done => { const v = document.getElementById('movie'); if (!v) return done(0);
        if (v.readyState >= 1) return done(v.duration); v.addEventListener('loadedmetadata', () => done(v.duration)); setTimeout(() => done(0), 20000); })""", 30)
    # A live redraw (any change on the run makes one; here the page forgets what it drew) keeps
    # each loaded poster as it is, rather than making it anew (black while it is decoded again),
    # and the movie with its playback.
    try:
        kept = refreshed(b, "document.querySelectorAll('#movie, #items img').forEach(e => e.__threadlineKept = true); lastDrawn = null;",
                         """const now = [...document.querySelectorAll('#items img')], movie = document.getElementById('movie');
        return { posters: `${now.filter(i => i.__threadlineKept === true).length}/${now.length}`, movie: !!movie && movie.__threadlineKept === true };""")
        posters_kept, movie_kept = kept["posters"], kept["movie"]
    except RuntimeError as e:
        posters_kept, movie_kept = f"the redraw failed: {e}", False
    # A change elsewhere on the farm (here: a refresh with nothing new) leaves the ended run's page
    # as it is: the output path the reader selected to copy stays selected.
    try:
        selected = refreshed(b, """const out = [...document.querySelectorAll('.summary span')].find(s => s.textContent.startsWith('Output')).querySelector('b');
        const range = document.createRange(); range.selectNodeContents(out);
        getSelection().removeAllRanges(); getSelection().addRange(range);
        const before = getSelection().toString();""", "const after = getSelection().toString(); getSelection().removeAllRanges(); return { before, after };")
    except RuntimeError as e:
        selected = {"before": f"the refresh failed: {e}", "after": ""}
    # The movie's player shows its poster until played (it stayed black: no frame is painted for
    # preload="metadata"): where the player is drawn in the screenshot, for the test to look at.
    movie_poster = b.wait("""new Promise(done => { const v = document.getElementById('movie'); if (!v || !v.poster) return done('no poster');
        const i = new Image(); i.onload = () => done(i.naturalWidth + 'x' + i.naturalHeight); i.onerror = () => done('the poster did not load');
        i.src = v.poster; })""", 30)
    movie_box = b.screenshot(os.path.join(out, "run-finished.png"), measure="#movie")
    marker = b.eval("window.__threadlineMarker")
    # Each bar is painted as long as its attempt took: no style may override its width. Zoomed
    # into the run's first quarter, so that bars are wide.
    drawn = b.eval("""(() => { const g = document.getElementById('gantt'); if (!g) return {};
        const to = document.getElementById('zoom-to');
        to.value = (parseFloat(to.value) / 4).toFixed(3); to.dispatchEvent(new Event('change'));
        const scale = g.getBoundingClientRect().width / g.viewBox.baseVal.width;
        const bars = [...g.querySelectorAll('rect.bar')].map(r => [+r.getAttribute('width'), r.getBoundingClientRect().width / scale]);
        document.getElementById('zoom-reset').click();
        return { widest: Math.max(0, ...bars.map(b => b[0])), misdrawn: bars.filter(([given, painted]) => Math.abs(given - painted) > 1) }; })()""")
    return {"statuses": statuses[:20], "etas": etas[:40], "gantt_waiting": gantt_waiting, "gantt_widest": drawn.get("widest", 0), "gantt_misdrawn": drawn.get("misdrawn", []), "states": seen_states, "progress": progress, "gantt_rows": bar_rows, "gantt_bars": max_bars, "posters": posters or 0, "posters_kept": posters_kept, "movie_kept": movie_kept,
            "movie_poster": movie_poster, "movie_box": movie_box, "selected": selected,
            "video_duration": duration or 0, "reloaded": marker != 42,
            # Item captions wider than their card (cut off at its edge): a phone's long file name.
            "captions_cut": b.eval("[...document.querySelectorAll('#items figcaption')].filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.textContent)"),
            "lineage_items": b.eval("document.querySelectorAll('#lineage li').length"),
            # Each entry's indent and first words ("1.5 segment of item 3"): the tree as drawn.
            "lineage_tree": b.eval("[...document.querySelectorAll('#lineage li')].map(li => parseFloat(li.style.marginLeft || '0') + ' ' + li.textContent.trim().split(' ').slice(0, 4).join(' '))")}


def farm(b, base, out):
    b.navigate(f"{base}/")
    b.wait("!!document.querySelector('#runs tbody tr')", 30)
    b.screenshot(os.path.join(out, "farm.png"))
    return b.eval("""(() => ({ status: document.getElementById('status').textContent,
        runs: [...document.querySelectorAll('#runs tbody tr')].map(r => ({ id: +r.dataset.run, state: r.dataset.state,
              items: r.querySelector('.items-done').textContent, bars: r.querySelectorAll('.stage-bar span').length,
              eta: r.querySelector('.eta').textContent })),
        workers: document.querySelectorAll('#workers tbody tr').length,
        clocks: [...document.querySelectorAll('#workers .clock-off')].map(c => c.textContent),
        failures: document.querySelectorAll('#failures tbody tr').length }))()""")


def restart(b, base, out):
    """Keeps the farm page open (no reload) while the test stops its server ("page-open" said
    when it may) and starts it again ("outage" said once the page showed the outage)."""
    b.navigate(f"{base}/")
    b.wait("!!document.querySelector('#runs tbody tr')", 30)
    b.eval("window.__threadlineMarker = 42")
    open(os.path.join(out, "page-open"), "w").close()
    seen, outage, back = [], None, None
    deadline = time.time() + 120
    while time.time() < deadline:
        s = b.eval("""({ status: document.getElementById('status').textContent, live: document.getElementById('live').classList.contains('on'),
                         runs: document.querySelectorAll('#runs tbody tr').length, marker: window.__threadlineMarker })""")
        if s["marker"] != 42:
            return {"error": "the page reloaded"}
        if not seen or seen[-1] != [s["status"], s["live"]]:
            seen.append([s["status"], s["live"]])
        if outage is None and not s["live"] and "no answer" in s["status"]:
            outage = s
            b.screenshot(os.path.join(out, "outage.png"))
            open(os.path.join(out, "outage"), "w").close()
        if outage is not None and s["live"] and "no answer" not in s["status"]:
            back = s
            b.screenshot(os.path.join(out, "back.png"))
            break
        time.sleep(0.1)
    return {"seen": seen[:20], "outage": outage, "back": back}


def failed_run(b, base, run, out):
    b.navigate(f"{base}/runs/{run}")
    text = b.wait("(document.getElementById('run-error') || {}).textContent", 30)
    b.screenshot(os.path.join(out, "run-failed.png"))
    return {"state": b.eval("document.getElementById('run-state').dataset.state"), "error": text,
            "failures": b.eval("[...document.querySelectorAll('#failures tbody tr')].map(r => r.textContent)"),
            # Each item card's state and the colour its place in the pipeline is drawn in.
            "item_locations": b.eval("""[...document.querySelectorAll('#items figure')].map(f => {
                const w = f.querySelector('.where'), st = f.querySelector('.state');
                return [st ? st.textContent : '', w ? getComputedStyle(w).color : 'none']; })"""),
            # Pixels the page is wider than the window (a long file name or filter graph unwrapped).
            "overflow": b.eval("document.documentElement.scrollWidth - document.documentElement.clientWidth")}


def resumed_gantt(b, base, run, out):
    """A run resumed long after it stopped: how wide its bars are drawn, what the chart says of
    the stretch between, and where a drag across the later bars zooms to."""
    b.navigate(f"{base}/runs/{run}")
    b.wait("document.querySelectorAll('#gantt rect.bar').length", 30)
    b.screenshot(os.path.join(out, "run-resumed.png"))
    seen = b.eval("""(() => { const g = document.getElementById('gantt'), scale = g.getBoundingClientRect().width / g.viewBox.baseVal.width;
        const bars = [...g.querySelectorAll('rect.bar')].map(r => r.getBoundingClientRect());
        return { bars: bars.length, narrowest: Math.min(...bars.map(r => r.width / scale)),
                 gaps: [...g.querySelectorAll('text.gap')].map(t => t.textContent),
                 ticks: [...g.querySelectorAll('text:not(.row):not(.gap)')].map(t => t.textContent).filter(t => t.endsWith(' s')),
                 // The later bars, in the window's pixels: the drag goes from the first's start to the last's end.
                 later: bars.filter(r => r.left > bars[0].left + (g.getBoundingClientRect().width - 200) / 2).map(r => [r.left, r.right, r.top + r.height / 2]) }; })()""")
    later = seen.pop("later")
    if later:
        x0, x1, y = min(r[0] for r in later) + 1, max(r[1] for r in later) - 1, later[0][2]
        b.send("Input.dispatchMouseEvent", type="mousePressed", x=x0, y=y, button="left", clickCount=1)
        b.send("Input.dispatchMouseEvent", type="mouseMoved", x=(x0 + x1) / 2, y=y, button="left")
        b.send("Input.dispatchMouseEvent", type="mouseMoved", x=x1, y=y, button="left")
        b.send("Input.dispatchMouseEvent", type="mouseReleased", x=x1, y=y, button="left", clickCount=1)
        seen["zoomed"] = b.eval("[parseFloat(document.getElementById('zoom-from').value), parseFloat(document.getElementById('zoom-to').value)]")
    return seen


def live_tooltip(b, base, run, out, db):
    """The pointer rests on a running bar while its attempt ends (written into the lineage
    database `db` by this script, as a coordinator would): what the bar's tooltip says before and
    after the page draws the chart again, the pointer not moved."""
    tip = "(() => { const t = document.getElementById('gantt-tip'); return t && !t.hidden && getComputedStyle(t).display !== 'none' ? t.textContent : ''; })()"
    b.navigate(f"{base}/runs/{run}")
    b.wait("document.querySelectorAll('#gantt rect.bar.running').length", 30)
    box = b.eval("""(() => { const r = document.querySelector('#gantt rect.bar.running').getBoundingClientRect();
        return { x: r.left + r.width / 2, y: r.top + r.height / 2 }; })()""")
    b.send("Input.dispatchMouseEvent", type="mouseMoved", x=box["x"], y=box["y"])
    before = b.wait(tip, 10)
    b.screenshot(os.path.join(out, "tooltip-running.png"))
    with sqlite3.connect(db) as con:
        con.execute("UPDATE attempt SET state = 'succeeded', finished_at = started_at + 4 WHERE state = 'running'")
        con.execute("UPDATE stage SET state = 'succeeded', finished_at = started_at + 4, seconds = 4 WHERE state = 'running'")
    redrawn = b.wait("document.querySelectorAll('#gantt rect.bar').length > 0 && document.querySelectorAll('#gantt rect.bar.running').length === 0", 20)
    time.sleep(0.3)
    b.screenshot(os.path.join(out, "tooltip-ended.png"))
    return {"before": before or "", "redrawn": bool(redrawn), "after": b.eval(tip)}


def gantt_time(b, base, run, out):
    """Seconds until the run's page has drawn every attempt: as a reader comes to it, from the
    farm page open in the browser (the same site: the browser has the page's script and style and
    a renderer for it); and as the first page a just-started browser opens, which adds starting
    the browser's renderer and compiling the script cold."""
    drawn = "(() => { const g = document.getElementById('gantt'); return g && +g.dataset.bars > 0 && g.querySelectorAll('rect.bar').length; })()"
    b.navigate("about:blank")
    t0 = time.time()
    b.navigate(f"{base}/runs/{run}")
    b.wait(drawn, 30, every=0.005)
    cold = time.time() - t0
    b.navigate(f"{base}/")
    b.wait("!!document.querySelector('#runs tbody tr')", 30)
    t0 = time.time()
    b.navigate(f"{base}/runs/{run}")
    bars = b.wait(drawn, 30, every=0.005)
    seconds = time.time() - t0
    b.screenshot(os.path.join(out, "gantt-5000.png"))
    # A bar's tooltip, filled in as the pointer comes over it: the pointer moved by the browser's
    # own input onto the middle of the run's first bar, then off the chart.
    tip = "(() => { const t = document.getElementById('gantt-tip'); return t && !t.hidden && getComputedStyle(t).display !== 'none' ? t.textContent : ''; })()"
    box = b.eval("""(() => { const r = document.querySelector('#gantt rect.bar').getBoundingClientRect();
        return { x: r.left + r.width / 2, y: r.top + r.height / 2 }; })()""")
    before = b.eval(tip)
    b.send("Input.dispatchMouseEvent", type="mouseMoved", x=box["x"], y=box["y"])
    tooltip = b.wait(tip, 10)
    b.screenshot(os.path.join(out, "gantt-tooltip.png"))
    b.send("Input.dispatchMouseEvent", type="mouseMoved", x=5, y=5)
    time.sleep(0.2)
    return {"seconds": seconds, "cold_seconds": cold, "bars": bars or 0, "tooltip_before_hover": before, "tooltip": tooltip or "",
            "tooltip_after_leaving": b.eval(tip), "titles": b.eval("document.querySelectorAll('#gantt rect.bar title').length")}


def running_bars(b, base, run, out, offset):
    """Watches a running run's chart in a browser whose clock is `offset` seconds off the machine's."""
    b.send("Page.addScriptToEvaluateOnNewDocument",
           source=f"(() => {{ const real = Date.now; window.__realNow = () => real() / 1000; Date.now = () => real() + {offset * 1000}; }})()")
    b.navigate(f"{base}/runs/{run}")
    b.wait("!!document.getElementById('run-state')", 60)
    samples, missing, axis_over = 0, 0, 0.0
    deadline = time.time() + 120
    while time.time() < deadline:
        s = b.eval("""(() => { const st = document.getElementById('run-state');
            const running = lastAttempts.filter(a => !a.finished).length;
            const bars = document.querySelectorAll('#gantt rect.bar.running').length;
            const start = lastAttempts.length ? Math.min(...lastAttempts.map(a => a.dispatched)) : null;
            const to = parseFloat(document.getElementById('zoom-to').value);
            return { state: st && st.dataset.state, running, bars, over: start == null || isNaN(to) ? 0 : to - (window.__realNow() - start) }; })()""")
        if s["state"] != "running":
            break
        if s["running"] > 0:
            samples += 1
            missing += s["bars"] == 0
            axis_over = max(axis_over, s["over"])
            if samples == 10:
                b.screenshot(os.path.join(out, f"running-bars{offset:+d}.png"))
        time.sleep(0.1)
    return {"samples": samples, "missing": missing, "axis_over": axis_over}


def narrow(b, base, out, runs):
    """The farm page and run pages on a phone (390 px wide): how many pixels each page is wider
    than the window, and which of the runs table's headings show without scrolling."""
    b.send("Emulation.setDeviceMetricsOverride", width=390, height=844, deviceScaleFactor=1, mobile=True)
    pages = {}
    for path in ["/"] + [f"/runs/{r}" for r in runs]:
        b.navigate(f"{base}{path}")
        b.wait("!!document.querySelector('#runs tbody tr, #run-state')", 30)
        time.sleep(0.5)
        pages[path] = {"overflow": b.eval("document.documentElement.scrollWidth - document.documentElement.clientWidth")}
        if path == "/":
            pages[path]["headings"] = b.eval("[...document.querySelectorAll('#runs th')].filter(th => th.offsetParent && th.getBoundingClientRect().right <= window.innerWidth).map(th => th.textContent)")
        data = b.send("Page.captureScreenshot", format="png")["data"]
        with open(os.path.join(out, "phone-" + ("farm" if path == "/" else path.strip("/").replace("/", "-")) + ".png"), "wb") as f:
            f.write(base64.b64decode(data))
    b.send("Emulation.clearDeviceMetricsOverride")
    return pages


def main():
    what = sys.argv[1]
    b = Browser()
    try:
        if what == "live-run":
            r = live_run(b, sys.argv[2], sys.argv[3], sys.argv[4])
        elif what == "farm":
            r = farm(b, sys.argv[2], sys.argv[3])
        elif what == "failed-run":
            r = failed_run(b, sys.argv[2], sys.argv[3], sys.argv[4])
        elif what == "restart":
            r = restart(b, sys.argv[2], sys.argv[3])
        elif what == "running-bars":
            r = running_bars(b, sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        elif what == "narrow":
            r = narrow(b, sys.argv[2], sys.argv[3], sys.argv[4:])
        elif what == "resumed-gantt":
            r = resumed_gantt(b, sys.argv[2], sys.argv[3], sys.argv[4])
        elif what == "live-tooltip":
            r = live_tooltip(b, sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
        elif what == "gantt-time":
            r = gantt_time(b, sys.argv[2], sys.argv[3], sys.argv[4])
        else:
            raise SystemExit(f"unknown scenario {what}")
    finally:
        b.close()
    print(json.dumps(r))


if __name__ == "__main__":
    main()
