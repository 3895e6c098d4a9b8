"""The Python link and the firmware core (compiled on the host) talking over a real pty,
plus the link over socket:// with garbage and disconnects."""

import socket
import threading
import time

import numpy as np
import pytest

from armtwin.controllers import rigproto as rp
from armtwin.envs.rig import LatencyWindow, LinkConfig, RigLink, RigLinkError


def wait_for(cond, timeout=2.0):
    t = time.monotonic() + timeout
    while time.monotonic() < t:
        if cond():
            return True
        time.sleep(0.005)
    return False


def wait_echo(link, seq, timeout=10.0):
    """The first state echoing ``seq`` (event-driven; None after ``timeout``, which only bounds a hang)."""
    end = time.monotonic() + timeout
    while True:
        s = link.latest()
        if s is not None and s.echo == seq & 0xFF:
            return s
        rem = end - time.monotonic()
        if rem <= 0:
            return None
        link.wait_state(s.t if s is not None else -1.0, rem)


def test_hello_and_mode_are_answered_by_the_firmware_core(emu):
    with RigLink(emu.device) as link:
        h = link.request_hello(timeout=2.0)
        assert h == rp.Hello(role=1, n_motors=2, control_hz=1000, pulses_per_deg_milli=37500, firmware=0x0201,
                             boot_id=h.boot_id)
        assert link.boot_id == h.boot_id
        link.set_mode(rp.Mode.VIRTUAL_TO_REAL, 250, 0)
        assert wait_for(lambda: link.mode_ack is not None)
        assert link.mode_ack == rp.ModeMsg(rp.Mode.VIRTUAL_TO_REAL, 250, 0)


def test_timed_targets_are_stamped_on_the_rigs_clock_and_held_until_their_time(emu):
    """set_mode(timed=True) against firmware 2.1: once the rig's clock is known the MODE carries
    TIMED and targets are stamped on the rig's clock, target_lead_s after their sample; a target
    stamped 40 ms ahead is held — the motor does not move for it — and applied at its time; none was
    late (the emulator counts them)."""
    with RigLink(emu.device) as link:
        assert link.request_hello(timeout=5.0) is not None
        assert link.wait_clock(5.0)
        link.set_mode(rp.Mode.VIRTUAL_TO_REAL, timed=True)
        assert wait_for(lambda: link.mode_ack is not None, timeout=10.0)
        assert link.timed and link.mode_ack.flags & rp.ModeMsg.TIMED
        # the clocks' offset from 0.3 s of states: the fastest one's arrival, less its wire time
        states, end = [], time.monotonic() + 0.3
        while time.monotonic() < end:
            s = link.wait_state(link.latest().t, 0.05)
            if s is not None:
                states.append(s)
        offset = min(s.t - link.clock.wire_s - s.t_us * 1e-6 for s in states if s.t_us > states[0].t_us)
        while True:                                             # (a HELLO on the wire skips a target)
            now = time.monotonic()
            if link.send_targets((0, 0), stamp=now) is not None:
                break
            time.sleep(0.003)
        # the stamp: the rig's clock at the sample + the lead (within the host's least read latency)
        expect = (now - offset + link.config.target_lead_s) * 1e6
        assert abs(((link.last_target_stamp_us - expect + 2 ** 31) % 2 ** 32) - 2 ** 31) < 500
        time.sleep(0.05)
        at = link.clock.rig_us(time.monotonic()) + 40_000          # 40 ms ahead on the rig's clock
        t_sent = time.monotonic()
        held = []
        while time.monotonic() - t_sent < 0.12:                   # the same target again and again: a
            if link.clock.rig_us(time.monotonic()) < at - 3000:       # state answers each (from 3 ms before
                link.send(rp.JointTargets((int(30 * 37.5), 0)), t_us=at)  # its time on, stamped as usual)
            else:
                link.send_targets((int(30 * 37.5), 0))
            s = link.wait_state(link.latest().t, 0.05)
            if s is not None:
                held.append((s.t_us - at, s.pwm[0]))
        held = np.array([h for h in held if abs(h[0]) < 2 ** 31])
        before, after = held[held[:, 0] < -3000], held[held[:, 0] > 3000]  # clear of the host's error
        assert len(before) > 5 and len(after) > 5
        assert np.all(before[:, 1] == 0)                         # held: the motor holds still
        assert np.abs(after[:, 1]).max() > 50                    # applied: it drives toward 30°
    emu.stop()
    assert emu.stats.get("late_targets") == 0


