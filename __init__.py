"""armtwin: a physics-based simulation environment and digital twin for industrial robot arms.

Sub-packages:
    robots: robot data (URDF files and frozen specs) and the registry ``robots.get(name)``.
    controllers: pure numpy maths (kinematics, IK, G-code, planning, PID); no PyBullet.
    envs: the simulator facade (the only module that imports pybullet) and Gymnasium envs.
    scripts: the ``armtwin`` command line.
"""

__version__ = "0.1.0"
