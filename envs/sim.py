"""The simulator facade: the only module in armtwin that imports :mod:`pybullet`.

Every :class:`World` owns its own PyBullet client (DIRECT by default, GUI only on
request), so many independent worlds live in one process. A world holds robots fixed
to a ground plane; each :class:`SimRobot` is driven through one call,
:meth:`SimRobot.command`, whatever its :class:`JointMode` — the G-code runner, the
Gymnasium envs, the teach pendant and the rig sync all end there.

Units: SI (m, rad, s, kg, N·m); poses are (4, 4) transforms in the robot's reporting
base frame, for the flange ``tool0``.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field, replace

import numpy as np
import pybullet
import pybullet_data

from ..controllers.kinematics import chain_of
from ..controllers.transforms import invert, quat_to_matrix, transform
from ..robots import RobotSpec
from ..robots.spec import DriveGains

__all__ = ["JointMode", "PhysicsConfig", "Camera", "cameras_for", "World", "SimRobot", "JointState", "Instability", "SimulationError"]


class SimulationError(RuntimeError):
    """A world or robot could not be created or used (e.g. a URDF that does not load)."""


class JointMode(enum.Enum):
    """How the joints of a robot are simulated (SPEC.md, "Joint models").

    KINEMATIC: joint values are set directly each step; no mass, inertia or force.
    HINGE: an explicit spring–damper drive, computed each physics step and applied as a
        force-limited joint torque; gravity, inertia and payload act on the arm.
    ARTICULATION: PyBullet's reduced-coordinate multibody with its own implicit
        position/velocity drive and force limit.
    """

    KINEMATIC = "kinematic"
    HINGE = "hinge"
    ARTICULATION = "articulation"

    @classmethod
    def parse(cls, value: "str | JointMode") -> "JointMode":
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            raise ValueError(f"unknown joint mode {value!r}; choose one of: {', '.join(m.value for m in cls)}") from None


@dataclass(frozen=True)
class PhysicsConfig:
    """Physics settings of a world.

    Attributes:
        dt: control step, s; :meth:`World.step` advances the time by this much.
        substeps: physics steps per control step (the physics step is dt / substeps).
        gravity: m/s², world frame.
        solver_iterations: PyBullet constraint solver iterations.
    """

    dt: float = 1.0 / 240.0
    substeps: int = 1
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)
    solver_iterations: int = 50

    def __post_init__(self) -> None:
        if not (np.isfinite(self.dt) and self.dt > 0):
            raise ValueError(f"dt must be a positive number of seconds, got {self.dt}")
        if int(self.substeps) != self.substeps or self.substeps < 1:
            raise ValueError(f"substeps must be a whole number >= 1, got {self.substeps}")


@dataclass(frozen=True)
class Camera:
    """A look-at camera. Angles in degrees, distances in metres.

    Attributes:
        target: point looked at, world frame (m).
        distance: eye to target (m).
        azimuth: eye direction measured from world +x, counter-clockwise (deg).
        elevation: eye height angle above the horizontal plane (deg).
        fov: vertical field of view (deg).
    """

    target: tuple[float, float, float]
    distance: float
    azimuth: float = 45.0
    elevation: float = 25.0
    fov: float = 50.0
    near: float = 0.02
    far: float = 20.0

    @property
    def eye(self) -> np.ndarray:
        az, el = np.radians(self.azimuth), np.radians(self.elevation)
        d = np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
        return np.asarray(self.target, dtype=float) + self.distance * d

    def view_matrix(self) -> np.ndarray:
        """(4, 4) world-to-camera (OpenGL convention, camera looks along −z)."""
        eye, tgt = self.eye, np.asarray(self.target, dtype=float)
        f = tgt - eye
        f /= np.linalg.norm(f)
        up = np.array([0.0, 0.0, 1.0])
        s = np.cross(f, up)
        s /= np.linalg.norm(s)
        u = np.cross(s, f)
        m = np.eye(4)
        m[0, :3], m[1, :3], m[2, :3] = s, u, -f
        m[:3, 3] = -m[:3, :3] @ eye
        return m

    def projection_matrix(self, aspect: float) -> np.ndarray:
        """(4, 4) OpenGL perspective projection."""
        t = 1.0 / np.tan(np.radians(self.fov) / 2)
        n, f = self.near, self.far
        return np.array([[t / aspect, 0, 0, 0], [0, t, 0, 0],
                         [0, 0, (f + n) / (n - f), 2 * f * n / (n - f)], [0, 0, -1, 0]])

    def project(self, points: np.ndarray, width: int, height: int) -> np.ndarray:
        """Pixel coordinates (N, 2) (x right, y down) of world points (N, 3); NaN behind the eye."""
        pts = np.atleast_2d(np.asarray(points, dtype=float))
        h = np.c_[pts, np.ones(len(pts))]
        clip = (self.projection_matrix(width / height) @ self.view_matrix() @ h.T).T
        w = clip[:, 3:4]
        ndc = np.where(w > 1e-9, clip[:, :2] / np.where(w > 1e-9, w, 1.0), np.nan)
        return np.c_[(ndc[:, 0] + 1) * 0.5 * width, (1 - ndc[:, 1]) * 0.5 * height]


def cameras_for(spec: RobotSpec) -> dict[str, Camera]:
    """Named camera presets that frame a robot's workspace."""
    r = spec.reach
    zc = 0.5 * max(r, 0.6)
    tgt = (0.2 * r, 0.0, zc)
    dist = 1.9 * r + 0.25
    return {
        "iso": Camera(tgt, dist, azimuth=-50.0, elevation=22.0),
        "front": Camera(tgt, dist, azimuth=-90.0, elevation=8.0),
        "side": Camera(tgt, dist, azimuth=0.0, elevation=8.0),
        "top": Camera((0.0, 0.0, 0.0), dist * 1.05, azimuth=-90.0, elevation=89.0),
    }