def test_a_rig_without_timed_targets_gets_untimed_ones():
    """Firmware 2.0 (the fake rig) does not know TIMED: set_mode(timed=True) sends the mode without
    it, and targets carry the host's time."""
    import serial
    link = RigLink("loop://")
    link._port = serial.serial_for_url("loop://", timeout=0.5)
    try:
        link.hello = rp.Hello(role=1, firmware=0x0200)
        for k in range(10):
            link.clock.observe(1.0 + 0.002 * k, 2000 * k)
        assert link.clock.ready
        link.set_mode(rp.Mode.VIRTUAL_TO_REAL, timed=True)
        assert not link.timed
        link.hello = rp.Hello(role=1, firmware=0x0201)
        link.set_mode(rp.Mode.VIRTUAL_TO_REAL, timed=True)
        assert link.timed
        link.set_mode(rp.Mode.REAL_TO_VIRTUAL, timed=True)       # only a mode that follows targets is timed
        assert not link.timed
    finally:
        link._port.close()


def test_targets_drive_the_emulated_motors_and_states_echo_commands(emu):
    # Lock-step and count-based: each target waits for the state that echoes it, so every
    # target sent must close exactly one latency measurement, however slow the machine is.
    # Heartbeats and HELLOs are switched off so that the targets are the only frames in flight.
    with RigLink(emu.device, LinkConfig(heartbeat_s=60.0, hello_s=60.0)) as link:
        link.set_mode(rp.Mode.VIRTUAL_TO_REAL)
        assert wait_for(lambda: link.mode_ack is not None, timeout=10.0)
        target = (int(20 * 37.5), int(-10 * 37.5))
        assert wait_echo(link, link.send_targets(target)) is not None  # retires the MODE frame's measurement
        n_lat0, n_tx0 = link.stats.latencies_ms.count, link.stats.frames_tx
        echoed = []
        deadline = time.monotonic() + 60.0  # bounds a hang only
        while len(echoed) < 300 and time.monotonic() < deadline:
            seq = link.send_targets(target)
            assert seq is not None  # lock-step: the wire is always free again
            s = wait_echo(link, seq)
            assert s is not None, f"no state echoed target seq {seq}"
            echoed.append(s)
        assert len(echoed) == 300
        sent = link.stats.frames_tx - n_tx0
        assert sent == 300 and link.stats.targets_skipped == 0
        assert link.stats.latencies_ms.count - n_lat0 == sent  # one measurement per command, none missed
        lat = link.stats.latencies_ms.values()[-sent:]  # (a later keep-alive state may repeat an echo:
        assert np.all(np.isfinite(lat)) and np.all(lat > 0)  # only the first one closes a measurement)
        s = echoed[-1]
        assert not (s.faults & rp.Fault.POWER)
        # after 300 lock-step targets the motors hold the target (no WATCHDOG: frames kept coming
        # unless the machine stalled > 100 ms — then the last target restarted the motors)
        settle_end = time.monotonic() + 30.0
        while time.monotonic() < settle_end:
            seq = link.send_targets(target)
            s = (wait_echo(link, seq, 2.0) if seq is not None else None) or link.latest()
            if not s.faults and np.allclose(s.degrees, [20.0, -10.0], atol=0.5):
                break
        np.testing.assert_allclose(s.degrees, [20.0, -10.0], atol=0.5)
        assert not (s.faults & (rp.Fault.WATCHDOG | rp.Fault.POWER))
        assert link.stats.lost == 0 and link.stats.dropped == 0


