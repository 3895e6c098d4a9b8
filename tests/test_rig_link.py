"""The Python link and the firmware core (compiled on the host) talking over a real pty,
plus the link over socket:// with garbage and disconnects."""

import socket
import threading
import time

import numpy as np
import pytest

from armtwin.controllers import rigproto as rp
from armtwin.envs.rig import Emulator, RigLink, RigLinkError, build_emulator


@pytest.fixture(scope="module")
def exe():
    return build_emulator()


@pytest.fixture
def emu(exe):
    e = Emulator(exe=exe)
    yield e
    e.stop()


def wait_for(cond, timeout=2.0):
    t = time.monotonic() + timeout
    while time.monotonic() < t:
        if cond():
            return True
        time.sleep(0.005)
    return False


def test_hello_and_mode_are_answered_by_the_firmware_core(emu):
    with RigLink(emu.device) as link:
        h = link.request_hello(timeout=2.0)
        assert h == rp.Hello(role=1, n_motors=2, control_hz=1000, pulses_per_deg_milli=37500, firmware=0x0100)
        link.set_mode(rp.Mode.VIRTUAL_TO_REAL, 250, 0)
        assert wait_for(lambda: link.mode_ack is not None)
        assert link.mode_ack == rp.ModeMsg(rp.Mode.VIRTUAL_TO_REAL, 250, 0)


def test_targets_drive_the_emulated_motors_and_states_echo_commands(emu):
    with RigLink(emu.device) as link:
        link.set_mode(rp.Mode.VIRTUAL_TO_REAL)
        target = (int(20 * 37.5), int(-10 * 37.5))
        t_end = time.monotonic() + 1.5
        while time.monotonic() < t_end:  # stream targets (a step) at ~200 Hz
            link.send_targets(target)
            time.sleep(0.005)
        s = link.latest()
        assert s is not None and not (s.faults & (rp.Fault.WATCHDOG | rp.Fault.POWER))
        np.testing.assert_allclose(s.degrees, [20.0, -10.0], atol=0.5)
        assert len(link.stats.latencies_ms) > 100  # echoes matched to the commands
        assert all(l > 0 for l in link.stats.latencies_ms)
        assert link.stats.lost == 0 and link.stats.dropped == 0


def test_watchdog_stops_the_motors_when_the_host_goes_silent(emu):
    import serial
    port = serial.serial_for_url(emu.device, timeout=0.002)
    dec = rp.StreamDecoder()
    port.write(b"\x00" + rp.encode_frame(rp.ModeMsg(rp.Mode.VIRTUAL_TO_REAL), 0, 0))
    states = []
    for k in range(40):  # 0.2 s of targets far away: the motors run at full speed
        port.write(rp.encode_frame(rp.JointTargets((30000, -30000)), k + 1, 0))
        states += [f.msg for f in dec.feed(port.read(512)) if isinstance(f.msg, rp.JointStates)]
        time.sleep(0.005)
    assert states and abs(states[-1].pwm[0]) == 255 and not states[-1].faults & rp.Fault.WATCHDOG
    t_silent = time.monotonic()
    silent = []  # (time since silence, state)
    while time.monotonic() - t_silent < 0.6:  # then silence: no frame at all
        now = time.monotonic() - t_silent
        silent += [(now, f.msg) for f in dec.feed(port.read(512)) if isinstance(f.msg, rp.JointStates)]
    port.close()
    tripped = [(t, m) for t, m in silent if m.faults & rp.Fault.WATCHDOG]
    assert tripped and all(m.pwm == (0, 0) for _, m in tripped)
    assert silent[-1][1].faults & rp.Fault.WATCHDOG
    # the motors coasted to a stop: the last states do not move
    assert silent[-1][1].positions == silent[-2][1].positions


def test_garbage_from_the_host_is_survived_by_the_rig(emu):
    with RigLink(emu.device) as link:
        link.set_mode(rp.Mode.VIRTUAL_TO_REAL)
        rng = np.random.default_rng(1)
        flags = rp.Fault.NONE
        for k in range(300):
            link.send_targets((375, 375))
            if k % 50 == 10:
                with link._lock:
                    link._port.write(rng.integers(0, 256, 40, dtype=np.uint8).tobytes())
            time.sleep(0.003)
            s = link.latest()
            if s is not None:
                flags |= s.faults
        assert flags & rp.Fault.RX_ERROR  # the rig saw and dropped corrupt frames
        np.testing.assert_allclose(link.latest().degrees, [10.0, 10.0], atol=0.5)  # and kept following


class FakeRig:
    """A TCP 'rig' that sends garbage between valid states and drops the first connection."""

    def __init__(self):
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(2)
        self.port = self.srv.getsockname()[1]
        self.stop = threading.Event()
        self.connections = 0
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def run(self):
        rng = np.random.default_rng(5)
        self.srv.settimeout(0.1)
        seq = 0
        while not self.stop.is_set():
            try:
                c, _ = self.srv.accept()
            except OSError:
                continue
            self.connections += 1
            first = self.connections == 1
            c.settimeout(0.001)
            for k in range(150 if first else 10 ** 9):
                if self.stop.is_set():
                    break
                out = rp.encode_frame(rp.JointStates(0, 0, (k, -k), (1, -1)), seq, k)
                seq += 1
                if k % 7 == 3:
                    out = rng.integers(0, 256, 25, dtype=np.uint8).tobytes() + out
                try:
                    c.sendall(out)
                    c.recv(4096)
                except socket.timeout:
                    pass
                except OSError:
                    break
                time.sleep(0.002)
            c.close()  # first connection: the "cable" is pulled after 150 frames


def test_socket_url_garbage_and_reconnect():
    rig = FakeRig()
    try:
        with RigLink(f"socket://127.0.0.1:{rig.port}") as link:
            assert wait_for(lambda: link.stats.reconnects >= 1, timeout=5.0)
            assert link.stats.disconnects >= 1
            n0 = link.stats.states_rx
            assert wait_for(lambda: link.stats.states_rx > n0 + 20, timeout=3.0)
            assert link.stats.dropped > 0  # garbage dropped, and counted
            assert link.latest().positions[0] == -link.latest().positions[1]
    finally:
        rig.stop.set()
        rig.th.join(2)
        rig.srv.close()


def test_bad_port_raises_a_link_error():
    with pytest.raises(RigLinkError):
        RigLink("/dev/does-not-exist-armtwin").open()