@dataclass(frozen=True)
class JointState:
    """Joint positions (rad / m), velocities (rad/s / m/s) and efforts (N·m / N), each (n,)."""

    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray


@dataclass(frozen=True)
class Instability:
    """Why a robot's simulation was judged unstable."""

    time: float  # s
    joint: int  # 0-based joint index, -1 for the whole state
    message: str


class World:
    """An independent PyBullet world with a ground plane.

    Args:
        physics: time step, substeps, gravity.
        gui: open PyBullet's GUI (needs a display); headless DIRECT otherwise.
        renderer: "auto" (EGL when it loads, else TinyRenderer), "egl" or "tiny".
            EGL must be loaded before any body, so it is decided here.
        ground: load a ground plane.
    """

    def __init__(self, physics: PhysicsConfig | None = None, *, gui: bool = False,
                 renderer: str = "tiny", ground: bool = True) -> None:
        self.physics = physics or PhysicsConfig()
        if gui and not os.environ.get("DISPLAY"):
            raise SimulationError("a GUI was asked for but no display is available (DISPLAY is not set)")
        self._p = pybullet
        self.client = pybullet.connect(pybullet.GUI if gui else pybullet.DIRECT)
        if self.client < 0:
            raise SimulationError("could not connect to the PyBullet physics server")
        self._egl_plugin = -1
        if renderer not in ("auto", "egl", "tiny"):
            raise ValueError(f"renderer must be auto, egl or tiny, got {renderer!r}")
        if renderer in ("auto", "egl") and not gui:
            self._egl_plugin = self._load_egl()
            if renderer == "egl" and self._egl_plugin < 0:
                self.close()
                raise SimulationError("the EGL renderer plugin did not load")
        self.time = 0.0  # s
        self.robots: list[SimRobot] = []
        self._closed = False
        c = self.client
        pybullet.setGravity(*self.physics.gravity, physicsClientId=c)
        pybullet.setPhysicsEngineParameter(fixedTimeStep=self.physics.dt / self.physics.substeps,
                                           numSolverIterations=self.physics.solver_iterations, physicsClientId=c)
        if ground:
            pybullet.setAdditionalSearchPath(pybullet_data.getDataPath(), physicsClientId=c)
            self.ground = pybullet.loadURDF("plane.urdf", physicsClientId=c)

    def _load_egl(self) -> int:
        try:
            import pkgutil
            egl = pkgutil.get_loader("eglRenderer")
            if egl is None:
                return -1
            return pybullet.loadPlugin(egl.get_filename(), "_eglRendererPlugin", physicsClientId=self.client)
        except Exception:  # noqa: BLE001 - any failure means: fall back to TinyRenderer
            return -1

    @property
    def renderer(self) -> str:
        """"egl" or "tiny": the renderer :meth:`render` uses."""
        return "egl" if self._egl_plugin >= 0 else "tiny"

    # ----- life cycle -----------------------------------------------------------------
    def close(self) -> None:
        """Disconnect the client (idempotent)."""
        if not getattr(self, "_closed", True):
            self._closed = True
            try:
                if self._egl_plugin >= 0:
                    pybullet.unloadPlugin(self._egl_plugin, physicsClientId=self.client)
                pybullet.disconnect(physicsClientId=self.client)
            except pybullet.error:
                pass

    def __enter__(self) -> "World":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    # ----- content --------------------------------------------------------------------
    def add_robot(self, spec: RobotSpec, mode: JointMode | str = JointMode.KINEMATIC, *,
                  q0=None, drive: DriveGains | None = None, payload: float = 0.0,
                  position=(0.0, 0.0, 0.0), urdf_path: str | None = None) -> "SimRobot":
        """Load ``spec``'s URDF fixed to the ground and return its handle.

        Args:
            spec: the robot.
            mode: joint model.
            q0: initial joints (rad / m); default the ``home`` pose.
            drive: drive gains overriding ``spec.drive``.
            payload: kg attached at the flange.
            position: where the mounting face stands, world frame (m).
            urdf_path: load another URDF file with the same joints (default: the spec's).
        """
        path = str(urdf_path or spec.urdf_path)
        try:
            body = pybullet.loadURDF(path, basePosition=position, useFixedBase=True,
                                     flags=pybullet.URDF_USE_INERTIA_FROM_FILE, physicsClientId=self.client)
        except pybullet.error as exc:
            raise SimulationError(f"URDF {path} did not load: {exc}") from None
        robot = SimRobot(self, spec, body, JointMode.parse(mode), drive or spec.drive, np.asarray(position, float))
        robot.set_payload(payload)
        robot.reset(spec.home if q0 is None else q0)
        self.robots.append(robot)
        return robot

    # ----- time -----------------------------------------------------------------------
    def step(self, n: int = 1) -> None:
        """Advance the world by ``n`` control steps of ``physics.dt``.

        Robots whose state became unstable keep their flag in :attr:`SimRobot.instability`.
        """
        p, c = pybullet, self.client
        dynamic = any(r.mode is not JointMode.KINEMATIC for r in self.robots)
        for _ in range(n):
            for _sub in range(self.physics.substeps):
                for r in self.robots:
                    r._pre_physics()
                if dynamic:
                    p.stepSimulation(physicsClientId=c)
                for r in self.robots:
                    r._post_physics()
            self.time += self.physics.dt

    # ----- rendering ------------------------------------------------------------------
    def render(self, camera: Camera, width: int = 640, height: int = 480) -> np.ndarray:
        """RGB image (height, width, 3) uint8 from ``camera``."""
        view = camera.view_matrix().T.reshape(-1).tolist()
        proj = camera.projection_matrix(width / height).T.reshape(-1).tolist()
        renderer = pybullet.ER_BULLET_HARDWARE_OPENGL if self._egl_plugin >= 0 else pybullet.ER_TINY_RENDERER
        _, _, rgba, _, _ = pybullet.getCameraImage(
            width, height, viewMatrix=view, projectionMatrix=proj, renderer=renderer,
            lightDirection=[0.4, -0.6, 1.0], shadow=1, physicsClientId=self.client)
        img = np.reshape(np.asarray(rgba, dtype=np.uint8), (height, width, 4))
        return np.ascontiguousarray(img[:, :, :3])


