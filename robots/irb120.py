"""ABB IRB120: 6-axis arm with a spherical wrist, 3 kg payload, 580 mm reach.

Reference: ABB IRB 120 product specification (geometry, ranges, speeds); link masses
from public descriptions (ROS-Industrial abb_irb120 support package). Effort limits and
drive gains are not published: the values below are chosen so that the arm can hold
its rated payload at full reach with margin (J2 needs ≈ 45 N·m there).

Standard DH (mm, deg): a=[0,270,70,0,0,0], alpha=[-90,0,-90,90,-90,0],
d=[290,0,0,302,0,72], theta offsets=[0,-90,0,0,0,180]. At q = 0 the flange is at
(374, 0, 630) mm, upper arm vertical, forearm along +x.
"""

import numpy as np

from ..controllers.ik.geometry import SphericalWristGeometry
from .spec import DriveGains, LinkSpec, Origin, RobotSpec, WorkCell, dh_standard_origins, revolute_joints

A_MM = (0.0, 270.0, 70.0, 0.0, 0.0, 0.0)
ALPHA_DEG = (-90.0, 0.0, -90.0, 90.0, -90.0, 0.0)
D_MM = (290.0, 0.0, 0.0, 302.0, 0.0, 72.0)
OFFSET_DEG = (0.0, -90.0, 0.0, 0.0, 0.0, 180.0)

_origins, _tool = dh_standard_origins(np.array(A_MM) / 1000, np.radians(ALPHA_DEG), np.array(D_MM) / 1000, np.radians(OFFSET_DEG))

_BASE = (0.22, 0.22, 0.24, 1.0)     # graphite base
_ARM = (0.93, 0.93, 0.91, 1.0)      # ABB graphite white
_WRIST = (0.98, 0.45, 0.08, 1.0)    # orange wrist group, to tell the wrist from the arm
_FLANGE = (0.15, 0.15, 0.15, 1.0)

SPEC = RobotSpec(
    name="irb120",
    title="ABB IRB120",
    maker="ABB",
    reference="ABB IRB 120 product specification; masses from ROS-Industrial abb_irb120",
    links=(
        LinkSpec("base_link", 6.215, 0.09, _BASE, path=((0, 0, 0), (0, 0, 0.10))),
        LinkSpec("link_1", 3.067, 0.075, _ARM, path=((0, 0, 0.10), (0, 0, 0.29))),
        LinkSpec("link_2", 3.909, 0.05, _ARM, housing=0.17, accent=_BASE),
        LinkSpec("link_3", 2.944, 0.055, _ARM, housing=0.15, accent=_BASE),
        LinkSpec("link_4", 1.328, 0.04, _ARM, path=((0, 0, -0.03), (0, 0, 0.302)), housing=0.0),
        LinkSpec("link_5", 0.546, 0.035, _WRIST, housing=0.09),
        LinkSpec("link_6", 0.137, 0.022, _FLANGE, path=((0, 0, 0.045), (0, 0, 0.072))),
    ),
    joints=tuple(revolute_joints(
        _origins,
        lower_deg=(-165, -110, -110, -160, -120, -400),
        upper_deg=(165, 110, 70, 160, 120, 400),
        speed_deg_s=(250, 250, 250, 320, 320, 420),
        effort_nm=(120, 120, 60, 20, 20, 10),
    )),
    tool=_tool,
    report_frame=Origin(),
    payload=3.0,
    reach=0.580,
    named_poses={
        "zero": (0, 0, 0, 0, 0, 0),
        "home": tuple(np.radians((0, 0, 0, 0, 90, 0))),
        "ready": tuple(np.radians((0, 20, 10, 0, 60, 0))),
    },
    geometry=SphericalWristGeometry(d1=D_MM[0] / 1000, a2=A_MM[1] / 1000, a3=A_MM[2] / 1000, d4=D_MM[3] / 1000,
                                    d6=D_MM[5] / 1000, offsets=tuple(np.radians(OFFSET_DEG))),
    # Hinge gains by a stability rule, not by hand (envs/sim.py, JointMode.HINGE). Per joint, with
    # I_min the smallest effective inertia 1/(M⁻¹)_ii (no payload), I_max the largest M_ii (rated
    # payload) over the joint ranges, h = 1/240 s: x = h²K/I_min, y = 2h(D + joint_damping)/I_min with
    # x + y = 2 and damping ratio >= 0.1 at I_max (joint_damping = 10 % of the total damping); then
    # all gains scaled by one factor so that max over 400 random poses of
    # eig(M(q)⁻¹ (h²K + 2h(D + joint_damping))) = 2, half the explicit-Euler limit of 4 (the
    # coupled J2–J3 mode buzzes at the Nyquist rate above it). Friction: implicit, stable at any value.
    drive=DriveGains(
        stiffness=(240.0, 9400.0, 1100.0, 37.0, 15.0, 0.14),
        damping=(2.9, 18.0, 3.3, 0.12, 0.076, 0.0036),
        friction=(0.5, 0.5, 0.3, 0.1, 0.1, 0.05),
        joint_damping=(0.32, 2.0, 0.37, 0.014, 0.0084, 0.0004),
    ),
    dh={"convention": ("standard",), "a_mm": A_MM, "alpha_deg": ALPHA_DEG, "d_mm": D_MM, "offset_deg": OFFSET_DEG},
    # G-code (docs/GCODE.md): default work origin (m, reporting frame), G0 speed (m/s), tool acceleration
    # (m/s²); conservative so that the dynamic joint models can follow the timed path too.
    workcell=WorkCell(origin=(0.350, 0.0, 0.200), rapid_speed=0.5, acceleration=2.0),
)
