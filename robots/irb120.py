"""ABB IRB120: 6-axis arm with a spherical wrist, 3 kg payload, 580 mm reach.

Reference: ABB IRB 120 product specification (geometry, ranges, speeds). Link masses,
centres of mass and inertia tensors are ROS-Industrial's published values
(:data:`REFERENCE`: repository ros-industrial/abb_experimental, file
abb_irb120_support/urdf/irb120_3_58_macro.xacro, commit 20b9cf86ad27), written here as the
reference gives them and turned into armtwin's link frames by
:meth:`~armtwin.robots.reference.ReferenceModel.inertials` (the reference's link frames are
the base frame's axes at q = 0; armtwin's follow the DH table, so links 2–6 are turned and the
flange link is shifted by 72 mm). Its ``link_6`` inertia, 0.001 kg·m² on every axis for
0.137 kg (a radius of gyration of 85 mm on a 40 mm flange), is a placeholder: armtwin keeps the
published centre of mass and derives that link's inertia from its drawing shape (a solid
cylinder, radius 22 mm, 27 mm long, at uniform density: ≈ 2.5·10⁻⁵ / 3.3·10⁻⁵ kg·m²).

Effort limits and drive gains are not published: the values below are chosen so that the arm
can hold its rated payload at full reach with margin (J2 needs ≈ 45 N·m there).

Standard DH (mm, deg): a=[0,270,70,0,0,0], alpha=[-90,0,-90,90,-90,0],
d=[290,0,0,302,0,72], theta offsets=[0,-90,0,0,0,180]. At q = 0 the flange is at
(374, 0, 630) mm, upper arm vertical, forearm along +x.
"""

import numpy as np

from ..controllers.ik.geometry import SphericalWristGeometry
from .reference import ReferenceModel, RefJoint, RefLink
from .shapes import Paint, cylinder, slab
from .spec import DriveGains, LinkSpec, Origin, RobotSpec, WorkCell, dh_standard_origins, revolute_joints

A_MM = (0.0, 270.0, 70.0, 0.0, 0.0, 0.0)
ALPHA_DEG = (-90.0, 0.0, -90.0, 90.0, -90.0, 0.0)
D_MM = (290.0, 0.0, 0.0, 302.0, 0.0, 72.0)
OFFSET_DEG = (0.0, -90.0, 0.0, 0.0, 0.0, 180.0)

_origins, _tool = dh_standard_origins(np.array(A_MM) / 1000, np.radians(ALPHA_DEG), np.array(D_MM) / 1000, np.radians(OFFSET_DEG))

#: ROS-Industrial's IRB120 description: masses (kg), centres of mass (m) and inertia tensors about
#: them (kg·m²: ixx, ixy, ixz, iyy, iyz, izz) in its own link frames, and its joint chain.
REFERENCE = ReferenceModel(
    repository="ros-industrial/abb_experimental",
    path="abb_irb120_support/urdf/irb120_3_58_macro.xacro",
    commit="20b9cf86ad274e4f98540b9c9efe59f94245d2d1",
    links=(
        RefLink("base_link", 6.215, (-0.04204, 8.01e-05, 0.07964),
                (0.0247272, -8.0784e-05, 0.00130902, 0.0491285, -8.0419e-06, 0.0472376)),
        RefLink("link_1", 3.067, (9.77e-05, -0.00012, 0.23841),
                (0.0142175, -1.28579e-05, -2.31364e-05, 0.0144041, 1.93404e-05, 0.0104533)),
        RefLink("link_2", 3.909, (0.00078, -0.00212, 0.10124),
                (0.0603111, 9.83431e-06, 5.72407e-05, 0.041569, -0.00050497, 0.0259548)),
        RefLink("link_3", 2.944, (0.02281, 0.00106, 0.05791),
                (0.00835606, -8.01545e-05, 0.00142884, 0.016713, -0.000182227, 0.0126984)),
        RefLink("link_4", 1.328, (0.2247, 0.00015, 0.00041),
                (0.00284661, -2.12765e-05, -1.6435e-05, 0.00401346, 1.31336e-05, 0.0052535)),
        RefLink("link_5", 0.546, (-0.00109, 3.68e-05, 6.22e-05),
                (0.000404891, 1.61943e-06, 8.46805e-07, 0.000892825, -1.51792e-08, 0.000815468)),
        RefLink("link_6", 0.137, (-0.00706, -0.00017, -1.32e-06), (0.001, 0.0, 0.0, 0.001, 0.0, 0.001),
                placeholder="the reference's 0.001 kg·m² on every axis for 0.137 kg is a placeholder"),
    ),
    joints=(
        RefJoint("joint_1", Origin((0, 0, 0)), (0, 0, 1)),
        RefJoint("joint_2", Origin((0, 0, 0.29)), (0, 1, 0)),
        RefJoint("joint_3", Origin((0, 0, 0.27)), (0, 1, 0)),
        RefJoint("joint_4", Origin((0, 0, 0.07)), (1, 0, 0)),
        RefJoint("joint_5", Origin((0.302, 0, 0)), (0, 1, 0)),
        RefJoint("joint_6", Origin((0.072, 0, 0)), (1, 0, 0)),
    ),
    flange=Origin((0, 0, 0), (0, np.pi / 2, 0)),   # its tool0: link_6 turned 90° about y
)

