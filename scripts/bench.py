#!/usr/bin/env python3
"""The render benchmark (run it through scripts/bench, which sets up its environment).

  scripts/bench [small|medium|batch|suggest|all] [--reps N] [--no-moviepy] [--quality-only]

Workload (generated deterministically with the ffmpeg CLI into .bench/media/SIZE):
  small = 12 clips, medium = 48 clips: 1920x1080 landscape, and portrait stored as 1920x1080 with
  a 90-degree display matrix as iPhones do; 30 and 60 fps; 3 s and 10 s; H.264 and HEVC; AAC.
  Plus 2 JPEG stills (4032x3024) and a music track.
Job: every clip trimmed (the first 0.5 s dropped), auto-rotated, fitted to 1280x720 at 30 fps,
  a colour adjustment, a date text overlay, 0.25 s fades through black between items; the stills
  as 3 s Ken Burns items; the music mixed under the clip audio; x264 veryfast crf 23 + AAC 160k.
Contenders, interleaved round by round: Threadline (embedded default, workers = cores), the same
  job as ONE ffmpeg -filter_complex command, the decode floor (ffmpeg -f null of all sources), the
  encode floor (x264 of the output's duration of 1280x720 frames at the same settings), and for
  `small` MoviePy 2 (its own venv, its own ffmpeg binary).

batch = 40 distinct small projects (three 3 s clips each from a pool of eight 1280x720 clips, two
  of them portrait; captions per project; 640x360, 0.25 s fades; no soundtrack). Contenders,
  interleaved: one `coord submit` of all 40 pipeline files on a fresh state folder, and the 40
  expert ffmpeg commands (as above) run two at a time with `xargs -P 2`.

suggest = the `coord suggest` library scan: 10,000 files (8,000 JPEGs dated in EXIF by exiftool,
  2,000 MOVs dated by QuickTime creationdate) in 100 folders. Contenders, interleaved: the first
  scan (`coord suggest list` on a new state folder, no contact sheets), a rescan with nothing
  changed, and exiftool reading the same dates from the same files (`exiftool -fast2 -r`).
"""
import argparse, datetime, json, os, platform, shlex, shutil, statistics, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, ".bench")
COORD = os.path.join(ROOT, ".build", "release", "coord")
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
CORES = os.cpu_count() or 1
SIZES = {"small": 12, "medium": 48}
ORDER = ["small", "medium", "batch", "suggest"]
SUGGEST_FILES, SUGGEST_FOLDERS, SUGGEST_TODAY = 10_000, 100, "2026-06-20"
W, H, FPS, FADE, TRIM = 1280, 720, 30, 0.25, 0.5


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


# ---------------------------------------------------------------- workload

def set_rotation(path, degrees):
    """A display matrix in the first tkhd, as phones write it (ffmpeg 5.1's CLI cannot)."""
    data = bytearray(open(path, "rb").read())
    at = data.find(b"tkhd")
    version = data[at + 4]
    off = at + 4 + 4 + (32 if version == 1 else 20) + 8 + 8
    one, minus, w = 0x00010000, 0xFFFF0000, 0x40000000
    m = {90: [0, one, 0, minus, 0, 0, 0, 0, w], 270: [0, minus, 0, one, 0, 0, 0, 0, w]}[degrees]
    for i, v in enumerate(m):
        data[off + 4 * i: off + 4 * i + 4] = v.to_bytes(4, "big")
    open(path, "wb").write(data)


def clip_specs(n):
    for k in range(n):
        yield dict(name=f"clip{k:02d}.mp4", portrait=(k % 3 == 1), fps=60 if k % 4 == 3 else 30,
                   seconds=3 if k % 2 == 0 else 10, hevc=(k % 5 == 4), tone=220 + 15 * k)


def generate(size):
    d = os.path.join(BENCH, "media", size)
    os.makedirs(d, exist_ok=True)
    for s in clip_specs(SIZES[size]):
        path = os.path.join(d, s["name"])
        if os.path.exists(path):
            continue
        tmp = path + ".tmp.mp4"
        video = (["-c:v", "libx265", "-preset", "ultrafast", "-crf", "26", "-tag:v", "hvc1", "-x265-params", "log-level=error"]
                 if s["hevc"] else ["-c:v", "libx264", "-preset", "veryfast", "-crf", "20"])
        run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=size=1920x1080:rate={s['fps']}:duration={s['seconds']}",
             "-f", "lavfi", "-i", f"sine=frequency={s['tone']}:sample_rate=48000:duration={s['seconds']}",
             *video, "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "128k", "-ac", "2", "-movflags", "+faststart", tmp])
        if s["portrait"]:
            set_rotation(tmp, 90)
        os.replace(tmp, path)
    for k in range(2):
        path = os.path.join(d, f"still{k}.jpg")
        if not os.path.exists(path):
            run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=size=4032x3024:rate=1:duration=1",
                 "-vf", f"hue=h={90 * k}", "-frames:v", "1", "-q:v", "3", path])
    music = os.path.join(d, "music.m4a")
    if not os.path.exists(music):
        run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
             "aevalsrc=0.2*sin(2*PI*196*t)*(0.6+0.4*sin(2*PI*0.5*t))|0.2*sin(2*PI*247*t)*(0.6+0.4*cos(2*PI*0.5*t)):s=48000:d=400",
             "-c:a", "aac", "-b:a", "160k", music])
    return d


