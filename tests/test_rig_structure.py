"""The rig package's structural promises (issue 16.3): one module per concern, a log read without
the serial link, public names where the README documents them, and no monkey-patching of the
command path (the wrapper uses :meth:`SimRobot.set_command_filter`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import armtwin.envs.rig as rig
from armtwin.envs.sim import PhysicsConfig, World
from armtwin.robots import get


def test_plot_and_replay_read_a_log_without_the_serial_link_or_the_sync_loop(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        from armtwin.scripts.cmd_plot import read_log
        from armtwin.scripts import cmd_replay  # noqa: F401
        from armtwin.envs.rig.log import SyncSample, TwinLog
        import numpy as np
        with TwinLog({str(tmp_path / 'x.csv')!r}, (0, 1)) as log:
            from armtwin.controllers.rigproto import Fault
            log.write(SyncSample(0, 0.0, np.zeros(2), np.zeros(2), np.zeros(2), 1.0, Fault.NONE))
        read_log({str(tmp_path / 'x.csv')!r})
        loaded = [n for n, m in list(sys.modules.items()) if n.startswith("armtwin") and
                  any(k in vars(m) for k in ("RigLink", "TwinSync", "TwinSyncWrapper"))]  # wherever they live
        print(sorted(loaded + [m for m in ("serial", "pybullet") if m in sys.modules]))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_every_public_name_is_importable_from_the_package():
    from armtwin.envs.rig import chip, emulator, gym, link, log, sync
    for name in rig.__all__:
        value = getattr(rig, name)
        owners = [m for m in (link, log, sync, gym, emulator, chip) if getattr(m, name, None) is value and name in m.__all__]
        assert len(owners) == 1, (name, owners)  # defined once, in its concern's module
    assert rig.TwinSyncWrapper is gym.TwinSyncWrapper  # the README's `armtwin.envs.rig.TwinSyncWrapper`
    with pytest.raises(AttributeError):
        rig.NoSuchThing  # noqa: B018


def test_the_command_filter_is_the_one_explicit_seam():
    with World(PhysicsConfig()) as world:
        robot = world.add_robot(get("irb120"))
        seen = []

        def pin_j1(q, qd):
            seen.append(q.copy())
            q[0], qd[0] = 0.25, 0.0
            return q, qd

        robot.set_command_filter(pin_j1)
        with pytest.raises(ValueError, match="filtered already"):
            robot.set_command_filter(lambda q, qd: (q, qd))
        robot.command(np.full(6, 0.1), np.full(6, 0.5))
        q, qd = robot.commanded
        assert q[0] == 0.25 and qd[0] == 0.0 and np.allclose(q[1:], 0.1) and np.allclose(qd[1:], 0.5)
        assert len(seen) == 1 and "command" not in vars(robot)  # a method, not an instance attribute over it
        robot.set_command_filter(None)
        robot.set_command_filter(lambda q, qd: (q * np.nan, qd))
        with pytest.raises(ValueError, match=r"q \(filtered\) has non-finite values"):
            robot.command(np.zeros(6))
        robot.set_command_filter(None)
        robot.command(np.full(6, 0.1))
        assert np.allclose(robot.commanded[0], 0.1)
