"""``--live`` (issue 22, stretch): a Foxglove WebSocket server streaming the log's topics. A client
speaking the Foxglove WebSocket protocol (``foxglove.sdk.v1``) connects, sees every topic
advertised with its ROS 2 schema, subscribes, and receives joint states it can decode."""

from __future__ import annotations

import json
import struct
import threading
import time

import numpy as np
import pytest

pytest.importorskip("foxglove")
ws_client = pytest.importorskip("websockets.sync.client")
ws_exceptions = pytest.importorskip("websockets.exceptions")

from mcap.records import Schema  # noqa: E402
from mcap_ros2.decoder import DecoderFactory  # noqa: E402

from armtwin.controllers import rigproto as rp  # noqa: E402
from armtwin.envs.rig import SyncSample  # noqa: E402
from armtwin.envs.telemetry.live import LiveServer  # noqa: E402
from armtwin.envs.telemetry.topics import TWIN_TOPICS  # noqa: E402
from armtwin.envs.telemetry.twinlog import TwinMcapLog  # noqa: E402
from armtwin.robots import get  # noqa: E402
from armtwin.scripts.cli import main  # noqa: E402


class FoxgloveClient:
    """The client side of the Foxglove WebSocket protocol, as much as a viewer needs."""

    def __init__(self, url: str) -> None:
        # the SDK speaks "foxglove.sdk.v1" (the successor of "foxglove.websocket.v1"; same ops)
        self.ws = ws_client.connect(url, subprotocols=["foxglove.sdk.v1", "foxglove.websocket.v1"], open_timeout=10)
        self.channels: dict[str, dict] = {}
        self.info: dict = {}

    def read_advertisements(self, topics, timeout: float = 10.0) -> None:
        end = time.monotonic() + timeout
        while not set(topics) <= set(self.channels) and time.monotonic() < end:
            msg = self.ws.recv(timeout=max(0.01, end - time.monotonic()))
            if isinstance(msg, str):
                m = json.loads(msg)
                if m["op"] == "serverInfo":
                    self.info = m
                elif m["op"] == "advertise":
                    self.channels.update({c["topic"]: c for c in m["channels"]})

    def subscribe(self, topic: str, sub_id: int) -> None:
        self.ws.send(json.dumps({"op": "subscribe", "subscriptions": [{"id": sub_id, "channelId": self.channels[topic]["id"]}]}))

    def messages(self, n: int, timeout: float = 10.0) -> list[tuple[int, int, bytes]]:
        """(subscription id, timestamp ns, payload) of the next ``n`` messageData frames."""
        out, end = [], time.monotonic() + timeout
        while len(out) < n and time.monotonic() < end:
            msg = self.ws.recv(timeout=max(0.01, end - time.monotonic()))
            if isinstance(msg, bytes) and msg[0] == 0x01:        # messageData
                sub, ts = struct.unpack_from("<IQ", msg, 1)
                out.append((sub, ts, msg[13:]))
        return out

    def decoder(self, topic: str):
        c = self.channels[topic]
        schema = Schema(id=1, name=c["schemaName"], encoding=c["schemaEncoding"], data=c["schema"].encode())
        return DecoderFactory().decoder_for(c["encoding"], schema)

    def close(self) -> None:
        self.ws.close()


def test_a_foxglove_client_sees_the_twin_topics_and_receives_joint_states():
    spec = get("irb120")
    live = LiveServer(TWIN_TOPICS, port=0)
    log = TwinMcapLog(None, spec, (0, 1), live=live)       # the twin log's messages, no file
    client = FoxgloveClient(live.url)
    try:
        client.read_advertisements(TWIN_TOPICS)
        assert set(client.channels) == set(TWIN_TOPICS)
        for topic, t in TWIN_TOPICS.items():
            c = client.channels[topic]
            assert (c["encoding"], c["schemaName"], c["schemaEncoding"]) == ("cdr", t.name, "ros2msg")
        client.subscribe("/joint_states", 7)
        client.subscribe("/twin/sample", 8)
        time.sleep(0.3)                                       # the server takes the subscriptions
        stop = threading.Event()

        def loop():                                           # a 500 Hz loop writing samples
            k = 0
            while not stop.is_set():
                v = np.array([0.01 * k, -0.02 * k])
                log.write(SyncSample(k, k * 0.002, v, v - 0.5, np.full(2, 0.5), 3.0, rp.Fault.NONE))
                k += 1
                time.sleep(0.002)

        th = threading.Thread(target=loop)
        th.start()
        got = client.messages(200)
        stop.set()
        th.join()
    finally:
        client.close()
        log.close()                                           # stops the server too
    assert len(got) == 200 and {sub for sub, _, _ in got} == {7, 8}
    js = [client.decoder("/joint_states")(p) for sub, _, p in got if sub == 7]
    ts = [client.decoder("/twin/sample")(p) for sub, _, p in got if sub == 8]
    assert js[0].name == ["joint_1", "joint_2"] and len(js[0].position) == 2
    stt = [t.stt for t in ts]
    assert stt == list(range(stt[0], stt[0] + len(stt)))    # every sample, in order, at the loop's rate
    for t in ts[:5]:
        assert np.allclose(t.servo_deg, np.array([0.01, -0.02]) * t.stt - 0.5)
    stamps = [ts_ for sub, ts_, _ in got if sub == 8]
    assert np.all(np.diff(stamps) > 0)


