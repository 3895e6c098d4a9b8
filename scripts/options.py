"""The command-line options that several commands share, built from armtwin's vocabulary.

Choices come from the enums of :mod:`armtwin.envs.config` (``--help`` lists the real ones;
a new joint model or camera is one enum member), bounds from the same module, and each option
is checked in one place with one message naming it. Output files are checked here too, before
anything runs: their ending, their folder, that they are not the input or each other, and that
they are not a FIFO or a device.

Nothing here imports PyBullet.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ..envs.config import MAX_FPS, MIN_FPS, VIDEO_SUFFIXES, CameraPreset, JointMode, Renderer, VideoSettings, parse_size
from .cli import CliError, output_file

__all__ = ["add_joint_mode", "joint_mode", "add_video_options", "video_settings", "same_file", "check_outputs",
           "check_output_name", "LOG_SUFFIXES", "VIDEO_SUFFIXES", "BAUD_MIN", "BAUD_MAX", "check_baud",
           "parse_joints", "check_log_file", "open_log", "add_tool_options", "tool_settings", "add_motor_params",
           "motor_params", "add_publish_options", "check_publish", "open_publisher", "print_publish_report",
           "add_live_options", "check_live", "open_live"]

#: the file name endings of logs: CSV rows, or ROS 2 messages in MCAP (the 'telemetry' extra; docs/TELEMETRY.md)
LOG_SUFFIXES = (".csv", ".mcap")


# ----- joint model -----------------------------------------------------------------------------

def add_joint_mode(p: argparse.ArgumentParser, default: JointMode = JointMode.KINEMATIC, *, what: str = "joint model") -> None:
    """``--joint-mode`` (alias ``--mode``) with :class:`JointMode`'s choices; read it with :func:`joint_mode`."""
    p.add_argument("--joint-mode", "--mode", dest="joint_mode", default=default.value, metavar="MODE",
                   choices=[m.value for m in JointMode],
                   help=f"{what}: {', '.join(m.value for m in JointMode)} (default {default.value})")


def joint_mode(args: argparse.Namespace) -> JointMode:
    """The parsed ``--joint-mode`` as a :class:`JointMode`."""
    try:
        return JointMode.parse(args.joint_mode)
    except ValueError as exc:
        raise CliError(f"--joint-mode: {exc}") from None


# ----- video -------------------------------------------------------------------------------------

def add_video_options(p: argparse.ArgumentParser, *, cameras: tuple[CameraPreset, ...] | None = None,
                      default_camera: CameraPreset = CameraPreset.ISO, video_help: str | None = None,
                      required: bool = False, renderer: bool = False, overlay: bool = False,
                      gif: bool = True) -> None:
    """``--video FILE`` with ``--camera``, ``--fps``, ``--size`` (and optionally ``--renderer``,
    ``--no-overlay``, ``--gif``); read them with :func:`video_settings`.

    Args:
        cameras: the presets this command offers (default: every robot view, plus WORK when
            ``default_camera`` is WORK); () for none (the command frames its own picture).
        required: the command only makes videos (``show``, ``replay``): --video must be given.
    """
    if cameras is None:
        cameras = CameraPreset.robot_views()
        if default_camera is CameraPreset.WORK:
            cameras = (CameraPreset.WORK, *cameras)
    names = [c.value for c in cameras]
    p.add_argument("--video", metavar="OUT.mp4", required=required,
                   help=video_help or f"write a video: {' or '.join(VIDEO_SUFFIXES)} (H.264 MP4 or GIF)")
    if gif:
        p.add_argument("--gif", action="store_true", help="also write a GIF next to the MP4")
    if names:   # () for a command with a camera of its own (replay)
        p.add_argument("--camera", default=default_camera.value, choices=names, metavar="CAMERA",
                       help=f"video camera: {', '.join(names)} (default {default_camera.value})")
    add_frame_options(p)
    if renderer:
        p.add_argument("--renderer", default=Renderer.AUTO.value, choices=[r.value for r in Renderer],
                       help="PyBullet renderer (default auto: EGL when it loads, else tiny)")
    if overlay:
        p.add_argument("--no-overlay", action="store_true", help="no text overlay")


def add_frame_options(p: argparse.ArgumentParser, size: str = "640x480", fps: float | None = 30.0,
                      fps_default: str = "30") -> None:
    """``--fps`` (default ``fps``, described as ``fps_default``) and ``--size`` (default ``size``);
    read them with :func:`frame_settings`."""
    p.add_argument("--fps", type=float, default=fps,
                   help=f"video frames per simulated second, {MIN_FPS:g} to {MAX_FPS:g} (default {fps_default})")
    p.add_argument("--size", default=size, metavar="WxH",
                   help=f"video size in pixels, even numbers, e.g. 1280x720 (default {size})")