def test_latency_window_is_bounded_and_its_percentiles_cover_the_newest():
    w = LatencyWindow(capacity=1000)
    rng = np.random.default_rng(3)
    old = rng.uniform(50, 60, 5000)  # these fall out of the ring
    new = rng.uniform(1, 5, 1000)
    for v in np.r_[old, new]:
        w.append(float(v))
    assert len(w) == 1000 and w.count == 6000 and w.capacity == 1000
    np.testing.assert_array_equal(w.values(), new)  # oldest first
    assert w.percentile(50) == pytest.approx(np.percentile(new, 50))
    assert w.percentile(99) == pytest.approx(np.percentile(new, 99))
    assert w.max_ms == pytest.approx(old.max()) and w.min_ms == pytest.approx(new.min())
    assert w.mean_ms == pytest.approx(np.r_[old, new].mean())
    assert w._buf.nbytes == 8000  # constant memory
    empty = LatencyWindow(10)
    assert np.isnan(empty.percentile(50)) and len(empty) == 0 and list(empty) == []
    with pytest.raises(ValueError):
        LatencyWindow(0)


def test_watchdog_stops_the_motors_when_the_host_goes_silent(emu):
    import serial
    port = serial.serial_for_url(emu.device, timeout=0.002)
    dec = rp.StreamDecoder()
    port.write(b"\x00" + rp.encode_frame(rp.ModeMsg(rp.Mode.VIRTUAL_TO_REAL), 0, 0))
    states = []
    k = 0
    deadline = time.monotonic() + 30.0  # bounds a hang only
    # targets far away until the motors run at full speed (and at least 40 targets)
    while time.monotonic() < deadline:
        k += 1
        port.write(rp.encode_frame(rp.JointTargets((30000, -30000)), k, 0))
        new = [f.msg for f in dec.feed(port.read(512)) if isinstance(f.msg, rp.JointStates)]
        states += new
        if k >= 40 and new and abs(new[-1].pwm[0]) == 255 and not new[-1].faults & rp.Fault.WATCHDOG:
            break
        time.sleep(0.005)
    assert states and abs(states[-1].pwm[0]) == 255 and not states[-1].faults & rp.Fault.WATCHDOG
    # then silence — no frame at all — until the watchdog tripped and the motors stood still
    # for 5 states in a row (each state is >= 20 ms apart on the rig's clock: the keep-alive)
    silent = []
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        silent += [f.msg for f in dec.feed(port.read(512)) if isinstance(f.msg, rp.JointStates)]
        tail = silent[-5:]
        if len(tail) == 5 and all(m.faults & rp.Fault.WATCHDOG for m in tail) and \
                len({m.positions for m in tail}) == 1:
            break
    port.close()
    tripped = [m for m in silent if m.faults & rp.Fault.WATCHDOG]
    assert tripped and all(m.pwm == (0, 0) for m in tripped)
    assert silent[-1].faults & rp.Fault.WATCHDOG
    assert len({m.positions for m in silent[-5:]}) == 1  # the motors coasted to a stop
    assert silent[0].positions != silent[-1].positions  # (they were running when the host went silent)


