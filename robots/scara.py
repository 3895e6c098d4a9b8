"""A 600 mm reach 4-axis SCARA (RRPR), modelled on the Epson LS6-B602 class.

Arm 1 (J1→J2) 325 mm, arm 2 (J2→J4 axis) 275 mm; J1 ±132°, J2 ±150°, J3 quill down
(prismatic along −z) 0–200 mm, J4 tool roll ±360°. Both arms along base +x at zero;
counter-clockwise positive. The flange frame ``tool0`` points down (its z is the approach
direction) and its x axis makes the angle q1 + q2 + q4 with base x (the tool roll).

Masses, inertias, heights, speeds, efforts and drive gains are not published for this
class of robot: the values here are chosen to be plausible (total 17 kg; arm plane
450 mm above the floor; flange 360 mm above the floor at J3 = 0, 160 mm at full stroke).
"""

import numpy as np

from ..controllers.ik.geometry import ScaraGeometry
from .shapes import Paint, cylinder, slab
from .spec import DriveGains, JointSpec, JointType, LinkSpec, Origin, RobotSpec, WorkCell

L1 = 0.325  # m
L2 = 0.275  # m
H1 = 0.450  # m, J1 arm plane above the floor
H2 = 0.060  # m, arm 2 sits above arm 1
QUILL = 0.150  # m, flange below arm 2 at J3 = 0
Z0 = H1 + H2 - QUILL  # m, flange height at J3 = 0

_BASE = (0.30, 0.32, 0.35, 1.0)
_ARM = (0.95, 0.95, 0.93, 1.0)
_ARM2 = (0.20, 0.45, 0.80, 1.0)
_QUILL = (0.75, 0.75, 0.78, 1.0)
_FLANGE = (0.12, 0.12, 0.12, 1.0)

# What people see (robots/shapes.py), at the zero pose: the LS6-B class's rounded pedestal on a dark
# foot plate, white covers on both arms (the outer one with the raised cover over the J3/J4 drives),
# dark caps on the joints and the chrome ball-screw spline (Ø20 mm quill) through the outer arm, long
# enough to stay in its bushing over the whole 200 mm stroke. Proportions, not published dimensions.
_WHITE = Paint("epson_white", _ARM)
_PEDESTAL = Paint("epson_grey", (0.78, 0.79, 0.81, 1.0))
_DARK = Paint("epson_dark", (0.22, 0.23, 0.25, 1.0))
_CHROME = Paint("chrome", (0.80, 0.82, 0.86, 1.0))
_X, _Y, _Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
_ARM1_Z = (H1 - 0.045, H1 + 0.045)          # m, arm 1 cover bottom and top
_ARM2_Z = (_ARM1_Z[1] + 0.002, H1 + H2 + 0.045)  # m, arm 2 cover bottom and top
_VISUAL = {
    "base_link": (
        slab((0, 0, 0.0075), _X, _Y, [(sx * 0.065, sy * 0.08, 0.025) for sx in (-1, 1) for sy in (-1, 1)], 0.015,
             _DARK, fillet=0.003),
        slab((0, 0, (0.015 + _ARM1_Z[0] - 0.012) / 2), _X, _Y, [(-0.035, -0.05, 0.04), (-0.035, 0.05, 0.04), (0.025, 0, 0.075)],
             _ARM1_Z[0] - 0.012 - 0.015, _PEDESTAL, fillet=0.02),
        cylinder((0, 0, _ARM1_Z[0] - 0.012), (0, 0, _ARM1_Z[0]), 0.078, _DARK),
    ),
    "link_1": (
        slab((0, 0, H1), _X, _Y, [(0, 0, 0.088), (L1, 0, 0.07)], _ARM1_Z[1] - _ARM1_Z[0], _WHITE, fillet=0.02),
    ),
    "link_2": (
        slab((0, 0, (_ARM2_Z[0] + _ARM2_Z[1]) / 2), _X, _Y, [(L1, 0, 0.07), (L1 + L2, 0, 0.056)],
             _ARM2_Z[1] - _ARM2_Z[0], _WHITE, fillet=0.015),
        slab((0, 0, _ARM2_Z[1] + 0.035), _X, _Y, [(L1 + 0.06, 0, 0.05), (L1 + L2, 0, 0.056)], 0.07, _WHITE, fillet=0.02),
        cylinder((L1, 0, _ARM2_Z[1]), (L1, 0, _ARM2_Z[1] + 0.008), 0.058, _DARK, fillet=0.002, dome=0.006),
        cylinder((L1 + L2, 0, _ARM2_Z[1] + 0.07), (L1 + L2, 0, _ARM2_Z[1] + 0.08), 0.024, _DARK, fillet=0.002),
        cylinder((L1 + L2, 0, _ARM2_Z[0]), (L1 + L2, 0, _ARM2_Z[0] - 0.012), 0.024, _DARK, fillet=0.002),
    ),
    "link_3": (
        cylinder((L1 + L2, 0, Z0), (L1 + L2, 0, H1 + H2 + 0.22), 0.010, _CHROME),
    ),
    "link_4": (
        cylinder((L1 + L2, 0, Z0 + 0.016), (L1 + L2, 0, Z0), 0.022, _DARK, fillet=0.002),
    ),
}

