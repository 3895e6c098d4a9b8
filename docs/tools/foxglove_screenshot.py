#!/usr/bin/env python3
"""Screenshot of an armtwin MCAP run log opened in Foxglove Studio's web app (docs/img/foxglove_run.png).

The viewer is **Foxglove Studio 1.48.0** (open source, MPL-2.0), the last release of it on npm:
the package ``@foxglove/studio-base@1.48.0`` ships the studio's prebuilt web bundle (``assets/index.js``, a UMD library that needs React 17 beside it).
Lichtblick, the community fork, publishes no web build on npm (``@lichtblick/suite`` is only its
extension API, TypeScript sources), so this script does not use it. It is not the current
Foxglove app either, which is closed source and cannot be installed here.

What the script does, with nothing but npm, Python and Debian's Chromium:

1. ``npm pack`` ``@foxglove/studio-base@1.48.0``, ``react@17.0.2`` and ``react-dom@17.0.2`` into a
   cache folder (default ``~/.cache/armtwin-lichtblick``, never in the repository) and writes a
   small ``index.html`` there that mounts the studio's ``App`` component (what Foxglove's own
   ``studio-web`` package did), with an in-memory layout made for an armtwin run: a 3D panel
   (the robot's URDF posed by the log's ``/tf``, the programmed path ``/path/planned``, the
   flange ``/tool_pose``; the URDF is the repository's ``robots/urdf/ROBOT.urdf``, the file the log
   carries on ``/robot_description``, loaded by URL because its OBJ meshes are relative paths that
   a URDF read from a topic cannot resolve; meshes read Z-up, the studio's default being Y-up), a Plot of ``/joint_states`` positions, a Plot of the flange position and a
   Raw Messages panel on ``/gcode/line``.
2. Writes the run log (``armtwin run PROGRAM --robot ROBOT --log run.mcap``) unless ``--mcap``
   names one.
3. Serves the viewer, the MCAP (with HTTP Range requests, which the studio's remote-file source
   needs) and ``robots/urdf`` (the URDF's OBJ meshes are relative paths) on 127.0.0.1.
4. Opens ``/?ds=remote-file&ds.url=…/run.mcap&layoutId=armtwin-run&time=…`` in headless
   Chromium driven over the DevTools protocol (the venv's ``websockets``), waits until the
   panels have drawn, and saves a PNG screenshot.

Usage (from the repository root, in the venv)::

    python docs/tools/foxglove_screenshot.py                       # irb120_word.ngc on the IRB120
    python docs/tools/foxglove_screenshot.py --mcap /tmp/run.mcap --robot irb120 \\
        --at 0.55 --out docs/img/foxglove_run.png

``--at`` is the fraction of the run's time the studio seeks to (the 3D panel shows the robot's
pose then); ``--camera`` the 3D view (distance, phi, theta); ``--size`` the window, ``--wait`` the seconds given to the panels after the data has
loaded, ``--keep-serving`` keeps the server up to look at the page in a browser of your own.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import http.server
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STUDIO = "@foxglove/studio-base@1.48.0"
REACT = ("react@17.0.2", "react-dom@17.0.2")
LAYOUT_ID = "armtwin-run"


# --------------------------------------------------------------------------- the viewer
def _npm_pack(spec: str, dest: Path) -> Path:
    out = subprocess.run(["npm", "pack", spec, "--silent", "--pack-destination", str(dest)],
                         check=True, capture_output=True, text=True).stdout.strip().splitlines()
    return dest / out[-1]


def ensure_viewer(cache: Path) -> Path:
    """The web app's folder in the cache, packed from npm on first use."""
    web = cache / "web"
    if (web / "assets" / "index.js").is_file() and (web / "react.production.min.js").is_file():
        return web
    npm = cache / "npm"
    npm.mkdir(parents=True, exist_ok=True)
    web.mkdir(parents=True, exist_ok=True)
    print(f"packing {STUDIO} (36 MB) and React 17 from npm into {npm}", flush=True)
    tgz = _npm_pack(STUDIO, npm)
    with tarfile.open(tgz) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith("package/assets/")]
        for m in members:
            m.name = m.name[len("package/"):]
        tar.extractall(web, members=members)
    for spec, name in zip(REACT, ("react", "react-dom")):
        tgz = _npm_pack(spec, npm)
        with tarfile.open(tgz) as tar:
            data = tar.extractfile(f"package/umd/{name}.production.min.js").read()
        (web / f"{name}.production.min.js").write_bytes(data)
    return web


