"""AUBO-i5: 6-axis collaborative arm with a UR-like offset wrist, 5 kg payload, 886 mm reach.

Reference: AUBO-i5 user manual (modified DH, ranges, torques); speed limits as AUBO publishes
them (J1–J3 2.5964 rad/s, J4–J6 3.1105 rad/s). Link masses, centres of mass and inertia tensors
are AUBO's own published values (:data:`REFERENCE`: repository AuboRobot/aubo_description, file
urdf/aubo_i5.urdf, commit e094857c2918), written here as the reference gives them; its link
frames are armtwin's (checked when this module is imported,
:meth:`~armtwin.robots.reference.ReferenceModel.inertials`). Poses are reported in the
controller's base frame, which lies 23.5 mm above the mounting face (the URDF root link
``base_link`` is the mounting face; AUBO's URDF puts the shoulder joint 122 mm above it).

Modified (Craig) DH (mm, deg): d=[98.5,121.5,0,0,102.5,94], a=[0,0,408,376,0,0],
alpha=[0,-90,180,180,-90,90], theta offsets=[180,-90,0,-90,0,0].
Drive gains and friction are not published; chosen for a stable, stiff drive.
"""

import numpy as np

from ..controllers.ik.geometry import OffsetWristGeometry
from .reference import ReferenceModel, RefJoint, RefLink
from .shapes import Paint, Shell, cylinder
from .spec import DriveGains, LinkSpec, Origin, RobotSpec, WorkCell, dh_modified_origins, revolute_joints

D_MM = (98.5, 121.5, 0.0, 0.0, 102.5, 94.0)
A_MM = (0.0, 0.0, 408.0, 376.0, 0.0, 0.0)
ALPHA_DEG = (0.0, -90.0, 180.0, 180.0, -90.0, 90.0)
OFFSET_DEG = (180.0, -90.0, 0.0, -90.0, 0.0, 0.0)
MOUNT_TO_BASE_M = 0.0235  # controller base frame above the mounting face

_origins, _tool = dh_modified_origins(np.array(A_MM) / 1000, np.radians(ALPHA_DEG), np.array(D_MM) / 1000, np.radians(OFFSET_DEG))
_report = Origin((0.0, 0.0, MOUNT_TO_BASE_M))
_origins[0] = Origin.from_matrix(_report.matrix @ _origins[0].matrix)

#: AUBO's own AUBO-i5 description: masses (kg), centres of mass (m) and inertia tensors about them
#: (kg·m²: ixx, ixy, ixz, iyy, iyz, izz) in its link frames, and its joint chain. (Its joints also
#: list motor data — gear ratio 121 / 101, rotor inertia — used by nothing here yet.)
REFERENCE = ReferenceModel(
    repository="AuboRobot/aubo_description",
    path="urdf/aubo_i5.urdf",
    commit="e094857c2918d9d6f5c4341dcb8f63e8f30d5215",
    links=(
        RefLink("base_link", 1.53902, (0.000129, 0.001249, 0.016678),
                (0.003278, -0.000001, -0.000001, 0.003017, -0.000048, 0.005841)),
        RefLink("shoulder_Link", 4.848581, (-0.00001, 0.001807, -0.013854),
                (0.011842, 0.0, 0.000004, 0.0118, -0.000103, 0.008103)),
        RefLink("upperArm_Link", 10.836261, (0.2040, 0.0, 0.006603),
                (0.026024, 0.00002, 0.0, 0.432805, 0.0, 0.425155)),
        RefLink("foreArm_Link", 2.849168, (0.264626, -0.00002, 0.093611),
                (0.003634, 0.000007, 0.000168, 0.065327, 0.000002, 0.064676)),
        RefLink("wrist1_Link", 1.628022, (0.000038, 0.011278, -0.001539),
                (0.001951, 0.000003, 0.000001, 0.001154, -0.000042, 0.001931)),
        RefLink("wrist2_Link", 1.628022, (-0.000038, -0.011278, -0.001539),
                (0.001951, 0.000003, -0.000001, 0.001154, 0.000042, 0.001931)),
        RefLink("wrist3_Link", 0.1978, (0.000022, 0.0006, -0.017081),
                (0.000118, 0.0, 0.0, 0.000112, 0.000001, 0.000184)),
    ),
    joints=(
        RefJoint("shoulder_joint", Origin((0, 0, 0.122), (0, 0, np.pi)), (0, 0, 1)),
        RefJoint("upperArm_joint", Origin((0, 0.1215, 0), (-np.pi / 2, -np.pi / 2, 0)), (0, 0, 1)),
        RefJoint("foreArm_joint", Origin((0.408, 0, 0), (-np.pi, 0, 0)), (0, 0, 1)),
        RefJoint("wrist1_joint", Origin((0.376, 0, 0), (np.pi, 0, np.pi / 2)), (0, 0, 1)),
        RefJoint("wrist2_joint", Origin((0, 0.1025, 0), (-np.pi / 2, 0, 0)), (0, 0, 1)),
        RefJoint("wrist3_joint", Origin((0, -0.094, 0), (np.pi / 2, 0, 0)), (0, 0, 1)),
    ),
)
#: AUBO's published speed limits, rad/s
SPEED_RAD_S = (2.5964, 2.5964, 2.5964, 3.1105, 3.1105, 3.1105)