def frame_settings(args: argparse.Namespace) -> tuple[float | None, tuple[int, int]]:
    """``(fps, (width, height))`` of :func:`add_frame_options`, checked (fps None: the command's
    own default); CliError naming the option."""
    try:
        size = VideoSettings(size=parse_size(args.size)).size
    except ValueError as exc:
        raise CliError(f"--size {args.size}: {exc}") from None
    try:
        if args.fps is not None:
            VideoSettings(fps=args.fps)
    except ValueError as exc:
        raise CliError(f"--fps {args.fps}: {exc}") from None
    return args.fps, size


def video_settings(args: argparse.Namespace) -> VideoSettings:
    """The video options as one checked :class:`VideoSettings`; CliError naming the option.

    The ``--video`` file itself is checked with :func:`~armtwin.scripts.cli.output_file` (ending,
    folder) here too, when given.
    """
    if getattr(args, "video", None):
        output_file(args.video, "--video", VIDEO_SUFFIXES)
    fps, size = frame_settings(args)
    fields: dict[str, Any] = {"fps": 30.0 if fps is None else fps, "size": size, "camera": getattr(args, "camera", CameraPreset.ISO.value),
              "renderer": getattr(args, "renderer", Renderer.AUTO.value),
              "overlay": not getattr(args, "no_overlay", False), "gif": bool(getattr(args, "gif", False))}
    for opt, name in (("--camera", "camera"), ("--renderer", "renderer")):
        try:            # each option alone, so that the message names the one at fault
            VideoSettings(**{name: fields[name]})
        except ValueError as exc:
            raise CliError(f"{opt} {fields[name]}: {exc}") from None
    return VideoSettings(**fields)


# ----- tools ---------------------------------------------------------------------------------------

def add_tool_options(p: argparse.ArgumentParser, *, program: bool = True) -> None:
    """``--tools FILE`` (the tool table), ``--tool N`` (mounted at the start) and, for commands that
    read a program, ``--pen-servo`` (the M300 dialect option); read them with :func:`tool_settings`."""
    p.add_argument("--tools", metavar="FILE.toml",
                   help="tool table (TOML, [tool.N] entries; docs/GCODE.md \"Tools\"); default the built-in table")
    p.add_argument("--tool", type=int, default=0, metavar="N",
                   help=("the tool mounted when the program starts; its TCP follows the program until an M6 "
                         if program else "the tool on the flange; jog, IK target, readout and taught points are "
                         "at its TCP, and programs run start with it ") + "(default 0: the bare flange)")
    if not program:
        return
    p.add_argument("--pen-servo", action="store_true",
                   help="dialect option: M300 S drives a servo pen (S below 40: pen down), as Inkscape's "
                        "pen-plotter writers mean it")


def tool_settings(args: argparse.Namespace) -> dict:
    """The tool options as :class:`~armtwin.controllers.gcode.config.MachineConfig` fields
    (``tools``, ``tool``, ``pen_servo``); CliError naming the option at fault."""
    from ..controllers.tools import ToolTableError, default_tools, load_tools
    path = getattr(args, "tools", None)
    if path:
        if not os.path.isfile(path):
            raise CliError(f"--tools {path}: no such file" if not os.path.exists(path)
                           else f"--tools {path}: not a regular file")
        try:
            tools = load_tools(path)
        except ToolTableError as exc:
            raise CliError(f"--tools {exc}") from None
        except OSError as exc:
            raise CliError(f"--tools {path}: cannot read ({exc.strerror or exc})") from None
    else:
        tools = default_tools()
    n = getattr(args, "tool", 0) or 0
    if n not in tools:
        raise CliError(f"--tool {n}: the tool table ({tools.source}) has T{', T'.join(str(k) for k in tools)}")
    return {"tools": tools, "tool": n, "pen_servo": bool(getattr(args, "pen_servo", False))}


# ----- output files ---------------------------------------------------------------------------------

