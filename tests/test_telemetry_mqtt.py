"""The remote store (issue 22.2): records to a real mosquitto with QoS 1 through a bounded
queue — every record arrives once and in order across a broker restart, a full queue drops the
oldest and says which, the twin publisher down-samples and keeps short faults, and the CLI
checks its URL."""

from __future__ import annotations

import json
import math
import threading
import time

import numpy as np
import pytest

pytest.importorskip("paho.mqtt")

from armtwin.controllers import rigproto as rp  # noqa: E402
from armtwin.envs.rig import SyncSample  # noqa: E402
from armtwin.envs.telemetry.mqtt import MqttStore, MqttTarget, parse_mqtt_url  # noqa: E402
from armtwin.envs.telemetry.records import TwinPublisher  # noqa: E402
from armtwin.scripts.cli import main  # noqa: E402

from armtwin.envs.telemetry.broker import Broker, have_mosquitto  # noqa: E402

pytestmark = pytest.mark.skipif(not have_mosquitto(), reason="Debian's mosquitto is not installed (apt-get install mosquitto)")


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path).start()
    yield b
    b.stop()


class Subscriber:
    """A persistent-session QoS 1 subscriber that collects every payload (reconnects by itself)."""

    def __init__(self, port: int, topic: str) -> None:
        import paho.mqtt.client as mqtt
        self.got: list[dict] = []
        self.ready = threading.Event()
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="armtwin-test-sub", clean_session=False)
        c.reconnect_delay_set(1, 1)
        c.on_connect = lambda cl, u, f, rc, p: (cl.subscribe(topic, qos=1), self.ready.set())
        c.on_message = lambda cl, u, msg: self.got.append(json.loads(msg.payload))
        c.connect("127.0.0.1", port)
        c.loop_start()
        self.client = c
        assert self.ready.wait(10)
        time.sleep(0.2)  # the SUBACK

    def wait_for(self, n: int, timeout: float) -> None:
        end = time.monotonic() + timeout
        while len(self.got) < n and time.monotonic() < end:
            time.sleep(0.05)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def test_every_record_arrives_once_in_order_across_a_broker_restart(broker):
    sub = Subscriber(broker.port, "armtwin/twin")
    store = MqttStore(MqttTarget("127.0.0.1", broker.port, "armtwin/twin"), reconnect_s=(1, 1))
    try:
        n = 0

        def put_for(seconds: float) -> None:
            nonlocal n
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                store.put({"i": n})
                n += 1
                time.sleep(0.01)               # 100 Hz: records are in flight when the broker goes

        put_for(0.5)
        broker.stop()                          # the outage: records queue up locally
        put_for(1.5)
        assert not store.connected and store.pending > 0
        broker.start()
        put_for(0.5)
        assert store.flush(20), f"{store.pending} records never acknowledged"
        sub.wait_for(n, 20)
    finally:
        rep = store.close(1.0)
        sub.close()
    seqs = [m["seq"] for m in sub.got]
    assert seqs == list(range(n)), (len(seqs), n)   # each once, in order
    assert [m["i"] for m in sub.got] == list(range(n))
    assert rep.acked == rep.queued == n and rep.dropped == 0 and rep.unsent == 0 and rep.reconnects >= 1


def test_a_full_queue_drops_the_oldest_and_says_which(tmp_path):
    b = Broker(tmp_path)                        # never started: the broker is down the whole time
    store = MqttStore(MqttTarget("127.0.0.1", b.port, "t"), max_queue=5, reconnect_s=(1, 1))
    for i in range(12):
        store.put({"i": i})
    rep = store.close(0.2)
    assert rep.queued == 12 and rep.dropped == 7 and rep.dropped_ranges == [(0, 6)] and rep.unsent == 5
    assert rep.acked == 0 and "7 dropped" in rep.describe() and "dropped seq 0-6" in rep.describe()


def _sample(k, dt=0.002, faults=rp.Fault.NONE):
    v = np.array([0.1 * k, -0.05 * k])
    return SyncSample(k, k * dt, v, v - 0.5 if k % 7 else np.array([math.nan, 1.0]), np.array([0.5, 0.25]),
                      3.0 if k % 100 else math.nan, faults)


