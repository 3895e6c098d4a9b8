"""A browser teach pendant for a simulated robot (``armtwin ui ROBOT``), built on ``viser``.

Two layers:

* :class:`PendantCore` — the logic, no GUI: a :class:`~armtwin.envs.sim.World` with one robot,
  joint targets, jogging (joints; the tool along/about the base or tool axes), IK targets
  with a branch choice (:func:`armtwin.controllers.ik.solve`), taught points, G-code export
  and program runs. Every motion goes through ``SimRobot.command`` and is advanced by
  :meth:`PendantCore.tick` (``World.step``) — the one command path. Thread-safe (one lock).
  With :meth:`PendantCore.attach_rig` the simulated robot also commands the servo rig
  (virtual → real, :class:`armtwin.envs.rig.TwinSync`) from a loop of its own at the sync
  rate (:class:`armtwin.envs.rig.RigLoop`, 500 Hz): each tick publishes the joints the world
  has, and the rig loop sends them — ramped from the rig's measured joints, never a step —
  whatever the page or the GUI thread does. Only the thread that ticks touches PyBullet.
* :class:`Pendant` — the viser server: the robot's URDF mirrored live from the simulated
  joints, sliders, jog buttons, a draggable target (transform gizmo) that can also be typed
  as X/Y/Z in mm ("go to XYZ"), readouts, the joint model, teach/save and run-program
  controls, and a rig panel (servo joints, ΔE, latency, faults) while a rig is attached; a
  background thread runs the simulation in real time.

Units at this edge: degrees, millimetres (the SCARA's J3 in mm), mm/min for feeds; SI inside.

Usage::

    from armtwin.envs.pendant import Pendant
    p = Pendant("irb120", host="127.0.0.1", port=8080)   # starts serving at once
    print(p.url)
    p.serve_forever()        # or: ... p.close()
"""

from __future__ import annotations

import errno
import math
import os
import stat
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..controllers.kinematics import chain_of, fk
from ..controllers.transforms import (
    invert,
    matrix_to_quat,
    matrix_to_rpy,
    quat_to_matrix,
    rot_x,
    rot_y,
    rot_z,
    transform,
)
from ..robots import RobotSpec
from . import examples_dir
from .sim import JointMode, PhysicsConfig, World

__all__ = ["MoveResult", "Pendant", "PendantConfig", "PendantCore", "SaveResult", "examples_dir", "gcode_for_points",
           "rig_markdown", "safe_file_name"]

_ROT = {"x": rot_x, "y": rot_y, "z": rot_z}


@dataclass(frozen=True)
class PendantConfig:
    """Settings of a pendant.

    Attributes:
        dt: physics control step, s.
        rate: GUI/simulation update rate, Hz (the simulation runs in real time).
        joint_step: default jog step of revolute joints, deg.
        prismatic_step: default jog step of prismatic joints, mm.
        tool_step: default tool jog step, mm.
        turn_step: default tool turn step, deg.
        feed: feed rate written into saved G-code, mm/min.
        save_dir: folder where "save as G-code" writes (and nowhere else: the names typed in the
            page must be plain file names, see :func:`safe_file_name`).
        program_dir: folder listed in the program chooser (default ``examples/``).
    """

    dt: float = 1.0 / 240.0
    rate: float = 30.0
    joint_step: float = 5.0
    prismatic_step: float = 10.0
    tool_step: float = 10.0
    turn_step: float = 5.0
    feed: float = 3000.0
    save_dir: Path = Path(".")
    program_dir: Path | None = None

    def __post_init__(self) -> None:
        for name in ("dt", "rate", "joint_step", "prismatic_step", "tool_step", "turn_step", "feed"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"PendantConfig.{name} must be a positive number, got {v!r}")


@dataclass(frozen=True)
class MoveResult:
    """Outcome of a jog or target request.

    Attributes:
        applied: the robot was commanded to the new joints.
        q: (n,) commanded joints (rad / m) when applied, else the unchanged target.
        message: one line for people.
        branch: IK branch of the solution, if IK was used.
    """

    applied: bool
    q: np.ndarray
    message: str
    branch: str | None = None


@dataclass(frozen=True)
class SaveResult:
    """Outcome of "save as G-code".

    Attributes:
        saved: the file was written.
        path: the file written (None when not saved).
        message: one line for people: where it went, or why nothing was written.
    """

    saved: bool
    path: Path | None
    message: str


#: file endings "save as G-code" keeps; any other name gets ``.ngc`` added
GCODE_SUFFIXES = (".ngc", ".nc", ".gcode")
#: longest file name "save as G-code" accepts, characters (with the ending)
MAX_FILE_NAME = 120


def safe_file_name(name: str) -> tuple[str | None, str]:
    """A file name typed in the browser, checked for the save folder.

    Accepts a plain name only: not empty, no folder separators (``/`` or ``\\``), no ``..``,
    not hidden (leading ``.``), no drive (``:``) and no control characters, at most
    :data:`MAX_FILE_NAME` characters. Surrounding spaces are dropped; ``.ngc`` is added unless
    the name ends in one of :data:`GCODE_SUFFIXES` (any case).

    Returns:
        ``(name, "")`` when accepted (with its ending), else ``(None, why)``.
    """
    name = str(name).strip()
    if not name:
        return None, "give a file name"
    if "/" in name or "\\" in name:
        return None, f"{name!r}: a file name only, no folders"
    if ".." in name:
        return None, f"{name!r}: '..' is not allowed in a file name"
    if name.startswith("."):
        return None, f"{name!r}: a file name may not start with '.'"
    if ":" in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        return None, f"{name!r}: no ':' or control characters in a file name"
    if not name.lower().endswith(GCODE_SUFFIXES):
        name += ".ngc"
    if len(name) > MAX_FILE_NAME:
        return None, f"a file name of at most {MAX_FILE_NAME} characters, please (got {len(name)})"
    return name, ""