def test_cli_run_live_serves_while_it_runs(tmp_path, capsys):
    prog = tmp_path / "p.ngc"
    prog.write_text("G21 G90\nG0 X0 Y0 Z10\nG1 Z0 F600\nG1 X20 F1200\nG0 Z10\nM30\n")
    from armtwin.envs.telemetry.broker import free_port
    port = free_port()
    rc = main(["run", str(prog), "--robot", "irb120", "--live", "--live-port", str(port), "--log", str(tmp_path / "r.csv")])
    err = capsys.readouterr().err
    assert rc == 0 and f"ws://127.0.0.1:{port}" in err
    # the server is gone with the run: the port is free again
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def _connect(p, port: int) -> "FoxgloveClient":
    """A client of the live server of process ``p`` on ``port``, once it listens (up to 60 s; the
    process must not end meanwhile)."""
    end = time.monotonic() + 60
    while True:
        try:
            return FoxgloveClient(f"ws://127.0.0.1:{port}")
        except (OSError, ws_exceptions.WebSocketException):   # not listening yet
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < end, f"nothing listens on {port} after 60 s"
            time.sleep(0.1)


def test_cli_sync_live_streams_joint_states_at_the_loop_rate(emu, tmp_path):
    import subprocess
    import sys
    from armtwin.envs.telemetry.broker import free_port
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "armtwin", "sync", "--port", emu.device, "--robot", "irb120",
                          "--samples", "2500", "--log", str(tmp_path / "t.csv"), "--live", "--live-port", str(port)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = None
    try:
        client = _connect(p, port)
        client.read_advertisements(TWIN_TOPICS)
        assert set(client.channels) == set(TWIN_TOPICS)
        client.subscribe("/joint_states", 1)
        got = client.messages(400)
    finally:
        if client is not None:
            client.close()
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert len(got) == 400
    stamps = np.array([ts for _, ts, _ in got]) / 1e9
    rate = (len(stamps) - 1) / (stamps[-1] - stamps[0])
    assert 400 < rate < 600, rate                            # the sync's 500 Hz (a loaded host skips ticks)
    js = client.decoder("/joint_states")(got[-1][2])
    assert js.name == ["joint_1", "joint_2"] and all(np.isfinite(js.position))


# ----- armtwin ui --live: the pendant streams while the user jogs --------------------------------

def test_the_pendant_streams_joint_states_that_follow_a_jog():
    from armtwin.envs.pendant import PendantCore
    from armtwin.envs.telemetry.topics import PENDANT_TOPICS
    spec = get("irb120")
    core = PendantCore(spec, "articulation")       # a dynamic model: the joints follow the jog over several ticks
    live = LiveServer(PENDANT_TOPICS, port=0)
    core.attach_live(live)
    client = FoxgloveClient(live.url)
    try:
        client.read_advertisements(PENDANT_TOPICS)
        assert set(client.channels) == set(PENDANT_TOPICS)
        client.subscribe("/joint_states", 1)
        client.subscribe("/joint_states/commanded", 2)
        time.sleep(0.3)                                       # the server takes the subscriptions
        seen, targets = [], []
        for k in range(60):
            if k == 10:
                r = core.jog_joint(1, +1, 10.0)               # joint 2 by +10 deg, as the page's jog button does
                assert r.applied, r.message
            core.tick(8)                                      # the pendant's loop: 8 steps of 1/240 s per update
            seen.append(core.joints())
            targets.append(core.target_joints())
        got = client.messages(2 * len(seen))
    finally:
        client.close()
        core.close()                                          # stops the server too
    js = [client.decoder("/joint_states")(p) for sub, _, p in got if sub == 1]
    cmd = [client.decoder("/joint_states/commanded")(p) for sub, _, p in got if sub == 2]
    assert len(js) == len(cmd) == len(seen)                   # one message per topic and update, none lost
    assert js[0].name == list(spec.joint_names)
    got_q = np.array([m.position for m in js])
    assert np.array_equal(got_q, np.array(seen))              # exactly the pendant's joints, update by update
    assert np.array_equal(np.array([m.position for m in cmd]), np.array(targets))
    j2 = np.degrees(got_q[:, 1])
    assert np.ptp(j2[:10]) < 1e-6                             # still before the jog
    assert j2[10] - j2[9] > 0.5                               # moving at the first update after it ...
    assert abs(j2[-1] - j2[9] - 10.0) < 0.2                   # ... and there at the end
    stamps = [ts for sub, ts, _ in got if sub == 1]
    assert np.allclose(np.diff(stamps) / 1e9, 8 / 240, atol=1e-6)   # stamped with the world's time


def test_cli_ui_live_serves_the_pendant_topics(tmp_path):
    import signal
    import subprocess
    import sys
    from armtwin.envs.telemetry.broker import free_port
    from armtwin.envs.telemetry.topics import PENDANT_TOPICS
    pytest.importorskip("viser")
    port, live_port = free_port(), free_port()
    p = subprocess.Popen([sys.executable, "-m", "armtwin", "ui", "irb120", "--port", str(port), "--live",
                          "--live-port", str(live_port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = None
    try:
        client = _connect(p, live_port)
        client.read_advertisements(PENDANT_TOPICS)
        assert set(client.channels) == set(PENDANT_TOPICS)
        client.subscribe("/joint_states", 1)
        got = client.messages(10)
    finally:
        if client is not None:
            client.close()
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert f"ws://127.0.0.1:{live_port}" in err and len(got) == 10
    js = client.decoder("/joint_states")(got[-1][2])
    assert js.name == [f"joint_{i}" for i in range(1, 7)] and np.allclose(js.position, get("irb120").home, atol=1e-3)


def test_cli_ui_refuses_a_bad_live_port(capsys):
    assert main(["ui", "irb120", "--live", "--live-port", "70000"]) == 2
    err = capsys.readouterr().err
    assert "--live-port 70000" in err and err.count("\n") == 1
