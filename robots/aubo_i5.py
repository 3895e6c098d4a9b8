"""AUBO-i5: 6-axis collaborative arm with a UR-like offset wrist, 5 kg payload, 886 mm reach.

Reference: AUBO-i5 user manual (modified DH, ranges, speeds, torques); link masses from
the public aubo_description URDF. Poses are reported in the controller's base frame,
which lies 23.5 mm above the mounting face (the URDF root link ``base_link`` is the
mounting face; public URDFs put the shoulder joint 122 mm above it).

Modified (Craig) DH (mm, deg): d=[98.5,121.5,0,0,102.5,94], a=[0,0,408,376,0,0],
alpha=[0,-90,180,180,-90,90], theta offsets=[180,-90,0,-90,0,0].
Drive gains and friction are not published; chosen for a stable, stiff drive.
"""

import numpy as np

from .spec import DriveGains, LinkSpec, Origin, RobotSpec, WorkCell, dh_modified_origins, revolute_joints

D_MM = (98.5, 121.5, 0.0, 0.0, 102.5, 94.0)
A_MM = (0.0, 0.0, 408.0, 376.0, 0.0, 0.0)
ALPHA_DEG = (0.0, -90.0, 180.0, 180.0, -90.0, 90.0)
OFFSET_DEG = (180.0, -90.0, 0.0, -90.0, 0.0, 0.0)
MOUNT_TO_BASE_M = 0.0235  # controller base frame above the mounting face

_origins, _tool = dh_modified_origins(np.array(A_MM) / 1000, np.radians(ALPHA_DEG), np.array(D_MM) / 1000, np.radians(OFFSET_DEG))
_report = Origin((0.0, 0.0, MOUNT_TO_BASE_M))
_origins[0] = Origin.from_matrix(_report.matrix @ _origins[0].matrix)

_BASE = (0.35, 0.37, 0.40, 1.0)
_ARM = (0.95, 0.95, 0.95, 1.0)     # white arm tubes
_JOINT = (0.10, 0.35, 0.75, 1.0)   # AUBO blue joint rings
_WRIST = (0.80, 0.82, 0.86, 1.0)

SPEC = RobotSpec(
    name="aubo_i5",
    title="AUBO-i5",
    maker="AUBO Robotics",
    reference="AUBO-i5 user manual (DH, limits); masses from aubo_description",
    links=(
        LinkSpec("base_link", 1.54, 0.075, _BASE, path=((0, 0, 0), (0, 0, 0.07))),
        LinkSpec("shoulder_link", 4.85, 0.065, _ARM, path=((0, 0, -0.05), (0, 0, 0.0)), housing=0.12, accent=_JOINT),
        LinkSpec("upper_arm_link", 10.84, 0.055, _ARM, housing=0.13, accent=_JOINT),
        LinkSpec("forearm_link", 2.85, 0.042, _ARM, housing=0.11, accent=_JOINT),
        LinkSpec("wrist1_link", 1.63, 0.040, _WRIST, housing=0.09, accent=_JOINT),
        LinkSpec("wrist2_link", 1.63, 0.040, _WRIST, housing=0.09, accent=_JOINT),
        LinkSpec("wrist3_link", 0.20, 0.032, _BASE, path=((0, 0, -0.02), (0, 0, 0.0))),
    ),
    joints=tuple(revolute_joints(
        _origins,
        lower_deg=(-175,) * 6,
        upper_deg=(175,) * 6,
        speed_deg_s=(150, 150, 150, 180, 180, 180),
        effort_nm=(133, 133, 133, 13.5, 13.5, 13.5),
    )),
    tool=_tool,
    report_frame=_report,
    payload=5.0,
    reach=0.886,
    named_poses={
        "zero": (0, 0, 0, 0, 0, 0),
        "home": tuple(np.radians((0, -20, 80, 10, 90, 0))),  # tool pointing down at (612, -122, 323) mm
    },
    geometry={"d1": 0.0985, "d2": 0.1215, "a2": 0.408, "a3": 0.376, "d5": 0.1025, "d6": 0.094},
    # Hinge gains by a rule, not by hand (envs/drives.py: `python -m armtwin.envs.drives aubo_i5`):
    # the stiffness shape of the first design (x + y = 2 per joint at h = 1/240 s over the inertia
    # range) scaled to the largest factor at which, with every joint damped to zeta = 0.2 at its
    # heaviest pose (10 % of it the joint's own damping), max over 400 random poses of
    # eig(M(q)⁻¹ (h²K + 2h(D + joint_damping))) = 2, half the explicit-Euler limit. The first design
    # had zeta 0.05 on J1–J3: its ringing, excited by a policy's 25 Hz command steps, took the light
    # wrist past 10x its speed limit in 19 of 20 random-action Gym episodes. Friction: implicit.
    drive=DriveGains(
        stiffness=(320.0, 1060.0, 930.0, 50.0, 7.3, 0.037),
        damping=(12.7, 22.9, 9.7, 0.43, 0.068, 0.0007),
        friction=(0.8, 0.8, 0.6, 0.1, 0.1, 0.05),
        joint_damping=(1.4, 2.5, 1.1, 0.048, 0.0075, 0.000078),
    ),
    dh={"convention": ("modified",), "a_mm": A_MM, "alpha_deg": ALPHA_DEG, "d_mm": D_MM, "offset_deg": OFFSET_DEG},
    # G-code (docs/GCODE.md): default work origin (m, reporting frame), G0 speed (m/s), tool acceleration
    # (m/s²); conservative so that the dynamic joint models can follow the timed path too.
    workcell=WorkCell(origin=(0.450, -0.120, 0.200), rapid_speed=0.5, acceleration=1.5),
)