def test_the_twin_publisher_sends_one_record_per_period_with_every_fault_since_the_last(broker):
    sub = Subscriber(broker.port, "rig/twin")
    pub = TwinPublisher(MqttStore(MqttTarget("127.0.0.1", broker.port, "rig/twin")), (0, 1), hz=10)
    for k in range(1000):                       # 2 s at 500 Hz
        pub.write(_sample(k, faults=rp.Fault.POWER if k == 73 else rp.Fault.NONE))
    rep = pub.close(10)
    sub.wait_for(20, 10)
    sub.close()
    assert pub.records == rep.acked == 20 and [m["stt"] for m in sub.got] == list(range(0, 1000, 50))
    first, third = sub.got[0], sub.got[2]
    assert first["joints"] == ["j1", "j2"] and first["time"] == 0.0 and first["faults"] == "OK"
    assert sub.got[1]["faults"] == "OK" and third["faults"] == "POWER"  # sample 73: after record 50, in 100's
    assert [m["faults"] for m in sub.got[3:]] == ["OK"] * 17
    assert third["virtual_deg"] == [10.0, -5.0] and third["latency_ms"] is None   # NaN as null
    assert sub.got[1]["latency_ms"] == 3.0 and isinstance(third["stamp"], float)


@pytest.mark.parametrize("url, why", [
    ("http://h/t", "expected mqtt://"), ("mqtt:///t", "no broker host"), ("mqtt://h:1883", "no topic"),
    ("mqtt://h:99999/t", "port"), ("mqtt://h/a/#", "wildcards")])
def test_bad_urls_are_refused(url, why):
    with pytest.raises(ValueError, match=why):
        parse_mqtt_url(url)


def test_url_defaults():
    assert parse_mqtt_url("mqtt://broker.local/plant/cell%201/twin") == MqttTarget("broker.local", 1883, "plant/cell 1/twin")


def test_cli_sync_publishes_to_the_store(emu, broker, tmp_path, capsys):
    sub = Subscriber(broker.port, "rig/twin")
    rc = main(["sync", "--port", emu.device, "--robot", "irb120", "--samples", "1000", "--log", str(tmp_path / "t.csv"),
               "--publish", f"mqtt://127.0.0.1:{broker.port}/rig/twin", "--publish-hz", "20"])
    out, err = capsys.readouterr()
    # 20 Hz of the sync's own clock: 1000 samples take 2 s at 500 Hz, longer when the machine is loaded.
    # A record is the first logged sample at or after each 50 ms tick; a tick the loop stalled
    # through (no sample in it) has none, so the records expected are found in the log itself.
    from armtwin.envs.rig import read_twin_log
    logged = np.asarray(read_twin_log(tmp_path / "t.csv")["Time"], dtype=float)
    ticks = np.floor(logged * 20 + 1e-9)
    expected = logged[np.r_[True, ticks[1:] > ticks[:-1]]]        # the first sample of each tick that has one
    n = len(expected)
    assert n >= 40 and n >= 0.9 * (ticks[-1] + 1), (n, ticks[-1])  # stalls are the exception
    sub.wait_for(n, 10)
    sub.close()
    assert rc == 0, err
    assert "mqtt://127.0.0.1" in err and f"{n} of {n} records acknowledged, 0 dropped" in err
    assert [m["seq"] for m in sub.got] == list(range(n))
    times = np.array([m["time"] for m in sub.got])
    np.testing.assert_allclose(times, expected, atol=1e-6)        # each the log's own sample


@pytest.mark.parametrize("argv, msg", [(["--publish", "http://x/t"], "--publish http://x/t: "),
                                       (["--publish", "mqtt://h/t", "--publish-hz", "0"], "--publish-hz 0")])
def test_cli_sync_refuses_a_bad_store(argv, msg, tmp_path, capsys):
    assert main(["sync", "--port", "/dev/nonexistent-rig", "--robot", "irb120", "--seconds", "1",
                 "--log", str(tmp_path / "x.csv"), *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1


def test_cli_run_publishes_down_sampled_run_records(broker, tmp_path, capsys):
    prog = tmp_path / "p.ngc"
    prog.write_text("G21 G90\nG0 X0 Y0 Z10\nG1 Z0 F600\nG1 X20 F1200\nG0 Z10\nM30\n")
    sub = Subscriber(broker.port, "cell/run")
    rc = main(["run", str(prog), "--robot", "irb120", "--json", "--publish", f"mqtt://127.0.0.1:{broker.port}/cell/run"])
    out, err = capsys.readouterr()
    res = json.loads(out)
    n = math.floor(res["program_time"] * 10 + 1e-6) + 1          # 10 Hz of run time, from t = 0
    sub.wait_for(n, 10)
    sub.close()
    assert rc == 0 and f"{n} of {n} records acknowledged, 0 dropped" in err
    assert [m["seq"] for m in sub.got] == list(range(n))
    assert np.allclose([m["time"] for m in sub.got], np.arange(n) * 0.1, atol=0.0041)   # the control period
    assert sub.got[0]["joints"] == [f"j{i}" for i in range(1, 7)] and max(abs(e) for e in sub.got[-1]["error_deg"]) < 1e-6