_joints = revolute_joints(
    _origins,
    lower_deg=(-165, -110, -110, -160, -120, -400),
    upper_deg=(165, 110, 70, 160, 120, 400),
    speed_deg_s=(250, 250, 250, 320, 320, 420),
    effort_nm=(120, 120, 60, 20, 20, 10),
)

_BASE = (0.22, 0.22, 0.24, 1.0)     # graphite base
_ARM = (0.93, 0.93, 0.91, 1.0)      # ABB graphite white
_WRIST = (0.98, 0.45, 0.08, 1.0)    # orange wrist group, to tell the wrist from the arm
_FLANGE = (0.15, 0.15, 0.15, 1.0)

# What people see (robots/shapes.py): the product specification's dimension drawing at the zero pose
# (mm): a 180 x 180 foot, the J1 column, the flat upper arm beside the shoulder and elbow housings (its
# side face 47 mm left of the kinematic plane, so it overlaps the collision cylinder there), the
# forearm housing over the elbow with its motor covers, the round forearm tube ending in a fork, and
# the round wrist in ABB orange. Sizes not given in the drawing are read off its proportions.
_WHITE = Paint("abb_white", _ARM)
_GREY = Paint("abb_grey", (0.70, 0.71, 0.72, 1.0))
_ORANGE = Paint("abb_orange", _WRIST)
_DARK = Paint("graphite", _BASE)
_STEEL = Paint("steel", (0.45, 0.46, 0.48, 1.0))
_X, _Y, _Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
_VISUAL = {
    "base_link": (
        slab((0, 0, 0.008), _X, _Y, [(sx * 0.07, sy * 0.07, 0.02) for sx in (-1, 1) for sy in (-1, 1)], 0.016,
             _DARK, fillet=0.004),
        slab((0, 0, 0.057), _X, _Y, [(sx * 0.042, sy * 0.042, 0.04) for sx in (-1, 1) for sy in (-1, 1)], 0.082,
             _WHITE, fillet=0.02),
        slab((-0.083, 0, 0.045), _Y, _Z, [(-0.02, 0.0, 0.012), (0.02, 0.0, 0.012)], 0.012, _DARK, fillet=0.003),
    ),
    "link_1": (
        cylinder((0, 0, 0.098), (0, 0, 0.2), 0.074, _WHITE, fillet=0.006),
        slab((0, 0.0125, 0.0), _X, _Z, [(0, 0.29, 0.072), (0, 0.18, 0.074)], 0.115, _WHITE, fillet=0.025),
        cylinder((0, 0.07, 0.29), (0, 0.095, 0.29), 0.052, _GREY, fillet=0.008, dome=0.006),
    ),
    "link_2": (
        slab((0, -0.076, 0), _X, _Z, [(0, 0.29, 0.068), (0, 0.56, 0.052)], 0.058, _WHITE, fillet=0.016),
        cylinder((0, -0.104, 0.29), (0, -0.11, 0.29), 0.045, _GREY, fillet=0.003, dome=0.004),
        cylinder((0, -0.104, 0.56), (0, -0.11, 0.56), 0.034, _GREY, fillet=0.003, dome=0.003),
    ),
    "link_3": (
        slab((0, 0.0115, 0), _X, _Z, [(0, 0.56, 0.06), (-0.055, 0.625, 0.052), (0.05, 0.63, 0.058)], 0.113, _WHITE,
             fillet=0.024),
        cylinder((0, 0.068, 0.56), (0, 0.088, 0.56), 0.045, _GREY, fillet=0.006, dome=0.005),
        cylinder((-0.105, 0, 0.63), (-0.118, 0, 0.63), 0.04, _GREY, fillet=0.005, dome=0.004),
    ),
    "link_4": (
        cylinder((0.1, 0, 0.63), (0.215, 0, 0.63), 0.048, _WHITE, fillet=0.004, end_radius=0.04),
        slab((0.0, 0.041, 0), _X, _Z, [(0.21, 0.63, 0.036), (0.302, 0.63, 0.035)], 0.014, _WHITE, fillet=0.005),
        slab((0.0, -0.041, 0), _X, _Z, [(0.21, 0.63, 0.036), (0.302, 0.63, 0.035)], 0.014, _WHITE, fillet=0.005),
    ),
    "link_5": (
        cylinder((0.302, -0.034, 0.63), (0.302, 0.034, 0.63), 0.033, _ORANGE, fillet=0.008),
        cylinder((0.302, 0, 0.63), (0.352, 0, 0.63), 0.03, _ORANGE, fillet=0.004, end_radius=0.026),
    ),
    "link_6": (
        cylinder((0.352, 0, 0.63), (0.374, 0, 0.63), 0.02, _STEEL, fillet=0.002),
    ),
}