def items(size):
    """Clips with the two stills at a third and two thirds of the way."""
    clips = list(clip_specs(SIZES[size]))
    out = [("clip", c) for c in clips]
    n = len(out)
    out.insert(2 * n // 3, ("still", {"name": "still1.jpg"}))
    out.insert(n // 3, ("still", {"name": "still0.jpg"}))
    return out


def write_pipeline(size, media, output):
    lines = [f"# scripts/bench: the {size} job", "version: 1", f"name: bench-{size}", "output:",
             f"  path: {output}", f"  size: {W}x{H}", f"  fps: {FPS}", "  fit: letterbox",
             "  video: { codec: h264, crf: 23, preset: veryfast }", "  audio: { codec: aac, bitrate: 160k }",
             f"transition: {{ type: fade, duration: {FADE} }}",
             "soundtrack: { source: music.m4a, volume: 0.3, clip_audio: 1 }", "clips:"]
    for k, (kind, s) in enumerate(items(size)):
        if kind == "clip":
            lines += [f"  - video: {s['name']}", f"    trim: {{ start: {TRIM} }}",
                      "    adjust: { contrast: 1.05, saturation: 1.1 }",
                      f"    text: {{ value: \"2026-06-{k % 28 + 1:02d}\", position: bottom-left }}"]
        else:
            lines += [f"  - photo: {s['name']}", "    duration: 3",
                      "    ken_burns: { from: { zoom: 1.0 }, to: { zoom: 1.2 } }"]
    path = os.path.join(media, "pipeline.yaml")
    open(path, "w").write("\n".join(lines) + "\n")
    return path


# ---------------------------------------------------------------- the expert ffmpeg command

def ffmpeg_command(size, media, pipeline, output):
    return expert_command(items(size), media, pipeline, output, W, H, music=True)


def expert_command(job_items, media, pipeline, output, W, H, music):
    """ONE ffmpeg -filter_complex command for the same job, frame counts taken from Threadline's plan.

    Written as an expert would: each item is cut to exactly the frames and samples it shows, its
    fades through black are plain fade/afade filters at known frame and sample ranges, and the items
    are joined by one concat filter (xfade chains buffer every later input and cost far more).
    Rates are converted before scaling, so 60 fps sources are scaled once per output frame."""
    plan = json.loads(subprocess.check_output([COORD, "plan", pipeline, "--json"]))
    timeline = plan["timeline"]
    n = len(timeline)
    # Samples each transition overlaps: where the next item starts against where this one ends.
    overlap = [0] * (n + 1)
    for k in range(1, n):
        overlap[k] = timeline[k - 1]["sampleStart"] + timeline[k - 1]["sampleCount"] - timeline[k]["sampleStart"]
    inputs, f, joined = [], [], []
    for idx, ((kind, s), t) in enumerate(zip(job_items, timeline)):
        frames, samples = t["frameCount"], t["sampleCount"]
        head, tail = t["headFrames"], t["tailFrames"]
        # Through black: the first half of a transition shows the outgoing item fading out,
        # the second half the incoming one fading in (as Threadline's transition does).
        drop_head, fade_in = head // 2, head - head // 2
        fade_out, drop_tail = tail // 2, tail - tail // 2
        first, last = drop_head, frames - drop_tail
        head_s, tail_s = overlap[idx], overlap[idx + 1]
        first_s, last_s = head_s // 2, samples - (tail_s - tail_s // 2)
        fades = []
        if fade_in:
            fades.append(f"fade=t=in:start_frame=0:nb_frames={fade_in}")
        if fade_out:
            fades.append(f"fade=t=out:start_frame={last - first - fade_out}:nb_frames={fade_out}")
        afades = []
        if head_s:
            afades.append(f"afade=t=in:curve=tri:start_sample=0:nb_samples={head_s - head_s // 2}")
        if tail_s:
            afades.append(f"afade=t=out:curve=tri:start_sample={last_s - first_s - tail_s // 2}:nb_samples={tail_s // 2}")
        vf = ",".join(fades + ["format=yuv420p"])
        af = ",".join(afades + ["anull"])
        src = os.path.join(media, s["name"])
        if kind == "clip":
            # As an expert writes it: portrait clips are scaled in their stored orientation and turned
            # after (no autorotation of full-size frames), and the colour adjustment touches only the
            # picture, before the letterbox bars are added.
            if s["portrait"]:
                inputs += ["-noautorotate", "-ss", f"{TRIM}", "-i", src]
                fit = f"scale={H}:{W}:force_original_aspect_ratio=decrease:force_divisible_by=2,transpose=clock,"
            else:
                inputs += ["-ss", f"{TRIM}", "-i", src]
                fit = f"scale={W}:{H}:force_original_aspect_ratio=decrease:force_divisible_by=2,"
            f.append(f"[{idx}:v]fps={FPS},tpad=stop_mode=clone:stop=-1,trim=start_frame={first}:end_frame={last},setpts=PTS-STARTPTS,"
                     f"{fit}eq=contrast=1.05:saturation=1.1,"
                     f"pad={W}:{H}:(ow-iw)/2:(oh-ih)/2,setsar=1,"
                     f"drawtext=fontfile={FONT}:text='{s.get('text', f'2026-06-{idx % 28 + 1:02d}')}':fontsize={H // 18}:fontcolor=white:"
                     f"shadowx=2:shadowy=2:shadowcolor=black@0.6:x=h*0.05:y=h-text_h-h*0.05,{vf}[v{idx}]")
            f.append(f"[{idx}:a]aresample=48000,aformat=sample_fmts=fltp:channel_layouts=stereo,apad,"
                     f"atrim=start_sample={first_s}:end_sample={last_s},asetpts=PTS-STARTPTS,{af}[a{idx}]")
        else:
            inputs += ["-i", src]
            # Ken Burns: scale the still once to twice the output, then zoompan 1.0 → 1.2 around the centre.
            f.append(f"[{idx}:v]scale={2 * W}:{2 * H}:force_original_aspect_ratio=increase,crop={2 * W}:{2 * H},"
                     f"zoompan=z='1+0.2*on/{frames - 1}':x='iw/2-iw/zoom/2':y='ih/2-ih/zoom/2':d={frames}:s={W}x{H}:fps={FPS},"
                     f"setsar=1,trim=start_frame={first}:end_frame={last},setpts=PTS-STARTPTS,{vf}[v{idx}]")
            f.append(f"anullsrc=r=48000:cl=stereo,aformat=sample_fmts=fltp,atrim=end_sample={last_s - first_s},{af}[a{idx}]")
        joined.append(f"[v{idx}][a{idx}]")
    f.append("".join(joined) + f"concat=n={n}:v=1:a=1[vout][acat]")
    total = (timeline[-1]["startFrame"] + timeline[-1]["frameCount"]) / FPS
    if music:
        inputs += ["-i", os.path.join(media, "music.m4a")]
        f.append(f"[{n}:a]aresample=48000,aformat=sample_fmts=fltp:channel_layouts=stereo,atrim=0:{total:.6f},volume=0.3[m]")
        f.append("[acat][m]amix=inputs=2:duration=first:normalize=0[aout]")
    else:
        f[-1] = f[-1].replace("[acat]", "[aout]")
    return ["ffmpeg", "-v", "error", "-y", *inputs, "-filter_complex", ";".join(f), "-map", "[vout]", "-map", "[aout]",
            "-c:v", "libx264", "-preset", "veryfast", "-crf", "23", "-pix_fmt", "yuv420p",
            "-c:a", "aac", "-b:a", "160k", "-movflags", "+faststart", output], total


def decode_floor(size, media):
    srcs = [os.path.join(media, s["name"]) for _, s in items(size)]
    cmd = ["ffmpeg", "-v", "error"]
    for s in srcs:
        cmd += ["-i", s]
    for k in range(len(srcs)):
        cmd += ["-map", f"{k}:v"]
    return cmd + ["-f", "null", "-"]


def encode_floor(total):
    return ["ffmpeg", "-v", "error", "-f", "lavfi", "-i", f"testsrc2=size={W}x{H}:rate={FPS}:duration={total:.3f}",
            "-c:v", "libx264", "-preset", "veryfast", "-crf", "23", "-pix_fmt", "yuv420p", "-f", "null", "-"]


MOVIEPY = r'''
import sys, json
from moviepy import VideoFileClip, ImageClip, TextClip, AudioFileClip, CompositeVideoClip, CompositeAudioClip, concatenate_videoclips, vfx, afx
job = json.load(open(sys.argv[1]))
W, H, FADE = job["w"], job["h"], job["fade"]
parts = []
for it in job["items"]:
    if it["kind"] == "clip":
        c = VideoFileClip(it["path"]).subclipped(job["trim"])
        c = c.resized(height=H) if c.w / c.h < W / H else c.resized(width=W)
        c = c.with_effects([vfx.MultiplyColor(1.0), vfx.LumContrast(0, 5, 128)])
        t = TextClip(font=job["font"], text=it["date"], font_size=H // 18, color="white").with_duration(c.duration).with_position((int(H * 0.05), int(H * 0.9)))
        c = CompositeVideoClip([c.with_position("center"), t], size=(W, H))
    else:
        img = ImageClip(it["path"]).resized(height=H).with_duration(3)
        img = img.resized(lambda t: 1 + 0.2 * t / 3).with_position("center")
        c = CompositeVideoClip([img], size=(W, H)).with_duration(3)
    parts.append(c.with_effects([vfx.FadeIn(FADE / 2), vfx.FadeOut(FADE / 2)]))
movie = concatenate_videoclips(parts, method="compose")
music = AudioFileClip(job["music"]).subclipped(0, movie.duration).with_volume_scaled(0.3)
movie = movie.with_audio(CompositeAudioClip([movie.audio, music]))
movie.write_videofile(job["out"], fps=30, codec="libx264", preset="veryfast", ffmpeg_params=["-crf", "23"],
                      audio_codec="aac", audio_bitrate="160k", threads=job["threads"], logger=None)
'''


def moviepy_command(size, media, output):
    job = {"w": W, "h": H, "fade": FADE, "trim": TRIM, "font": FONT, "threads": CORES, "out": output,
           "music": os.path.join(media, "music.m4a"), "items": []}
    for k, (kind, s) in enumerate(items(size)):
        job["items"].append({"kind": kind, "path": os.path.join(media, s["name"]), "date": f"2026-06-{k % 28 + 1:02d}"})
    jp = os.path.join(media, "moviepy-job.json")
    json.dump(job, open(jp, "w"))
    sp = os.path.join(BENCH, "moviepy_job.py")
    open(sp, "w").write(MOVIEPY)
    return [sys.executable, sp, jp]


# ---------------------------------------------------------------- measuring

def timed(cmd, env=None):
    """Wall seconds, CPU seconds of the command and all its descendants, peak RSS (MB) of the biggest."""
    before = os.times()
    t0 = time.monotonic()
    r = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", os.path.join(BENCH, "time.out"), *cmd],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    wall = time.monotonic() - t0
    after = os.times()
    if r.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd[:6])} … failed ({r.returncode}): {r.stderr.decode()[-2000:]}")
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    rss = int(open(os.path.join(BENCH, "time.out")).read().split()[-1]) / 1024
    return {"wall": wall, "cpu": cpu, "rss_mb": rss, "stdout": r.stdout.decode()}