INDEX_HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>armtwin run: Foxglove Studio 1.48 (open source)</title>
<style>html,body,#root{margin:0;height:100%;width:100%;overflow:hidden}</style></head>
<body><div id="root"></div>
<script src="react.production.min.js"></script>
<script src="react-dom.production.min.js"></script>
<script>window["react"] = window.React; window["react-dom"] = window.ReactDOM;</script>
<script src="assets/index.js"></script>
<script src="armtwin-layout.js"></script>
<script>
(async () => {
  const S = window;  // the UMD bundle puts @foxglove/studio-base's exports on the window
  S.overwriteFetch();
  await S.waitForFonts();
  await S.initI18n();
  // the 3D panel's one-off "open settings" hint, already seen
  localStorage.setItem("studio.profile-data", JSON.stringify(
    { onboarding: { settingsTooltipShownForPanelTypes: ["3D"] } }));
  const values = new Map([["colorScheme", "dark"], ["timezone", "UTC"]]);
  const appConfiguration = {
    get: (k) => values.get(k),
    set: async (k, v) => { values.set(k, v); },
    addChangeListener: () => {}, removeChangeListener: () => {},
  };
  const layouts = new Map();
  const now = new Date().toISOString();
  layouts.set(LAYOUT.id, { id: LAYOUT.id, name: "armtwin run", permission: "CREATOR_WRITE",
    baseline: { data: LAYOUT.data, savedAt: now }, working: undefined, syncInfo: undefined });
  const layoutStorage = {
    list: async () => [...layouts.values()],
    get: async (_ns, id) => layouts.get(id),
    put: async (_ns, layout) => { layouts.set(layout.id, layout); return layout; },
    delete: async (_ns, id) => { layouts.delete(id); },
    importLayouts: async () => {},
  };
  const dataSources = [new S.RemoteDataSourceFactory(), new S.McapLocalDataSourceFactory()];
  ReactDOM.render(React.createElement(S.App, {
    deepLinks: [window.location.href], appConfiguration, dataSources, layoutStorage,
    extensionLoaders: [], enableGlobalCss: true, enableLaunchPreferenceScreen: false,
  }), document.getElementById("root"));
})().catch((e) => { console.error("armtwin viewer start failed", e); });
</script></body></html>
"""


def layout_js(urdf_url: str, robot: str, camera=(1.75, 60.0, 150.0)) -> str:
    distance, phi, theta = camera
    grid = {"visible": True, "frameLocked": True, "label": "Grid", "instanceId": "grid",
            "layerId": "foxglove.Grid", "frameId": "world", "size": 2, "divisions": 20,
            "lineWidth": 1, "color": "#248eff60", "position": [0, 0, 0], "rotation": [0, 0, 0],
            "order": 1}
    urdf = {"visible": True, "frameLocked": True, "label": f"{robot} URDF", "instanceId": "urdf",
            "layerId": "foxglove.Urdf", "url": urdf_url, "order": 2}
    three = {
        "cameraState": {"distance": distance, "perspective": True, "phi": phi,
                        "thetaOffset": theta, "target": [0.2, 0.0, 0.3], "targetOffset": [0, 0, 0],
                        "targetOrientation": [0, 0, 0, 1], "fovy": 45, "near": 0.01, "far": 100},
        "followMode": "follow-pose", "followTf": "world",
        "scene": {"transforms": {"showLabel": False, "axisScale": 0.25, "lineWidth": 1},
                  "backgroundColor": "#15151a", "meshUpAxis": "z_up"},
        # the links' axes hidden: the flange's is /tool_pose's
        "transforms": {f"frame:{f}": {"visible": False} for f in (
            "world", "base", "base_link", "tool0", *[f"link_{i}" for i in range(1, 7)])},
        "topics": {
            "/robot_description": {"visible": False},  # relative mesh paths: the URDF layer instead
            "/path/planned": {"visible": True, "type": "line", "lineWidth": 0.005,
                              "gradient": ["#ffd000ff", "#ffd000ff"]},
            "/tool_pose": {"visible": True, "type": "axis", "axisScale": 0.08},
        },
        "layers": {"grid": grid, "urdf": urdf},
        "publish": {"type": "point", "poseTopic": "/move_base_simple/goal",
                    "pointTopic": "/clicked_point", "poseEstimateTopic": "/initialpose",
                    "poseEstimateXDeviation": 0.5, "poseEstimateYDeviation": 0.5,
                    "poseEstimateThetaDeviation": 0.26179939},
        "imageMode": {},
        "foxglovePanelTitle": f"3D: robots/urdf/{robot}.urdf posed by /tf, /tool_pose axes",
    }

    def plot(title, paths):
        return {"foxglovePanelTitle": title,
                "paths": [{"value": p, "label": label, "enabled": True,
                           "timestampMethod": "receiveTime"} for p, label in paths],
                "showXAxisLabels": True, "showYAxisLabels": True, "showLegend": True,
                "legendDisplay": "floating", "showPlotValuesInLegend": False, "isSynced": True,
                "xAxisVal": "timestamp", "sidebarDimension": 240}

    data = {
        "configById": {
            "3D!armtwin": three,
            "Plot!joints": plot("/joint_states: position (rad)",
                                [(f"/joint_states.position[{i}]", f"joint_{i + 1}")
                                 for i in range(6)]),
            "Plot!flange": plot("/tool_pose: flange position (m)",
                                [(f"/tool_pose.pose.position.{a}", a) for a in "xyz"]),
            "RawMessages!gcode": {"topicPath": "/gcode/line.data", "diffEnabled": False,
                                  "diffMethod": "custom", "diffTopicPath": "",
                                  "showFullMessageForDiff": False},
        },
        "globalVariables": {}, "userNodes": {},
        "playbackConfig": {"speed": 1},
        "layout": {"direction": "row", "splitPercentage": 52, "first": "3D!armtwin",
                   "second": {"direction": "column", "splitPercentage": 44,
                              "first": "Plot!joints",
                              "second": {"direction": "column", "splitPercentage": 68,
                                         "first": "Plot!flange",
                                         "second": "RawMessages!gcode"}}},
    }
    return "const LAYOUT = " + json.dumps({"id": LAYOUT_ID, "data": data}, indent=1) + ";\n"


# --------------------------------------------------------------------------- the server
class Handler(http.server.SimpleHTTPRequestHandler):
    """Static files with HTTP Range support; routes: / (viewer), /run.mcap, /urdf/…"""

    routes: dict[str, Path] = {}
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".js": "text/javascript", ".obj": "model/obj",
                      ".urdf": "text/xml", ".mcap": "application/octet-stream"}

    def log_message(self, fmt, *args):  # quiet
        pass

    def translate_path(self, path):
        path = path.split("?", 1)[0].split("#", 1)[0]
        for prefix, root in self.routes.items():
            if prefix != "/" and (path == prefix or path.startswith(prefix.rstrip("/") + "/")):
                if root.is_file():
                    return str(root)
                return str(root / path[len(prefix.rstrip("/")) + 1:])
        return str(self.routes["/"] / path.lstrip("/"))

    def end_headers(self):
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def do_GET(self):
        path = Path(self.translate_path(self.path))
        rng = self.headers.get("Range")
        if not path.is_file() or not rng:
            try:
                return super().do_GET()
            except (BrokenPipeError, ConnectionResetError):
                return None
        m = re.match(r"bytes=(\d+)-(\d*)", rng)
        size = path.stat().st_size
        start = int(m.group(1))
        end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        with open(path, "rb") as f:
            f.seek(start)
            try:
                self.wfile.write(f.read(end - start + 1))
            except (BrokenPipeError, ConnectionResetError):
                pass


def serve(web: Path, mcap: Path, urdf_dir: Path):
    Handler.routes = {"/run.mcap": mcap, "/urdf/": urdf_dir, "/": web}
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


# --------------------------------------------------------------------------- the browser
async def _cdp_screenshot(ws_url: str, url: str, out: Path, size, wait: float, timeout: float):
    import websockets

    async with websockets.connect(ws_url, max_size=2 ** 28) as ws:
        seq = 0
        pending: dict[int, asyncio.Future] = {}
        console: list[str] = []

        async def reader():
            async for raw in ws:
                msg = json.loads(raw)
                if "id" in msg and msg["id"] in pending:
                    pending.pop(msg["id"]).set_result(msg)
                elif msg.get("method") == "Runtime.consoleAPICalled":
                    p = msg["params"]
                    if p["type"] in ("error", "warning"):
                        console.append(p["type"] + ": " + " ".join(
                            str(a.get("value", a.get("description", ""))) for a in p["args"]))
                elif msg.get("method") == "Runtime.exceptionThrown":
                    console.append("exception: " + json.dumps(msg["params"]["exceptionDetails"])[:400])

        task = asyncio.create_task(reader())

        async def call(method, **params):
            nonlocal seq
            seq += 1
            fut = asyncio.get_running_loop().create_future()
            pending[seq] = fut
            await ws.send(json.dumps({"id": seq, "method": method, "params": params}))
            res = await asyncio.wait_for(fut, 120)
            if "error" in res:
                raise RuntimeError(f"{method}: {res['error']}")
            return res.get("result", {})

        async def evaluate(expr):
            res = await call("Runtime.evaluate", expression=expr, returnByValue=True)
            return res.get("result", {}).get("value")

        await call("Runtime.enable")
        await call("Page.enable")
        await call("Emulation.setDeviceMetricsOverride", width=size[0], height=size[1],
                   deviceScaleFactor=1, mobile=False)
        await call("Page.navigate", url=url)
        # Loaded when the playback bar shows the run's length and the plots have canvases.
        t0 = time.monotonic()
        ready = False
        while time.monotonic() - t0 < timeout:
            await asyncio.sleep(2)
            state = await evaluate(
                "JSON.stringify({text: document.body.innerText.slice(0, 4000),"
                " canvases: document.querySelectorAll('canvas').length})")
            if not state:
                continue
            state = json.loads(state)
            text = state["text"]
            if "Fetching remote file failed" in text or "Failed to" in text and "URDF" in text:
                print("viewer reports:", text[:600], file=sys.stderr)
            if "/gcode/line" in text and re.search(r"\d+: G", text) and state["canvases"] >= 3:
                ready = True
                break
        if not ready:
            print("warning: the page did not reach the expected state before the timeout",
                  file=sys.stderr)
        await asyncio.sleep(wait)
        # Move the mouse out of the panels so no hover tooltip or toolbar stays on the picture.
        await call("Input.dispatchMouseEvent", type="mouseMoved", x=size[0] - 2, y=size[1] - 2)
        await asyncio.sleep(1)
        shot = await call("Page.captureScreenshot", format="png")
        out.write_bytes(base64.b64decode(shot["data"]))
        task.cancel()
        for line in console[:20]:
            print("console", line[:300], file=sys.stderr)
        return ready


def screenshot(url: str, out: Path, size, wait: float, timeout: float, chromium: str) -> bool:
    profile = tempfile.mkdtemp(prefix="armtwin-chromium-")
    cmd = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu-sandbox",
           "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist",
           "--no-first-run", "--no-default-browser-check", "--hide-scrollbars",
           f"--user-data-dir={profile}", "--remote-debugging-address=127.0.0.1",
           "--remote-debugging-port=0", f"--window-size={size[0]},{size[1]}", "about:blank"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port = None
        t0 = time.monotonic()
        while port is None and time.monotonic() - t0 < 60:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                raise RuntimeError("chromium exited before its DevTools endpoint came up")
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if m:
                port = int(m.group(1))
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
        page = next(t for t in targets if t["type"] == "page")
        return asyncio.run(_cdp_screenshot(page["webSocketDebuggerUrl"], url, out, size, wait,
                                           timeout))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


# --------------------------------------------------------------------------- main
def run_span(mcap: Path):
    from mcap.reader import make_reader

    with open(mcap, "rb") as f:
        stats = make_reader(f).get_summary().statistics
    return stats.message_start_time, stats.message_end_time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mcap", type=Path, help="an armtwin run log (default: run PROGRAM now)")
    ap.add_argument("--program", default="examples/irb120_word.ngc")
    ap.add_argument("--robot", default="irb120")
    ap.add_argument("--out", type=Path, default=REPO / "docs/img/foxglove_run.png")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache/armtwin-lichtblick")
    ap.add_argument("--at", type=float, default=0.55, help="fraction of the run to seek to")
    ap.add_argument("--size", default="1800x960")
    ap.add_argument("--wait", type=float, default=8.0)
    ap.add_argument("--camera", default="1.75,60,150",
                    help="3D view: distance m, phi deg (from vertical), theta deg")
    ap.add_argument("--timeout", type=float, default=240.0)
    ap.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    ap.add_argument("--keep-serving", action="store_true")
    args = ap.parse_args(argv)
    size = tuple(int(v) for v in args.size.lower().split("x"))

    web = ensure_viewer(args.cache)
    mcap = args.mcap
    if mcap is None:
        mcap = args.cache / "run.mcap"
        subprocess.run(["armtwin", "run", args.program, "--robot", args.robot, "--log", str(mcap)],
                       check=True, cwd=REPO)
    urdf_dir = REPO / "robots" / "urdf"
    httpd = serve(web, mcap.resolve(), urdf_dir)
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    (web / "armtwin-layout.js").write_text(layout_js(f"{base}/urdf/{args.robot}.urdf", args.robot,
                                                      tuple(float(v) for v in args.camera.split(","))))
    (web / "index.html").write_text(INDEX_HTML)

    start, end = run_span(mcap)
    seek_ns = start + int(args.at * (end - start))
    seek = dt.datetime.fromtimestamp(seek_ns // 10 ** 9, dt.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S") + f".{seek_ns % 10 ** 9:09d}Z"
    query = urllib.parse.urlencode({"ds": "remote-file", "ds.url": f"{base}/run.mcap",
                                    "layoutId": LAYOUT_ID, "time": seek})
    url = f"{base}/?{query}"
    print("viewer:", url, flush=True)
    if args.keep_serving:
        print("serving until Ctrl-C", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    ok = screenshot(url, args.out, size, args.wait, args.timeout, args.chromium)
    httpd.shutdown()
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KB)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
