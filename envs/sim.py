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

import contextlib
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

#: a filter of joint commands, ``(q, qd) -> (q, qd)`` (rad / m, rad/s / m/s; (n,) each): see
#: :meth:`SimRobot.set_command_filter`
CommandFilter = Callable[[np.ndarray, np.ndarray], "tuple[np.ndarray, np.ndarray]"]


def _libc():
    try:
        import ctypes
        return ctypes.CDLL(None)
    except (OSError, ImportError):
        return None


_LIBC = _libc()  # C stdio, to flush printf buffers around redirections


def _flush_all() -> None:
    """Flush Python's and C's stdio buffers."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):
            pass
    if _LIBC is not None:
        try:
            _LIBC.fflush(None)
        except (OSError, AttributeError, TypeError, ValueError):
            pass


@contextlib.contextmanager
def _quiet_fds(stderr: bool = True):
    """Send the process's file descriptors 1 (and 2) to /dev/null for a block.

    PyBullet's plugins print with C ``printf``, which Python's ``sys.stdout`` cannot catch.
    """
    _flush_all()
    fds = (1, 2) if stderr else (1,)
    saved = []
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except (OSError, TypeError, AttributeError):  # also at interpreter shutdown
        yield
        return
    try:
        for fd in fds:
            try:
                saved.append((fd, os.dup(fd)))
                os.dup2(devnull, fd)
            except OSError:
                pass
        yield
    finally:
        _flush_all()  # C stdio buffers hold what was printed during the block: drop it here
        for fd, old in saved:
            os.dup2(old, fd)
            os.close(old)
        os.close(devnull)


with _quiet_fds():  # no "pybullet build time" banner (C printf) on every command's output
    import pybullet
import pybullet_data  # noqa: E402

from ..controllers.dynamics import PAYLOAD_DENSITY
from ..controllers.kinematics import chain_of
from ..controllers.tools import Tool
from ..controllers.transforms import invert, quat_to_matrix, transform
from ..robots import RobotSpec
from ..robots.spec import DriveGains
from .camera import Camera, camera_for_path, cameras_for
from ..robots.urdfcheck import check_urdf
from .config import JointMode, PhysicsConfig, Renderer
from .errors import SimulationError

__all__ = ["JointMode", "PhysicsConfig", "Camera", "cameras_for", "camera_for_path", "World", "SimRobot", "JointState", "Instability",
           "SimulationError", "PyBulletIKSettings", "pybullet_ik"]


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


#: a finger pad's contact radius, m: its torsional friction is the Coulomb coefficient times this
#: times the normal force (the engine's contacts are points, which would let a gripped piece pivot)
PAD_RADIUS = 0.008


class World:
    """An independent PyBullet world with a ground plane.

    Args:
        physics: time step, substeps, gravity.
        gui: open PyBullet's GUI (needs a display); headless DIRECT otherwise.
        renderer: a :class:`~armtwin.envs.config.Renderer` (or its name): AUTO (EGL when it loads,
            else TinyRenderer), EGL or TINY.
            EGL must be loaded before any body, so it is decided here.
        ground: load a ground plane.
    """

    def __init__(self, physics: PhysicsConfig | None = None, *, gui: bool = False,
                 renderer: Renderer | str = Renderer.TINY, ground: bool = True) -> None:
        renderer = Renderer.parse(renderer)      # a typo fails before a client is made
        self.physics = physics or PhysicsConfig()
        if gui and not os.environ.get("DISPLAY"):
            raise SimulationError("a GUI was asked for but no display is available (DISPLAY is not set)")
        self._p = pybullet
        self.client = pybullet.connect(pybullet.GUI if gui else pybullet.DIRECT)
        if self.client < 0:
            raise SimulationError("could not connect to the PyBullet physics server")
        self._egl_plugin = -1
        if renderer is not Renderer.TINY and not gui:
            self._egl_plugin = self._load_egl()
            if renderer is Renderer.EGL and self._egl_plugin < 0:
                self.close()
                raise SimulationError("the EGL renderer plugin did not load")
        self.time = 0.0  # s
        self.robots: list[SimRobot] = []
        self._free_bodies = 0      # movable objects: the physics is stepped for them
        self._closed = False
        c = self.client
        pybullet.setGravity(*self.physics.gravity, physicsClientId=c)
        pybullet.setPhysicsEngineParameter(fixedTimeStep=self.physics.dt / self.physics.substeps,
                                           numSolverIterations=self.physics.solver_iterations, physicsClientId=c)
        if ground:
            pybullet.setAdditionalSearchPath(pybullet_data.getDataPath(), physicsClientId=c)
            self.ground = pybullet.loadURDF("plane.urdf", physicsClientId=c)

    def _load_egl(self) -> int:
        """Load PyBullet's EGL renderer plugin; its id, or -1 when it does not load.

        Must run before any body is loaded. The plugin prints driver information to the
        process's stdout at C level; that is silenced so ``--json`` output stays clean.
        """
        try:
            import pkgutil
            egl = pkgutil.get_loader("eglRenderer")
            if egl is None:
                return -1
            with _quiet_fds():
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
                    with _quiet_fds():
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

    def __reduce__(self):
        """A world is its PyBullet client: a copy would share it and disconnect it when collected."""
        raise TypeError("a World owns a PyBullet client and cannot be pickled or copied; build a new World "
                        "(armtwin's Gymnasium envs pickle as their arguments and build their own)")

    # ----- content --------------------------------------------------------------------
    def add_robot(self, spec: RobotSpec, mode: JointMode | str = JointMode.KINEMATIC, *,
                  q0=None, drive: DriveGains | None = None, payload: float = 0.0,
                  position=(0.0, 0.0, 0.0), urdf_path: str | None = None, tool: Tool | None = None,
                  orientation=None, jaws: bool = True) -> "SimRobot":
        """Load ``spec``'s URDF fixed to the ground and return its handle.

        Args:
            spec: the robot.
            mode: joint model.
            q0: initial joints (rad / m); default the ``home`` pose.
            drive: drive gains overriding ``spec.drive``.
            payload: kg attached at the flange.
            position: where the mounting face stands, world frame (m).
            orientation: (3, 3) the mounting face's rotation in the world (a workcell's mount);
                None: upright.
            urdf_path: load another URDF file with the same joints (default: the spec's).
            tool: a tool on the flange (:class:`~armtwin.controllers.tools.Tool`): its body is drawn,
                its mass acts at its centre of mass in the dynamic joint models, and
                :meth:`SimRobot.tcp_pose` is its tool centre point. None: the bare flange.
            jaws: draw a gripper tool's jaws on its link (False: a
                :class:`~armtwin.envs.gripper.ParallelGripper` adds them as moving bodies).

        Raises:
            RobotDataError: (a ValueError) the URDF file is missing or unusable — checked before
                PyBullet reads it (:func:`~armtwin.robots.urdfcheck.check_urdf`).
            SimulationError: PyBullet refused it all the same.
        """
        joints = list(zip(spec.joint_names, (t.value for t in spec.joint_types)))
        path = str(check_urdf(urdf_path or spec.urdf_path, joints))
        mode = JointMode.parse(mode)
        rotation = np.eye(3) if orientation is None else np.asarray(orientation, dtype=float).reshape(3, 3)
        if not np.allclose(rotation @ rotation.T, np.eye(3), atol=1e-9) or np.linalg.det(rotation) < 0:
            raise ValueError("orientation must be a rotation matrix")
        if tool is None:
            body = self._load_urdf(path, position, rotation)
        else:   # the robot's description with the tool's links, through a file that lives for the call
            import tempfile

            from ..robots.tooling import urdf_with_tool
            folder = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
            with tempfile.TemporaryDirectory(prefix="armtwin-tool-", dir=folder) as tmp:
                tooled = os.path.join(tmp, f"{spec.name}_T{tool.number}.urdf")
                with open(tooled, "w") as f:
                    f.write(urdf_with_tool(path, tool, jaws=jaws))
                body = self._load_urdf(str(check_urdf(tooled, joints)), position, rotation, shown=path)
        robot = SimRobot(self, spec, body, mode, drive or spec.drive, np.asarray(position, float), tool, rotation)
        robot.set_payload(payload)
        robot.reset(spec.home if q0 is None else q0)
        self.robots.append(robot)
        return robot

    def add_visual_mesh(self, vertices, triangles, color=(0.1, 0.1, 0.1, 1.0)) -> int:
        """A static, visual-only mesh (no collision, no mass), world frame; returns its body id.

        For what a run leaves in the scene (ink on the table, a laser's burn): it is drawn by every
        renderer with the right occlusion, and nothing collides with it.

        Args:
            vertices: (N, 3) positions, m, world frame.
            triangles: (M, 3) vertex indices, counter-clockwise seen from the visible side.
            color: RGBA 0..1.
        """
        v = np.asarray(vertices, dtype=float).reshape(-1, 3)
        t = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
        if len(v) == 0 or len(t) == 0 or not np.all(np.isfinite(v)) or t.min() < 0 or t.max() >= len(v):
            raise ValueError("a visual mesh needs finite vertices and triangles indexing them")
        normals = np.zeros_like(v)
        n = np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]])
        for k in range(3):
            np.add.at(normals, t[:, k], n)
        normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-12)
        # through an OBJ file: the EGL renderer draws only meshes read from files. The file lives
        # for the call only (PyBullet reads it at once), in memory where the system has a tmpfs.
        import tempfile
        folder = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        with tempfile.TemporaryDirectory(prefix="armtwin-mesh-", dir=folder) as tmp:
            path = os.path.join(tmp, "mesh.obj")
            with open(path, "w") as f:
                f.write("".join(f"v {a:.6f} {b:.6f} {c:.6f}\n" for a, b, c in v))
                f.write("".join(f"vn {a:.5f} {b:.5f} {c:.5f}\n" for a, b, c in normals))
                f.write("".join(f"f {i + 1}//{i + 1} {j + 1}//{j + 1} {k + 1}//{k + 1}\n" for i, j, k in t))
            with _quiet_fds():     # the loaders print warnings with C printf
                shape = pybullet.createVisualShape(pybullet.GEOM_MESH, fileName=path, rgbaColor=list(color),
                                                   physicsClientId=self.client)
        if shape < 0:
            raise SimulationError("PyBullet refused a visual mesh")
        return pybullet.createMultiBody(baseMass=0, baseCollisionShapeIndex=-1, baseVisualShapeIndex=shape,
                                        physicsClientId=self.client)

    def add_shapes(self, shapes, pose=None, *, color=(0.55, 0.57, 0.60, 1.0), mass: float = 0.0,
                   visual: bool = True, friction: float | None = None, free: bool = False) -> int:
        """A rigid body made of primitive shapes (a workcell's table, a robot link for collision
        queries); returns its body id.

        Args:
            shapes: a sequence of ``(kind, size, local (4, 4) pose)``: kind "box" (size: 3 edge
                lengths), "cylinder" (radius, length along its z), "sphere" (radius,) or "mesh"
                (size: (file, scale) — an STL or OBJ file and metres per file unit; a static mesh
                collides as its triangles, a moving one as its convex hull) — m.
            pose: (4, 4) the body's frame in the world, m (default identity).
            color: RGBA 0..1.
            mass: kg; 0: static. A collision-only world gives its moving bodies a mass so that
                the engine treats them as movable.
            visual: also draw it (a collision-only world does not).
            friction: its Coulomb friction coefficient (default: the engine's).
            free: a movable object (a workpiece): the world steps its physics from now on, also
                when every robot is kinematic, so that it falls, rests and is carried.

        Raises:
            SimulationError: PyBullet refused a shape (e.g. an unreadable mesh file).
        """
        from ..controllers.transforms import matrix_to_quat
        p, c = pybullet, self.client
        T = np.eye(4) if pose is None else np.asarray(pose, dtype=float)
        cols, viss = [], []
        for kind, size, local in shapes:
            local = np.asarray(local, dtype=float)
            frame = dict(collisionFramePosition=local[:3, 3].tolist(),
                         collisionFrameOrientation=matrix_to_quat(local[:3, :3]).tolist())
            vframe = dict(visualFramePosition=local[:3, 3].tolist(),
                          visualFrameOrientation=matrix_to_quat(local[:3, :3]).tolist())
            if kind == "box":
                geo = dict(shapeType=p.GEOM_BOX, halfExtents=[float(v) / 2 for v in size])
                vgeo = geo
            elif kind == "cylinder":
                geo = dict(shapeType=p.GEOM_CYLINDER, radius=float(size[0]), height=float(size[1]))
                vgeo = dict(shapeType=p.GEOM_CYLINDER, radius=float(size[0]), length=float(size[1]))
            elif kind == "sphere":
                geo = dict(shapeType=p.GEOM_SPHERE, radius=float(size[0]))
                vgeo = geo
            elif kind == "mesh":
                scale = [float(size[1])] * 3
                geo = dict(shapeType=p.GEOM_MESH, fileName=str(size[0]), meshScale=scale,
                           flags=p.GEOM_FORCE_CONCAVE_TRIMESH if mass == 0 else 0)
                vgeo = dict(shapeType=p.GEOM_MESH, fileName=str(size[0]), meshScale=scale)
            else:
                raise ValueError(f"unknown shape kind {kind!r}")
            with _quiet_fds():
                col = p.createCollisionShape(**geo, **frame, physicsClientId=c)
                vis = p.createVisualShape(**vgeo, **vframe, rgbaColor=list(color), physicsClientId=c) if visual else -1
            if col < 0 or (visual and vis < 0):
                raise SimulationError(f"PyBullet refused a {kind} shape {size}")
            cols.append(col)
            viss.append(vis)
        if len(cols) == 1:
            body = p.createMultiBody(baseMass=float(mass), baseCollisionShapeIndex=cols[0],
                                     baseVisualShapeIndex=viss[0], basePosition=T[:3, 3].tolist(),
                                     baseOrientation=matrix_to_quat(T[:3, :3]).tolist(), physicsClientId=c)
        else:   # a compound of several shapes: one child link per shape, all fixed to the base
            body = self._compound(cols, viss, T, mass)
        if friction is not None:
            p.changeDynamics(body, -1, lateralFriction=float(friction), physicsClientId=c)
        if free:
            self._free_bodies += 1
        return body

    def _compound(self, cols: list[int], viss: list[int], T: np.ndarray, mass: float) -> int:
        from ..controllers.transforms import matrix_to_quat
        k = len(cols) - 1
        zero, unit = [0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]
        return pybullet.createMultiBody(
            baseMass=float(mass), baseCollisionShapeIndex=cols[0], baseVisualShapeIndex=viss[0],
            basePosition=T[:3, 3].tolist(), baseOrientation=matrix_to_quat(T[:3, :3]).tolist(),
            linkMasses=[float(mass)] * k, linkCollisionShapeIndices=cols[1:], linkVisualShapeIndices=viss[1:],
            linkPositions=[zero] * k, linkOrientations=[unit] * k, linkInertialFramePositions=[zero] * k,
            linkInertialFrameOrientations=[unit] * k, linkParentIndices=[0] * k,
            linkJointTypes=[pybullet.JOINT_FIXED] * k, linkJointAxis=[[0.0, 0.0, 1.0]] * k,
            physicsClientId=self.client)

    def add_fingers(self, pose, fingers, *, mass: float, friction: float, color, travel: float) -> int:
        """A gripper's fingers: a body whose base (massless to the eye: no shape; ``mass`` kg split
        over base and fingers) stands at ``pose`` ((4, 4), world) and whose fingers slide on
        prismatic joints, each along its own axis. The world steps its physics from now on.

        Args:
            pose: (4, 4) the base's frame in the world, m.
            fingers: per finger ``(centre (3,), size (3,), axis (3,))`` in the base frame: a box of
                ``size`` m at ``centre``, its joint moving it along the unit ``axis`` (joint value
                0 at ``centre``, positive towards ``axis``).
            mass: kg in all.
            friction: the fingers' Coulomb friction coefficient.
            travel: how far each finger slides from 0 (its stop: open) towards its axis, m.
            color: RGBA 0..1.

        Returns: the body id (finger k is link k).
        """
        from ..controllers.transforms import matrix_to_quat
        p, c = pybullet, self.client
        T = np.asarray(pose, dtype=float)
        k = len(fingers)
        m = float(mass) / (k + 1)
        cols, viss = [], []
        for _, size, _ in fingers:
            half = [float(v) / 2 for v in size]
            with _quiet_fds():
                cols.append(p.createCollisionShape(p.GEOM_BOX, halfExtents=half, physicsClientId=c))
                viss.append(p.createVisualShape(p.GEOM_BOX, halfExtents=half, rgbaColor=list(color), physicsClientId=c))
        unit = [0.0, 0.0, 0.0, 1.0]
        body = p.createMultiBody(
            baseMass=m, baseCollisionShapeIndex=-1, baseVisualShapeIndex=-1, basePosition=T[:3, 3].tolist(),
            baseOrientation=matrix_to_quat(T[:3, :3]).tolist(), baseInertialFramePosition=[0.0, 0.0, 0.0],
            linkMasses=[m] * k, linkCollisionShapeIndices=cols, linkVisualShapeIndices=viss,
            linkPositions=[[float(v) for v in centre] for centre, _, _ in fingers], linkOrientations=[unit] * k,
            linkInertialFramePositions=[[0.0, 0.0, 0.0]] * k, linkInertialFrameOrientations=[unit] * k,
            linkParentIndices=[0] * k, linkJointTypes=[p.JOINT_PRISMATIC] * k,
            linkJointAxis=[[float(v) for v in axis] for _, _, axis in fingers], physicsClientId=c)
        for j in range(-1, k):
            p.changeDynamics(body, j, lateralFriction=float(friction), spinningFriction=float(friction) * PAD_RADIUS,
                             frictionAnchor=1, linearDamping=0.0, angularDamping=0.0, physicsClientId=c)
            if j >= 0:
                p.changeDynamics(body, j, jointLowerLimit=0.0, jointUpperLimit=float(travel), physicsClientId=c)
        for j in range(1, k):       # the fingers move together, as a gripper's rack and pinion makes them
            gear = p.createConstraint(body, 0, body, j, p.JOINT_GEAR, [1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0],
                                      physicsClientId=c)
            p.changeConstraint(gear, gearRatio=-1.0, maxForce=1e4, erp=0.8, physicsClientId=c)
        self._free_bodies += 1
        return body

    def drive_fingers(self, body: int, targets, force: float) -> None:
        """Drive the prismatic joints of ``body`` (:meth:`add_fingers`) towards ``targets`` (m), each
        pushing with at most ``force`` N (blocked by what they close on, they squeeze with it)."""
        for j, target in enumerate(targets):
            pybullet.setJointMotorControl2(int(body), j, pybullet.POSITION_CONTROL, targetPosition=float(target),
                                           force=float(force), positionGain=0.5, velocityGain=1.0,
                                           physicsClientId=self.client)

    def reset_fingers(self, body: int, pose) -> None:
        """Teleport the fingers' body (:meth:`add_fingers`) to ``pose`` ((4, 4), world), open and still."""
        self.set_body_pose(body, pose, still=True)
        for j in range(pybullet.getNumJoints(int(body), physicsClientId=self.client)):
            pybullet.resetJointState(int(body), j, 0.0, 0.0, physicsClientId=self.client)

    def finger_positions(self, body: int) -> np.ndarray:
        """The joint values (m) of the fingers of ``body`` (:meth:`add_fingers`)."""
        n = pybullet.getNumJoints(int(body), physicsClientId=self.client)
        return np.array([s[0] for s in pybullet.getJointStates(int(body), list(range(n)), physicsClientId=self.client)])

    def in_contact(self, a: int, b: int, link_a: int | None = None) -> bool:
        """Bodies ``a`` (only its link ``link_a``, if given) and ``b`` touch after the last physics step."""
        kw = {} if link_a is None else {"linkIndexA": int(link_a)}
        return bool(pybullet.getContactPoints(int(a), int(b), physicsClientId=self.client, **kw))

    def link_count(self, body: int) -> int:
        """The links of any body (the base not counted)."""
        return pybullet.getNumJoints(int(body), physicsClientId=self.client)

    def set_body_pose(self, body: int, pose, *, still: bool = False) -> None:
        """Teleport a body (not a robot) to ``pose`` ((4, 4), world frame, m); ``still``: and stop it."""
        from ..controllers.transforms import matrix_to_quat
        T = np.asarray(pose, dtype=float)
        pybullet.resetBasePositionAndOrientation(int(body), T[:3, 3].tolist(), matrix_to_quat(T[:3, :3]).tolist(),
                                                 physicsClientId=self.client)
        if still:
            pybullet.resetBaseVelocity(int(body), [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], physicsClientId=self.client)

    def distance(self, a: int, b: int, within: float, link_a: int | None = None) -> float:
        """Signed distance between bodies ``a`` and ``b`` (m; negative: the penetration depth) as
        the engine's collision query finds it now (no stepping), or ``within`` when they are
        farther apart than that. ``link_a``: only that link of ``a``."""
        kw = {} if link_a is None else {"linkIndexA": int(link_a)}
        pts = pybullet.getClosestPoints(int(a), int(b), float(within), physicsClientId=self.client, **kw)
        return min((pt[8] for pt in pts), default=float(within))

    def aabb(self, body: int) -> tuple[np.ndarray, np.ndarray]:
        """(lower (3,), upper (3,)) world-axis bounding box of a body, m."""
        lo, hi = pybullet.getAABB(int(body), physicsClientId=self.client)
        return np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)

    def body_pose(self, body: int) -> np.ndarray:
        """(4, 4) a body's (not a robot's) pose in the world, m."""
        pos, quat = pybullet.getBasePositionAndOrientation(int(body), physicsClientId=self.client)
        return transform(quat_to_matrix(quat), pos)

    def attach(self, robot: "SimRobot", link: int, body: int, max_force: float) -> int:
        """Hold ``body`` fixed to a link of ``robot`` where it is now (a gripper's grip): a fixed
        constraint that pulls with at most ``max_force`` N; returns its id for :meth:`detach`."""
        ls = pybullet.getLinkState(robot.body, int(link), computeForwardKinematics=True, physicsClientId=self.client)
        world_com = transform(quat_to_matrix(ls[1]), ls[0])     # constraint frames are centre-of-mass frames
        rel = invert(world_com) @ self.body_pose(body)
        from ..controllers.transforms import matrix_to_quat
        cid = pybullet.createConstraint(robot.body, int(link), int(body), -1, pybullet.JOINT_FIXED, [0.0, 0.0, 0.0],
                                        parentFramePosition=rel[:3, 3].tolist(), childFramePosition=[0.0, 0.0, 0.0],
                                        parentFrameOrientation=matrix_to_quat(rel[:3, :3]).tolist(),
                                        physicsClientId=self.client)
        pybullet.changeConstraint(cid, maxForce=float(max_force), physicsClientId=self.client)
        return cid

    def detach(self, constraint: int) -> None:
        """Let go of what :meth:`attach` holds."""
        pybullet.removeConstraint(int(constraint), physicsClientId=self.client)

    def set_collision(self, a: int, link_a: int, b: int, link_b: int, enabled: bool) -> None:
        """Let the physics make contacts between a link of body ``a`` and one of ``b`` (-1: the
        base) or not — e.g. a tool and the work it draws on, an ideal touch."""
        pybullet.setCollisionFilterPair(int(a), int(b), int(link_a), int(link_b), int(bool(enabled)),
                                        physicsClientId=self.client)

    def remove_body(self, body: int) -> None:
        """Remove a body made by :meth:`add_visual_mesh` (or any non-robot body)."""
        if any(r.body == body for r in self.robots):
            raise ValueError("a robot's body is removed with its world")
        pybullet.removeBody(int(body), physicsClientId=self.client)

    def _load_urdf(self, path: str, position, rotation: np.ndarray, shown: str | None = None) -> int:
        from ..controllers.transforms import matrix_to_quat
        try:
            return pybullet.loadURDF(path, basePosition=position, baseOrientation=matrix_to_quat(rotation).tolist(),
                                     useFixedBase=True,
                                     flags=pybullet.URDF_USE_INERTIA_FROM_FILE, physicsClientId=self.client)
        except pybullet.error as exc:
            raise SimulationError(f"URDF {shown or path} did not load: {exc}") from None

    # ----- time -----------------------------------------------------------------------
    def step(self, n: int = 1) -> None:
        """Advance the world by ``n`` control steps of ``physics.dt`` (each ``substeps`` physics steps).

        A robot's command (q, qd) is the joint state wanted at the end of the control
        step; within the step the drives aim at the first-order hold
        ``q + qd·(τ − t_end)``. Robots whose state became unstable keep their flag in
        :attr:`SimRobot.instability` (see :attr:`instabilities`).
        """
        p, c = pybullet, self.client
        dynamic = self._free_bodies > 0 or any(r.mode is not JointMode.KINEMATIC for r in self.robots)
        sub = self.physics.substeps
        h = self.physics.dt / sub
        for _ in range(n):
            for i in range(sub):
                for r in self.robots:
                    r._pre_physics((sub - i) * h)
                if dynamic:
                    p.stepSimulation(physicsClientId=c)
                    for r in self.robots:
                        r._cached = None
                for r in self.robots:
                    r._post_physics((sub - i - 1) * h)
            self.time += self.physics.dt

    def engine_steps(self, n: int, *, robot_calls: bool = False) -> None:
        """``n`` bare ``stepSimulation`` calls: no drives, no guard, no clock.

        For benchmarks only: the engine's own cost of this world's physics step, the ceiling a
        control loop over it cannot pass. With ``robot_calls`` each step also makes the two engine
        calls an articulation robot's drive needs at every physics step and nothing else: its
        targets set (one ``setJointMotorControlArray``, its last targets held) and its joints read
        for the guard (one ``getJointStates``) — PyBullet has no call for several bodies at once,
        so this is the ceiling of any loop that drives every robot at every physics step. The
        robots' state moves off their command path, so a world used for this is thrown away
        afterwards.
        """
        p, c = pybullet, self.client
        # each articulation robot's drive call as it stands (targets held: the arms keep their pose)
        arms = [(r.body, r.joints, r._q_cmd.tolist(), r._qd_cmd.tolist(), *r._drive_lists) for r in self.robots
                if r.mode is JointMode.ARTICULATION] if robot_calls else []
        for _ in range(int(n)):
            for body, joints, q, qd, forces, kp, kd in arms:
                p.setJointMotorControlArray(body, joints, p.POSITION_CONTROL, targetPositions=q, targetVelocities=qd,
                                            forces=forces, positionGains=kp, velocityGains=kd, physicsClientId=c)
            p.stepSimulation(physicsClientId=c)
            for body, joints, *_ in arms:
                p.getJointStates(body, joints, physicsClientId=c)

    @property
    def instabilities(self) -> list[Instability]:
        """The stability guard's findings for all robots of this world (empty when all are stable)."""
        return [r.instability for r in self.robots if r.instability is not None]

    def joint_states(self, robots: "list[SimRobot]") -> tuple[np.ndarray, np.ndarray]:
        """Joint positions and velocities (len(robots), n) of robots with the same number of joints
        (rad / m, rad/s / m/s): the batched vector envs' read, one engine call per robot."""
        get, c = pybullet.getJointStates, self.client
        raw = [get(r.body, r.joints, physicsClientId=c) for r in robots]
        q = np.array([[j[0] for j in s] for s in raw])
        qd = np.array([[j[1] for j in s] for s in raw])
        return q, qd

    # ----- rendering ------------------------------------------------------------------
    def render(self, camera: Camera, width: int = 640, height: int = 480, *, rgba: bool = False) -> np.ndarray:
        """Image from ``camera`` (EGL when loaded, else TinyRenderer).

        Args:
            camera: the view.
            width, height: pixels.
            rgba: return the engine's RGBA buffer (height, width, 4) as is, without the
                copy that drops alpha (video encoders take RGBA directly).

        Returns:
            (height, width, 3) uint8 RGB, or (height, width, 4) uint8 RGBA.
        """
        raw = self._camera_image(camera, width, height)
        img = np.reshape(np.asarray(raw, dtype=np.uint8), (int(height), int(width), 4))
        return img if rgba else np.ascontiguousarray(img[:, :, :3])

    def render_raw(self, camera: Camera, width: int = 640, height: int = 480) -> None:
        """Call the engine's ``getCameraImage`` exactly as :meth:`render` does and drop the result.

        For benchmarks: the cost of the renderer alone, as a baseline for recorders.
        """
        self._camera_image(camera, width, height)

    def render_observation(self, camera: Camera, width: int, height: int, *,
                           depth: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
        """A small image for learning: RGB without shadows (they cost ~45 % of a TinyRenderer
        frame at 84x84) and, with ``depth``, the distance along the view axis of every pixel.

        Returns:
            ((height, width, 3) uint8 RGB, (height, width) float32 depth in metres or None).
        """
        out = self._camera_image(camera, width, height, shadow=False, full=True)
        rgba = np.reshape(np.asarray(out[2], dtype=np.uint8), (int(height), int(width), 4))
        rgb = np.ascontiguousarray(rgba[:, :, :3])
        if not depth:
            return rgb, None
        z = 2.0 * np.reshape(np.asarray(out[3], dtype=np.float32), (int(height), int(width))) - 1.0
        n, f = camera.near, camera.far
        return rgb, (2.0 * n * f / (f + n - z * (f - n))).astype(np.float32)

    def _camera_image(self, camera: Camera, width: int, height: int, *, shadow: bool = True, full: bool = False):
        if int(width) != width or int(height) != height or width < 1 or height < 1:
            raise ValueError(f"image size must be whole positive pixels, got {width}x{height}")
        view, proj = camera.gl_matrices(width, height)
        # no segmentation mask: armtwin only reads the colour buffer, and the mask costs the
        # EGL renderer 15-30 % of its frame time at 640x480
        kw = dict(viewMatrix=view, projectionMatrix=proj, lightDirection=[0.4, -0.6, 1.0], shadow=int(shadow),
                  flags=pybullet.ER_NO_SEGMENTATION_MASK, physicsClientId=self.client)
        if self._egl_plugin >= 0:
            with _quiet_fds(stderr=False):  # the plugin prints "ven = ..." on every frame
                out = pybullet.getCameraImage(int(width), int(height), renderer=pybullet.ER_BULLET_HARDWARE_OPENGL, **kw)
        else:
            out = pybullet.getCameraImage(int(width), int(height), renderer=pybullet.ER_TINY_RENDERER, **kw)
        return out if full else out[2]


class SimRobot:
    """A robot in a :class:`World`. Create it with :meth:`World.add_robot`.

    Joint models (:class:`JointMode`):

    * KINEMATIC — the commanded joint values are written into the engine at every
      physics step (and again after it, so gravity acting on other robots' steps cannot
      move it); no mass, inertia or force. ``state().tau`` is zero (use
      :meth:`inverse_dynamics` for the torque a motion would need).
    * HINGE — at every physics step the drive torque
      ``tau = K (q_cmd - q) + D (qd_cmd - qd) [+ g(q)]`` is computed explicitly from the
      measured state, clamped to ±effort and applied as a joint torque; PyBullet's
      default velocity motors are replaced by a velocity-zero motor limited to the
      Coulomb ``friction``. The explicit spring is only conditionally stable: with
      joint-space inertia M, it needs roughly ``eig(M⁻¹(h² K + 2 h D)) < 4`` at physics
      step h — the reason its default gains are soft.
    * ARTICULATION — PyBullet's implicit joint motor (POSITION_CONTROL): the solver
      drives the joint velocity towards ``qd_cmd + position_gain (q_cmd - q) / h``
      (with ``velocity_gain`` weighting the velocity error) using at most the joint's
      effort; unconditionally stable in the step size.

    ``joint_damping`` (viscous, in the engine) applies in both dynamic models. The
    stability guard runs after every physics step: a non-finite state or a joint speed
    above :attr:`INSTABILITY_SPEED_FACTOR` × its limit, or a drive torque that flips
    between the effort limits for :attr:`CHATTER_STEPS` steps (a saturated explicit
    spring's limit cycle), sets :attr:`instability`; the robot is then braked at its
    last finite state and ignores commands until :meth:`reset`.
    """

    #: speed beyond which the state counts as unstable, as a multiple of the joint's limit
    INSTABILITY_SPEED_FACTOR = 10.0
    #: physics steps of a drive torque flipping between ±effort that count as unstable chatter
    CHATTER_STEPS = 24
    #: density of the payload body (aluminium), kg/m³: a payload is a solid sphere at the flange
    PAYLOAD_DENSITY = PAYLOAD_DENSITY

    def __init__(self, world: World, spec: RobotSpec, body: int, mode: JointMode,
                 drive: DriveGains, position: np.ndarray, tool: Tool | None = None,
                 rotation: np.ndarray | None = None) -> None:
        self.world, self.spec, self.body, self.mode = world, spec, body, mode
        #: the tool on the flange (None: the bare flange, whose TCP is the flange)
        self.tool = tool
        p, c = pybullet, world.client
        by_name = {}
        links: dict[str, int] = {}
        for j in range(p.getNumJoints(body, physicsClientId=c)):
            info = p.getJointInfo(body, j, physicsClientId=c)
            by_name[info[1].decode()] = j
            links[info[12].decode()] = j
        missing = [n for n in spec.joint_names if n not in by_name]
        if missing or "tool0" not in links:
            raise SimulationError(f"URDF for {spec.name} lacks joints {missing or ''} / link tool0")
        self.tool_link = links["tool0"]
        #: the body's link indices by URDF link name (the base link is -1)
        self.link_index: dict[str, int] = {spec.links[0].name: -1, **links}
        #: the link whose frame is the TCP (the flange without a tool)
        self.tcp_link = links.get("tcp", self.tool_link)
        self.joints = [by_name[n] for n in spec.joint_names]
        n = spec.dof
        self._vmax = spec.max_velocity
        self._q_cmd = spec.home.copy()
        self._command_filter: CommandFilter | None = None
        self._qd_cmd = np.zeros(n)
        self._tau = np.zeros(n)
        self._last_good = (spec.home.copy(), np.zeros(n))
        self._flips = np.zeros(n, dtype=int)
        self._prev_sat = np.zeros(n)
        self.instability: Instability | None = None
        self._cached: tuple | None = None  # joint states read since the last physics step
        self._speed_guard = tuple(float(v) for v in self.INSTABILITY_SPEED_FACTOR * spec.max_velocity)
        self.payload = 0.0
        #: where the robot's base stands in the world (m)
        self.base_position = tuple(float(v) for v in position)
        # world <- reporting frame
        self._world_T_report = transform(rotation, position) @ spec.report_frame.matrix
        self._report_T_world = invert(self._world_T_report)
        # the engine's own clamp (default 100 rad/s) would hide a blow-up from the guard
        vclamp = 10.0 * self.INSTABILITY_SPEED_FACTOR * self._vmax
        for j, v in zip(self.joints, vclamp):
            p.changeDynamics(body, j, linearDamping=0.0, angularDamping=0.0, maxJointVelocity=float(v), physicsClientId=c)
        self.set_drive(drive)

    # ----- configuration --------------------------------------------------------------
    def set_drive(self, drive: DriveGains) -> None:
        """Replace the drive data (gains, friction, damping, force limits) of this robot."""
        n = self.spec.dof
        for name in ("stiffness", "damping", "friction", "joint_damping"):
            if len(getattr(drive, name)) != n:
                raise ValueError(f"drive.{name} needs {n} values for {self.spec.name}, got {len(getattr(drive, name))}")
        self.drive = drive
        self._effort = self.spec.max_effort if drive.effort is None else np.array(drive.effort, dtype=float)
        self._kp = np.array(drive.stiffness, dtype=float)
        self._kd = np.array(drive.damping, dtype=float)
        self._friction = np.array(drive.friction, dtype=float)
        # the articulation drive's constant arguments, sent every physics step: built once per drive
        self._drive_lists = (self._effort.tolist(), [drive.position_gain] * n, [drive.velocity_gain] * n)
        for j, jd in zip(self.joints, drive.joint_damping):
            pybullet.changeDynamics(self.body, j, jointDamping=float(jd), physicsClientId=self.world.client)
        self._configure_motors()

    def _configure_motors(self) -> None:
        p, c = pybullet, self.world.client
        n = self.spec.dof
        if self.instability is not None:  # brakes: hold still with full effort
            p.setJointMotorControlArray(self.body, self.joints, p.VELOCITY_CONTROL, targetVelocities=[0.0] * n,
                                        forces=self._effort.tolist(), physicsClientId=c)
        elif self.mode is JointMode.ARTICULATION:
            self._apply_articulation_drive()
        else:
            # PyBullet enables velocity motors by default. KINEMATIC wants none; HINGE keeps a
            # velocity-zero motor whose force limit is the Coulomb friction.
            forces = self._friction if self.mode is JointMode.HINGE else np.zeros(n)
            p.setJointMotorControlArray(self.body, self.joints, p.VELOCITY_CONTROL, targetVelocities=[0.0] * n,
                                        forces=forces.tolist(), physicsClientId=c)

    def _apply_articulation_drive(self, target: np.ndarray | None = None) -> None:
        forces, kp, kd = self._drive_lists
        pybullet.setJointMotorControlArray(
            self.body, self.joints, pybullet.POSITION_CONTROL,
            targetPositions=(self._q_cmd if target is None else target).tolist(), targetVelocities=self._qd_cmd.tolist(),
            forces=forces, positionGains=kp, velocityGains=kd, physicsClientId=self.world.client)

    def set_mode(self, mode: JointMode | str) -> None:
        """Switch the joint model, keeping the current state and targets."""
        self.mode = JointMode.parse(mode)
        self.instability = None
        self._tau = np.zeros(self.spec.dof)
        self._configure_motors()

    def set_payload(self, mass: float) -> None:
        """Attach ``mass`` kg at the flange origin (0 removes it).

        The payload is a solid aluminium sphere (:attr:`PAYLOAD_DENSITY`) centred on the
        flange origin, so it adds m·g·r of gravity torque and its own rotational inertia.
        """
        if not (np.isfinite(mass) and mass >= 0):
            raise ValueError(f"payload must be >= 0 kg, got {mass}")
        from ..robots.bodies import flange_inertia   # the same flange body as the numpy dynamics
        from ..robots.urdfgen import FLANGE_MASS
        m = FLANGE_MASS + float(mass)
        inertia = flange_inertia(float(mass))
        pybullet.changeDynamics(self.body, self.tool_link, mass=m, localInertiaDiagonal=[inertia] * 3,
                                physicsClientId=self.world.client)
        self.payload = float(mass)

    @property
    def num_links(self) -> int:
        """Links of the loaded body (the URDF's joints, fixed ones included); the base not counted."""
        return pybullet.getNumJoints(self.body, physicsClientId=self.world.client)

    def set_mass_scale(self, factors) -> None:
        """Scale each link's mass and inertia by ``factors`` (:attr:`num_links` values, > 0) against the
        values loaded from the URDF (1: as loaded). The flange link keeps the mass :meth:`set_payload`
        gave it. For domain randomisation."""
        f = np.asarray(factors, dtype=float).reshape(-1)
        c = self.world.client
        if f.shape != (self.num_links,) or not np.all(np.isfinite(f) & (f > 0)):
            raise ValueError(f"{self.spec.name}: set_mass_scale needs {self.num_links} factors > 0, got {factors!r}")
        if not hasattr(self, "_nominal_mass"):
            info = [pybullet.getDynamicsInfo(self.body, j, physicsClientId=c) for j in range(self.num_links)]
            self._nominal_mass = [(float(i[0]), list(i[2])) for i in info]
        for j, (k, (m, inertia)) in enumerate(zip(f, self._nominal_mass)):
            if j != self.tool_link and m > 0:
                pybullet.changeDynamics(self.body, j, mass=m * k, localInertiaDiagonal=[v * k for v in inertia],
                                        physicsClientId=c)

    # ----- state ----------------------------------------------------------------------
    def reset(self, q, qd=None) -> None:
        """Teleport the joints to ``q`` (rad / m) with velocity ``qd``, hold them there, clear the guard."""
        q = self._checked(q, "q")
        qd = np.zeros_like(q) if qd is None else self._checked(qd, "qd")
        self._write_state(q, qd)
        self._q_cmd, self._qd_cmd = q.copy(), qd.copy()
        self._tau = np.zeros_like(q)
        self._flips[:] = 0
        self._prev_sat[:] = 0
        self._last_good = (q.copy(), qd.copy())
        self.instability = None
        self._configure_motors()

    def _write_state(self, q: np.ndarray, qd: np.ndarray) -> None:
        c = self.world.client
        self._cached = None
        for j, a, b in zip(self.joints, q, qd):
            pybullet.resetJointState(self.body, j, float(a), float(b), physicsClientId=c)

    def _read(self) -> tuple[np.ndarray, np.ndarray, list]:
        """(q, qd, raw joint states); cached until the next physics step or state write."""
        if self._cached is None:
            s = pybullet.getJointStates(self.body, self.joints, physicsClientId=self.world.client)
            self._cached = (np.array([x[0] for x in s]), np.array([x[1] for x in s]), s)
        return self._cached

    def state(self) -> JointState:
        """Joint positions, velocities and actuator efforts now.

        ``tau`` is the drive torque: the implicit motor's torque (ARTICULATION), the
        clamped spring–damper torque applied in the last physics step (HINGE, friction
        not included), zero (KINEMATIC).
        """
        q, qd, s = self._read()
        if self.mode is JointMode.ARTICULATION and self.instability is None:
            tau = np.array([x[3] for x in s])
        else:
            tau = self._tau.copy()
        return JointState(q.copy(), qd.copy(), tau)

    @property
    def q(self) -> np.ndarray:
        """Joint positions (n,), rad / m."""
        return self._read()[0].copy()

    @property
    def commanded(self) -> tuple[np.ndarray, np.ndarray]:
        """The last commanded positions and velocities."""
        return self._q_cmd.copy(), self._qd_cmd.copy()

    def flange_pose(self) -> np.ndarray:
        """(4, 4) flange (tool0) pose in the reporting base frame, as the physics engine has it."""
        return self._link_pose(self.tool_link)

    def tcp_pose(self) -> np.ndarray:
        """(4, 4) the tool centre point's pose in the reporting base frame (the flange without a tool)."""
        return self._link_pose(self.tcp_link)

    def _link_pose(self, link: int) -> np.ndarray:
        ls = pybullet.getLinkState(self.body, link, computeForwardKinematics=True, physicsClientId=self.world.client)
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

    # ----- dynamics queries (engine model, including the payload) -------------------------
    def inverse_dynamics(self, q, qd=None, qdd=None) -> np.ndarray:
        """Joint torques (n,) N·m (N) that produce ``qdd`` at state (``q``, ``qd``) under gravity.

        Uses the engine's model with the current payload; friction and joint damping are
        not included. ``qd`` and ``qdd`` default to zero (then: the gravity torque).
        """
        q = self._checked(q, "q")
        qd = np.zeros_like(q) if qd is None else self._checked(qd, "qd")
        qdd = np.zeros_like(q) if qdd is None else self._checked(qdd, "qdd")
        tau = pybullet.calculateInverseDynamics(self.body, q.tolist(), qd.tolist(), qdd.tolist(),
                                                physicsClientId=self.world.client)
        return np.asarray(tau, dtype=float)

    def gravity_torque(self, q=None) -> np.ndarray:
        """Joint torques (n,) N·m (N) that hold the arm (and payload) still at ``q`` (default: now)."""
        return self.inverse_dynamics(self.q if q is None else q)

    def mass_matrix(self, q=None) -> np.ndarray:
        """Joint-space inertia matrix (n, n), kg·m² (kg for prismatic rows), payload included."""
        q = self.q if q is None else self._checked(q, "q")
        return np.asarray(pybullet.calculateMassMatrix(self.body, q.tolist(), physicsClientId=self.world.client))

    # ----- the one command path -------------------------------------------------------
    def command(self, q, qd=None) -> None:
        """Set the joint targets: positions (rad / m) and optionally velocities (rad/s / m/s).

        The same call for every joint model. ``(q, qd)`` is the state wanted at the end of
        the next control step (:meth:`World.step`); during the step each physics step aims
        at ``q + qd·(τ − t_end)``, and the target stays until the next command. Commands
        are stored but not acted on while the robot is unstable (until :meth:`reset`).

        A command filter (:meth:`set_command_filter`) sees every command before it is stored.
        """
        q = self._checked(q, "q")
        qd = np.zeros_like(q) if qd is None else self._checked(qd, "qd")
        if self._command_filter is not None:
            q, qd = self._command_filter(q.copy(), qd.copy())
            q, qd = self._checked(q, "q (filtered)"), self._checked(qd, "qd (filtered)")
        self._q_cmd, self._qd_cmd = q, qd

    def set_command_filter(self, fn: CommandFilter | None) -> None:
        """Route every :meth:`command` through ``fn(q, qd) -> (q, qd)`` (rad, rad/s; (n,) each), or
        stop with None.

        The explicit seam for a second source of joint commands that shares the one command path
        — e.g. :class:`armtwin.envs.rig.TwinSyncWrapper` replacing the joints a servo rig stands
        for with the rig's measured ones, whatever the env's own controller commands. One filter
        at a time; :meth:`reset` does not go through it.

        Raises:
            ValueError: a filter is installed already (remove it first with None).
        """
        if fn is not None and self._command_filter is not None:
            raise ValueError(f"{self.spec.name}: its commands are filtered already (by {self._command_filter!r}); "
                             f"remove that filter first")
        self._command_filter = fn

    def _checked(self, v, what: str) -> np.ndarray:
        v = np.asarray(v, dtype=float).reshape(-1)
        if v.shape != (self.spec.dof,):
            raise ValueError(f"{self.spec.name}: {what} needs {self.spec.dof} values, got {v.size}")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{self.spec.name}: {what} has non-finite values: {v}")
        return v

    def _target(self, lead: float) -> np.ndarray:
        """Drive target ``lead`` s before the end of the control step (first-order hold)."""
        return self._q_cmd - lead * self._qd_cmd

    def _pre_physics(self, lead: float) -> None:
        """Before a physics step that starts ``lead`` s before the control step ends."""
        if self.instability is not None:
            return
        c = self.world.client
        if self.mode is JointMode.KINEMATIC:
            return  # written after the physics step (_post_physics)
        if self.mode is JointMode.ARTICULATION:
            # PyBullet's motor reaches target + h·qd at the end of the step: aim at the target *now*
            self._apply_articulation_drive(self._target(lead))
        elif self.mode is JointMode.HINGE:
            q, qd, _ = self._read()
            tau = self._kp * (self._target(lead) - q) + self._kd * (self._qd_cmd - qd)
            if self.drive.gravity_compensation:
                tau = tau + self.inverse_dynamics(q)
            if np.all(np.isfinite(tau)):
                self._tau = np.clip(tau, -self._effort, self._effort)
            pybullet.setJointMotorControlArray(self.body, self.joints, pybullet.TORQUE_CONTROL,
                                               forces=self._tau.tolist(), physicsClientId=c)

    def _post_physics(self, lead: float) -> None:
        """After a physics step that ends ``lead`` s before the control step ends; the guard."""
        if self.instability is not None:
            return
        if self.mode is JointMode.KINEMATIC:
            self._write_state(self._target(lead), self._qd_cmd)  # exact; also undoes the step's gravity
            return
        if self.mode is JointMode.ARTICULATION:
            # Fast path (it runs every physics step): plain-float checks on the raw states; the
            # arrays and the message are built only when something is wrong.
            raw = pybullet.getJointStates(self.body, self.joints, physicsClientId=self.world.client)
            if all(abs(x[1]) <= lim and abs(x[0]) < math.inf for x, lim in zip(raw, self._speed_guard)):
                self._last_good = raw
                return
        q, qd, _ = self._read()
        t = self.world.time + self.world.physics.dt - lead  # end of this physics step
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(qd))):
            bad = int(np.argmax(~(np.isfinite(q) & np.isfinite(qd))))
            return self._unstable(Instability(t, bad, f"{self.spec.name}: non-finite state of joint {bad + 1} {self._where(t)}"))
        over = np.abs(qd) > self.INSTABILITY_SPEED_FACTOR * self._vmax
        if np.any(over):
            k = int(np.argmax(over))
            return self._unstable(Instability(
                t, k, f"{self.spec.name}: joint {k + 1} speed {abs(qd[k]):.3g} exceeds {self.INSTABILITY_SPEED_FACTOR:g}x "
                      f"its limit {self._vmax[k]:.3g} {self._where(t)}"))
        if self.mode is JointMode.HINGE:
            sat = np.where(np.abs(self._tau) >= self._effort * (1 - 1e-9), np.sign(self._tau), 0.0)
            flip = (sat != 0) & (sat == -self._prev_sat)
            self._flips = np.where(flip, self._flips + 1, np.where(sat != 0, self._flips, 0))
            self._prev_sat = sat
            if np.any(self._flips >= self.CHATTER_STEPS):
                k = int(np.argmax(self._flips))
                return self._unstable(Instability(
                    t, k, f"{self.spec.name}: joint {k + 1} drive chatters between ±{self._effort[k]:.3g} "
                          f"(effort limit) for {self.CHATTER_STEPS} steps {self._where(t)}; lower the stiffness/damping "
                          f"or the step"))
        self._last_good = (q, qd)

    def _where(self, t: float) -> str:
        """When and under which model, for instability messages (built only when one is found)."""
        return f"at t={t:.4f} s ({self.mode.value} model, physics step {self.world.physics.dt / self.world.physics.substeps:.4g} s)"

    def _unstable(self, why: Instability) -> None:
        """Flag the instability, put the robot back to its last finite state and brake it."""
        self.instability = why
        good = self._last_good
        q = good[0] if isinstance(good[0], np.ndarray) else np.array([x[0] for x in good])  # arrays or raw states
        self._write_state(q, np.zeros_like(q))
        self._tau = np.zeros_like(q)
        self._configure_motors()

    @property
    def stable(self) -> bool:
        """False once the stability guard has tripped (see :attr:`instability`)."""
        return self.instability is None