def interleave(label, contenders, reps, once=()):
    """Runs the contenders round by round (`once`: only in the first round); their measurements by name."""
    results = {k: [] for k in contenders}
    for r in range(reps):
        for name, fn in contenders.items():
            if name in once and r > 0:
                continue
            m = fn()
            results[name].append(m)
            print(f"  {label} round {r + 1}/{reps}: {name:20s} {m['wall']:7.2f} s wall, {m['cpu']:7.2f} s CPU", file=sys.stderr, flush=True)
    return results


def threadline(pipeline, state):
    if os.path.isdir(state):
        subprocess.run(["rm", "-rf", state], check=True)     # a cold render every round: nothing cached
    m = timed([COORD, "submit", pipeline, "--state", state, "--workers", str(CORES), "--json"])
    j = json.loads(m["stdout"].strip().splitlines()[-1])
    m["coordinator_rss_mb"] = j["coordinator_peak_rss"] / 1048576
    m["worker_rss_mb"] = j["worker_peak_rss"] / 1048576
    return m


def probe(path):
    out = subprocess.check_output(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                                   "stream=nb_read_frames:format=duration,size,bit_rate", "-of", "json", path])
    j = json.loads(out)
    return {"frames": int(j["streams"][0]["nb_read_frames"]), "duration": float(j["format"]["duration"]),
            "size_mb": int(j["format"]["size"]) / 1e6, "kbps": int(j["format"]["bit_rate"]) / 1000}