def replace_file(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a new file in the same folder, renamed into place.

    The name may be taken only by a regular file with one link (it is replaced: its other
    names, if any, would keep the old text, so a hard link is refused too); a symbolic link, a
    FIFO, a device, a socket or a folder of that name is refused with an OSError saying what it
    is. Nothing is ever opened through the existing name.

    Raises:
        OSError: the name is taken by something else, or the folder cannot be written.
    """
    def check() -> None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        what = ("a symbolic link" if stat.S_ISLNK(st.st_mode) else "a folder" if stat.S_ISDIR(st.st_mode)
                else None if stat.S_ISREG(st.st_mode) else "not a regular file (a FIFO, device or socket)")
        if what is None and st.st_nlink != 1:
            what = f"a file with {st.st_nlink} hard links (replacing one name would leave the others)"
        if what is not None:
            raise OSError(errno.EEXIST, f"the name is taken by {what}", str(path))

    check()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        check()             # again, just before the rename (the name may have changed meanwhile)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


#: largest jog step accepted, mm or deg
MAX_JOG_STEP = 1000.0


def _checked_step(step, what: str) -> float:
    """A jog step as a float: finite and within [0, MAX_JOG_STEP] (ValueError otherwise).

    A NaN step stored in the target would break every later jog, so it is refused here."""
    step = float(step)
    if not (0.0 <= step <= MAX_JOG_STEP):
        raise ValueError(f"{what} must be between 0 and {MAX_JOG_STEP:g}, got {step}")
    return step


def gcode_for_points(spec: RobotSpec, poses: list[np.ndarray], *, feed_mm_min: float = 3000.0,
                     origin_m=None, title: str = "") -> str:
    """G-code (RS-274/NGC, as armtwin's interpreter reads it) visiting taught flange poses.

    Conventions (armtwin's G-code): units mm (G21), absolute (G90), XY plane (G17), feed in
    mm/min; X Y Z relative to the work origin (the robot's default :func:`machine_for` origin
    unless ``origin_m`` is given); A B C in degrees (orientation ``Rz(C) Ry(B) Rx(A) Rx(180°)``);
    the SCARA takes C only. The first move is a rapid (G0), the others linear (G1).

    Args:
        spec: the robot.
        poses: (4, 4) flange poses in the reporting base frame, m.
        feed_mm_min: feed of the G1 moves, mm/min.
        origin_m: (3,) work origin in the base frame, m.
        title: a comment put in the header.
    """
    from ..controllers.gcode.config import machine_for
    from ..controllers.gcode.interpreter import abc_of
    origin = np.asarray(machine_for(spec).origin if origin_m is None else origin_m, float)
    scara = spec.roll_only
    o_mm = origin * 1000.0
    lines = [f"(armtwin teach pendant: {spec.name}, {len(poses)} point{'s' if len(poses) != 1 else ''}{', ' + title if title else ''})",
             f"(work origin X{o_mm[0]:.3f} Y{o_mm[1]:.3f} Z{o_mm[2]:.3f} mm in the base frame; XYZ below are relative to it)",
             "G21 G90 G17 G94"]
    for k, T in enumerate(poses):
        p = (np.asarray(T)[:3, 3] - origin) * 1000.0
        a, b, c = abc_of(np.asarray(T)[:3, :3])
        words = f"X{p[0]:.3f} Y{p[1]:.3f} Z{p[2]:.3f}"
        words += f" C{c:.3f}" if scara else f" A{a:.3f} B{b:.3f} C{c:.3f}"
        if k == 0:
            lines.append(f"N{10 * (k + 1)} G0 {words}")
        else:
            lines.append(f"N{10 * (k + 1)} G1 {words}" + (f" F{feed_mm_min:.0f}" if k == 1 else ""))
    lines.append("M2")
    return "\n".join(lines).replace("-0.000", "0.000") + "\n"


class PendantCore:
    """The pendant's logic on one simulated robot (no GUI). Thread-safe.

    Args:
        spec: the robot.
        mode: joint model.
        config: settings.
    """

    def __init__(self, spec: RobotSpec, mode: JointMode | str = JointMode.KINEMATIC, config: PendantConfig | None = None) -> None:
        self.spec = spec
        self.config = config or PendantConfig()
        self.lock = threading.RLock()
        self.world = World(PhysicsConfig(dt=self.config.dt), renderer="tiny")
        self.robot = self.world.add_robot(spec, JointMode.parse(mode))
        self.q_target = self.robot.q.copy()
        self.points: list[np.ndarray] = []
        self._program: deque = deque()  # (q (n,), qd (n,), line) samples, one per world step
        self.program_line: int | None = None
        self.program_name: str | None = None
        self.version = 0  # bumps whenever the commanded joints change
        self._chain = chain_of(spec)
        self.twin = None  # TwinSync once a rig is attached (virtual -> real)
        self.rig_loop = None  # the RigLoop running it
        self._published = self.robot.q.copy()  # the joints as of the newest tick, for the rig loop (no lock)

    # ----- state ------------------------------------------------------------------------
    def close(self) -> None:
        """Close the rig link and its log (if attached) and the world (idempotent)."""
        with self.lock:
            self.detach_rig()
            self.world.close()

    # ----- servo rig (virtual -> real) ------------------------------------------------------
    #: the rig follows the pendant at up to this share of each joint's speed limit (ramped: a
    #: slider moved far is a ramp for the rig, not a step)
    RIG_SPEED = 0.5

    def attach_rig(self, link, joints=(0, 1), log=None, *, rate_hz: float = 500.0) -> None:
        """Let the simulated robot command the servo rig (virtual → real) from a loop of its own.

        A :class:`~armtwin.envs.rig.RigLoop` samples the twin at ``rate_hz`` on its own thread:
        it sends the joints the newest :meth:`tick` published as JOINT_TARGETS — through a
        limiter that starts from the rig's measured joints (and again after a power cut, a
        watchdog stop or a lost link) at :attr:`RIG_SPEED` of the joints' speed limits — and
        reads back the rig's state. So the rig keeps getting targets and heartbeats at the sync
        rate even while the GUI thread stalls (a browser loading the page). :meth:`readout`
        shows the servo joints, ΔE, the latency and the faults. The pendant owns ``link`` and
        ``log`` from now on: :meth:`detach_rig` / :meth:`close` close them.

        Args:
            link: an open :class:`~armtwin.envs.rig.RigLink`.
            joints: 0-based robot joints mapped to the rig's motors 1, 2 (revolute only).
            log: optional :class:`~armtwin.envs.rig.TwinLog` receiving every sample.
            rate_hz: the rig loop's rate, Hz.

        Raises:
            ValueError: a rig is attached already, the link is not open, or a joint that does
                not exist or is prismatic.
        """
        from .rig.sync import Direction, RigLoop, SyncConfig, TwinSync
        if not getattr(link, "is_open", False):
            raise ValueError("attach_rig needs an open RigLink (call link.open() first)")
        with self.lock:
            if self.twin is not None:
                raise ValueError(f"a rig is attached already ({self.twin.link.url}); detach it first")
            cfg = SyncConfig(tuple(int(j) for j in joints), Direction.VIRTUAL_TO_REAL, rate_hz=rate_hz,
                             limit_speed=self.RIG_SPEED)
            twin = TwinSync(self.robot, link, cfg, log)
            self._published = self.robot.q.copy()
            self.twin, self.rig_loop = twin, RigLoop(twin, self.published_joints).start()

    def published_joints(self) -> np.ndarray:
        """(n,) the joints as of the newest :meth:`tick`, rad (no lock: the rig loop reads them)."""
        return self._published

    def detach_rig(self) -> None:
        """Stop driving the rig: stop its loop, close its link (the rig goes IDLE) and its log (idempotent)."""
        with self.lock:
            twin, loop, self.twin, self.rig_loop = self.twin, self.rig_loop, None, None
        if twin is None:
            return
        try:
            if loop is not None:
                loop.stop()
            twin.link.close()
        finally:
            if twin.log is not None:
                twin.log.close()

    @property
    def running_program(self) -> bool:
        return bool(self._program)

    def tick(self, steps: int = 1) -> None:
        """Advance the world ``steps`` control steps (program samples are commanded first).

        The joints the world has after the steps are published for the rig loop
        (:meth:`published_joints`), which sends them to the rig at its own rate.
        """
        with self.lock:
            for _ in range(steps):
                if self._program:
                    q, qd, line = self._program.popleft()
                    self.q_target = q
                    self.program_line = line
                    self.robot.command(q, qd)
                    if not self._program:
                        self.program_line = None
                        self.robot.command(q)
                    self.version += 1
                self.world.step()
            self._published = self.robot.q.copy()  # one reference swap: the rig loop reads it unlocked

    def joints(self) -> np.ndarray:
        """(n,) joint positions as the engine has them now, rad / m (a copy, read under the lock).

        Use this (not ``robot.q``) from other threads: the pendant's loop steps the same
        physics client, and a read between its steps would see a half-updated state.
        """
        with self.lock:
            return self.robot.q.copy()

    def target_joints(self) -> np.ndarray:
        """(n,) commanded joint positions, rad / m (a copy, read under the lock)."""
        with self.lock:
            return self.q_target.copy()

    def tool_pose(self, q=None) -> np.ndarray:
        """(4, 4) flange pose in the reporting frame: of ``q``, or as the engine has it now."""
        if q is not None:
            return fk(self._chain, q)
        with self.lock:
            return self.robot.flange_pose()

    def readout(self) -> dict[str, Any]:
        """Joint values (display units), tool pose (mm, URDF RPY deg), time (s), mode, target,
        program line, stability; ``twin``: :meth:`rig_status` with a rig attached, else None."""
        with self.lock:
            q = self.robot.q
            T = self.robot.flange_pose()
            t = self.world.time
            mode = self.robot.mode.value
            twin = self.rig_status()
        return {"time": t, "mode": mode, "joints": self.spec.to_display(q), "units": self.spec.display_units(),
                "position_mm": T[:3, 3] * 1000.0, "rpy_deg": np.degrees(matrix_to_rpy(T[:3, :3])),
                "target": self.spec.to_display(self.q_target), "program_line": self.program_line,
                "stable": self.robot.stable, "twin": twin}

    #: fault events of the twin listed by :meth:`rig_status` (the newest ones)
    RIG_EVENTS_SHOWN = 3

    def rig_status(self) -> dict[str, Any] | None:
        """The attached rig as of the newest sample (None without a rig).

        Keys: ``port`` (its URL); ``joints`` (mapped robot joints, 1-based); ``stt`` (sample
        number, -1 before the first); ``virtual_deg``, ``servo_deg``, ``error_deg`` ((k,) deg:
        simulated joints, the rig's measured joints — NaN while unknown — and ΔE = virtual −
        servo); ``latency_ms`` (command out → matching state back, ms; NaN while the link is
        faulty); ``faults`` ("OK", "LINK", "POWER|STALL", … of that sample; "WAITING" before the
        first); ``connected`` (the port is open; False while the link reconnects a vanished
        port); ``states_rx``, ``lost``, ``dropped``, ``reconnect_attempts``, ``reconnects``
        (link counters); ``events`` (the newest :attr:`RIG_EVENTS_SHOWN` fault changes, e.g.
        "LINK on at #41 (1.36 s)"); ``error`` (why the newest sample failed, "" normally).
        """
        with self.lock:
            twin, loop = self.twin, self.rig_loop
            if twin is None:
                return None
            s = twin.latest_sample
            link, k = twin.link, len(twin.idx)
            nan = np.full(k, np.nan)
            st = link.stats
            events = [f"{e.fault} {'on' if e.on else 'off'} at #{e.stt} ({e.time:.2f} s)"
                      for e in twin.events[-self.RIG_EVENTS_SHOWN:]]
            return {"port": link.url, "joints": [j + 1 for j in twin.idx],
                    "stt": -1 if s is None else int(s.stt),
                    "virtual_deg": nan.copy() if s is None else np.asarray(s.virtual_deg, float),
                    "servo_deg": nan.copy() if s is None else np.asarray(s.servo_deg, float),
                    "error_deg": nan.copy() if s is None else np.asarray(s.error_deg, float),
                    "latency_ms": math.nan if s is None else float(s.latency_ms),
                    "faults": "WAITING" if s is None else s.faults.names(),
                    "connected": bool(link.connected), "states_rx": st.states_rx, "lost": st.lost,
                    "dropped": st.dropped, "reconnect_attempts": st.reconnect_attempts,
                    "reconnects": st.reconnects, "events": events, "error": loop.error if loop is not None else ""}

    # ----- joint space --------------------------------------------------------------------
    def set_mode(self, mode: JointMode | str) -> None:
        """Switch the joint model (the robot keeps its state and target)."""
        with self.lock:
            self.robot.set_mode(JointMode.parse(mode))
            self.robot.command(self.q_target)

    def _apply(self, q: np.ndarray, message: str, branch: str | None = None) -> MoveResult:
        with self.lock:
            self._program.clear()
            self.program_line = None
            self.q_target = np.asarray(q, float).copy()
            self.robot.command(self.q_target)
            self.version += 1
        return MoveResult(True, self.q_target.copy(), message, branch)

    def set_joints(self, q) -> MoveResult:
        """Command joints (n,) rad / m; values outside the ranges are clipped (and said so)."""
        q = np.asarray(q, float).reshape(-1)
        if q.shape != (self.spec.dof,) or not np.all(np.isfinite(q)):
            raise ValueError(f"{self.spec.name}: need {self.spec.dof} finite joint values")
        qc = np.clip(q, self.spec.lower, self.spec.upper)
        clipped = [i + 1 for i in range(len(q)) if abs(qc[i] - q[i]) > 1e-12]
        return self._apply(qc, f"clipped J{', J'.join(map(str, clipped))} to range" if clipped else "ok")

    def set_joint_display(self, i: int, value: float) -> MoveResult:
        """Set joint ``i`` (0-based) to ``value`` in display units (deg; mm for prismatic)."""
        with self.lock:
            disp = self.spec.to_display(self.q_target)
        disp[i] = float(value)
        return self.set_joints(self.spec.from_display(disp))

    def jog_joint(self, i: int, direction: int, step: float | None = None) -> MoveResult:
        """Move joint ``i`` by ``direction`` × ``step`` (deg; mm for prismatic joints)."""
        if not 0 <= i < self.spec.dof:
            raise ValueError(f"{self.spec.name} has joints 1..{self.spec.dof}, got J{i + 1}")
        if step is None:
            step = self.config.prismatic_step if self.spec.prismatic[i] else self.config.joint_step
        step = _checked_step(step, "joint jog step")
        with self.lock:
            disp = self.spec.to_display(self.q_target)
        disp[i] += float(np.sign(direction)) * step
        q = self.spec.from_display(disp)
        if q[i] < self.spec.lower[i] - 1e-12 or q[i] > self.spec.upper[i] + 1e-12:
            with self.lock:
                return MoveResult(False, self.q_target.copy(), f"J{i + 1} would leave its range")
        return self._apply(q, f"J{i + 1} jogged")

    # ----- Cartesian ----------------------------------------------------------------------
    def target_pose(self) -> np.ndarray:
        """(4, 4) flange pose of the commanded joints (reporting frame)."""
        with self.lock:
            return fk(self._chain, self.q_target)

    def jog_tool(self, axis: str, direction: int, step: float | None = None, *, frame: str = "base",
                 branch: str | None = None) -> MoveResult:
        """Jog the tool: ``axis`` "x"/"y"/"z" moves by ``step`` mm, "rx"/"ry"/"rz" turns by ``step`` deg.

        Args:
            axis: which axis.
            direction: +1 or -1.
            step: mm or deg (default from the config).
            frame: "base" (axes of the robot base; turns about the base axes through the tool
                point, like G-code A/B/C) or "tool" (the flange's own axes).
            branch: IK branch to stay on (None: the nearest solution).
        """
        axis = axis.lower()
        if axis not in ("x", "y", "z", "rx", "ry", "rz"):
            raise ValueError(f"tool jog axis must be x, y, z, rx, ry or rz, got {axis!r}")
        if frame not in ("base", "tool"):
            raise ValueError(f"jog frame must be 'base' or 'tool', got {frame!r}")
        T = self.target_pose()
        sgn = float(np.sign(direction))
        if axis in ("x", "y", "z"):
            step = _checked_step(self.config.tool_step if step is None else step, "tool jog step")
            d = np.eye(3)["xyz".index(axis)] * sgn * step / 1000.0
            T[:3, 3] += d if frame == "base" else T[:3, :3] @ d
        else:
            a = math.radians(sgn * _checked_step(self.config.turn_step if step is None else step, "tool turn step"))
            R = _ROT[axis[1]](a)
            T[:3, :3] = R @ T[:3, :3] if frame == "base" else T[:3, :3] @ R
        return self.move_to_pose(T, branch=branch)

    def move_to_pose(self, T: np.ndarray, *, branch: str | None = None) -> MoveResult:
        """Solve IK for the flange pose ``T`` (4, 4; reporting frame, m) and command it if it is reachable.

        Args:
            T: the target.
            branch: keep this IK branch label (e.g. "front/up/noflip", "left"); None: the
                nearest solution to the current joints (weighted shortest travel).

        Returns:
            A :class:`MoveResult`; unreachable or out-of-range targets are not applied.
        """
        from ..controllers.ik import solve
        T = np.asarray(T, float)
        if T.shape != (4, 4) or not np.all(np.isfinite(T)):
            raise ValueError("the target pose must be a finite 4x4 transform")
        with self.lock:
            q_near = self.q_target.copy()
        r = solve(self.spec, T, q_near)
        if branch:
            cands = [s for s in r.solutions if s.branch == branch and s.within_limits]
            if not cands:
                why = r.reason if not r.ok else f"no solution on branch {branch} here"
                return MoveResult(False, q_near, f"not applied: {why}")
            best = min(cands, key=lambda s: float(np.sum(np.abs(s.q - q_near))))
            return self._apply(best.q, f"IK ok ({best.branch})", best.branch)
        if not r.ok or r.best is None:
            return MoveResult(False, q_near, f"not applied: {r.status.value}: {r.reason}")
        return self._apply(r.best, f"IK ok ({r.best_branch})", r.best_branch)

    def branches(self) -> tuple[str, ...]:
        """IK branch labels of the robot."""
        from ..controllers.ik import branch_labels
        return tuple(branch_labels(self.spec))

    def current_branch(self) -> str:
        from ..controllers.ik import branch_of
        with self.lock:
            return branch_of(self.spec, self.q_target)

    # ----- teaching -------------------------------------------------------------------------
    def record_point(self) -> int:
        """Record the current commanded flange pose; returns the number of points."""
        self.points.append(self.target_pose())
        return len(self.points)

    def clear_points(self) -> None:
        self.points.clear()

    def gcode(self) -> str:
        """G-code of the recorded points (see :func:`gcode_for_points`)."""
        return gcode_for_points(self.spec, self.points, feed_mm_min=self.config.feed,
                                title=datetime.now().strftime("%Y-%m-%d %H:%M"))

    def save_gcode(self, name: str) -> SaveResult:
        """Write the recorded points as G-code into the config's save folder, under a plain file name.

        ``name`` comes from the browser, so it is checked by :func:`safe_file_name` (no folder,
        no ``..``, not absolute, not hidden; ``.ngc`` added unless it ends in ``.ngc``, ``.nc`` or
        ``.gcode``), and the text goes into a new file that is then renamed into place
        (:func:`replace_file`): nothing is written through a link to a file outside the save
        folder, a FIFO of that name cannot block the pendant, and a reader never sees half a
        file. An existing regular file of that name is replaced; anything else is refused.

        Returns:
            A :class:`SaveResult`; a refused name, no points yet or a failed write are results
            (``saved`` False, the reason in ``message``), not exceptions.
        """
        folder = Path(self.config.save_dir)
        safe, why = safe_file_name(name)
        if safe is None:
            return SaveResult(False, None, f"not saved: {why} (files go into {folder})")
        if not self.points:
            return SaveResult(False, None, "not saved: no points recorded yet")
        path = folder / safe
        try:
            folder.mkdir(parents=True, exist_ok=True)  # the configured folder only, never one from the name
            replace_file(path, self.gcode())
        except OSError as exc:
            return SaveResult(False, None, f"not saved: {path}: {exc.strerror or exc}")
        n = len(self.points)
        return SaveResult(True, path, f"saved {n} point{'s' if n != 1 else ''} to {path}")

    # ----- programs ---------------------------------------------------------------------------
    def list_programs(self) -> list[Path]:
        """``.ngc`` files in the program folder (default ``examples/``); this robot's (``<id>_*.ngc``) first."""
        d = Path(self.config.program_dir or examples_dir())
        if not d.is_dir():
            return []
        own = f"{self.spec.name}_"  # this robot's programs first
        return sorted(d.glob("*.ngc"), key=lambda p: (not p.name.startswith(own), p.name))

    def run_program(self, text: str, name: str = "program") -> str:
        """Compile a G-code program and queue it; returns a status line.

        The program is compiled as ``armtwin run`` compiles it
        (:func:`~armtwin.controllers.gcode.compile_program`: preflight, then the joints at every
        control step of this pendant), led in from where the robot stands, and then commanded
        sample by sample by :meth:`tick`. Faults stop it before anything moves.
        """
        plan = self.plan_program(text)
        if isinstance(plan, str):
            return plan
        with self.lock:
            self._program = deque(plan)
            self.program_name = name
        return f"running {name}: {len(plan) * self.config.dt:.1f} s"

    def stop_program(self) -> None:
        with self.lock:
            self._program.clear()
            self.program_line = None
            self.q_target = self.robot.q.copy()
            self.robot.command(self.q_target)
            self.version += 1

    def plan_program(self, text: str) -> str | list[tuple[np.ndarray, np.ndarray, int]]:
        """The (q, qd, line) samples :meth:`run_program` queues: a joint move from where the robot
        stands to the program's start, then the program's control trajectory at this pendant's
        control step (the joints ``armtwin run`` commands); or a status line naming the first
        fault when the program cannot run."""
        from ..controllers.gcode import ControlTrajectoryError, compile_program
        try:
            program = compile_program(text, self.spec, period=self.config.dt)
            if program.trajectory is None:
                return f"not run: {program.refusal}"[:240]
            ps, q, qd = program.trajectory.arrays()
        except (ControlTrajectoryError, ValueError) as exc:    # ValueError: too long to hold as arrays
            return f"not run: {exc}"[:240]
        with self.lock:
            q_now = self.q_target.copy()
        lead = self._joint_move(q_now, np.asarray(program.report.program.q_start, float),
                                int(ps.line[0]) if len(ps) else 0)
        return lead + [(q[k], qd[k], int(ps.line[k])) for k in range(len(q))]

    def _joint_move(self, q0: np.ndarray, q1: np.ndarray, line: int) -> list:
        """A smooth joint-space move (cosine profile, at most half the joint speed limits)."""
        dq = q1 - q0
        if np.max(np.abs(dq)) < 1e-9:
            return []
        dt = self.config.dt
        T = max(float(np.max(np.abs(dq) * math.pi / 2 / (0.5 * self.spec.max_velocity))), 0.2)
        n = int(math.ceil(T / dt))
        u = np.arange(1, n + 1) / n
        s = 0.5 - 0.5 * np.cos(np.pi * u)
        sd = 0.5 * np.pi * np.sin(np.pi * u) / T
        return [(q0 + dq * s[k], dq * sd[k], line) for k in range(n)]


class Pendant:
    """The viser teach pendant. Starts serving on construction.

    Args:
        robot: robot id or spec.
        host: interface to bind (default 127.0.0.1: this machine only).
        port: TCP port (0 or None: a free one).
        mode: initial joint model.
        config: settings.
        verbose: let viser print its banner.
        low_graphics: no shadows and no environment map (for software WebGL, e.g. headless tests).
    """

    def __init__(self, robot: str | RobotSpec, *, host: str = "127.0.0.1", port: int | None = 8080,
                 mode: JointMode | str = JointMode.KINEMATIC, config: PendantConfig | None = None,
                 verbose: bool = False, low_graphics: bool = False) -> None:
        import viser
        from viser.extras import ViserUrdf

        from .. import robots
        spec = robots.get(robot) if isinstance(robot, str) else robot
        self.core = PendantCore(spec, mode, config)
        self.spec = spec
        if not port:
            port = _free_port(host)
        try:
            self.server = viser.ViserServer(host=host, port=int(port), verbose=verbose)
        except BaseException:
            self.core.close()  # the world (and nothing else) is open so far
            raise
        self.host, self.port = host, self.server.get_port()
        self._stop = threading.Event()
        self._closed = False
        self._close_lock = threading.Lock()
        self._last_version = -1
        self._status = "ready"
        self._uploaded: tuple[str, str] | None = None
        self._slider_version = -1  # core.version produced by the last slider move (not echoed back)
        self._moving_target = False
        sc = self.server.scene
        sc.set_up_direction("+z")
        if low_graphics:
            sc.configure_default_lights(enabled=True, cast_shadow=False)
            sc.configure_environment_map(hdri=None)
            sc.add_light_ambient("/ambient", intensity=1.2)
        sc.add_grid("/grid", width=2.0, height=2.0, cell_size=0.1, plane="xy")
        self._world_T_report = self.core.robot.world_T_report
        self.urdf = ViserUrdf(self.server, Path(spec.urdf_path), root_node_name="/robot")
        names = self.urdf.get_actuated_joint_names()
        self._order = [list(spec.joint_names).index(n) for n in names]
        self.urdf.update_cfg(self.core.joints()[self._order])
        from .sim import cameras_for
        cam = cameras_for(spec)["iso"]
        self.server.initial_camera.position = tuple(float(v) for v in cam.eye)
        self.server.initial_camera.look_at = tuple(float(v) for v in cam.target)
        self._build_gui()
        self._thread = threading.Thread(target=self._loop, name="armtwin-pendant", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # ----- GUI ----------------------------------------------------------------------------
    def _build_gui(self) -> None:
        gui, spec, cfg = self.server.gui, self.spec, self.core.config
        units = spec.display_units()
        lo, hi = spec.to_display(spec.lower), spec.to_display(spec.upper)
        q_disp = spec.to_display(self.core.q_target)
        self.readout_md = gui.add_markdown("…")
        self.status_md = gui.add_markdown("status: ready")
        self.rig_md = gui.add_markdown("rig", visible=False)  # shown while a rig is attached
        with gui.add_folder("Joints"):
            self.sliders = []
            for i in range(spec.dof):
                s = gui.add_slider(f"J{i + 1} ({units[i]})", min=float(np.floor(lo[i])), max=float(np.ceil(hi[i])),
                                   step=0.1, initial_value=float(q_disp[i]))
                s.on_update(self._slider_cb(i))
                self.sliders.append(s)
            self.mode_dd = gui.add_dropdown("joint model", tuple(m.value for m in JointMode),
                                            initial_value=self.core.robot.mode.value)
            self.mode_dd.on_update(lambda _e: self._guard(lambda: self._set_mode(self.mode_dd.value)))
        with gui.add_folder("Jog"):
            self.joint_step = gui.add_number("joint step (deg/mm)", initial_value=float(cfg.joint_step), min=0.01, max=180.0, step=0.01)
            for i in range(spec.dof):
                g = gui.add_button_group(f"J{i + 1}", (f"J{i + 1} −", f"J{i + 1} +"))
                g.on_click(self._jog_joint_cb(i))
            self.tool_step = gui.add_number("tool step (mm)", initial_value=float(cfg.tool_step), min=0.01, max=500.0, step=0.01)
            self.turn_step = gui.add_number("turn step (deg)", initial_value=float(cfg.turn_step), min=0.01, max=180.0, step=0.01)
            self.jog_frame = gui.add_dropdown("jog frame", ("base", "tool"), initial_value="base")
            move = gui.add_button_group("tool move", ("X−", "X+", "Y−", "Y+", "Z−", "Z+"))
            move.on_click(self._jog_tool_cb(move))
            turns = ("A−", "A+", "B−", "B+", "C−", "C+") if not self._is_scara() else ("C−", "C+")
            turn = gui.add_button_group("tool turn", turns)
            turn.on_click(self._jog_tool_cb(turn))
        with gui.add_folder("IK target"):
            self.branch_dd = gui.add_dropdown("branch", ("nearest",) + self.core.branches(), initial_value="nearest")
            self.target_live = gui.add_checkbox("follow target", initial_value=True)
            snap = gui.add_button("target to tool")
            snap.on_click(lambda _e: self._guard(self._snap_target))
            go = gui.add_button("go to target")
            go.on_click(lambda _e: self._guard(self._go_target))
            p_mm = self.core.target_pose()[:3, 3] * 1000.0
            self.target_xyz = tuple(
                gui.add_number(f"target {a} (mm)", initial_value=round(float(v), 1), min=-10000.0, max=10000.0, step=0.1)
                for a, v in zip("XYZ", p_mm))
            go_xyz = gui.add_button("go to XYZ")
            go_xyz.on_click(lambda _e: self._guard(self._go_xyz))
        with gui.add_folder("Teach"):
            self.points_md = gui.add_markdown("0 points recorded")
            rec = gui.add_button("record point")
            rec.on_click(lambda _e: self._guard(self._record))
            clr = gui.add_button("clear points")
            clr.on_click(lambda _e: self._guard(self._clear))
            self.save_name = gui.add_text("file name", initial_value="taught.ngc")
            self.feed = gui.add_number("feed (mm/min)", initial_value=float(cfg.feed), min=1.0, max=60000.0, step=1.0)
            save = gui.add_button("save as G-code")
            save.on_click(lambda _e: self._guard(self._save))
            self.save_md = gui.add_markdown("", visible=False)  # the outcome, next to the button
        with gui.add_folder("Program"):
            progs = [p.name for p in self.core.list_programs()]
            self.prog_dd = gui.add_dropdown("program", tuple(progs) or ("(no .ngc in examples/)",), initial_value=(progs or ["(no .ngc in examples/)"])[0])
            self.upload = gui.add_upload_button("upload .ngc", mime_type=".ngc,.nc,.gcode,text/plain")
            self.upload.on_upload(lambda _e: self._guard(self._uploaded_cb))
            run = gui.add_button("run program")
            run.on_click(lambda _e: self._guard(self._run_program))
            stop = gui.add_button("stop")
            stop.on_click(lambda _e: self._guard(self.core.stop_program))
        T = self._world_T_report @ self.core.target_pose()
        self.target = self.server.scene.add_transform_controls("/target", scale=0.15, position=tuple(T[:3, 3]),
                                                               wxyz=_wxyz(T[:3, :3]))
        self.target_dot = self.server.scene.add_icosphere("/target/dot", radius=0.012, color=(40, 200, 80))
        self.target.on_update(lambda _e: self._guard(self._target_moved))
        self.tool_frame = self.server.scene.add_frame("/tool", axes_length=0.06, axes_radius=0.003)

    def _is_scara(self) -> bool:
        return self.spec.roll_only

    def _guard(self, fn) -> None:
        """Run a GUI callback; errors become the status line, never a dead server."""
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - shown to the person at the pendant
            self._set_status(f"error: {exc}")

    def _set_status(self, text: str) -> None:
        self._status = text
        self.status_md.content = f"status: {text}"

    def _slider_cb(self, i: int):
        def cb(event) -> None:
            if event.client is None:
                return  # our own update of the slider (the loop showing a jog), not a person
            self._guard(lambda: self._slider_moved(i))
        return cb

    def _slider_moved(self, i: int) -> None:
        # viser runs callbacks on a thread pool, so the updates of one drag can run out of
        # order: read the slider's newest value and apply it under the lock, so the last
        # callback to run applies the last value the browser sent.
        with self.core.lock:
            v = float(self.sliders[i].value)
            if abs(v - float(self.spec.to_display(self.core.q_target)[i])) < 1e-6:
                return
            r = self.core.set_joint_display(i, v)
            if abs(float(self.spec.to_display(r.q)[i]) - v) < 1e-6:
                self._slider_version = self.core.version  # the slider shows it already: no echo
            # else (clipped to the range): the loop moves the slider to the applied value
        self._set_status(r.message)
        self._snap_target()

    def _jog_joint_cb(self, i: int):
        def cb(event) -> None:
            d = -1 if event.target.value.endswith("−") else 1
            self._guard(lambda: self._report(self.core.jog_joint(i, d, float(self.joint_step.value))))
        return cb

    def _jog_tool_cb(self, group):
        def cb(event) -> None:
            v = event.target.value
            d = -1 if v.endswith("−") else 1
            letter = v[0]
            if letter in "XYZ":
                axis, step = letter.lower(), float(self.tool_step.value)
            else:
                axis, step = "r" + "xyz"["ABC".index(letter)], float(self.turn_step.value)
            self._guard(lambda: self._report(self.core.jog_tool(axis, d, step, frame=self.jog_frame.value,
                                                                branch=self._branch())))
        return cb

    def _branch(self) -> str | None:
        b = self.branch_dd.value
        return None if b == "nearest" else b

    def _report(self, r: MoveResult) -> None:
        self._set_status(r.message)
        if r.applied:
            self._snap_target()

    def _set_mode(self, value: str) -> None:
        self.core.set_mode(value)
        self._set_status(f"joint model: {value}")

    def _snap_target(self) -> None:
        T_report = self.core.target_pose()
        T = self._world_T_report @ T_report
        self._moving_target = True
        try:
            self.target.position = tuple(T[:3, 3])
            self.target.wxyz = _wxyz(T[:3, :3])
        finally:
            self._moving_target = False
        self.target_dot.color = (40, 200, 80)
        self._show_target_xyz(T_report[:3, 3])

    def _show_target_xyz(self, p_m: np.ndarray) -> None:
        """Show a target position (3,) m, reporting frame, in the X/Y/Z inputs (mm)."""
        for h, v in zip(self.target_xyz, np.asarray(p_m, float) * 1000.0):
            h.value = round(float(v), 1)

    def _target_pose_report(self) -> np.ndarray:
        T = transform(quat_to_matrix(_xyzw(self.target.wxyz)), np.asarray(self.target.position, float))
        return invert(self._world_T_report) @ T

    def _target_moved(self) -> None:
        if self._moving_target:
            return
        self._show_target_xyz(self._target_pose_report()[:3, 3])
        if self.target_live.value:
            self._go_target()

    def _go_xyz(self) -> None:
        """Move the target to the typed X/Y/Z (mm, reporting frame; its orientation kept) and go there."""
        p = np.array([float(h.value) for h in self.target_xyz]) / 1000.0
        if not np.all(np.isfinite(p)):
            self._set_status("target X/Y/Z must be numbers")
            return
        T = self._target_pose_report()
        T[:3, 3] = p
        W = self._world_T_report @ T
        self._moving_target = True
        try:
            self.target.position = tuple(float(v) for v in W[:3, 3])
        finally:
            self._moving_target = False
        self._go_target()

    def _go_target(self) -> None:
        r = self.core.move_to_pose(self._target_pose_report(), branch=self._branch())
        self._set_status(r.message)
        self.target_dot.color = (40, 200, 80) if r.applied else (230, 40, 40)

    def _record(self) -> None:
        n = self.core.record_point()
        T = self._world_T_report @ self.core.points[-1]
        self.server.scene.add_icosphere(f"/taught/p{n}", radius=0.008, color=(255, 140, 0), position=tuple(T[:3, 3]))
        self.points_md.content = f"{n} point{'s' if n != 1 else ''} recorded"
        self._set_status(f"recorded point {n}")

    def _clear(self) -> None:
        self.core.clear_points()
        self.server.scene.remove_by_name("/taught")
        self.points_md.content = "0 points recorded"

    def _save(self) -> None:
        self.core.config = _replace_feed(self.core.config, float(self.feed.value))
        r = self.core.save_gcode(self.save_name.value)
        text = r.message if r.saved else f"**⚠ {r.message}**"
        self.save_md.content = text
        self.save_md.visible = True
        self._set_status(text)

    def _uploaded_cb(self) -> None:
        f = self.upload.value
        self._uploaded = (f.name, f.content.decode("utf-8", errors="replace"))
        self._set_status(f"uploaded {f.name}; press 'run program'")

    def _run_program(self) -> None:
        if self._uploaded is not None:
            name, text = self._uploaded
            self._uploaded = None
        else:
            match = [p for p in self.core.list_programs() if p.name == self.prog_dd.value]
            if not match:
                self._set_status("no program chosen")
                return
            name, text = match[0].name, match[0].read_text(errors="replace")
        self._set_status(self.core.run_program(text, name))

    # ----- live loop ------------------------------------------------------------------------
    def _loop(self) -> None:
        period = 1.0 / self.core.config.rate
        steps = max(1, int(round(period / self.core.config.dt)))
        next_t = time.monotonic()
        last_text = last_rig = 0.0
        last_q: np.ndarray | None = None
        shown = rig_shown = ""
        while not self._stop.is_set():
            try:
                self.core.tick(steps)
                with self.core.lock:
                    q = self.core.robot.q
                    version = self.core.version
                    echo = version != self._slider_version  # a slider move is shown by the slider already
                    q_target = self.core.q_target.copy()
                    T = self._world_T_report @ self.core.robot.flange_pose()
                if last_q is None or np.max(np.abs(q - last_q)) > 1e-7:  # only send what changed
                    last_q = q
                    with self.server.atomic():
                        self.urdf.update_cfg(q[self._order])
                        self.tool_frame.position = tuple(T[:3, 3])
                        self.tool_frame.wxyz = _wxyz(T[:3, :3])
                if version != self._last_version and echo:
                    self._last_version = version
                    disp = self.spec.to_display(q_target)
                    for s, v in zip(self.sliders, disp):
                        v = float(np.clip(round(float(v), 3), s.min, s.max))
                        if abs(float(s.value) - v) > 1e-6:
                            s.value = v
                    if self.core.running_program:
                        self._snap_target()
                now = time.monotonic()
                if now - last_rig > 0.1:
                    last_rig = now
                    rig = rig_markdown(self.core.rig_status())
                    if rig != rig_shown:  # attached, detached, a new sample or a fault
                        rig_shown = rig
                        if rig:
                            self.rig_md.content = rig
                        self.rig_md.visible = bool(rig)
                if now - last_text > 0.1:
                    text = self._readout_text()
                    # the clock alone changes the text: refresh it once a second, the rest at once
                    if text.split("\n", 1)[1:] != shown.split("\n", 1)[1:] or now - last_text > 1.0:
                        last_text = now
                        shown = text
                        self.readout_md.content = text
            except Exception as exc:  # noqa: BLE001 - keep serving; show what went wrong
                if self._stop.is_set():
                    return
                self._set_status(f"error: {exc}")
            next_t += period
            delay = next_t - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_t = time.monotonic()

    def _readout_text(self) -> str:
        r = self.core.readout()
        joints = " · ".join(f"J{i + 1} {v:.1f}{'mm' if u == 'mm' else '°'}" for i, (v, u) in enumerate(zip(r["joints"], r["units"])))
        x, y, z = r["position_mm"]
        a, b, c = r["rpy_deg"]
        line = f"  \nprogram line {r['program_line']}" if r["program_line"] else ""
        warn = "  \n**unstable**" if not r["stable"] else ""
        return (f"**{self.spec.title}** · {r['mode']} · t {r['time']:.1f} s  \n{joints}  \n"
                f"tool x {x:.1f} y {y:.1f} z {z:.1f} mm · rpy {a:.1f} {b:.1f} {c:.1f}°{line}{warn}")

    # ----- life cycle -------------------------------------------------------------------------
    def serve_forever(self) -> None:
        """Block until interrupted (Ctrl-C)."""
        try:
            while not self._stop.is_set():
                self._stop.wait(0.5)
        finally:
            self.close()

    def close(self) -> None:
        """Stop the loop and the server; close the rig link and log (if attached) and the world (idempotent)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self.server.stop()
        finally:
            self.core.close()

    def __enter__(self) -> Pendant:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


#: what each fault flag means, for the person at the pendant
_FAULT_TEXT = {
    "LINK": "no state from the rig",
    "POWER": "motor supply cut",
    "WATCHDOG": "the rig stopped its motors (no frame for 100 ms)",
    "STALL": "a motor is driven but does not move",
    "RANGE": "a position did not fit the wire and was saturated",
    "RX_ERROR": "the rig dropped a corrupt frame",
    "LATE": "the host stalled",
}


def _deg(v: float, sign: bool = False) -> str:
    return "—" if not math.isfinite(v) else (f"{v:+.2f}°" if sign else f"{v:.1f}°")


def rig_markdown(tw: dict | None) -> str:
    """The page's rig panel (markdown) for :meth:`PendantCore.rig_status`; "" without a rig.

    Shows the port, the servo joints (deg), ΔE per joint (deg), the latency (ms) and a status
    line: ``OK``, or each fault in bold with what it means — a lost link says whether the port
    is gone (reconnecting) or open but silent — then the newest fault changes.
    """
    if tw is None:
        return ""
    joints = tw["joints"]
    servo = " · ".join(f"J{j} {_deg(v)}" for j, v in zip(joints, tw["servo_deg"]))
    err = " · ".join(f"J{j} {_deg(e, True)}" for j, e in zip(joints, tw["error_deg"]))
    lat = "—" if not math.isfinite(tw["latency_ms"]) else f"{tw['latency_ms']:.1f} ms"
    faults = tw["faults"]
    if faults == "OK":
        state = "rig OK"
    elif faults == "WAITING":
        state = "waiting for the first sample"
    else:
        parts = []
        for name in faults.split("|"):
            what = _FAULT_TEXT.get(name, "")
            if name == "LINK":
                what += (" — port open, the rig is silent" if tw["connected"]
                         else f" — port gone, trying to reopen it ({tw['reconnect_attempts']} attempts so far)")
                name = "LINK LOST"
            parts.append(f"**⚠ {name}**" + (f": {what}" if what else ""))
        state = "  \n".join(parts)
    sample = f"sample #{tw['stt']}" if tw["stt"] >= 0 else "no sample yet"
    lines = [f"**Rig** `{tw['port']}` · {sample}",
             f"servo {servo}", f"ΔE {err}", f"latency {lat}", state]
    if tw["error"]:
        lines.append(f"**⚠ sample failed**: {tw['error']}")
    if tw["events"]:
        lines.append("recent faults: " + "; ".join(tw["events"]))
    return "  \n".join(lines)


def _wxyz(R: np.ndarray) -> tuple[float, float, float, float]:
    x, y, z, w = matrix_to_quat(R)
    return (float(w), float(x), float(y), float(z))


def _xyzw(wxyz) -> np.ndarray:
    w, x, y, z = (float(v) for v in wxyz)
    return np.array([x, y, z, w])


def _replace_feed(cfg: PendantConfig, feed: float) -> PendantConfig:
    from dataclasses import replace
    return replace(cfg, feed=feed)


def _free_port(host: str) -> int:
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