# ----- PyBullet's numerical IK, the reference of ``armtwin bench ik`` ---------------------------
# It works on a bare kinematic body (no world, no drives, no stepping), so it is a function of
# its own rather than a World method. Nothing in armtwin solves IK with it; that is
# :mod:`armtwin.controllers.ik`. Each call opens its own DIRECT client (never the global
# connection), loads the robot's URDF with a fixed base, solves every pose seeded from the same
# joint vector (the home pose by default; the joints are reset to it before each pose — passing
# it as ``currentPositions`` instead converges far worse in PyBullet 3.2), and disconnects.

@dataclass(frozen=True)
class PyBulletIKSettings:
    """Settings of ``pybullet.calculateInverseKinematics`` (damped least squares, IK_DLS).

    Attributes:
        max_iterations: ``maxNumIterations`` per call.
        residual_threshold: ``residualThreshold`` (m) at which PyBullet stops iterating.
        damping: ``jointDamping`` for every joint (dimensionless DLS damping).
        null_space: pass the joint limits, ranges and the seed as rest pose (PyBullet's
            null-space variant, which keeps joints inside their ranges).
        restarts: extra calls per pose, each seeded from the previous answer (0: one call).
        The defaults are the best of a small sweep on the IRB120 (``armtwin bench ik`` prints
        them with the results).
    """

    max_iterations: int = 1000
    residual_threshold: float = 1e-7
    damping: float = 1e-4
    null_space: bool = False
    restarts: int = 0


