"""The teach pendant's logic, without a GUI: :class:`PendantCore` (see :mod:`armtwin.envs.pendant`).

A :class:`~armtwin.envs.sim.World` with one robot, joint targets, jogging (joints; the tool along
or about the base or tool axes), IK targets with a branch choice, taught points, G-code export and
program runs. With a tool on the flange (``armtwin ui R --tool N [--tools FILE]``,
:attr:`PendantConfig.tool`) the tool's body and mass are on the simulated flange and everything
Cartesian — the readout, the IK target, the jog, the taught points and their G-code — is at its
TCP (:class:`~armtwin.controllers.tcp.TcpKinematics`), as ``armtwin run --tool N`` has it. With a
workcell (``armtwin ui R --cell FILE|default``, :attr:`PendantConfig.cell`) the robot stands at the
cell's mount among its bodies, and an IK target whose solution is in collision (with the cell or
the robot itself, by ``armtwin check --cell``'s rule: :class:`~armtwin.envs.interference.CollisionFilter`)
is not applied: the choice takes the nearest free solution, or says the target is in collision. Every motion goes through ``SimRobot.command`` and is advanced by
:meth:`PendantCore.tick` — the one command path. Thread-safe (one lock); only the thread that
ticks touches PyBullet. With :meth:`PendantCore.attach_rig` the simulated robot also commands the
servo rig from a loop of its own at the sync rate.

Units at this edge: degrees, millimetres, mm/min; SI inside.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from ...controllers.tcp import TcpKinematics
from ...controllers.tools import Tool, ToolTable, default_tools
from ...controllers.transforms import (
    matrix_to_rpy,
    rot_x,
    rot_y,
    rot_z,
)
from ...robots import RobotSpec
from ...robots.workcell import Cell
from .. import examples_dir
from ..sim import JointMode, PhysicsConfig, World


from ...controllers.gcode.teach import gcode_for_points
from ..collision import CollisionModel
from ..files import replace_file
from ..interference import CollisionFilter
from ..workcell import mount_of, place_cell

__all__ = ["MoveResult", "PendantConfig", "PendantCore", "SaveResult", "safe_file_name", "GCODE_SUFFIXES",
           "MAX_FILE_NAME", "MAX_JOG_STEP"]

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
        tools: the tool table (``--tools FILE``; default the built-in one).
        tool: the number of the tool on the flange (``--tool N``; 0: the bare flange): its TCP is
            the pendant's controlled point, and programs run start with it mounted.
        cell: the workcell (``--cell``): the robot at its mount among its bodies, and IK targets
            in collision refused; None: an empty world, nothing checked.
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
    tools: ToolTable = field(default_factory=default_tools, compare=False)
    tool: int = 0
    cell: Cell | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for name in ("dt", "rate", "joint_step", "prismatic_step", "tool_step", "turn_step", "feed"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"PendantConfig.{name} must be a positive number, got {v!r}")
        if not isinstance(self.tools, ToolTable):
            raise ValueError(f"PendantConfig.tools must be a ToolTable, got {type(self.tools).__name__}")
        if self.cell is not None and not isinstance(self.cell, Cell):
            raise ValueError(f"PendantConfig.cell must be a Cell or None, got {type(self.cell).__name__}")
        if isinstance(self.tool, bool) or not isinstance(self.tool, (int, np.integer)) or self.tool not in self.tools:
            raise ValueError(f"PendantConfig.tool {self.tool!r} is not in the tool table ({self.tools.source}: "
                             f"T{', T'.join(str(n) for n in self.tools)})")

    @property
    def mounted(self) -> Tool | None:
        """The tool on the flange (None: T0, the bare flange)."""
        return self.tools[int(self.tool)] if self.tool else None


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


#: largest jog step accepted, mm or deg
MAX_JOG_STEP = 1000.0


def _checked_step(step, what: str) -> float:
    """A jog step as a float: finite and within [0, MAX_JOG_STEP] (ValueError otherwise).

    A NaN step stored in the target would break every later jog, so it is refused here."""
    step = float(step)
    if not (0.0 <= step <= MAX_JOG_STEP):
        raise ValueError(f"{what} must be between 0 and {MAX_JOG_STEP:g}, got {step}")
    return step


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
        #: FK and IK of the controlled point: the mounted tool's TCP (the flange without a tool)
        self.kinematics = TcpKinematics(spec, self.config.mounted)
        self.world = World(PhysicsConfig(dt=self.config.dt), renderer="tiny")
        cell = self.config.cell
        position, rotation = ((0.0, 0.0, 0.0), None) if cell is None else mount_of(cell)
        self.robot = self.world.add_robot(spec, JointMode.parse(mode), tool=self.config.mounted,  # its mass a payload
                                          position=position, orientation=rotation)
        #: with a cell: its bodies in the world, and the IK's collision filter (a world of its own)
        self.placed = None if cell is None else place_cell(self.world, cell, self.robot)
        self.collisions: CollisionFilter | None = None
        if cell is not None:
            self.collisions = CollisionFilter(CollisionModel(spec, cell, tool=self.config.mounted))
        self._collision_lock = threading.Lock()   # the filter places its links, then queries: one caller at a time
        self.q_target = self.robot.q.copy()
        self.points: list[np.ndarray] = []
        self._program: deque = deque()  # (q (n,), qd (n,), line) samples, one per world step
        self.program_line: int | None = None
        self.program_name: str | None = None
        self.version = 0  # bumps whenever the commanded joints change
        self.twin = None  # TwinSync once a rig is attached (virtual -> real)
        self.rig_loop = None  # the RigLoop running it
        self._published = self.robot.q.copy()  # the joints as of the newest tick, for the rig loop (no lock)
        self.live = None  # the --live stream (a RunMcapLog without a file) once attached
        self._qd_target = np.zeros(spec.dof)  # the commanded velocities (a program's; 0 for a jog)

    # ----- state ------------------------------------------------------------------------
    def close(self) -> None:
        """Close the rig link and its log (if attached) and the world (idempotent)."""
        with self.lock:
            self.detach_rig()
            self.detach_live()
            self.world.close()
            if self.collisions is not None:
                self.collisions.model.close()
                self.collisions = None

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
        from ..rig.sync import Direction, RigLoop, SyncConfig, TwinSync
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

    # ----- live view (--live) -----------------------------------------------------------------
    def attach_live(self, server) -> None:
        """Stream the robot to ``server`` (a :class:`~armtwin.envs.telemetry.live.LiveServer` made
        with :data:`~armtwin.envs.telemetry.topics.PENDANT_TOPICS`) after every :meth:`tick`: the
        topics of ``armtwin run --live`` (joint states, the targets as the commanded joints,
        ``/tf``, the tool poses, the program line), built by the run log's own writer
        (:class:`~armtwin.envs.telemetry.runlog.RunMcapLog` without a file), so the encoding
        happens on its thread, not the pendant's. The pendant owns the server from now on:
        :meth:`detach_live` / :meth:`close` close it.

        Raises:
            ValueError: a live stream is attached already.
        """
        from ..telemetry.runlog import RunMcapLog
        with self.lock:
            if self.live is not None:
                raise ValueError("a live stream is attached already; detach it first")
            self.live = RunMcapLog(None, self.spec, base_position=self.robot.base_position, mode=self.robot.mode.value,
                                   live=server, command="ui", start_ns=self._start_ns())
            self._stream()

    def _start_ns(self) -> int:
        """The wall clock (ns) that world time 0 maps to: now minus the world's time."""
        return time.time_ns() - int(round(self.world.time * 1e9))

    def detach_live(self) -> None:
        """Stop streaming and close the live server (idempotent)."""
        with self.lock:
            live, self.live = self.live, None
        if live is not None:
            live.close()

    def _stream(self) -> None:
        """The state after a tick to the live stream (under the lock; queueing only)."""
        st = self.robot.state()
        self.live.write(self.world.time, self.program_line, self.q_target, self._qd_target, st.q, st.qd, st.tau,
                        self.robot.flange_pose())

    @property
    def running_program(self) -> bool:
        return bool(self._program)

    def tick(self, steps: int = 1) -> None:
        """Advance the world ``steps`` control steps (program samples are commanded first).

        The joints the world has after the steps are published for the rig loop
        (:meth:`published_joints`), which sends them to the rig at its own rate, and to the live
        stream (:meth:`attach_live`): one message per topic per tick.
        """
        with self.lock:
            for _ in range(steps):
                if self._program:
                    q, qd, line = self._program.popleft()
                    self.q_target, self._qd_target = q, qd
                    self.program_line = line
                    self.robot.command(q, qd)
                    if not self._program:
                        self.program_line = None
                        self._qd_target = np.zeros(self.spec.dof)
                        self.robot.command(q)
                    self.version += 1
                self.world.step()
            self._published = self.robot.q.copy()  # one reference swap: the rig loop reads it unlocked
            if self.live is not None:
                self._stream()

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
        """(4, 4) TCP pose (the flange without a tool) in the reporting frame: of ``q``, or as the
        engine has it now."""
        if q is not None:
            return self.kinematics.fk(q)
        with self.lock:
            return self.robot.tcp_pose()

    @property
    def tool_label(self) -> str:
        """The mounted tool for people: "T1 pen holder, 0.5 mm pen (TCP 0 0 100 mm)", or "no tool"."""
        t = self.config.mounted
        if t is None:
            return "no tool (the flange)"
        return f"T{t.number} {t.name} (TCP {' '.join(f'{v * 1000:g}' for v in t.offset)} mm)"

    def readout(self) -> dict[str, Any]:
        """Joint values (display units), TCP pose (mm, URDF RPY deg; the flange without a tool), the
        tool (:attr:`tool_label`), time (s), mode, target, program line, stability; ``twin``:
        :meth:`rig_status` with a rig attached, else None."""
        with self.lock:
            q = self.robot.q
            T = self.robot.tcp_pose()
            t = self.world.time
            mode = self.robot.mode.value
            twin = self.rig_status()
        return {"time": t, "mode": mode, "joints": self.spec.to_display(q), "units": self.spec.display_units(),
                "position_mm": T[:3, 3] * 1000.0, "rpy_deg": np.degrees(matrix_to_rpy(T[:3, :3])),
                "target": self.spec.to_display(self.q_target), "program_line": self.program_line,
                "stable": self.robot.stable, "twin": twin, "tool": self.tool_label}

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
            self._qd_target = np.zeros(self.spec.dof)
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
        """(4, 4) TCP pose (the flange without a tool) of the commanded joints (reporting frame)."""
        with self.lock:
            return self.kinematics.fk(self.q_target)

    def jog_tool(self, axis: str, direction: int, step: float | None = None, *, frame: str = "base",
                 branch: str | None = None) -> MoveResult:
        """Jog the tool: ``axis`` "x"/"y"/"z" moves by ``step`` mm, "rx"/"ry"/"rz" turns by ``step`` deg.

        Args:
            axis: which axis.
            direction: +1 or -1.
            step: mm or deg (default from the config).
            frame: "base" (axes of the robot base; turns about the base axes through the TCP,
                like G-code A/B/C) or "tool" (the TCP frame's own axes: along and about the tool).
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
        """Solve IK for the TCP pose ``T`` (4, 4; reporting frame, m; the flange without a tool) and
        command it if it is reachable.

        Args:
            T: the target.
            branch: keep this IK branch label (e.g. "front/up/noflip", "left"); None: the
                nearest solution to the current joints (weighted shortest travel).

        Returns:
            A :class:`MoveResult`; unreachable or out-of-range targets are not applied, and with a
            cell neither are targets whose every solution (on ``branch``) is in collision: the
            message says "not applied: in collision: ..." with the pairs; when the nearest
            solution was skipped for a collision, the message of the applied one says so.
        """
        T = np.asarray(T, float)
        if T.shape != (4, 4) or not np.all(np.isfinite(T)):
            raise ValueError("the target pose must be a finite 4x4 transform")
        with self.lock:
            q_near = self.q_target.copy()
        filt = self.collisions
        if filt is None:
            r = self.kinematics.solve(T, q_near)
        else:
            with self._collision_lock:
                return self._move_free(T, q_near, filt, branch)
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

    def _move_free(self, T: np.ndarray, q_near: np.ndarray, filt: CollisionFilter, branch: str | None) -> MoveResult:
        """:meth:`move_to_pose` with the cell's collision filter."""
        from ...controllers.ik import IKStatus
        r = self.kinematics.solve(T, q_near, reject=filt)
        if branch:
            cands = [s for s in r.solutions if s.branch == branch and s.within_limits]
            if not cands:
                why = r.reason if not r.ok else f"no solution on branch {branch} here"
                return MoveResult(False, q_near, f"not applied: {why}")
            free = [s for s in cands if not s.rejected]
            pick = min(free or cands, key=lambda s: float(np.sum(np.abs(s.q - q_near))))
            if not free:
                return MoveResult(False, q_near, f"not applied: in collision on branch {branch}: {pick.rejected}")
            return self._apply(pick.q, f"IK ok ({pick.branch})", pick.branch)
        if r.status is IKStatus.REJECTED:
            return MoveResult(False, q_near, f"not applied: in collision: {filt.refusal(r)}")
        if not r.ok or r.best is None:
            return MoveResult(False, q_near, f"not applied: {r.status.value}: {r.reason}")
        skipped = filt.skipped(self.kinematics.solve(T, q_near))
        note = "" if skipped is None else \
            f"; the nearest solution ({skipped[0]}) is in collision: " + "; ".join(c.describe() for c in skipped[1])
        return self._apply(r.best, f"IK ok ({r.best_branch}){note}", r.best_branch)

    def branches(self) -> tuple[str, ...]:
        """IK branch labels of the robot."""
        from ...controllers.ik import branch_labels
        return tuple(branch_labels(self.spec))

    def current_branch(self) -> str:
        from ...controllers.ik import branch_of
        with self.lock:
            return branch_of(self.spec, self.q_target)

    # ----- teaching -------------------------------------------------------------------------
    def record_point(self) -> int:
        """Record the current commanded TCP pose (the flange without a tool); returns the number of points."""
        self.points.append(self.target_pose())
        return len(self.points)

    def clear_points(self) -> None:
        self.points.clear()

    def gcode(self) -> str:
        """G-code of the recorded points (see :func:`gcode_for_points`)."""
        return gcode_for_points(self.spec, self.points, feed_mm_min=self.config.feed,
                                title=datetime.now().strftime("%Y-%m-%d %H:%M"), tool=self.config.mounted)

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
        control step of this pendant; the pendant's tool table and mounted tool are ``run``'s
        ``--tools`` and ``--tool``), led in from where the robot stands, and then commanded
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
            self._qd_target = np.zeros(self.spec.dof)
            self.q_target = self.robot.q.copy()
            self.robot.command(self.q_target)
            self.version += 1

    def plan_program(self, text: str) -> str | list[tuple[np.ndarray, np.ndarray, int]]:
        """The (q, qd, line) samples :meth:`run_program` queues: a joint move from where the robot
        stands to the program's start, then the program's control trajectory at this pendant's
        control step (the joints ``armtwin run`` commands); or a status line naming the first
        fault when the program cannot run."""
        from ...controllers.gcode import ControlTrajectoryError, compile_program, machine_for
        try:
            machine = machine_for(self.spec, tools=self.config.tools, tool=int(self.config.tool))
            program = compile_program(text, self.spec, machine, period=self.config.dt)
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