SPEC = RobotSpec(
    name="irb120",
    title="ABB IRB120",
    maker="ABB",
    reference=f"ABB IRB 120 product specification; link dynamics from {REFERENCE.citation}",
    links=REFERENCE.apply((
        LinkSpec("base_link", 6.215, 0.09, _BASE, path=((0, 0, 0), (0, 0, 0.10)), visual=_VISUAL["base_link"]),
        LinkSpec("link_1", 3.067, 0.075, _ARM, path=((0, 0, 0.10), (0, 0, 0.29)), visual=_VISUAL["link_1"]),
        LinkSpec("link_2", 3.909, 0.05, _ARM, housing=0.17, accent=_BASE, visual=_VISUAL["link_2"]),
        LinkSpec("link_3", 2.944, 0.055, _ARM, housing=0.15, accent=_BASE, visual=_VISUAL["link_3"]),
        LinkSpec("link_4", 1.328, 0.04, _ARM, path=((0, 0, -0.03), (0, 0, 0.302)), housing=0.0, visual=_VISUAL["link_4"]),
        LinkSpec("link_5", 0.546, 0.035, _WRIST, housing=0.09, visual=_VISUAL["link_5"]),
        LinkSpec("link_6", 0.137, 0.022, _FLANGE, path=((0, 0, 0.045), (0, 0, 0.072)), visual=_VISUAL["link_6"]),
    ), _joints, _tool),
    joints=tuple(_joints),
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
    # Hinge gains by a stability rule, not by hand: robots/gains.py (``python -m armtwin.robots.gains``
    # prints them), from the inertias above — the largest eigenvalue of M(q)⁻¹(h²K + 2h(D + joint_damping))
    # over 400 random poses is 2 at h = 1/240 s, half the explicit-Euler limit of 4. Friction: implicit,
    # stable at any value.
    drive=DriveGains(
        stiffness=(550.0, 7100.0, 1000.0, 87.0, 29.0, 0.14),
        damping=(4.5, 16.0, 3.3, 0.19, 0.1, 0.0035),
        friction=(0.5, 0.5, 0.3, 0.1, 0.1, 0.05),
        joint_damping=(0.5, 1.8, 0.37, 0.021, 0.012, 0.00038),
    ),
    dh={"convention": ("standard",), "a_mm": A_MM, "alpha_deg": ALPHA_DEG, "d_mm": D_MM, "offset_deg": OFFSET_DEG},
    # G-code (docs/GCODE.md): default work origin (m, reporting frame), G0 speed (m/s), tool acceleration
    # (m/s²); conservative so that the dynamic joint models can follow the timed path too.
    workcell=WorkCell(origin=(0.350, 0.0, 0.200), rapid_speed=0.5, acceleration=2.0),
)