def x264_settings(path):
    """The option string libx264 writes into the stream (SEI), less its thread counts."""
    data = open(path, "rb").read(8 << 20)
    k = data.find(b"x264 - core")
    if k < 0:
        return None
    text = data[k:data.index(b"\0", k)].decode(errors="replace")
    opts = text.split("options: ", 1)[-1].split()
    return " ".join(o for o in opts if not o.split("=")[0].endswith("threads"))


def compare(a, b, frames):
    """SSIM (all) and PSNR (average) of a's first frames against b's."""
    out = subprocess.run(["ffmpeg", "-v", "info", "-nostats", "-i", a, "-i", b, "-frames:v", str(frames), "-lavfi",
                          # Frame by frame: MP4 and Matroska round timestamps differently, so pair by index.
                          "[0:v]settb=1/30,setpts=N,split[x][p];[1:v]settb=1/30,setpts=N,split[y][q];[x][y]ssim;[p][q]psnr",
                          "-f", "null", "-"], stderr=subprocess.PIPE, check=True).stderr.decode()
    ssim = float(out.split("SSIM ")[1].split("All:")[1].split()[0])
    psnr = out.split("PSNR ")[1].split("average:")[1].split()[0]
    return {"ssim": ssim, "psnr": float("inf") if psnr == "inf" else float(psnr)}


def quality(size, media, pipeline, tl_out, ff_out, out_dir):
    """Each output against a lossless render (x264 crf 0) of the same job's first items, by its own
    renderer: what each loses to encoding. Plus the two outputs against each other, and their x264
    settings side by side."""
    plan = json.loads(subprocess.check_output([COORD, "plan", pipeline, "--json"]))["timeline"]
    frames = plan[3]["startFrame"]           # items 0–2 and the transitions between them
    # Threadline: the same pipeline cut to four items, losslessly.
    text = open(pipeline).read().replace("crf: 23", "crf: 0")
    head, clips = text.split("clips:\n")
    entries = ["  - " + e for e in clips.split("  - ")[1:]]
    lossless_tl = os.path.join(out_dir, "threadline-lossless.mp4")
    p = os.path.join(media, "pipeline-lossless.yaml")
    open(p, "w").write(head.replace(tl_out, lossless_tl) + "clips:\n" + "".join(entries[:4]))
    state = os.path.join(BENCH, "state", size + "-lossless")
    subprocess.run(["rm", "-rf", state], check=True)
    subprocess.run([COORD, "submit", p, "--state", state, "--workers", str(CORES)], check=True, stdout=subprocess.DEVNULL)
    # ffmpeg: its own command, losslessly, stopped after those frames.
    lossless_ff = os.path.join(out_dir, "ffmpeg-lossless.mkv")
    cmd, _ = ffmpeg_command(size, media, pipeline, lossless_ff)
    cmd = [("0" if c == "23" and cmd[i - 1] == "-crf" else c) for i, c in enumerate(cmd)]
    cmd[-1:-1] = ["-frames:v", str(frames)]
    cmd = [c for c in cmd if c not in ("-movflags", "+faststart")]
    subprocess.run(cmd, check=True)
    tl_settings, ff_settings = x264_settings(tl_out), x264_settings(ff_out)
    return {"frames": frames,
            "threadline": compare(tl_out, lossless_tl, frames), "ffmpeg": compare(ff_out, lossless_ff, frames),
            "threadline_vs_ffmpeg": compare(tl_out, ff_out, frames),
            "same_x264_settings": tl_settings == ff_settings and tl_settings is not None,
            "x264_settings": tl_settings}