def test_after_a_watchdog_stop_only_a_new_mode_moves_the_motors_again(emu):
    """The watchdog is latched: a host that comes back with targets or heartbeats alone finds the
    motors stopped (and WATCHDOG reported) until it sends MODE again — a stale target is never
    driven to by a stray frame."""
    import serial
    port = serial.serial_for_url(emu.device, timeout=0.002)
    dec = rp.StreamDecoder()
    seq = iter(range(1, 100000))

    def send(msg):
        port.write(rp.encode_frame(msg, next(seq), 0))

    def states_for(seconds, msg=None):
        out, t_end = [], time.monotonic() + seconds
        while time.monotonic() < t_end:
            if msg is not None:
                send(msg)
            out += [f.msg for f in dec.feed(port.read(512)) if isinstance(f.msg, rp.JointStates)]
            time.sleep(0.005)
        return out

    port.write(b"\x00")
    send(rp.ModeMsg(rp.Mode.VIRTUAL_TO_REAL))
    far = rp.JointTargets((30000, -30000))
    assert any(abs(m.pwm[0]) == 255 for m in states_for(0.3, far))  # driving
    stopped = states_for(0.4)  # silence: the watchdog trips
    assert stopped and stopped[-1].faults & rp.Fault.WATCHDOG and stopped[-1].pwm == (0, 0)
    back = states_for(0.3, far)  # targets again, no MODE
    assert back and all(m.pwm == (0, 0) and m.faults & rp.Fault.WATCHDOG for m in back[3:])
    send(rp.ModeMsg(rp.Mode.VIRTUAL_TO_REAL))
    resumed = states_for(0.3, far)
    port.close()
    assert any(abs(m.pwm[0]) == 255 and not m.faults & rp.Fault.WATCHDOG for m in resumed)


def test_garbage_from_the_host_is_survived_by_the_rig(emu):
    with RigLink(emu.device) as link:
        link.set_mode(rp.Mode.VIRTUAL_TO_REAL)
        rng = np.random.default_rng(1)
        for k in range(300):
            link.send_targets((375, 375))
            if k % 50 == 10:
                with link._lock:
                    link._port.write(rng.integers(0, 256, 40, dtype=np.uint8).tobytes())
            time.sleep(0.003)
        # every state counts (not only the ones this loop happened to look at)
        assert wait_for(lambda: link.stats.faults_seen & rp.Fault.RX_ERROR, timeout=10.0)  # the rig dropped corrupt frames
        deadline = time.monotonic() + 30.0  # and kept following (bounds a hang only)
        while time.monotonic() < deadline:
            seq = link.send_targets((375, 375))
            s = (wait_echo(link, seq, 2.0) if seq is not None else None) or link.latest()
            if not (s.faults & ~rp.Fault.RX_ERROR) and np.allclose(s.degrees, [10.0, 10.0], atol=0.5):
                break
            time.sleep(0.003)
        np.testing.assert_allclose(s.degrees, [10.0, 10.0], atol=0.5)
        assert link.stats.lost == 0


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


def test_emulator_link_never_replaces_a_regular_file(exe, tmp_path):
    from armtwin.envs.rig import Emulator
    keep = tmp_path / "twin.csv"
    keep.write_text("data")
    with pytest.raises(RigLinkError, match="exists and is not a symbolic link; refusing to replace it"):
        Emulator(exe=exe, link=str(keep))
    assert keep.read_text() == "data"
    link = tmp_path / "rig"
    emu = Emulator(exe=exe, link=str(link))
    try:
        assert link.is_symlink() and emu.device == str(link)
    finally:
        emu.stop()
    assert not link.exists() and not link.is_symlink()  # its own link is removed at exit


def test_targets_carry_the_time_they_belong_to():
    """send_targets(stamp=t): the frame's time field says t (the sample the targets were computed
    for), not the moment of the write, so a delay between the sample and the write does not bend
    the velocity the firmware takes from two frames' times; without a stamp, the write's time."""
    import serial
    link = RigLink("loop://")
    link._port = serial.serial_for_url("loop://", timeout=0.5)  # a loop-back port: what is written is read back
    try:
        t_sample = time.monotonic() - 0.0123                  # a sample taken 12.3 ms before the write
        link.send_targets((10, -20), stamp=t_sample)
        time.sleep(0.003)                                     # the first frame's wire time (a busy wire skips targets)
        before = time.monotonic()
        link.send_targets((11, -21))
        raw = link._port.read(200)
    finally:
        link._port.close()
    frames = [rp.decode_frame(f) for f in raw.split(b"\x00") if f]
    assert [f.msg.targets for f in frames] == [(10, -20), (11, -21)]
    assert frames[0].t_us == int((t_sample - link._t0) * 1e6) & 0xFFFFFFFF
    assert frames[1].t_us >= int((before - link._t0) * 1e6) & 0xFFFFFFFF
