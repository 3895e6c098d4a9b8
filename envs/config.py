"""armtwin's configuration vocabulary: the words people choose from, without PyBullet.

The command line (:mod:`armtwin.scripts.options`), the Gymnasium envs, the runner and the
simulator facade all take their choices from here, so ``--help`` lists the real choices and a
new joint model, renderer or camera is one enum member. Importing this module loads neither
PyBullet nor the simulator (a test checks it).

Units: SI (s, m/s²); video sizes in pixels, frame rates in frames per simulated second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..controllers.choices import Choice

__all__ = ["JointMode", "Renderer", "CameraPreset", "PhysicsConfig", "VideoSettings", "VIDEO_SUFFIXES",
           "MIN_FPS", "MAX_FPS", "MIN_VIDEO_SIZE", "MAX_VIDEO_SIZE", "parse_size"]


class JointMode(Choice):
    """How the joints of a robot are simulated (docs/JOINT_MODELS.md).

    KINEMATIC: joint values are set directly each step; no mass, inertia or force.
    HINGE: an explicit spring–damper drive, computed each physics step and applied as a
        force-limited joint torque; gravity, inertia and payload act on the arm.
    ARTICULATION: PyBullet's reduced-coordinate multibody with its own implicit
        position/velocity drive and force limit.
    """

    __label__ = "joint mode"

    KINEMATIC = "kinematic"
    HINGE = "hinge"
    ARTICULATION = "articulation"


class Renderer(Choice):
    """PyBullet's image renderer: AUTO takes EGL (GPU or Mesa) when it loads, else TINY (CPU)."""

    __label__ = "renderer"

    AUTO = "auto"
    EGL = "egl"
    TINY = "tiny"


class CameraPreset(Choice):
    """Named cameras of a video. WORK frames a program's path (runs only); the others frame the
    whole robot (:func:`armtwin.envs.camera.cameras_for`)."""

    __label__ = "camera"

    WORK = "work"
    ISO = "iso"
    FRONT = "front"
    SIDE = "side"
    TOP = "top"

    @classmethod
    def robot_views(cls) -> tuple["CameraPreset", ...]:
        """The presets that frame the robot itself (every command that films a robot has them)."""
        return tuple(m for m in cls if m is not cls.WORK)


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
        """ValueError for a non-positive or non-finite dt, or substeps that are not a whole number >= 1."""
        if isinstance(self.dt, bool) or not isinstance(self.dt, (int, float)) or not (math.isfinite(self.dt) and self.dt > 0):
            raise ValueError(f"dt must be a positive number of seconds, got {self.dt!r}")
        if isinstance(self.substeps, bool) or int(self.substeps) != self.substeps or self.substeps < 1:
            raise ValueError(f"substeps must be a whole number >= 1, got {self.substeps!r}")


#: file endings a video can be written to (H.264 MP4, GIF)
VIDEO_SUFFIXES = (".mp4", ".gif")
#: frame rates, frames per simulated second: below 1 a video is a slide show whose frames claim to
#: last for seconds; above 120 no player shows more
MIN_FPS, MAX_FPS = 1.0, 120.0
#: video sizes, pixels (width, height): H.264 with yuv420p needs even numbers
MIN_VIDEO_SIZE, MAX_VIDEO_SIZE = (16, 16), (7680, 4320)


def parse_size(text: str) -> tuple[int, int]:
    """``"640x480"`` -> (640, 480). ValueError (naming the rule) for anything else."""
    try:
        w, h = (int(v) for v in str(text).lower().replace("×", "x").split("x"))
    except ValueError:
        raise ValueError(f"a video size looks like 640x480 (WIDTHxHEIGHT pixels), got {text!r}") from None
    return VideoSettings.checked_size((w, h))


@dataclass(frozen=True)
class VideoSettings:
    """How a video is made; validated once, here, for every command and API that writes one.

    Attributes:
        fps: frames per simulated second, :data:`MIN_FPS` to :data:`MAX_FPS`.
        size: (width, height) pixels, even, :data:`MIN_VIDEO_SIZE` to :data:`MAX_VIDEO_SIZE`.
        camera: a :class:`CameraPreset` (or its name).
        renderer: a :class:`Renderer` (or its name).
        overlay: draw the text overlay (time, line, joints, tool pose).
        gif: also write a GIF next to an MP4.

    Raises:
        ValueError: naming the field and the rule.
    """

    fps: float = 30.0
    size: tuple[int, int] = (640, 480)
    camera: CameraPreset = CameraPreset.ISO
    renderer: Renderer = Renderer.AUTO
    overlay: bool = True
    gif: bool = False

    def __post_init__(self) -> None:
        fps = self.fps
        if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not (math.isfinite(fps) and MIN_FPS <= fps <= MAX_FPS):
            raise ValueError(f"the video frame rate must be between {MIN_FPS:g} and {MAX_FPS:g} frames/s, got {fps!r}")
        object.__setattr__(self, "fps", float(fps))
        object.__setattr__(self, "size", self.checked_size(self.size))
        object.__setattr__(self, "camera", CameraPreset.parse(self.camera))
        object.__setattr__(self, "renderer", Renderer.parse(self.renderer))

    @staticmethod
    def checked_size(size) -> tuple[int, int]:
        """``size`` as (width, height) ints, or ValueError: even whole numbers within the bounds."""
        ok = isinstance(size, (tuple, list)) and len(size) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in size)
        if ok:
            (w, h), (w0, h0), (w1, h1) = size, MIN_VIDEO_SIZE, MAX_VIDEO_SIZE
            ok = w % 2 == 0 and h % 2 == 0 and w0 <= w <= w1 and h0 <= h <= h1
        if not ok:
            raise ValueError(f"a video size must be even whole numbers of pixels from {MIN_VIDEO_SIZE[0]}x"
                             f"{MIN_VIDEO_SIZE[1]} to {MAX_VIDEO_SIZE[0]}x{MAX_VIDEO_SIZE[1]}, got {size!r}")
        return int(size[0]), int(size[1])