def bench(size, reps, moviepy):
    media = generate(size)
    out_dir = os.path.join(BENCH, "out", size)
    os.makedirs(out_dir, exist_ok=True)
    tl_out, ff_out, mp_out = (os.path.join(out_dir, n) for n in ("threadline.mp4", "ffmpeg.mp4", "moviepy.mp4"))
    pipeline = write_pipeline(size, media, tl_out)
    ff, total = ffmpeg_command(size, media, pipeline, ff_out)
    open(os.path.join(out_dir, "ffmpeg-command.sh"), "w").write(shlex.join(ff) + "\n")
    contenders = {
        "threadline": lambda: threadline(pipeline, os.path.join(BENCH, "state", size)),
        "ffmpeg": lambda: timed(ff),
        "decode floor": lambda: timed(decode_floor(size, media)),
        "encode floor": lambda: timed(encode_floor(total)),
    }
    if moviepy and size == "small":
        contenders["moviepy"] = lambda: timed(moviepy_command(size, media, mp_out))
    results = interleave(size, contenders, reps, once={"moviepy"})   # MoviePy: ten minutes a round, once is enough
    summary = {}
    for name, ms in results.items():
        walls = [m["wall"] for m in ms]
        cpus = [m["cpu"] for m in ms]
        s = {"wall_min": min(walls), "wall_median": statistics.median(walls), "walls": walls,
             "cpu_median": statistics.median(cpus), "busy": statistics.median(cpus) / (statistics.median(walls) * CORES),
             "peak_rss_mb": max(m["rss_mb"] for m in ms)}
        if name == "threadline":
            s["coordinator_rss_mb"] = max(m["coordinator_rss_mb"] for m in ms)
            s["worker_rss_mb"] = max(m["worker_rss_mb"] for m in ms)
        summary[name] = s
    ffw = summary["ffmpeg"]["wall_median"]
    floor = summary["decode floor"]["wall_median"] + summary["encode floor"]["wall_median"]
    for s in summary.values():
        s["vs_ffmpeg"] = s["wall_median"] / ffw
        s["vs_floor"] = s["wall_median"] / floor
    outputs = {"threadline": probe(tl_out), "ffmpeg": probe(ff_out)}
    if "moviepy" in summary:
        outputs["moviepy"] = probe(mp_out)
        summary["threadline"]["vs_moviepy"] = summary["threadline"]["wall_median"] / summary["moviepy"]["wall_median"]
    q = quality(size, media, pipeline, tl_out, ff_out, out_dir)
    return {"size": size, "clips": SIZES[size], "stills": 2, "output_seconds": total, "reps": reps,
            "results": summary, "outputs": outputs, "quality": q, "ffmpeg_command": os.path.relpath(os.path.join(out_dir, "ffmpeg-command.sh"), ROOT)}


# ---------------------------------------------------------------- batch: many small projects at once

BATCH_PROJECTS, BATCH_POOL, BW, BH = 40, 8, 640, 360


def batch_items(k):
    """Project k: three of the pool's clips (each project a different trio and captions)."""
    picks = [k % BATCH_POOL, (k + 3) % BATCH_POOL, (k + 5) % BATCH_POOL]
    return [("clip", {"name": f"clip{c}.mp4", "portrait": c % 4 == 1, "text": f"Project {k + 1} · {i + 1}"}) for i, c in enumerate(picks)]


def generate_batch():
    d = os.path.join(BENCH, "media", "batch")
    os.makedirs(d, exist_ok=True)
    for c in range(BATCH_POOL):
        path = os.path.join(d, f"clip{c}.mp4")
        if os.path.exists(path):
            continue
        tmp = path + ".tmp.mp4"
        run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=size=1280x720:rate=30:duration=3",
             "-f", "lavfi", "-i", f"sine=frequency={300 + 40 * c}:sample_rate=48000:duration=3",
             "-c:v", "libx264", "-preset", "veryfast", "-crf", "20", "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "128k", "-ac", "2",
             "-movflags", "+faststart", tmp])
        if c % 4 == 1:
            set_rotation(tmp, 90)
        os.replace(tmp, path)
    return d


def write_batch_pipeline(k, media, output):
    lines = ["# scripts/bench: one project of the batch job", "version: 1", f"name: batch-{k + 1:02d}", "output:",
             f"  path: {output}", f"  size: {BW}x{BH}", f"  fps: {FPS}", "  fit: letterbox",
             "  video: { codec: h264, crf: 23, preset: veryfast }", "  audio: { codec: aac, bitrate: 160k }",
             f"transition: {{ type: fade, duration: {FADE} }}", "clips:"]
    for kind, s in batch_items(k):
        lines += [f"  - video: {s['name']}", f"    trim: {{ start: {TRIM} }}", "    adjust: { contrast: 1.05, saturation: 1.1 }",
                  f"    text: {{ value: \"{s['text']}\", position: bottom-left }}"]
    path = os.path.join(media, f"p{k + 1:02d}.yaml")
    open(path, "w").write("\n".join(lines) + "\n")
    return path