class SimRobot:
    """A robot in a :class:`World`. Create it with :meth:`World.add_robot`."""

    #: speed beyond which the state counts as unstable, as a multiple of the joint's limit
    INSTABILITY_SPEED_FACTOR = 20.0

    def __init__(self, world: World, spec: RobotSpec, body: int, mode: JointMode,
                 drive: DriveGains, position: np.ndarray) -> None:
        self.world, self.spec, self.body, self.mode = world, spec, body, mode
        p, c = pybullet, world.client
        by_name = {}
        for j in range(p.getNumJoints(body, physicsClientId=c)):
            info = p.getJointInfo(body, j, physicsClientId=c)
            by_name[info[1].decode()] = j
            if info[12].decode() == "tool0":
                self.tool_link = j
        missing = [n for n in spec.joint_names if n not in by_name]
        if missing or not hasattr(self, "tool_link"):
            raise SimulationError(f"URDF for {spec.name} lacks joints {missing or ''} / link tool0")
        self.joints = [by_name[n] for n in spec.joint_names]
        self.drive = drive
        n = spec.dof
        for name in ("stiffness", "damping", "friction", "joint_damping"):
            if len(getattr(drive, name)) != n:
                raise ValueError(f"drive.{name} needs {n} values for {spec.name}")
        self._kp = np.array(drive.stiffness)
        self._kd = np.array(drive.damping)
        self._friction = np.array(drive.friction)
        self._effort = spec.max_effort
        self._vmax = spec.max_velocity
        self._q_cmd = spec.home.copy()
        self._qd_cmd = np.zeros(n)
        self._tau = np.zeros(n)
        self.instability: Instability | None = None
        # world <- reporting frame
        self._world_T_report = transform(None, position) @ spec.report_frame.matrix
        self._report_T_world = invert(self._world_T_report)
        for j, jd in zip(self.joints, drive.joint_damping):
            p.changeDynamics(body, j, linearDamping=0.0, angularDamping=0.0, jointDamping=float(jd), physicsClientId=c)
        self._configure_motors()

    # ----- configuration --------------------------------------------------------------
    def _configure_motors(self) -> None:
        p, c = pybullet, self.world.client
        # PyBullet enables velocity motors by default; the kinematic and hinge models do not want them.
        if self.mode is not JointMode.ARTICULATION:
            p.setJointMotorControlArray(self.body, self.joints, p.VELOCITY_CONTROL,
                                        forces=[0.0] * self.spec.dof, physicsClientId=c)

    def set_mode(self, mode: JointMode | str) -> None:
        """Switch the joint model, keeping the current state."""
        self.mode = JointMode.parse(mode)
        self.instability = None
        self._configure_motors()

    def set_payload(self, mass: float) -> None:
        """Attach ``mass`` kg at the flange (0 removes it)."""
        if not (np.isfinite(mass) and mass >= 0):
            raise ValueError(f"payload must be >= 0 kg, got {mass}")
        from ..robots.urdfgen import FLANGE_MASS
        pybullet.changeDynamics(self.body, self.tool_link, mass=FLANGE_MASS + float(mass), physicsClientId=self.world.client)
        self.payload = float(mass)

    # ----- state ----------------------------------------------------------------------
    def reset(self, q, qd=None) -> None:
        """Teleport the joints to ``q`` (rad / m) with velocity ``qd`` and hold them there."""
        q = self._checked(q, "q")
        qd = np.zeros_like(q) if qd is None else self._checked(qd, "qd")
        for j, a, b in zip(self.joints, q, qd):
            pybullet.resetJointState(self.body, j, float(a), float(b), physicsClientId=self.world.client)
        self._q_cmd, self._qd_cmd = q.copy(), qd.copy()
        self._tau = np.zeros_like(q)
        self.instability = None

    def state(self) -> JointState:
        """Joint positions, velocities and efforts now."""
        s = pybullet.getJointStates(self.body, self.joints, physicsClientId=self.world.client)
        q = np.array([x[0] for x in s])
        qd = np.array([x[1] for x in s])
        if self.mode is JointMode.ARTICULATION:
            tau = np.array([x[3] for x in s])
        else:
            tau = self._tau.copy()
        return JointState(q, qd, tau)

    @property
    def q(self) -> np.ndarray:
        """Joint positions (n,), rad / m."""
        return np.array([x[0] for x in pybullet.getJointStates(self.body, self.joints, physicsClientId=self.world.client)])

    @property
    def commanded(self) -> tuple[np.ndarray, np.ndarray]:
        """The last commanded positions and velocities."""
        return self._q_cmd.copy(), self._qd_cmd.copy()

    def flange_pose(self) -> np.ndarray:
        """(4, 4) flange (tool0) pose in the reporting base frame, as the physics engine has it."""
        ls = pybullet.getLinkState(self.body, self.tool_link, computeForwardKinematics=True, physicsClientId=self.world.client)
        t = transform(quat_to_matrix(ls[5]), ls[4])
        return self._report_T_world @ t

    def fk(self, q=None) -> np.ndarray:
        """Analytic flange pose (4, 4) for ``q`` (default: the current joints), reporting frame."""
        from ..controllers.kinematics import fk
        return fk(chain_of(self.spec), self.q if q is None else q)

    @property
    def world_T_report(self) -> np.ndarray:
        """(4, 4) the reporting base frame in world coordinates."""
        return self._world_T_report.copy()

    # ----- the one command path -------------------------------------------------------
    def command(self, q, qd=None) -> None:
        """Set the joint targets: positions (rad / m) and optionally velocities (rad/s / m/s).

        The same call for every joint model; the target is applied at each physics step
        until the next command.
        """
        self._q_cmd = self._checked(q, "q")
        self._qd_cmd = np.zeros_like(self._q_cmd) if qd is None else self._checked(qd, "qd")
        if self.mode is JointMode.ARTICULATION:
            d = self.drive
            n = self.spec.dof
            pybullet.setJointMotorControlArray(
                self.body, self.joints, pybullet.POSITION_CONTROL,
                targetPositions=self._q_cmd.tolist(), targetVelocities=self._qd_cmd.tolist(),
                forces=self._effort.tolist(), positionGains=[d.position_gain] * n,
                velocityGains=[d.velocity_gain] * n, physicsClientId=self.world.client)

    def _checked(self, v, what: str) -> np.ndarray:
        v = np.asarray(v, dtype=float).reshape(-1)
        if v.shape != (self.spec.dof,):
            raise ValueError(f"{self.spec.name}: {what} needs {self.spec.dof} values, got {v.size}")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{self.spec.name}: {what} has non-finite values: {v}")
        return v

    def _pre_physics(self) -> None:
        if self.instability is not None:
            return
        c = self.world.client
        if self.mode is JointMode.KINEMATIC:
            for j, a, b in zip(self.joints, self._q_cmd, self._qd_cmd):
                pybullet.resetJointState(self.body, j, float(a), float(b), physicsClientId=c)
        elif self.mode is JointMode.HINGE:
            s = pybullet.getJointStates(self.body, self.joints, physicsClientId=c)
            q = np.array([x[0] for x in s])
            qd = np.array([x[1] for x in s])
            tau = self._kp * (self._q_cmd - q) + self._kd * (self._qd_cmd - qd) - self._friction * np.tanh(qd / 1e-3)
            if np.all(np.isfinite(tau)):
                self._tau = np.clip(tau, -self._effort, self._effort)
            pybullet.setJointMotorControlArray(self.body, self.joints, pybullet.TORQUE_CONTROL,
                                               forces=self._tau.tolist(), physicsClientId=c)

    def _post_physics(self) -> None:
        if self.instability is not None:
            return
        if self.mode is JointMode.KINEMATIC:
            return  # the state is exactly what was set
        s = pybullet.getJointStates(self.body, self.joints, physicsClientId=self.world.client)
        q = np.array([x[0] for x in s])
        qd = np.array([x[1] for x in s])
        t = self.world.time
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(qd))):
            self.instability = Instability(t, -1, f"{self.spec.name}: non-finite joint state at t={t:.4f} s ({self.mode.value} model)")
            return
        over = np.abs(qd) > self.INSTABILITY_SPEED_FACTOR * self._vmax
        if np.any(over):
            k = int(np.argmax(over))
            self.instability = Instability(
                t, k, f"{self.spec.name}: joint {k + 1} speed {abs(qd[k]):.3g} exceeds {self.INSTABILITY_SPEED_FACTOR:g}x its "
                      f"limit {self._vmax[k]:.3g} at t={t:.4f} s ({self.mode.value} model, physics step "
                      f"{self.world.physics.dt / self.world.physics.substeps:.4g} s)")

    @property
    def stable(self) -> bool:
        return self.instability is None