SPEC = RobotSpec(
    name="scara",
    title="SCARA 600 mm (LS6-B602 class)",
    maker="armtwin (generic, Epson LS6-B602 class)",
    reference="Epson LS6-B602 public data sheet (reach, arm lengths, ranges, stroke)",
    links=(
        LinkSpec("base_link", 8.0, 0.09, _BASE, path=((0, 0, 0), (0, 0, H1 - 0.03)), visual=_VISUAL["base_link"]),
        LinkSpec("link_1", 4.5, 0.055, _ARM, path=((0, 0, 0), (L1, 0, 0)), housing=0.09, accent=_BASE, visual=_VISUAL["link_1"]),
        LinkSpec("link_2", 3.0, 0.045, _ARM2, path=((0, 0, 0), (L2, 0, 0)), housing=0.08, visual=_VISUAL["link_2"]),
        LinkSpec("link_3", 1.0, 0.014, _QUILL, path=((0, 0, 0.10), (0, 0, -QUILL)), visual=_VISUAL["link_3"]),
        LinkSpec("link_4", 0.5, 0.03, _FLANGE, path=((0, 0, 0.0), (0, 0, 0.03)), visual=_VISUAL["link_4"]),
    ),
    joints=(
        JointSpec("joint_1", JointType.REVOLUTE, Origin((0, 0, H1)), (0, 0, 1), np.radians(-132), np.radians(132), np.radians(420), 80.0),
        JointSpec("joint_2", JointType.REVOLUTE, Origin((L1, 0, H2)), (0, 0, 1), np.radians(-150), np.radians(150), np.radians(720), 40.0),
        JointSpec("joint_3", JointType.PRISMATIC, Origin((L2, 0, 0)), (0, 0, -1), 0.0, 0.200, 1.1, 150.0),
        JointSpec("joint_4", JointType.REVOLUTE, Origin((0, 0, -QUILL)), (0, 0, 1), np.radians(-360), np.radians(360), np.radians(2600), 5.0),
    ),
    tool=Origin((0, 0, 0), (np.pi, 0, 0)),
    report_frame=Origin(),
    payload=3.0,
    reach=L1 + L2,
    named_poses={
        "zero": (0, 0, 0, 0),
        "home": (np.radians(0), np.radians(90), 0.05, 0.0),
    },
    geometry=ScaraGeometry(l1=L1, l2=L2, z0=Z0),   # the type makes the tool orientation ROLL
    # Hinge gains by a stability rule, not by hand: robots/gains.py (``python -m armtwin.robots.gains``
    # prints them), from the inertias above — the largest eigenvalue of M(q)⁻¹(h²K + 2h(D + joint_damping))
    # over 400 random poses is 2 at h = 1/240 s, half the explicit-Euler limit of 4. Friction: implicit,
    # stable at any value.
    drive=DriveGains(
        stiffness=(8000.0, 1000.0, 57000.0, 3.9),
        damping=(18.0, 2.6, 66.0, 0.019),
        friction=(0.5, 0.3, 2.0, 0.02),
        joint_damping=(2.0, 0.29, 7.4, 0.0021),
    ),
    # G-code (docs/GCODE.md): default work origin (m, reporting frame), G0 speed (m/s), tool acceleration
    # (m/s²); conservative so that the dynamic joint models can follow the timed path too.
    workcell=WorkCell(origin=(0.350, 0.0, 0.200), rapid_speed=1.0, acceleration=4.0),
)