def bench_batch(reps):
    """40 distinct small projects: one `coord submit` of all 40 files against the same projects as
    per-project expert ffmpeg commands, two at a time (xargs -P 2), interleaved round by round."""
    media = generate_batch()
    out = os.path.join(BENCH, "out", "batch")
    for sub in ("threadline", "ffmpeg"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    pipelines, scripts, seconds = [], [], 0.0
    for k in range(BATCH_PROJECTS):
        p = write_batch_pipeline(k, media, os.path.join(out, "threadline", f"p{k + 1:02d}.mp4"))
        cmd, total = expert_command(batch_items(k), media, p, os.path.join(out, "ffmpeg", f"p{k + 1:02d}.mp4"), BW, BH, music=False)
        sp = os.path.join(out, "ffmpeg", f"p{k + 1:02d}.sh")
        open(sp, "w").write(shlex.join(cmd) + "\n")
        pipelines.append(p); scripts.append(sp); seconds += total
    state = os.path.join(BENCH, "state", "batch")

    def tl():
        if os.path.isdir(state):
            subprocess.run(["rm", "-rf", state], check=True)      # cold: nothing cached
        m = timed([COORD, "submit", *pipelines, "--state", state, "--workers", str(CORES), "--json"])
        states = [json.loads(l)["state"] for l in m["stdout"].strip().splitlines() if l.startswith("{")]
        if states.count("succeeded") != BATCH_PROJECTS:
            raise RuntimeError(f"batch: {states.count('succeeded')} of {BATCH_PROJECTS} projects succeeded")
        return m

    listing = os.path.join(out, "ffmpeg", "commands.txt")
    open(listing, "w").write("\n".join(scripts) + "\n")
    contenders = {"threadline": tl, "ffmpeg (xargs -P 2)": lambda: timed(["xargs", "-a", listing, "-P", "2", "-n", "1", "sh"])}
    results = interleave("batch", contenders, reps)
    summary = {}
    for name, ms in results.items():
        walls = [m["wall"] for m in ms]
        summary[name] = {"wall_min": min(walls), "wall_median": statistics.median(walls), "walls": walls,
                         "cpu_median": statistics.median([m["cpu"] for m in ms]), "peak_rss_mb": max(m["rss_mb"] for m in ms)}
    ffw = summary["ffmpeg (xargs -P 2)"]["wall_median"]
    for v in summary.values():
        v["vs_ffmpeg"] = v["wall_median"] / ffw
    frames = {sub: sum(probe(os.path.join(out, sub, f"p{k + 1:02d}.mp4"))["frames"] for k in range(BATCH_PROJECTS))
              for sub in ("threadline", "ffmpeg")}
    return {"size": "batch", "projects": BATCH_PROJECTS, "output_seconds": seconds, "reps": reps, "results": summary,
            "frames": frames, "goal": 0.8}


def table_batch(r):
    rows = [f"### batch: {r['projects']} distinct small projects (3 clips each, {BW}x{BH}) → {r['output_seconds']:.1f} s of output in all, "
            f"{r['reps']} rounds", "",
            "| contender | wall min (s) | wall median (s) | × ffmpeg | CPU s | peak RSS (MB) |", "|---|---:|---:|---:|---:|---:|"]
    for name, s in r["results"].items():
        rows.append(f"| {name} | {s['wall_min']:.2f} | {s['wall_median']:.2f} | {s['vs_ffmpeg']:.2f} | {s['cpu_median']:.1f} | {s['peak_rss_mb']:.0f} |")
    rows += ["", f"Threadline: one `coord submit` of all {r['projects']} pipeline files on a fresh state folder (all projects share "
             f"the workers). ffmpeg: one expert command per project (as `small`, without the soundtrack), two at a time. "
             f"Frames written: threadline {r['frames']['threadline']}, ffmpeg {r['frames']['ffmpeg']}. Goal: ≤ {r['goal']}× ffmpeg.", ""]
    return "\n".join(rows)


# ---------------------------------------------------------------- suggest scan

def suggest_library():
    """10,000 files in 100 folders; folder f holds one capture day (recent days and earlier Junes)."""
    root = os.path.join(BENCH, "media", "suggest")
    lib = os.path.join(root, "library")
    done = os.path.join(root, "complete-copies")
    if os.path.exists(done):
        return lib
    subprocess.run(["rm", "-rf", root], check=True)
    templates = os.path.join(root, "templates")
    os.makedirs(templates)
    args = []
    for f in range(SUGGEST_FOLDERS):
        year, day = (2026, 20 - f % 40) if f < 60 else (2019 + f % 7, 10 + f % 20)
        month = 6 if day > 0 else 5
        day = day if day > 0 else 31 + day
        stamp = f"{year}:{month:02d}:{day:02d} {8 + f % 12:02d}:{f % 60:02d}:00"
        jpg, mov = os.path.join(templates, f"{f}.jpg"), os.path.join(templates, f"{f}.mov")
        run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=size=320x240:rate=1,hue=h={f * 3.6}", "-frames:v", "1", jpg])
        run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30", "-t", "0.5", "-c:v", "libx264",
             "-preset", "ultrafast", "-movflags", "use_metadata_tags",
             "-metadata", f"com.apple.quicktime.creationdate={stamp.replace(':', '-', 2).replace(' ', 'T')}+0200", mov])
        args += ["-overwrite_original", f"-DateTimeOriginal={stamp}", "-OffsetTimeOriginal=+02:00", jpg, "-execute"]
    argfile = os.path.join(root, "exif.args")
    open(argfile, "w").write("\n".join(args) + "\n")
    run(["exiftool", "-q", "-@", argfile])
    per = SUGGEST_FILES // SUGGEST_FOLDERS
    for f in range(SUGGEST_FOLDERS):
        d = os.path.join(lib, f"{f:03d}")
        os.makedirs(d)
        for k in range(per):
            ext = "mov" if k % 5 == 0 else "jpg"
            # Copies, not hard links: the scan lists a file reached by two paths once (as the same photo).
            shutil.copyfile(os.path.join(templates, f"{f}.{ext}"), os.path.join(d, f"IMG_{f * per + k:05d}.{ext}"))
    open(done, "w").write("ok\n")
    return lib