_joints = revolute_joints(
    _origins,
    lower_deg=(-175,) * 6,
    upper_deg=(175,) * 6,
    speed_deg_s=tuple(np.degrees(SPEED_RAD_S)),
    effort_nm=(133, 133, 133, 13.5, 13.5, 13.5),
)

_BASE = (0.35, 0.37, 0.40, 1.0)
_ARM = (0.95, 0.95, 0.95, 1.0)     # white arm tubes
_JOINT = (0.10, 0.35, 0.75, 1.0)   # AUBO blue joint rings
_WRIST = (0.80, 0.82, 0.86, 1.0)

# What people see (robots/shapes.py), at the zero pose (the arm upright), from the user manual's
# dimension drawing and the DH offsets: UR-like joint modules (grey housings, blue end caps, dark seal
# rings) on the axes — Ø124 mm for J1–J3, Ø92 mm for the wrist — joined by the two arm tubes; the
# upper arm tube in the shoulder's plane (121.5 mm out), the forearm tube 94 mm back towards the base
# axis (where AUBO's centre of mass puts it). Sizes the drawing does not give are read off its proportions.
_GREY = Paint("aubo_grey", (0.78, 0.80, 0.83, 1.0))
_TUBE = Paint("aubo_white", (0.93, 0.94, 0.95, 1.0))
_BLUE = Paint("aubo_blue", _JOINT)
_DARK = Paint("aubo_dark", (0.20, 0.21, 0.23, 1.0))
_STEEL = Paint("steel", (0.55, 0.56, 0.58, 1.0))
_Y2, _Y4, _Z5, _Z6 = -0.1215, -0.0275, 0.906, 1.008   # m: upper arm plane, forearm plane, J4 and J6 heights


def _on_y(y0: float, y1: float, z: float, r: float, paint: Paint, **kw) -> Shell:
    """A cylinder along the base y axis from y0 to y1 at height z (a horizontal joint module part)."""
    return cylinder((0, y0, z), (0, y1, z), r, paint, **kw)


def _on_z(z0: float, z1: float, y: float, r: float, paint: Paint, **kw) -> Shell:
    """A cylinder along the base z axis from z0 to z1 at (0, y) (a vertical joint module part)."""
    return cylinder((0, y, z0), (0, y, z1), r, paint, **kw)


_VISUAL = {
    "base_link": (
        _on_z(0.0, 0.012, 0.0, 0.082, _DARK, fillet=0.003),
        _on_z(0.012, 0.05, 0.0, 0.062, _GREY, fillet=0.004),
        _on_z(0.05, 0.057, 0.0, 0.060, _DARK),
    ),
    "shoulder_link": (
        _on_z(0.057, 0.175, 0.0, 0.062, _GREY, fillet=0.012),
        _on_z(0.175, 0.181, 0.0, 0.052, _BLUE, fillet=0.002, dome=0.007),
        _on_y(-0.03, -0.088, 0.122, 0.062, _GREY, fillet=0.006),
        _on_y(-0.088, -0.094, 0.122, 0.060, _DARK),
    ),
    "upper_arm_link": (
        _on_y(-0.094, -0.158, 0.122, 0.062, _GREY, fillet=0.012),
        _on_y(-0.158, -0.164, 0.122, 0.052, _BLUE, fillet=0.002, dome=0.007),
        _on_z(0.122, 0.53, _Y2, 0.045, _TUBE),
        _on_y(-0.158, -0.088, 0.53, 0.058, _GREY, fillet=0.012),
        _on_y(-0.158, -0.164, 0.53, 0.048, _BLUE, fillet=0.002, dome=0.006),
        _on_y(-0.088, -0.082, 0.53, 0.056, _DARK),
    ),
    "forearm_link": (
        _on_y(-0.082, 0.004, 0.53, 0.056, _GREY, fillet=0.012),
        _on_y(0.004, 0.010, 0.53, 0.047, _BLUE, fillet=0.002, dome=0.006),
        _on_z(0.53, _Z5, _Y4, 0.037, _TUBE),
        _on_y(0.002, -0.07, _Z5, 0.046, _GREY, fillet=0.01),
        _on_y(0.002, 0.008, _Z5, 0.038, _BLUE, fillet=0.002, dome=0.005),
        _on_y(-0.07, -0.075, _Z5, 0.044, _DARK),
    ),
    "wrist1_link": (
        _on_y(-0.075, -0.166, _Z5, 0.046, _GREY, fillet=0.01),
        _on_y(-0.166, -0.172, _Z5, 0.038, _BLUE, fillet=0.002, dome=0.005),
        _on_z(_Z5, 0.962, _Y2, 0.046, _GREY),
        _on_z(0.962, 0.967, _Y2, 0.044, _DARK),
    ),
    "wrist2_link": (
        _on_z(0.967, 1.056, _Y2, 0.046, _GREY, fillet=0.01),
        _on_z(1.056, 1.062, _Y2, 0.038, _BLUE, fillet=0.002, dome=0.005),
        _on_y(_Y2, -0.196, _Z6, 0.045, _GREY, fillet=0.006),
        _on_y(-0.196, -0.2, _Z6, 0.042, _DARK),
    ),
    "wrist3_link": (
        _on_y(-0.2, -0.215, _Z6, 0.032, _STEEL, fillet=0.002),
    ),
}