def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: equal after resolving links and ``..``, or one file (hard links)."""
    if Path(a).resolve() == Path(b).resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:       # one of them does not exist (yet): then they are not the same file
        return False


def check_outputs(source: str, outputs: dict[str, str | None], *, what: str = "the program") -> None:
    """CliError when an output file (``{"--log": path, …}``) is the input ``source`` or another output."""
    named = [(opt, path) for opt, path in outputs.items() if path]
    for i, (opt, path) in enumerate(named):
        if same_file(path, source):
            raise CliError(f"{opt} {path}: is {what} itself; writing it would destroy it")
        for opt2, path2 in named[:i]:
            if same_file(path, path2):
                raise CliError(f"{opt} {path}: is the same file as {opt2}; give them different names")


def check_output_name(path: str, opt: str, suffixes: tuple[str, ...]) -> None:
    """CliError (naming ``opt``) unless ``path`` is a file name with one of ``suffixes`` (any case)
    and something before it: ``--log other.ngc`` would overwrite a G-code program with the log,
    ``--video .mp4`` is only an ending."""
    want = " or ".join(suffixes)
    if not path.strip():
        raise CliError(f"{opt}: needs a file name ending in {want}")
    name = os.path.basename(path.rstrip("/" + os.sep))
    if path.endswith(("/", os.sep)) or Path(path).is_dir():
        raise CliError(f"{opt} {path}: names a folder; give a file name ending in {want}")
    if not name.lower().endswith(suffixes):
        raise CliError(f"{opt} {path}: must end in {want}")
    if name.lower() in suffixes:
        raise CliError(f"{opt} {path}: needs a file name before {name} (e.g. out{name.lower()})")


# ----- the servo rig ----------------------------------------------------------------------------------

#: serial speeds the rig commands accept, bit/s (rig emulate, sync, ui --rig, bench rig)
BAUD_MIN, BAUD_MAX = 300, 4_000_000
def check_baud(baud: int, opt: str = "--baud") -> int:
    """``baud`` if it is a serial speed the rig commands accept, else a CliError naming ``opt``."""
    if not BAUD_MIN <= baud <= BAUD_MAX:
        raise CliError(f"{opt} {baud}: must be between {BAUD_MIN} and {BAUD_MAX} bit/s")
    return baud


def parse_joints(text: str, spec) -> tuple[int, ...]:
    """"1,2" -> (0, 1): 1 or 2 different revolute joints of ``spec`` (CliError on bad input)."""
    dof = spec.dof
    try:
        js = tuple(int(v) - 1 for v in text.split(","))
    except ValueError:
        raise CliError(f"--joints {text!r}: expected joint numbers such as 1,2") from None
    if not 1 <= len(js) <= 2 or len(set(js)) != len(js):
        raise CliError(f"--joints {text!r}: the rig has 2 motors; give 1 or 2 different joints")
    for j in js:
        if not 0 <= j < dof:
            raise CliError(f"--joints {text!r}: joint {j + 1} does not exist (1..{dof})")
        if spec.prismatic[j]:
            raise CliError(f"--joints: {spec.name} joint {j + 1} is prismatic; the rig's motors stand for revolute joints")
    return js


def add_motor_params(p: argparse.ArgumentParser, what: str) -> None:
    """``--motor-params FILE [FILE2]``: identified motors (``armtwin rig identify``, ``armtwin fit
    --save``); read them with :func:`motor_params`."""
    p.add_argument("--motor-params", nargs="+", metavar="FILE.toml", default=None,
                   help=f"{what}: one motor parameter file for every motor, or one per motor (motor 1, motor 2) — "
                        f"as `armtwin rig identify` or `armtwin fit --save` write them")


def motor_params(args: argparse.Namespace, motors: int):
    """The ``--motor-params`` files as one :class:`~armtwin.controllers.ident.MotorFit` per motor
    (``motors`` of them), or None when not given; CliError naming the file when one cannot be read."""
    files = args.motor_params
    if not files:
        return None
    if len(files) not in (1, motors):
        raise CliError(f"--motor-params: give one file for every motor or one per motor ({motors}), got {len(files)}")
    from ..controllers.ident import read_motor_fit
    fits = []
    for f in files:
        try:
            fits.append(read_motor_fit(f))
        except OSError as exc:
            raise CliError(f"--motor-params {f}: cannot read it: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise CliError(f"--motor-params {exc}") from None
    return fits * motors if len(fits) == 1 else fits


def check_log_file(path: str, opt: str, port: str) -> str:
    """Check a twin-log option before anything is opened: not the serial port, a ``.csv`` or ``.mcap``
    name (so a G-code program or another file is never written over by mistake; ``.mcap`` needs the
    'telemetry' extra), a regular file when it
    exists (a FIFO would block, a device would swallow the log) that can be written, in a folder
    that can be written. Returns ``path``; CliError naming ``opt`` otherwise."""
    if same_file(path, port):
        raise CliError(f"{opt} {path}: is the serial port itself")
    output_file(path, opt, LOG_SUFFIXES)
    if path.lower().endswith(".mcap"):
        from .cli import require_telemetry
        require_telemetry()
    if os.path.exists(path) and not os.access(path, os.W_OK):  # output_file checked what it is
        raise CliError(f"{opt} {path}: cannot write it: permission denied")
    return path


def open_log(path: str, joints, opt: str, spec=None, live=None):
    """The twin log at ``path``: a CSV :class:`armtwin.envs.rig.TwinLog`, or for a ``.mcap`` name the
    MCAP :class:`armtwin.envs.telemetry.twinlog.TwinMcapLog` of robot ``spec``; with a ``live``
    server (``--live``) the same messages stream to it (beside a CSV log, from a file-less MCAP
    log). CliError naming ``opt`` when it cannot be written."""
    mcap = path.lower().endswith(".mcap")
    if (mcap or live is not None) and spec is None:
        raise CliError(f"{opt} {path}: an MCAP log needs the robot (internal: open_log without spec)")
    try:
        if mcap:
            from ..envs.telemetry.twinlog import TwinMcapLog
            return TwinMcapLog(path, spec, joints, live=live)
        from ..envs.rig.log import TeeLog, TwinLog
        csv_log = TwinLog(path, joints)
        if live is None:
            return csv_log
        from ..envs.telemetry.twinlog import TwinMcapLog
        return TeeLog(csv_log, TwinMcapLog(None, spec, joints, live=live))
    except OSError as exc:
        raise CliError(f"{opt} {path}: cannot write it: {exc.strerror or exc}") from None


# ----- the remote store (--publish mqtt://host:port/topic) ------------------------------------------------

def add_publish_options(p: argparse.ArgumentParser, what: str = "twin records") -> None:
    """``--publish URL`` and ``--publish-hz``; check them with :func:`check_publish`."""
    p.add_argument("--publish", metavar="mqtt://HOST:PORT/TOPIC", default=None,
                   help=f"also send down-sampled {what} (JSON, QoS 1) to an MQTT broker; a bounded local queue "
                        f"rides out a broker outage and the summary says what it dropped (docs/TELEMETRY.md)")
    p.add_argument("--publish-hz", type=float, default=10.0, metavar="HZ",
                   help="records per second for --publish (default 10, at most 100)")


def check_publish(args: argparse.Namespace):
    """The parsed ``--publish`` target (None without it); CliError naming the option at fault."""
    if args.publish is None:
        return None
    from .cli import require_telemetry
    from ..envs.telemetry.records import PUBLISH_HZ_MAX
    if not (0 < args.publish_hz <= PUBLISH_HZ_MAX):  # also refuses nan
        raise CliError(f"--publish-hz {args.publish_hz:g}: must be more than 0 and at most {PUBLISH_HZ_MAX:g}")
    try:
        from ..envs.telemetry.mqtt import parse_mqtt_url
        target = parse_mqtt_url(args.publish)
    except ValueError as exc:
        raise CliError(f"--publish {args.publish}: {exc}") from None
    require_telemetry("paho")
    return target


def open_publisher(target, joints, hz: float):
    """A :class:`armtwin.envs.telemetry.records.TwinPublisher` to ``target`` (None when ``target`` is None)."""
    if target is None:
        return None
    from ..envs.telemetry.mqtt import MqttStore
    from ..envs.telemetry.records import TwinPublisher
    return TwinPublisher(MqttStore(target), joints, hz)


def print_publish_report(target, publisher) -> None:
    """One line on stderr: what became of the records sent to the store."""
    import sys
    if publisher is None:
        return
    rep = publisher.close()
    p50 = rep.latency_p50_ms()
    print(f"armtwin: {target.url}: {rep.describe()}"
          + (f"; latency p50 {p50:.1f} ms" if p50 == p50 else ""), file=sys.stderr)


# ----- the live view (--live) ----------------------------------------------------------------------------

def add_live_options(p: argparse.ArgumentParser) -> None:
    """``--live`` and ``--live-port``; open the server with :func:`open_live`."""
    p.add_argument("--live", action="store_true",
                   help="stream the log's topics to Foxglove (WebSocket on 127.0.0.1, 'telemetry' extra with "
                        "foxglove-sdk; docs/TELEMETRY.md)")
    p.add_argument("--live-port", type=int, default=8765, metavar="PORT",
                   help="port of the --live server on 127.0.0.1, 1..65535 (default 8765)")


def check_live(args: argparse.Namespace) -> None:
    """CliError for a ``--live-port`` out of range (checked before anything runs)."""
    if getattr(args, "live", False) and not 1 <= args.live_port <= 65535:
        raise CliError(f"--live-port {args.live_port}: must be between 1 and 65535")


def open_live(args: argparse.Namespace, topics):
    """The :class:`armtwin.envs.telemetry.live.LiveServer` of ``--live`` (None without it), its URL said
    on stderr; CliError for a bad port, a port in use or a missing package."""
    import sys
    if not getattr(args, "live", False):
        return None
    check_live(args)
    from .cli import require_telemetry
    require_telemetry("mcap", "foxglove")
    from ..envs.telemetry.live import LiveServer
    try:
        server = LiveServer(topics, port=args.live_port)
    except OSError as exc:
        raise CliError(str(exc)) from None
    print(f"armtwin: live: Foxglove WebSocket on {server.url} (Foxglove: Open connection → Foxglove WebSocket)",
          file=sys.stderr)
    return server