def bench_suggest(reps):
    lib = suggest_library()
    state = os.path.join(BENCH, "state", "suggest")
    out = os.path.join(BENCH, "out", "suggest")
    listing = [COORD, "suggest", "list", lib, "--today", SUGGEST_TODAY, "--json", "--no-contact-sheets", "--state", state, "--out", out]

    def first():
        subprocess.run(["rm", "-rf", state, out], check=True)
        run([COORD, "suggest", "enable", lib, "--memories", "--state", state], stdout=subprocess.DEVNULL)
        return timed(listing)

    contenders = {"first scan": first, "rescan": lambda: timed(listing),
                  "exiftool": lambda: timed(["exiftool", "-q", "-fast2", "-json", "-r", "-DateTimeOriginal", "-SubSecTimeOriginal",
                                             "-OffsetTimeOriginal", "-CreationDate", "-CreateDate", lib])}
    results = interleave("suggest", contenders, reps)
    listed = json.loads(results["rescan"][-1]["stdout"])
    dated = json.loads(results["exiftool"][-1]["stdout"])
    summary = {}
    for name, ms in results.items():
        walls = [m["wall"] for m in ms]
        summary[name] = {"wall_min": min(walls), "wall_median": statistics.median(walls), "walls": walls,
                         "cpu_median": statistics.median(m["cpu"] for m in ms), "peak_rss_mb": max(m["rss_mb"] for m in ms)}
    base = summary["exiftool"]["wall_median"]
    for s in summary.values():
        s["vs_exiftool"] = s["wall_median"] / base
    return {"size": "suggest", "files": SUGGEST_FILES, "folders": SUGGEST_FOLDERS, "reps": reps, "today": SUGGEST_TODAY,
            "suggestions": len(listed), "files_exiftool_read": len(dated), "results": summary,
            "limits": {"first scan": 60, "rescan": 2}}