SPEC = RobotSpec(
    name="aubo_i5",
    title="AUBO-i5",
    maker="AUBO Robotics",
    reference=f"AUBO-i5 user manual (DH, limits); link dynamics from {REFERENCE.citation}",
    links=REFERENCE.apply((
        LinkSpec("base_link", 1.53902, 0.075, _BASE, path=((0, 0, 0), (0, 0, 0.07)), visual=_VISUAL["base_link"]),
        LinkSpec("shoulder_link", 4.848581, 0.065, _ARM, path=((0, 0, -0.05), (0, 0, 0.0)), housing=0.12, accent=_JOINT, visual=_VISUAL["shoulder_link"]),
        LinkSpec("upper_arm_link", 10.836261, 0.055, _ARM, housing=0.13, accent=_JOINT, visual=_VISUAL["upper_arm_link"]),
        # the forearm tube runs 94 mm along the elbow axis from the DH line (towards the base axis),
        # where AUBO's centre of mass puts it (93.6 mm); the stubs at its ends stand for the joint housings
        LinkSpec("forearm_link", 2.849168, 0.042, _ARM, housing=0.11, accent=_JOINT,
                 path=((0, 0, 0), (0, 0, 0.094), (0.376, 0, 0.094), (0.376, 0, 0)), visual=_VISUAL["forearm_link"]),
        LinkSpec("wrist1_link", 1.628022, 0.040, _WRIST, housing=0.09, accent=_JOINT, visual=_VISUAL["wrist1_link"]),
        LinkSpec("wrist2_link", 1.628022, 0.040, _WRIST, housing=0.09, accent=_JOINT, visual=_VISUAL["wrist2_link"]),
        LinkSpec("wrist3_link", 0.1978, 0.032, _BASE, path=((0, 0, -0.02), (0, 0, 0.0)), visual=_VISUAL["wrist3_link"]),
    ), _joints, _tool),
    joints=tuple(_joints),
    tool=_tool,
    report_frame=_report,
    payload=5.0,
    reach=0.886,
    named_poses={
        "zero": (0, 0, 0, 0, 0, 0),
        "home": tuple(np.radians((0, -20, 80, 10, 90, 0))),  # tool pointing down at (612, -122, 323) mm
    },
    geometry=OffsetWristGeometry(d1=D_MM[0] / 1000, d2=D_MM[1] / 1000, a2=A_MM[2] / 1000, a3=A_MM[3] / 1000,
                                 d5=D_MM[4] / 1000, d6=D_MM[5] / 1000, offsets=tuple(np.radians(OFFSET_DEG))),
    # Hinge gains by a stability rule, not by hand: robots/gains.py (``python -m armtwin.robots.gains``
    # prints them), from the inertias above — the largest eigenvalue of M(q)⁻¹(h²K + 2h(D + joint_damping))
    # over 400 random poses is 2 at h = 1/240 s, half the explicit-Euler limit of 4. Friction: implicit,
    # stable at any value.
    # Damping ratio 0.3 on the wrist joints, which the big joints' reaction whips (robots/gains.py, RULES).
    drive=DriveGains(
        stiffness=(1400.0, 13000.0, 2400.0, 47.0, 8.4, 0.18),
        damping=(13.0, 40.0, 8.5, 0.88, 0.25, 0.016),
        friction=(0.8, 0.8, 0.6, 0.1, 0.1, 0.05),
        joint_damping=(1.4, 4.4, 0.95, 0.098, 0.028, 0.0018),
    ),
    dh={"convention": ("modified",), "a_mm": A_MM, "alpha_deg": ALPHA_DEG, "d_mm": D_MM, "offset_deg": OFFSET_DEG},
    # G-code (docs/GCODE.md): default work origin (m, reporting frame), G0 speed (m/s), tool acceleration
    # (m/s²); conservative so that the dynamic joint models can follow the timed path too.
    workcell=WorkCell(origin=(0.450, -0.120, 0.200), rapid_speed=0.5, acceleration=1.5),
)
