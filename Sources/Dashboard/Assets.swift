/// The dashboard's page, style and script, built into the binary: no CDN, no build step.
enum Assets {
    static let html = #"""
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Threadline</title>
    <link rel="stylesheet" href="/assets/app.css">
    <script src="/assets/app.js" defer></script>
    </head>
    <body>
    <header><a href="/" id="home">Threadline</a> <span id="status" class="status">loading…</span> <span id="live" class="live" title="live updates">●</span></header>
    <main id="main"><p class="muted">Loading…</p></main>
    </body>
    </html>
    """#

    static let style = #"""
    :root { --bg: #111418; --panel: #1b1f25; --line: #2b313a; --text: #e6e8eb; --muted: #8b94a1;
            --succeeded: #3fb950; --cached: #2aa198; --running: #388bfd; --ready: #a5c8ff; --pending: #4a525e;
            --failed: #f85149; --lost: #d29922; --stale: #8957e5; --cancelled: #6e7681; --missed: #bc8cff; --handed_back: #e3b341; --kept: #a5d6a7; --stopped: #3d5a80; }
    * { box-sizing: border-box; }
    body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; background: var(--bg); color: var(--text); }
    header { display: flex; gap: 1em; align-items: baseline; padding: .7em 1.2em; background: var(--panel); border-bottom: 1px solid var(--line); position: sticky; top: 0; z-index: 2; }
    header a { color: var(--text); font-weight: 700; text-decoration: none; font-size: 1.1em; }
    .status { color: var(--muted); }
    .clock-off { color: var(--lost); font-size: .9em; }
    .live { color: var(--cancelled); font-size: .8em; margin-left: auto; }
    .live.on { color: var(--succeeded); }
    main { padding: 1em 1.2em 3em; overflow-wrap: break-word; }   /* a sha256 or a path breaks rather than widen the page */
    h1 { font-size: 1.35em; margin: .2em 0 .4em; }
    h2 { font-size: 1.05em; margin: 1.6em 0 .5em; color: var(--muted); font-weight: 600; text-transform: uppercase; letter-spacing: .04em; }
    table { border-collapse: collapse; width: 100%; }
    /* A table wider than the window scrolls on its own; the page never grows sideways. */
    .scroll { overflow-x: auto; }
    /* A phone: a run's name, state, items, duration and time left; a worker's slots and heartbeat. */
    @media (max-width: 640px) { .wide { display: none; } main { padding: .8em .6em 2em; } th, td { padding: .35em .4em; } }
    th, td { text-align: left; padding: .35em .6em; border-bottom: 1px solid var(--line); vertical-align: top; }
    th { color: var(--muted); font-weight: 600; font-size: .9em; }
    td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
    a { color: #79b8ff; }
    .muted { color: var(--muted); }
    .state { display: inline-block; padding: 0 .5em; border-radius: 1em; font-size: .85em; background: var(--pending); color: #fff; }
    .state.succeeded { background: var(--succeeded); color: #04150a; } .state.running { background: var(--running); }
    .state.failed { background: var(--failed); } .state.cancelled, .state.interrupted { background: var(--cancelled); }
    .state.cached { background: var(--cached); } .state.lost, .state.sidelined { background: var(--lost); color: #1a1200; }
    .stage-bar { display: flex; width: 220px; height: 12px; border-radius: 3px; overflow: hidden; background: var(--pending); margin-top: .3em; }
    .stage-bar span { display: block; height: 100%; }
    .s-succeeded { background: var(--succeeded); } .s-cached { background: var(--cached); } .s-running { background: var(--running); }
    .s-ready { background: var(--ready); } .s-pending { background: var(--pending); } .s-failed { background: var(--failed); }
    .s-cancelled { background: var(--cancelled); }
    .error { background: #2d1417; border: 1px solid #5c1f24; border-radius: 6px; padding: .6em .8em; white-space: pre-wrap; overflow-wrap: anywhere; font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .9em; }
    #failures td { overflow-wrap: anywhere; }
    .where { color: #ffa198; font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
    .where.quiet { color: var(--muted); }
    .summary { display: flex; flex-wrap: wrap; gap: 1.5em; color: var(--muted); }
    .summary b { color: var(--text); font-weight: 600; }
    progress { width: 320px; max-width: 100%; height: 10px; }
    #gantt-wrap { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: .5em; overflow: hidden; }
    #gantt { width: 100%; display: block; user-select: none; cursor: crosshair; }
    #gantt text { fill: var(--text); font-size: 11px; pointer-events: none; }
    #gantt text.row { fill: var(--muted); }
    #gantt .grid { stroke: var(--line); }
    #gantt rect.bar.succeeded { fill: var(--succeeded); } #gantt rect.bar.cached { fill: var(--cached); }
    #gantt rect.bar.failed { fill: var(--failed); } #gantt rect.bar.lost { fill: var(--lost); }
    #gantt rect.bar.stale { fill: var(--stale); } #gantt rect.bar.running { fill: var(--running); }
    #gantt rect.bar.cancelled { fill: var(--cancelled); } #gantt rect.bar.missed { fill: var(--missed); }
    #gantt rect.bar.handed_back { fill: var(--handed_back); } #gantt rect.bar.kept { fill: var(--kept); }
    #gantt rect.bar.stopped { fill: var(--stopped); }
    #gantt rect.brush { fill: rgba(121,184,255,.18); stroke: #79b8ff; }
    #gantt-tip { position: fixed; z-index: 3; pointer-events: none; max-width: min(40em, 90vw); padding: .3em .55em; white-space: pre-line;
                 background: var(--panel); color: var(--text); border: 1px solid var(--line); border-radius: 4px; font-size: 12px; box-shadow: 0 2px 8px rgba(0,0,0,.5); }
    #gantt-tip[hidden] { display: none; }
    #gantt rect.gap { fill: var(--bg); stroke: var(--line); stroke-dasharray: 3 3; }
    #gantt text.gap { fill: var(--muted); text-anchor: middle; font-size: 10px; }
    .legend { display: flex; gap: 1em; flex-wrap: wrap; margin: .4em 0; color: var(--muted); font-size: .9em; }
    .legend i { display: inline-block; width: .9em; height: .9em; border-radius: 2px; vertical-align: -.1em; margin-right: .3em; }
    .zoom { display: flex; flex-wrap: wrap; gap: .6em; align-items: center; margin: .4em 0; color: var(--muted); }
    .zoom input { width: 6em; background: var(--bg); color: var(--text); border: 1px solid var(--line); border-radius: 4px; padding: .15em .3em; }
    button { background: var(--panel); color: var(--text); border: 1px solid var(--line); border-radius: 4px; padding: .2em .7em; cursor: pointer; }
    .items { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr)); gap: .8em; }
    .items figure { margin: 0; background: var(--panel); border: 1px solid var(--line); border-radius: 6px; overflow: hidden; }
    .items .poster { aspect-ratio: 16 / 9; background: #000; display: flex; align-items: center; justify-content: center; color: var(--muted); }
    .items img { width: 100%; height: 100%; object-fit: contain; display: block; }
    .items figcaption { padding: .4em .5em; font-size: .85em; overflow-wrap: anywhere; }
    video { max-width: 100%; width: 640px; background: #000; border-radius: 6px; }
    .lineage li { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .85em; overflow-wrap: anywhere; }
    .workers .slots { font-size: .85em; color: var(--muted); }
    """#

    static let script = #"""
    'use strict';
    // Threadline dashboard: reads the JSON API, redraws when the server says lineage changed (SSE).
    const params = new URLSearchParams(location.search);
    const token = params.get('token') || sessionStorage.getItem('threadline-token') || '';
    if (token) sessionStorage.setItem('threadline-token', token);
    const withToken = u => token ? u + (u.includes('?') ? '&' : '?') + 'token=' + encodeURIComponent(token) : u;
    const esc = s => String(s ?? '').replace(/[&<>"']/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
    // The answer as its text (a run's attempts are compared with the last drawn as sent, rather
    // than stringified again: a megabyte for 5,000 attempts), and parsed.
    async function apiText(path) {
      const r = await fetch(path, { headers: token ? { Authorization: 'Bearer ' + token } : {} });
      if (!r.ok) throw new Error(path + ' answered ' + r.status);
      return r.text();
    }
    const api = async path => JSON.parse(await apiText(path));
    const fmtTime = t => t ? new Date(t * 1000).toLocaleString() : '';
    // As the CLI says sizes (ByteSize.text): "812.5 KiB", "5.1 MiB" (a tiny movie read "0.0 MB").
    function fmtBytes(n) {
      let v = n, unit = 'bytes';
      for (const u of ['KiB', 'MiB', 'GiB', 'TiB']) if (v >= 1024) { v /= 1024; unit = u; }
      return unit === 'bytes' ? `${n} bytes` : `${v.toFixed(1)} ${unit}`;
    }
    function fmtDur(s) {
      if (s == null || !isFinite(s)) return '';
      s = Math.max(0, s);
      if (s < 9.95) return s.toFixed(1) + ' s';
      // Whole seconds before minutes are taken: 299.6 s is "5 min 0 s", not "4 min 60 s".
      s = Math.round(s);
      if (s < 60) return s + ' s';
      const m = Math.floor(s / 60), h = Math.floor(m / 60);
      return h ? `${h} h ${m % 60} min` : `${m} min ${s % 60} s`;
    }
    const STAGE_STATES = ['succeeded', 'cached', 'running', 'ready', 'pending', 'failed', 'cancelled'];
    function stageBar(c) {
      const total = STAGE_STATES.reduce((a, k) => a + (c[k] || 0), 0) || 1;
      return '<div class="stage-bar" title="' + STAGE_STATES.filter(k => c[k]).map(k => `${k} ${c[k]}`).join(', ') + '">' +
        STAGE_STATES.filter(k => c[k]).map(k => `<span class="s-${k}" style="width:${(100 * c[k] / total).toFixed(2)}%"></span>`).join('') + '</div>';
    }
    const state = s => `<span class="state ${esc(s)}">${esc(s)}</span>`;
    // A running run's time left, from its planned frames (as `coord submit` shows it).
    // A running run with nothing running, on a live coordinator whose workers take no work (none
    // joined, or every one draining or sidelined), waits for a worker, as `coord submit` says.
    const waiting = (r, farm) => !!farm && farm.live && farm.slots_total === 0 && r.state === 'running' && !r.stages.running;
    // A running run with nothing running while the workers render other runs' stages waits for
    // its turn (a batch's fair share), as a batch's project lines say; its ETA was blank.
    const waitingForSlot = (r, farm) => !!farm && farm.live && farm.slots_total > 0 && r.state === 'running' && !r.stages.running && !r.joining;
    // Every frame left in renders that should be done by now: said so, as `coord submit` does
    // ("ETA 0.0 s" held for a second read as stuck).
    const finishing = r => r.finishing_renders ? (r.finishing_renders > 1 ? `finishing the last ${r.finishing_renders} renders` : 'finishing the last render') : '';
    const timeLeft = (r, farm) => waiting(r, farm) ? 'waiting for a worker to join'
      : waitingForSlot(r, farm) ? 'waiting for a slot'
      : r.joining ? 'joining the movie' : finishing(r) || (r.eta_s != null ? fmtDur(r.eta_s) : '');

    // ---- farm page ----
    let showAll = false;
    async function drawFarm() {
      const [farm, runs, workers] = await Promise.all([api('/api/farm'), api('/api/runs?limit=' + (showAll ? 100000 : 200)), api('/api/workers')]);
      document.getElementById('status').textContent = farm.status;
      let h = '<h2>Runs</h2><div class="scroll"><table id="runs"><thead><tr><th>Run</th><th>State</th><th class="wide">Stages</th><th class="num">Items</th><th class="wide" title="The name its client gave, and the key it came with: the runs of each key share the farm equally">Submitter</th><th class="wide">Started</th><th class="num">Duration</th><th class="num">ETA</th></tr></thead><tbody>';
      for (const r of runs) {
        h += `<tr data-run="${r.id}" data-state="${esc(r.state)}"><td><a href="/runs/${r.id}">${esc(r.name)}</a> <span class="muted">#${r.id}</span></td>` +
          `<td>${state(r.state)}</td><td class="wide">${stageBar(r.stages)}</td><td class="num items-done">${r.items_done}/${r.items}</td>` +
          `<td class="submitter wide">${esc(r.submitter || '')}${r.owner_key ? ` <span class="muted">key ${esc(r.owner_key)}</span>` : ''}</td><td class="wide">${fmtTime(r.started)}</td><td class="num">${fmtDur(r.duration_s)}</td><td class="num eta">${timeLeft(r, farm)}</td></tr>`;
      }
      h += '</tbody></table></div>';
      if (!showAll && runs.length >= 200) h += '<p><button id="all">Show every run</button></p>';
      if (!runs.length) h += '<p class="muted">No runs yet: <code>coord submit pipeline.yaml</code> starts one.</p>';
      h += '<h2>Workers</h2><div class="scroll"><table class="workers" id="workers"><thead><tr><th>Worker</th><th class="wide">Host</th><th>State</th><th class="num">Slots busy</th><th class="num">Heartbeat</th><th class="num wide" title="Artifacts in its store, as far as the coordinator knows: work goes where its inputs are">Holds</th><th>Running</th></tr></thead><tbody>';
      for (const w of workers) {
        h += `<tr><td>${esc(w.id)}</td><td class="wide">${esc(w.host)}</td><td>${state(w.state)}</td><td class="num">${w.busy}/${w.slots}</td>` +
          `<td class="num">${fmtDur(w.heartbeat_age_s)} ago${w.clock_offset_s == null ? '' : `<br><span class="clock-off" title="Its attempts' times are recorded on the coordinator's clock; keep the hosts in sync with NTP">clock ${fmtDur(Math.abs(w.clock_offset_s))} ${w.clock_offset_s > 0 ? 'behind' : 'ahead'}</span>`}</td><td class="num wide">${w.holds == null ? '—' : w.holds}</td><td class="slots">${w.running.map(s => `run ${s.run}: ${esc(s.stage)}`).join('<br>')}</td></tr>`;
      }
      if (!workers.length) h += '<tr><td colspan="7" class="muted">No workers seen in the last hour.</td></tr>';
      h += '</tbody></table></div><h2>Recent failures</h2>';
      h += farm.failures.length ? '<div class="scroll"><table id="failures"><thead><tr><th>Where</th><th>Error</th></tr></thead><tbody>' + farm.failures.map(f =>
        `<tr><td>${esc(f.stage)}<br><span class="muted">${esc(f.worker || '')} · ${fmtTime(f.finished)}</span></td><td>${f.location ? `<span class="where">${esc(f.location)}</span> ` : ''}${esc(f.error || f.state)}</td></tr>`).join('') + '</tbody></table></div>'
        : '<p class="muted">None.</p>';
      document.getElementById('main').innerHTML = h;
      const all = document.getElementById('all');
      if (all) all.onclick = () => { showAll = true; refresh(); };
    }

    // ---- run page ----
    let zoom = null;          // [from, to] in seconds since the run's first attempt
    let lastAttempts = [];
    // How far the coordinator's clock is ahead of this browser's: a running attempt's bar ends at
    // the coordinator's now. A browser minutes behind drew no running bar, one ahead squeezed the
    // chart into its first pixels. A running run's start plus its duration (and the time it lay
    // interrupted before a resume) is the coordinator's now.
    let serverAhead = 0;
    function serverNow() { return Date.now() / 1000 + (Math.abs(serverAhead) > 2 ? serverAhead : 0); }
    let lastDrawn = null;
    async function drawRun(id) {
      const [d, attemptsText, farm] = await Promise.all([api('/api/runs/' + id), apiText(`/api/runs/${id}/attempts`), api('/api/farm')]);
      const attempts = JSON.parse(attemptsText);
      const r = d.run;
      if (r.state === 'running' && r.duration_s != null) serverAhead = r.started + r.paused_s + r.duration_s - Date.now() / 1000;
      document.title = r.name + ' · Threadline';
      document.getElementById('status').textContent = `run #${r.id} · ${r.state}`;
      let h = `<h1>${esc(r.name)} <span id="run-state" data-state="${esc(r.state)}">${state(r.state)}</span></h1>`;
      // The bar fills with planned frames rendered once every item's length is known (items differ
      // in length), with items until then.
      const frames = r.frames_total != null && r.frames_total > 0;
      h += `<div class="summary"><span>Items <b id="run-progress">${r.items_done}/${r.items}</b></span>` +
        (frames ? `<span>Frames <b id="run-frames">${r.frames_done}/${r.frames_total}</b></span>` : '') +
        `<progress max="${frames ? r.frames_total : (r.items || 1)}" value="${frames ? r.frames_done : r.items_done}"></progress>` +
        `<span>Started <b>${fmtTime(r.started)}</b></span><span>Duration <b>${fmtDur(r.duration_s)}</b></span>` +
        (timeLeft(r, farm) ? `<span id="run-eta">${r.joining || finishing(r) || waiting(r, farm) || waitingForSlot(r, farm) ? '' : 'ETA '}<b>${timeLeft(r, farm)}</b></span>` : '') +
        `<span>Pipeline <b>${esc(r.pipeline_path)}</b></span><span>Output <b>${esc(r.output_path)}</b></span></div>`;
      h += `<div>${stageBar(r.stages)}</div>`;
      if (r.error) {
        // One bad file: its place in the pipeline and its path head the error; several: the error names each.
        const located = d.failures.filter(f => f.location);
        const f = new Set(located.map(f => f.location)).size === 1 ? located[0] : {};
        h += `<h2>Error</h2><div class="error" id="run-error">${f.location ? `<span class="where">${esc(f.location)}</span>\n` : ''}${f.file ? `file: ${esc(f.file)}\n` : ''}${esc(r.error)}</div>`;
      }
      if (d.notes && d.notes.length) h += '<h2>Notes</h2><ul id="notes">' + d.notes.map(n => `<li>${esc(n)}</li>`).join('') + '</ul>';
      h += '<h2>Attempts per worker slot</h2><div class="legend">' +
        ['succeeded', 'cached', 'kept', 'running', 'failed', 'lost', 'stale', 'missed', 'handed_back', 'stopped', 'cancelled'].map(s => `<span><i style="background:var(--${s})"></i>${s.replace('_', ' ')}</span>`).join('') + '</div>' +
        '<div class="zoom">Zoom: from <input id="zoom-from" type="number" step="0.1" min="0"> to <input id="zoom-to" type="number" step="0.1" min="0"> s <button id="zoom-reset">Whole run</button> <span>(or drag across the chart)</span></div>' +
        '<div id="gantt-wrap"><svg id="gantt"></svg></div>';
      h += '<h2>Items</h2><div class="items" id="items">' + d.items.map(it => {
        const poster = it.segment_sha256 ? `<img alt="poster of item ${it.idx + 1}" src="${withToken(`/api/runs/${r.id}/items/${it.idx}/poster.png`)}" loading="lazy">` : esc(it.state);
        return `<figure data-item="${it.idx}"><div class="poster">${poster}</div><figcaption>${it.idx + 1}. ${esc(it.label)} ${state(it.state)}` +
          // Where the item is in the pipeline: in the error's colour only on an item that failed
          // (every card, pending and rendered ones too, read as an error).
          `${it.location ? `<br><span class="where${it.state === 'failed' ? '' : ' quiet'}">${esc(it.location)}</span>` : ''}</figcaption></figure>`;
      }).join('') + '</div>';
      if (d.failures.length) {
        h += '<h2>Failures</h2><div class="scroll"><table id="failures"><thead><tr><th>Stage</th><th>Attempt</th><th>File</th><th>Error</th></tr></thead><tbody>' + d.failures.map(f =>
          `<tr><td>${esc(f.stage)}${f.location ? `<br><span class="where">${esc(f.location)}</span>` : ''}</td><td>${f.attempt_no == null ? 'refused' : f.attempt_no} · ${esc(f.state)}<br><span class="muted">${esc(f.worker || '')}</span></td>` +
          `<td>${esc(f.file || '')}</td><td>${esc(f.error || '')}</td></tr>`).join('') + '</tbody></table></div>';
      }
      if (d.movie) {
        h += `<h2>Movie</h2><video id="movie" controls preload="metadata" poster="${withToken('/artifacts/' + d.movie.sha256 + '/poster.png')}" src="${withToken('/artifacts/' + d.movie.sha256)}"></video>` +
          `<p class="muted">${esc(r.output_path)} · ${fmtBytes(d.movie.size)} · sha256 ${d.movie.sha256}</p>`;
        // What each artifact was made from, under it (the server sends `inputs` in the movie's order).
        const bySha = new Map(d.lineage.map(a => [a.sha256, a]));
        const made = ['movie', 'segment', 'transition', 'source'];
        const tree = (a, level, path) =>
          `<li style="margin-left:${level * 1.5}em">${esc(a.kind)}${a.item == null || a.kind === 'movie' ? '' : ' of item ' + (a.item + 1)} ` +
          // Fonts, images and the soundtrack are named where the pipeline has them: the store may not hold a copy.
          (made.includes(a.kind) ? `<a href="${withToken('/artifacts/' + a.sha256)}">${a.sha256.slice(0, 16)}</a>` : a.sha256.slice(0, 16)) +
          ` <span class="muted">${esc(a.uri)} · ${fmtBytes(a.size)}</span></li>` +
          (a.inputs || []).filter(s => !path.has(s) && bySha.has(s)).map(s => bySha.get(s))
            .map(b => tree(b, level + 1, new Set([...path, b.sha256]))).join('');
        const top = d.lineage.find(a => a.depth === 0);
        h += '<h2>Lineage</h2><ul class="lineage" id="lineage">' + (top ? tree(top, 0, new Set([top.sha256])) : '') + '</ul>';
      }
      // Nothing this page shows changed (each change anywhere on the farm comes here, up to five
      // times a second; an ended run's page was drawn again each time): it is not drawn again, so
      // what the reader selected (an output path, a sha256) stays selected.
      const drawn = h + attemptsText;
      if (drawn === lastDrawn) return;
      lastDrawn = drawn;
      // What shows loaded media is kept across live redraws while its address stays the same: the
      // movie (and its playback), and each item's poster once drawn (made anew at every change
      // anywhere on the farm, every poster went black while it was decoded again).
      const media = '#movie, #items img';
      const kept = new Map([...document.querySelectorAll(media)].filter(e => e.tagName !== 'IMG' || (e.complete && e.naturalWidth > 0))
        .map(e => [e.getAttribute('src'), e]));
      document.getElementById('main').innerHTML = h;
      for (const e of document.querySelectorAll(media)) {
        const old = kept.get(e.getAttribute('src'));
        if (old && old.tagName === e.tagName) e.replaceWith(old);
      }
      lastAttempts = attempts;
      drawGantt();
      document.getElementById('zoom-reset').onclick = () => { zoom = null; drawGantt(); };
      for (const idn of ['zoom-from', 'zoom-to']) document.getElementById(idn).onchange = () => {
        const a = parseFloat(document.getElementById('zoom-from').value), b = parseFloat(document.getElementById('zoom-to').value);
        if (isFinite(a) && isFinite(b) && b > a) { zoom = [a, b]; drawGantt(); }
      };
    }

    // Worker slots in their numbers' order ("w2" before "w10"): one collator, not one per comparison.
    const slotOrder = new Intl.Collator(undefined, { numeric: true });
    function drawGantt() {
      const svg = document.getElementById('gantt');
      if (!svg) return;
      const attempts = lastAttempts;
      if (!attempts.length) {
        // Not an empty 0–0.001 s axis: say why there is nothing to draw yet.
        svg.setAttribute('viewBox', `0 0 ${Math.max(400, svg.clientWidth || 900)} 24`);
        svg.setAttribute('height', 24);
        svg.innerHTML = '<text class="row" x="4" y="16">No attempt has started yet.</text>';
        svg.dataset.bars = 0;
        return;
      }
      const now = serverNow();
      // A running attempt ends at now, but never before it began: the estimate of the
      // coordinator's now can lag an attempt sent a moment ago, which then had no bar at all.
      const ends = a => a.finished || Math.max(now, a.started || a.dispatched);
      const start = attempts.length ? Math.min(...attempts.map(a => a.dispatched)) : now;
      const end = attempts.length ? Math.max(...attempts.map(ends)) : now;
      const [from, to] = zoom || [0, Math.max(0.001, end - start)];
      const digits = to - from < 1 ? 3 : 1;
      document.getElementById('zoom-from').value = from.toFixed(digits);
      document.getElementById('zoom-to').value = to.toFixed(digits);
      // A render's decode, transform and encode run together in one slot: one bar, "render/N".
      const merged = [], renders = new Map();
      for (const a of attempts) {
        const m = /^(decode|transform|encode)\//.exec(a.stage);
        const key = m && [a.worker, a.slot, a.item, a.attempt_no].join('|');   // one try of item N's render
        const prev = key && renders.get(key);
        if (prev) {
          prev.stage = 'render/' + a.item;
          if (a.state === 'failed') prev.state = 'failed';
          prev.finished = Math.max(prev.finished || 0, a.finished || 0) || null;
          if (a.error) prev.error = a.error;
          continue;
        }
        // A render the last coordinator gave out, finished after it stopped and kept: not "lost".
        // Nor is an attempt a stopping coordinator cancelled: it goes out again on resume.
        const bar = Object.assign({}, a, a.kept ? { state: 'kept' } : a.stopped ? { state: 'stopped' } : {});
        if (key) renders.set(key, bar);
        merged.push(bar);
      }
      const rows = new Map();
      for (const a of merged) {
        const key = (a.worker || 'coordinator') + ' · ' + (a.slot != null ? 'slot ' + a.slot : 'cache');
        if (!rows.has(key)) rows.set(key, []);
        rows.get(key).push(a);
      }
      const keys = [...rows.keys()].sort(slotOrder.compare);
      const labelW = 190, rowH = 20, width = Math.max(400, svg.clientWidth || 900), plotW = width - labelW - 10;
      const height = keys.length * rowH + 24;
      // A long stretch with no attempt under way (a farm stopped overnight and its runs resumed in
      // the morning: the bars of either side were slivers at the chart's two ends) is drawn
      // narrow, marked with how long it lasted ("46 s idle": its length alone read as a tick);
      // the axis on either side keeps one scale.
      const gaps = idleGaps(merged.map(a => [(a.started || a.dispatched) - start, ends(a) - start]), from, to);
      const { x, tOf, worked } = brokenAxis(gaps, from, to, labelW, plotW);
      const parts = [], bars = [];
      const step = niceStep(worked / 8);
      let lastTick = -Infinity;
      for (let t = Math.ceil(from / step) * step; t <= to; t += step) {
        const inGap = gaps.find(([g0, g1]) => t > g0 && t < g1);
        if (inGap) { t = Math.ceil(inGap[1] / step) * step - step; continue; }
        if (x(t) - lastTick < 48) continue;   // its label would run into the last one's
        lastTick = x(t);
        parts.push(`<line class="grid" x1="${x(t)}" x2="${x(t)}" y1="0" y2="${height - 16}"/><text x="${x(t) + 2}" y="${height - 4}">${t.toFixed(Math.max(0, Math.ceil(-Math.log10(step))))} s</text>`);
      }
      for (const [g0, g1] of gaps) {
        parts.push(`<rect class="gap" x="${x(g0).toFixed(1)}" y="0" width="${(x(g1) - x(g0)).toFixed(1)}" height="${height - 16}"><title>no attempt under way for ${fmtDur(g1 - g0)}</title></rect>` +
          `<text class="gap" x="${((x(g0) + x(g1)) / 2).toFixed(1)}" y="${height - 4}">${fmtDur(g1 - g0)} idle</text>`);
      }
      keys.forEach((k, i) => {
        const y = i * rowH;
        parts.push(`<text class="row" x="4" y="${y + 14}">${esc(k)}</text>`);
        for (const a of rows.get(k)) {
          const s = (a.started || a.dispatched) - start, e = ends(a) - start;
          if (e < from || s > to) continue;
          const x0 = Math.max(labelW, x(s)), x1 = Math.min(width - 10, x(e)), w = Math.max(1.5, x1 - x0);
          const label = a.stage;
          // Its tooltip is filled in when the pointer comes over it (hovered below): a <title> in
          // each of 5,000 bars doubled what the browser parsed, styled and laid out for the chart.
          bars.push([a, e - s]);
          parts.push(`<rect class="bar ${esc(a.state)}" x="${x0.toFixed(1)}" y="${y + 3}" width="${w.toFixed(1)}" height="${rowH - 6}" rx="2"/>`);
          // Clipped to its bar (a nested svg clips), so a label never runs into the next bar.
          if (w > 24) parts.push(`<svg x="${x0.toFixed(1)}" y="${y + 3}" width="${w.toFixed(1)}" height="${rowH - 6}"><text x="3" y="11">${esc(label)}</text></svg>`);
        }
      });
      svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
      svg.setAttribute('height', height);
      svg.innerHTML = parts.join('');
      svg.dataset.bars = attempts.length;
      svg.onmouseover = ev => hovered(svg, bars, ev);
      svg.onmouseleave = () => hovered(svg, bars, null);
      brush(svg, x, tOf, from, to, height);
    }
    // Stretches of [from, to] (seconds since the run's first attempt) in which none of `spans` was
    // under way, between two that were, each at least 30 s long and a fifth of the time shown.
    function idleGaps(spans, from, to) {
      const shown = spans.filter(([s, e]) => e > from && s < to).sort((a, b) => a[0] - b[0]);
      const gaps = [], least = Math.max(30, (to - from) / 5);
      let reach = shown.length ? Math.max(from, shown[0][0]) : to;
      for (const [s, e] of shown) {
        if (s - reach >= least) gaps.push([reach, s]);
        reach = Math.max(reach, e);
      }
      return gaps;
    }
    // The chart's time axis: seconds to x (`x`) and back (`tOf`), each of `gaps` drawn 100 px wide
    // (what it says, "40 min 15 s idle", fits inside) and the rest of [from, to], the seconds
    // shown that something was under way (`worked`), on one scale across the plot.
    function brokenAxis(gaps, from, to, labelW, plotW) {
      // (At most half the plot, whatever their number: a phone's chart is 200 px wide.)
      const gapW = Math.min(100, plotW / 2 / Math.max(1, gaps.length));
      const worked = to - from - gaps.reduce((n, [g0, g1]) => n + g1 - g0, 0);
      const scale = (plotW - gapW * gaps.length) / Math.max(1e-3, worked);
      const x = t => {
        let px = labelW, prev = from;
        for (const [g0, g1] of gaps) {
          if (t <= g0) break;
          if (t < g1) return px + (g0 - prev) * scale + (t - g0) / (g1 - g0) * gapW;
          px += (g0 - prev) * scale + gapW; prev = g1;
        }
        return px + (t - prev) * scale;
      };
      const tOf = px => {
        let at = labelW, prev = from;
        for (const [g0, g1] of gaps) {
          const gx = at + (g0 - prev) * scale;
          if (px <= gx) break;
          if (px < gx + gapW) return g0 + (px - gx) / gapW * (g1 - g0);
          at = gx + gapW; prev = g1;
        }
        return prev + (px - at) / scale;
      };
      return { x, tOf, worked };
    }
    // The tooltip of the bar under the pointer (`ev`: a mouseover; null: the pointer left the
    // chart): what ran, which try, how it ended, how long it took, and its error. Shown at once
    // beside the pointer, hidden off the bars.
    function hovered(svg, bars, ev) {
      let tip = document.getElementById('gantt-tip');
      if (!tip) { tip = document.createElement('div'); tip.id = 'gantt-tip'; tip.setAttribute('role', 'tooltip'); document.body.appendChild(tip); }
      const bar = ev && ev.target;
      const found = bar instanceof SVGRectElement && bar.classList.contains('bar') ? bars[Array.prototype.indexOf.call(svg.querySelectorAll('rect.bar'), bar)] : null;
      if (!found) { tip.hidden = true; return; }
      const [a, seconds] = found;
      tip.textContent = `${a.stage} · attempt ${a.attempt_no} · ${a.state} · ${fmtDur(seconds)}${a.error ? '\n' + a.error : ''}`;
      tip.hidden = false;
      // Beside the pointer, and inside the window.
      const left = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8), top = ev.clientY + 16;
      tip.style.left = Math.max(4, left) + 'px';
      tip.style.top = (top + tip.offsetHeight > window.innerHeight ? ev.clientY - tip.offsetHeight - 8 : top) + 'px';
    }
    function niceStep(raw) {
      const p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1e-3))));
      for (const m of [1, 2, 5, 10]) if (raw <= m * p) return m * p;
      return 10 * p;
    }
    function brush(svg, x, tOf, from, to, height) {
      let down = null, rect = null;
      const tAt = ev => { const b = svg.getBoundingClientRect(); return tOf((ev.clientX - b.left) * (svg.viewBox.baseVal.width / b.width)); };
      svg.onmousedown = ev => { down = tAt(ev); rect = document.createElementNS('http://www.w3.org/2000/svg', 'rect'); rect.setAttribute('class', 'brush'); rect.setAttribute('y', 0); rect.setAttribute('height', height - 16); svg.appendChild(rect); };
      svg.onmousemove = ev => { if (down == null) return; const t = tAt(ev); rect.setAttribute('x', x(Math.min(down, t))); rect.setAttribute('width', Math.abs(x(t) - x(down))); };
      svg.onmouseup = ev => { if (down == null) return; const t = tAt(ev); const a = Math.max(0, Math.min(down, t)), b = Math.max(down, t); down = null; if (b - a > (to - from) / 200) { zoom = [a, b]; } drawGantt(); };
    }

    // ---- live updates ----
    const runMatch = location.pathname.match(/^\/runs\/(\d+)$/);
    let drawing = false, again = false;
    async function refresh() {
      if (drawing) { again = true; return; }
      drawing = true;
      try { runMatch ? await drawRun(runMatch[1]) : await drawFarm(); }
      catch (e) {
        // A fetch that got no answer at all rejects with a TypeError ("Failed to fetch"): the
        // server is stopped or restarting, and the event stream reconnects by itself.
        document.getElementById('status').textContent = e instanceof TypeError
          ? `no answer from ${location.host}: the coordinator is stopped or restarting; trying again every second` : String(e.message || e);
      }
      drawing = false;
      if (again) { again = false; setTimeout(refresh, 100); }
    }
    function connect() {
      const es = new EventSource(withToken('/api/events'));
      const dot = document.getElementById('live');
      let lost = false;
      es.addEventListener('change', () => refresh());
      // The stream lost (the coordinator stopped or restarting; it retries every second): a
      // refresh says so in words, with no run running too (whose ticks would have found it).
      // Back: what changed meanwhile (a run resumed as it started) is drawn at once.
      es.onopen = () => { dot.classList.add('on'); if (lost) { lost = false; refresh(); } };
      es.onerror = () => { dot.classList.remove('on'); lost = true; refresh(); };
    }
    refresh();
    connect();
    // Running runs' durations and ETAs tick even when nothing was recorded.
    setInterval(() => { if (document.querySelector('[data-state="running"]')) refresh(); }, 5000);
    addEventListener('resize', () => drawGantt());
    """#
}