def table_suggest(r):
    rows = [f"### suggest: library scan of {r['files']:,} files in {r['folders']} folders, {r['reps']} rounds", "",
            "| contender | wall min (s) | wall median (s) | × exiftool | limit (s) | CPU s | peak RSS (MB) |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for name, s in r["results"].items():
        limit = r["limits"].get(name)
        rows.append(f"| {name} | {s['wall_min']:.2f} | {s['wall_median']:.2f} | {s['vs_exiftool']:.2f} | "
                    f"{limit if limit else '–'} | {s['cpu_median']:.1f} | {s['peak_rss_mb']:.0f} |")
    rows += ["", f"`coord suggest list --today {r['today']}` made {r['suggestions']} suggestions; exiftool read {r['files_exiftool_read']:,} files. "
             "The first scan reads each file's metadata (libexif, libavformat) and decodes no pixels; the rescan finds every "
             "(path, size, mtime) unchanged in the index and reads nothing.", ""]
    return "\n".join(rows)


def table(r):
    if r["size"] == "suggest":
        return table_suggest(r)
    if r["size"] == "batch":
        return table_batch(r)
    rows = [f"### {r['size']}: {r['clips']} clips + {r['stills']} stills → {r['output_seconds']:.1f} s of output, {r['reps']} rounds", "",
            "| contender | wall min (s) | wall median (s) | × ffmpeg | × floor | CPU s | cores busy | peak RSS (MB) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, s in r["results"].items():
        rss = f"{s['peak_rss_mb']:.0f}"
        if name == "threadline":
            rss = f"coordinator {s['coordinator_rss_mb']:.0f}, worker {s['worker_rss_mb']:.0f}"
        rows.append(f"| {name} | {s['wall_min']:.2f} | {s['wall_median']:.2f} | {s['vs_ffmpeg']:.2f} | {s['vs_floor']:.2f} | "
                    f"{s['cpu_median']:.1f} | {100 * s['busy']:.0f} % | {rss} |")
    if "vs_moviepy" in r["results"]["threadline"]:
        rows += ["", f"Threadline / MoviePy wall: {r['results']['threadline']['vs_moviepy']:.2f}"]
    o = r["outputs"]
    rows += ["", "Outputs: " + ", ".join(f"{k} {v['frames']} frames / {v['duration']:.2f} s"
                                     + (f" / {v['size_mb']:.1f} MB / {v['kbps']:.0f} kb/s" if "size_mb" in v else "") for k, v in o.items())]
    if "quality" in r:
        q = r["quality"]
        rows += ["", f"Quality over the first {q['frames']} frames (three items and their fades), each output against a lossless "
                 "(x264 crf 0) render of the same frames by the same renderer:", "",
                 "| output | SSIM | PSNR (dB) |", "|---|---:|---:|",
                 f"| threadline | {q['threadline']['ssim']:.4f} | {q['threadline']['psnr']:.2f} |",
                 f"| ffmpeg | {q['ffmpeg']['ssim']:.4f} | {q['ffmpeg']['psnr']:.2f} |",
                 f"| threadline against ffmpeg | {q['threadline_vs_ffmpeg']['ssim']:.4f} | {q['threadline_vs_ffmpeg']['psnr']:.2f} |", "",
                 "x264 settings " + ("identical" if q["same_x264_settings"] else "DIFFERENT")
                 + f" (thread counts aside): `{q['x264_settings']}`"]
    rows.append("")
    return "\n".join(rows)


def machine():
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    mem = next((int(l.split()[1]) // 1024 // 1024 for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
    ff = subprocess.check_output(["ffmpeg", "-version"]).decode().splitlines()[0]
    return f"{model}, {CORES} cores, {mem} GiB RAM, {platform.platform()}; {ff}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("size", nargs="?", default="all", choices=["small", "medium", "batch", "suggest", "all"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-moviepy", action="store_true")
    ap.add_argument("--quality-only", action="store_true",
                    help="recompute the quality figures of the last run's outputs (no timing) and rewrite the tables")
    a = ap.parse_args()
    sizes = ORDER if a.size == "all" else [a.size]
    command = "scripts/bench " + " ".join(sys.argv[1:])
    if a.quality_only:
        path = os.path.join(BENCH, "results.json")
        results = [r for r in json.load(open(path))["benchmarks"] if r["size"] in sizes and r["size"] not in ("suggest", "batch")]
        for r in results:
            media, out_dir = os.path.join(BENCH, "media", r["size"]), os.path.join(BENCH, "out", r["size"])
            tl_out, ff_out = os.path.join(out_dir, "threadline.mp4"), os.path.join(out_dir, "ffmpeg.mp4")
            r["quality"] = quality(r["size"], media, write_pipeline(r["size"], media, tl_out), tl_out, ff_out, out_dir)
            r["quality_command"] = command
    else:
        results = [bench_suggest(a.reps) if s == "suggest" else bench_batch(a.reps) if s == "batch" else bench(s, a.reps, not a.no_moviepy) for s in sizes]
        here = machine()
        for r in results:
            r["command"], r["date"], r["machine"] = command, datetime.date.today().isoformat(), here
    print("\n".join(table(r) for r in results))
    # Sizes not run this time keep their last results (each table names the command that made it).
    path = os.path.join(BENCH, "results.json")
    kept = json.load(open(path))["benchmarks"] if os.path.exists(path) else []
    results = [r for r in kept if r["size"] not in sizes and "command" in r] + results
    results.sort(key=lambda r: ORDER.index(r["size"]))
    json.dump({"benchmarks": results}, open(path, "w"), indent=2)
    # .bench/ is not in git: on a fresh checkout the sizes not run this time keep the tables the
    # committed docs/BENCHMARKS.md has for them, rather than losing them.
    md_path = os.path.join(ROOT, "docs", "BENCHMARKS.md")
    # Sections are rerun one at a time, on whatever machine a session has: each names its own.
    fresh = {r["size"]: f"{table(r)}\nMade by `{r['command']}` on {r['date']}"
             + (f" ({r['machine']})" if "machine" in r else "")
             + (f"; quality figures by `{r['quality_command']}`" if "quality_command" in r else "") + ".\n" for r in results}
    sections = {**previous_sections(md_path), **fresh} if os.path.exists(md_path) else fresh
    text = "\n".join(sections[size] for size in ORDER if size in sections)
    md = ["# Benchmarks", "", "Generated by `scripts/bench` — do not edit by hand; run it again.", "",
          "- Each section ends with the command, the day and the machine that made it (sections made before 2026-12-03 "
          "name no machine: they ran on one of the 2-core kinds that BENCHMARKS-SCHEDULER.md describes).",
          "- Wall times are min and median of the rounds, contenders interleaved round by round; ratios use medians.",
          "- × floor: wall ÷ (decode floor + encode floor). Cores busy: CPU seconds ÷ (wall × cores).",
          "- The ffmpeg command is written to `.bench/out/SIZE/ffmpeg-command.sh`; the job is described in `scripts/bench.py`. "
          "It cuts each item to the frames it shows, fades with fade/afade at known frames, joins with one concat filter and "
          "converts the frame rate before scaling (an xfade chain instead took 1.8× as long and 18 GB).",
          "- MoviePy (small only) runs in the first round only: about ten minutes a round.",
          "- Threadline runs as `coord submit` does by default: one worker process a core, one pipeline each, "
          "single-threaded codecs; every round starts from an empty state folder (nothing cached).",
          "- The scheduler's figures (`scripts/bench-scheduler`) are in [BENCHMARKS-SCHEDULER.md](BENCHMARKS-SCHEDULER.md).", "",
          text]
    open(md_path, "w").write("\n".join(md))


def previous_sections(md_path):
    """Each size's section of an existing BENCHMARKS.md, from its "### size:" heading through its
    "Made by" line, verbatim."""
    sections, size, lines = {}, None, []
    for line in open(md_path).read().splitlines():
        if line.startswith("### "):
            size, lines = line[4:].split(":", 1)[0].strip(), []
        if size is not None:
            lines.append(line)
            if line.startswith("Made by "):
                sections[size] = "\n".join(lines) + "\n"
                size = None
    return sections


if __name__ == "__main__":
    main()