def _ik_tool_link(client: int, body: int, name: str) -> int:
    for j in range(pybullet.getNumJoints(body, physicsClientId=client)):
        info = pybullet.getJointInfo(body, j, physicsClientId=client)
        if info[12].decode() == name:
            return j
    raise ValueError(f"link {name!r} not found in the URDF")


def pybullet_ik(spec, T, q_seed=None, settings: PyBulletIKSettings = PyBulletIKSettings(),
                link: str = "tool0") -> tuple[np.ndarray, float]:
    """Solve N poses with ``pybullet.calculateInverseKinematics``.

    Args:
        spec: the robot (its generated URDF is loaded).
        T: (N, 4, 4) flange poses in the robot's reporting base frame, metres.
        q_seed: (n,) joints every pose starts from, rad / m; default the home pose.
        settings: solver settings.
        link: the target link of the URDF.

    Returns:
        (Q, seconds): (N, n) answers (rad / m; not checked — verify them with the FK) and the
        wall time spent seeding and inside ``calculateInverseKinematics`` (s).
    """
    T = np.asarray(T, dtype=float).reshape(-1, 4, 4)
    seed = (spec.home if q_seed is None else np.asarray(q_seed, dtype=float)).tolist()
    from ..controllers.transforms import matrix_to_quat
    T_root = spec.report_frame.matrix @ T                   # reporting frame -> URDF root
    pos = T_root[:, :3, 3].tolist()
    quat = matrix_to_quat(T_root[:, :3, :3]).tolist()
    client = pybullet.connect(pybullet.DIRECT)
    try:
        body = pybullet.loadURDF(str(spec.urdf_path), useFixedBase=True, physicsClientId=client)
        tool = _ik_tool_link(client, body, link)
        n = spec.dof
        damping = [settings.damping] * n
        extra = {}
        if settings.null_space:
            extra = {"lowerLimits": spec.lower.tolist(), "upperLimits": spec.upper.tolist(),
                     "jointRanges": (spec.upper - spec.lower).tolist(), "restPoses": seed}
        movable = [j for j in range(pybullet.getNumJoints(body, physicsClientId=client))
                   if pybullet.getJointInfo(body, j, physicsClientId=client)[2] != pybullet.JOINT_FIXED]
        out = np.empty((len(T), n))
        ik, reset = pybullet.calculateInverseKinematics, pybullet.resetJointState
        its, thr = settings.max_iterations, settings.residual_threshold
        spent = 0.0
        for i in range(len(T)):
            t0 = time.perf_counter()
            cur = seed
            for _ in range(settings.restarts + 1):
                for j, v in zip(movable, cur):
                    reset(body, j, v, physicsClientId=client)
                cur = ik(body, tool, pos[i], quat[i], jointDamping=damping,
                         maxNumIterations=its, residualThreshold=thr, physicsClientId=client, **extra)
            spent += time.perf_counter() - t0
            out[i] = cur[:n]
        return out, spent
    finally:
        pybullet.disconnect(physicsClientId=client)
