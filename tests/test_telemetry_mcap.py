"""MCAP logs of ROS 2 messages (issue 22.1): armtwin's CDR encoders against mcap-ros2-support's
decoder, the TF tree against forward kinematics, ``run --log x.mcap`` against the CSV log of the
same run, the twin log against the CSV twin log, a log cut short by a kill, and signals."""

from __future__ import annotations

import csv
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mcap_ros2")

from mcap.reader import make_reader  # noqa: E402
from mcap_ros2._dynamic import generate_dynamic  # noqa: E402
from mcap_ros2.decoder import DecoderFactory  # noqa: E402

from armtwin.controllers import rigproto as rp  # noqa: E402
from armtwin.controllers.kinematics import chain_of, fk  # noqa: E402
from armtwin.controllers.transforms import quat_to_matrix, transform  # noqa: E402
from armtwin.envs.rig import SyncSample, TwinLog, TwinLogError, read_twin_log  # noqa: E402
from armtwin.envs.telemetry import rosmsg as m  # noqa: E402
from armtwin.envs.telemetry.tf import RobotFrames  # noqa: E402
from armtwin.envs.telemetry.topics import RUN_TOPICS, TWIN_TOPICS  # noqa: E402
from armtwin.envs.telemetry.twinlog import TwinMcapLog  # noqa: E402
from armtwin.robots import get  # noqa: E402
from armtwin.scripts.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
IRB = get("irb120")


def _decode(mtype: m.MessageType, data: bytes):
    return generate_dynamic(mtype.name, mtype.definition)[mtype.name](data)


def _messages(path, topics=None):
    with open(path, "rb") as f:
        r = make_reader(f, decoder_factories=[DecoderFactory()])
        return [(c.topic, msg.log_time, d) for _s, c, msg, d in r.iter_decoded_messages(topics, log_time_order=False)]


# ----- the encoders -----------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(5))
def test_every_encoder_decodes_with_the_librarys_decoder(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 8))
    names = [f"joint_{i}" * int(rng.integers(1, 4)) for i in range(n)]     # odd lengths: alignment
    pos, vel, eff = rng.normal(size=(3, n))
    stamp = int(rng.integers(0, 2**31 * 10**9))  # int32 seconds, as builtin_interfaces/Time
    js = _decode(m.JOINT_STATE, m.encode_joint_state(stamp, names, pos, vel, eff[: n // 2], frame="w" * (seed + 1)))
    assert js.name == names and js.position == pos.tolist() and js.velocity == vel.tolist()
    assert js.effort == eff[: n // 2].tolist() and js.header.frame_id == "w" * (seed + 1)
    assert js.header.stamp.sec * 10**9 + js.header.stamp.nanosec == stamp
    edges = [m.Transform(f"p{i}" * (i + 1), f"c{i}", tuple(rng.normal(size=3)), tuple(rng.normal(size=4)))
             for i in range(n)]
    tf = _decode(m.TF_MESSAGE, m.encode_tf(stamp, edges))
    assert [(t.header.frame_id, t.child_frame_id) for t in tf.transforms] == [(e.parent, e.child) for e in edges]
    for t, e in zip(tf.transforms, edges):
        tr, ro = t.transform.translation, t.transform.rotation
        assert (tr.x, tr.y, tr.z) == e.translation and (ro.x, ro.y, ro.z, ro.w) == e.rotation
    p, q = rng.normal(size=3), rng.normal(size=4)
    ps = _decode(m.POSE_STAMPED, m.encode_pose_stamped(stamp, "base", p, q))
    assert [ps.pose.position.x, ps.pose.position.y, ps.pose.position.z] == p.tolist()
    assert [ps.pose.orientation.x, ps.pose.orientation.y, ps.pose.orientation.z, ps.pose.orientation.w] == q.tolist()
    text = "G1 X40 ; ünïcode " * seed
    assert _decode(m.STRING, m.encode_string(text)).data == text
    lg = _decode(m.LOG, m.encode_log(stamp, m.LogLevel.ERROR, "armtwin", text, "p.ngc", "f", 12))
    assert (lg.level, lg.name, lg.msg, lg.file, lg.function, lg.line) == (40, "armtwin", text, "p.ngc", "f", 12)
    k = max(n, 1)
    v, s = rng.normal(size=(2, k)) * 100
    s[0] = math.nan
    ts = _decode(m.TWIN_SAMPLE, m.encode_twin_sample(stamp, 2**40 + seed, 1.25, [f"j{i}" for i in range(k)], v, s, v - s,
                                                     math.nan, 0x21, "POWER|LINK"))
    assert ts.stt == 2**40 + seed and ts.time == 1.25 and ts.virtual_deg == v.tolist() and math.isnan(ts.servo_deg[0])
    assert math.isnan(ts.latency_ms) and ts.faults == 0x21 and ts.fault_names == "POWER|LINK"


@pytest.mark.parametrize("robot", ["irb120", "aubo_i5", "scara"])
def test_the_tf_tree_composes_to_the_forward_kinematics(robot):
    spec = get(robot)
    frames = RobotFrames(spec)
    rng = np.random.default_rng(7)
    for _ in range(5):
        q = rng.uniform(spec.lower, spec.upper)
        edges = {e.child: e for e in frames.all(q)}
        T, link = np.eye(4), "tool0"             # walk up from the flange to the reporting frame "base"
        while link != frames.root:
            e = edges[link]
            T = transform(quat_to_matrix(e.rotation), e.translation) @ T
            link = e.parent
        rep = edges["base"]
        T = np.linalg.inv(transform(quat_to_matrix(rep.rotation), rep.translation)) @ T
        assert np.allclose(T, fk(chain_of(spec), q), atol=1e-12)
        pos, quat = frames.flange(q)
        assert np.allclose(pos, T[:3, 3], atol=1e-12) and np.allclose(quat_to_matrix(quat), T[:3, :3], atol=1e-12)


# ----- armtwin run --log run.mcap ---------------------------------------------------------------

PROGRAM = "G21 G90\nG0 X0 Y0 Z10\nG1 Z0 F600\nG1 X20 F1200\nG4 P0.2\nG1 Y20\nG0 Z10\nM30\n"


def test_run_log_mcap_holds_the_runs_joints_tf_pose_and_lines(tmp_path, capsys):
    prog = tmp_path / "p.ngc"
    prog.write_text(PROGRAM)
    out_csv, out_mcap = tmp_path / "run.csv", tmp_path / "run.mcap"
    for log in (out_csv, out_mcap):
        assert main(["run", str(prog), "--robot", "irb120", "--mode", "articulation", "--log", str(log)]) == 0
    out = capsys.readouterr().out
    assert str(out_mcap) in out
    rows = list(csv.DictReader(open(out_csv, newline="")))
    with open(out_mcap, "rb") as f:
        r = make_reader(f)
        summary = r.get_summary()
        counts = {c.topic: summary.statistics.channel_message_counts[i] for i, c in summary.channels.items()}
        (att,) = list(r.iter_attachments())
        (meta,) = list(r.iter_metadata())
        assert r.get_header().profile == "ros2"
    assert {c.topic: c.message_encoding for c in summary.channels.values()} == dict.fromkeys(RUN_TOPICS, "cdr")
    assert {summary.schemas[c.schema_id].name for c in summary.channels.values()} == {t.name for t in RUN_TOPICS.values()}
    n = len(rows)
    assert counts["/path/planned"] == 1
    for topic in ("/joint_states", "/joint_states/commanded", "/tf", "/tool_pose", "/tool_pose/commanded"):
        assert counts[topic] == n, topic        # one message per control period: nothing dropped
    assert att.name == "irb120.urdf" and att.data == IRB.urdf_path.read_bytes()
    assert meta.metadata["robot"] == "irb120" and meta.metadata["program"] == "p.ngc"
    msgs = _messages(out_mcap)
    js = [d for t, _, d in msgs if t == "/joint_states"]
    cmd = [d for t, _, d in msgs if t == "/joint_states/commanded"]
    stamps = np.array([ns for t, ns, _ in msgs if t == "/joint_states"])
    t = np.array([float(r["time_s"]) for r in rows])
    assert np.abs((stamps - stamps[0]) / 1e9 - (t - t[0])).max() < 1e-4 + 1e-9   # run time; the CSV has 4 decimals
    got = np.degrees([d.position for d in js])
    want = np.array([[float(r[f"j{i + 1}"]) for i in range(6)] for r in rows])
    assert np.abs(got - want).max() < 1e-4 + 1e-9       # the CSV has 4 decimals
    want_cmd = np.array([[float(r[f"j{i + 1}_cmd"]) for i in range(6)] for r in rows])
    assert np.abs(np.degrees([d.position for d in cmd]) - want_cmd).max() < 1e-4 + 1e-9
    assert js[0].name == list(IRB.joint_names) and len(js[-1].effort) == 6 and np.any(np.abs(js[-1].effort) > 0.1)
    poses = [d.pose.position for t, _, d in msgs if t == "/tool_pose"]
    got = np.array([[p.x, p.y, p.z] for p in poses]) * 1000
    want = np.array([[float(r[c]) for c in ("x_mm", "y_mm", "z_mm")] for r in rows])
    assert np.abs(got - want).max() < 1e-4 + 1e-9
    tf = [d for t, _, d in msgs if t == "/tf"][-1]
    assert [e.child_frame_id for e in tf.transforms] == [f"link_{i}" for i in range(1, 7)]
    lines = [d.data for t, _, d in msgs if t == "/gcode/line"]
    src = PROGRAM.splitlines()
    assert lines and all(src[int(x.split(":")[0]) - 1].strip() == x.split(": ", 1)[1] for x in lines)
    assert [int(x.split(":")[0]) for x in lines] == sorted({int(r["line"]) for r in rows})
    (path,) = [d for t, _, d in msgs if t == "/path/planned"]
    pts = np.array([[p.pose.position.x, p.pose.position.y, p.pose.position.z] for p in path.poses])
    cmd_mm = np.array([[float(r[c]) for c in ("x_cmd_mm", "y_cmd_mm", "z_cmd_mm")] for r in rows])
    assert path.header.frame_id == "base" and len(pts) >= 5
    for x in cmd_mm[:: max(1, len(cmd_mm) // 50)]:           # every commanded point lies on the programmed polyline
        a, b = pts[:-1] * 1000, pts[1:] * 1000
        u = np.clip(np.einsum("ij,ij->i", x - a, b - a) / np.maximum(np.einsum("ij,ij->i", b - a, b - a), 1e-12), 0, 1)
        assert np.min(np.linalg.norm(a + u[:, None] * (b - a) - x, axis=1)) < 1e-3
    notes = [d.msg for t, _, d in msgs if t == "/rosout"]
    assert notes[0].startswith("run of p.ngc on the irb120") and notes[-1] == f"run ended: {n} control periods"
    # plot reads a run log too: the joints it plots are the CSV's, measured and commanded
    from armtwin.envs.telemetry.reader import read_joint_runs
    runs = read_joint_runs(out_mcap)
    assert list(runs.runs) == [""] and not runs.twin and runs.prismatic == [False] * 6
    q_csv = np.array([[float(r[f"j{i + 1}"]) for i in range(6)] for r in rows])
    assert np.abs(np.degrees(runs.runs[""].q) - q_csv).max() < 1e-4 + 1e-9
    assert np.abs(np.degrees(runs.runs[""].q_ref) - want_cmd).max() < 1e-4 + 1e-9
    capsys.readouterr()
    assert main(["plot", str(out_mcap), "--out", str(tmp_path / "run.png")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "run.png")
    assert (tmp_path / "run.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_run_log_refuses_other_endings(tmp_path, capsys):
    prog = tmp_path / "p.ngc"
    prog.write_text(PROGRAM)
    assert main(["run", str(prog), "--robot", "irb120", "--log", str(tmp_path / "run.bag")]) == 2
    err = capsys.readouterr().err
    assert ".csv or .mcap" in err and err.count("\n") == 1


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_leaves_a_complete_indexed_mcap(tmp_path, sig):
    prog = tmp_path / "long.ngc"
    prog.write_text("G21 G90\nG0 X0 Y0 Z10\nG1 Z0 F300\n" + "G1 X40\nG1 Y40\nG1 X0\nG1 Y0\n" * 5 + "M30\n")
    log = tmp_path / "run.mcap"
    p = subprocess.Popen([sys.executable, "-m", "armtwin", "run", str(prog), "--robot", "irb120", "--log", str(log)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None:
            if log.exists() and log.stat().st_size > 60_000:      # past the first chunks
                break
            time.sleep(0.02)
        assert p.poll() is None, p.communicate()
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + int(sig), err
    periods = int(__import__("re").search(r"\((\d+) control periods", out).group(1))
    with open(log, "rb") as f:
        summary = make_reader(f).get_summary()   # the summary is there: the file was finished
    assert summary is not None
    counts = {c.topic: summary.statistics.channel_message_counts[i] for i, c in summary.channels.items()}
    assert counts["/joint_states"] == counts["/tf"] == periods > 0
    notes = [d.msg for t, _, d in _messages(log, ["/rosout"])]
    assert notes[-1].startswith("interrupted at t =") and f"after {periods} control periods" in notes[-1]


# ----- the twin log ------------------------------------------------------------------------------

def _samples(n=40):
    out = []
    for k in range(n):
        virt = np.array([10.0 + 0.37 * k, -5.0 - 0.11 * k])
        servo, lat, f = virt - [0.25, -0.125], 3.0 + 0.01 * k, rp.Fault.NONE
        if 5 <= k < 9:
            servo, lat, f = np.full(2, math.nan), math.nan, rp.Fault.LINK
        elif 9 <= k < 12:
            f = rp.Fault.POWER | rp.Fault.WATCHDOG
        elif k == 15:
            f = rp.Fault.LATE
        out.append(SyncSample(k, 0.002 * k, virt, servo, virt - servo, lat, f))
    return out


def test_the_mcap_twin_log_reads_back_as_the_csv_twin_log(tmp_path):
    samples = _samples()
    with TwinLog(tmp_path / "t.csv", (0, 1)) as a, TwinMcapLog(tmp_path / "t.mcap", IRB, (0, 1)) as b:
        for s in samples:
            a.write(s)
            b.write(s)
    c, d = read_twin_log(tmp_path / "t.csv"), read_twin_log(tmp_path / "t.mcap")
    assert list(c) == list(d) and c.labels == d.labels == ["j1", "j2"]
    assert d["Fault"] == c["Fault"] and d["STT"].tolist() == c["STT"].tolist()
    for col in c:
        if col not in ("Fault", "STT"):
            assert np.array_equal(np.isnan(c[col]), np.isnan(d[col])), col
            assert np.nanmax(np.abs(c[col] - d[col])) < 1e-3, col      # the CSV rounds to 4-6 decimals
    msgs = _messages(tmp_path / "t.mcap")
    assert {t for t, _, _ in msgs} == set(TWIN_TOPICS)
    servo = [d for t, _, d in msgs if t == "/joint_states"]
    assert servo[0].name == ["joint_1", "joint_2"] and np.allclose(np.degrees(servo[0].position), samples[0].servo_deg)
    notes = [d.msg for t, _, d in msgs if t == "/rosout"]
    assert sorted(notes) == sorted(["fault LINK ON at STT 5 (t = 0.010 s)", "fault LINK off at STT 9 (t = 0.018 s)",
                     "fault POWER ON at STT 9 (t = 0.018 s)", "fault WATCHDOG ON at STT 9 (t = 0.018 s)",
                     "fault POWER off at STT 12 (t = 0.024 s)", "fault WATCHDOG off at STT 12 (t = 0.024 s)"])


def test_a_twin_log_cut_short_by_a_kill_reads_up_to_its_last_complete_chunk(tmp_path):
    path = tmp_path / "t.mcap"
    log = TwinMcapLog(path, IRB, (0, 1), chunk_size=8 * 1024)   # small chunks: as a long run has many
    for s in _samples(400):
        log.write(s)
    log.close()
    data = path.read_bytes()
    full = read_twin_log(path)
    assert len(full["STT"]) == 400
    got = []
    for cut in (len(data) // 3, len(data) // 2, 3 * len(data) // 4):
        (tmp_path / "cut.mcap").write_bytes(data[:cut])
        d = read_twin_log(tmp_path / "cut.mcap")
        n = len(d["STT"])
        assert d["STT"].tolist() == list(range(n))     # a prefix, nothing mixed up
        got.append(n)
    assert 0 < got[0] < got[1] < got[2] < 400


def test_a_twin_log_with_a_lost_sample_or_no_samples_is_refused(tmp_path):
    samples = _samples(10)
    with TwinMcapLog(tmp_path / "gap.mcap", IRB, (0, 1)) as log:
        for s in samples[:4] + samples[5:]:
            log.write(s)
    with pytest.raises(TwinLogError, match=r"message 5 on /twin/sample, stt: 5 after 3 .*samples lost"):
        read_twin_log(tmp_path / "gap.mcap")
    TwinMcapLog(tmp_path / "empty.mcap", IRB, (0, 1)).close()
    with pytest.raises(TwinLogError, match="no /twin/sample messages"):
        read_twin_log(tmp_path / "empty.mcap")
    (tmp_path / "junk.mcap").write_bytes(b"not an mcap file at all")
    with pytest.raises(TwinLogError, match="not a readable MCAP file"):
        read_twin_log(tmp_path / "junk.mcap")


def test_cli_sync_logs_mcap_that_plot_reads(emu, tmp_path, capsys):
    log = str(tmp_path / "twin.mcap")
    rc = main(["sync", "--port", emu.device, "--robot", "irb120", "--joints", "1,2", "--samples", "300", "--log", log])
    out = capsys.readouterr().out
    assert rc == 0 and log in out
    d = read_twin_log(log)
    assert d["STT"].tolist() == list(range(300))            # every sample, none lost
    assert np.all(np.isfinite(d["Virtual_j1"])) and np.nanmedian(d["Latency_ms"]) > 0
    assert main(["plot", log, "--out", str(tmp_path / "twin.png")]) == 0
    assert (tmp_path / "twin.png").stat().st_size > 10_000


@pytest.mark.parametrize("argv, msg", [(["--seconds", "0.5"], "--seconds 0.5: must be between 1 and 60 s"),
                                       (["--outage", "nan"], "--outage nan: must be between 1 and 30 s")])
def test_bench_log_refuses_bad_bounds(argv, msg, capsys):
    assert main(["bench", "log", *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1


def test_run_log_compression_is_chosen_by_name(tmp_path):
    from armtwin.envs.runner import RunConfig
    from armtwin.envs.telemetry.mcapfile import Compression
    assert RunConfig(log_compression="LZ4").log_compression is Compression.LZ4
    with pytest.raises(ValueError, match="unknown compression 'gzip'; choose one of: zstd, lz4, none"):
        RunConfig(log_compression="gzip")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_ends_sync_with_a_finished_mcap_twin_log(sig, emu, tmp_path):
    import re
    log = tmp_path / "twin.mcap"
    p = subprocess.Popen([sys.executable, "-m", "armtwin", "sync", "--port", emu.device, "--robot", "irb120",
                          "--log", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and p.poll() is None:
            if log.exists() and log.stat().st_size > 60_000:       # chunks written: well under way
                break
            time.sleep(0.05)
        assert p.poll() is None, p.communicate()
        p.send_signal(sig)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + int(sig), err
    samples = int(re.search(r"samples (\d+) ", out).group(1))
    with open(log, "rb") as f:
        summary = make_reader(f).get_summary()                      # finished: summary and index written
    assert summary is not None
    d = read_twin_log(log)
    assert d["STT"].tolist() == list(range(samples)) and samples > 200    # every sample, none lost


# ----- /tool_outputs ----------------------------------------------------------------------------

OUTPUTS_PROGRAM = ("G21 G90\nG0 X0 Y0 Z10\nM3 S8000\nG1 Z0 F600\nM8\nG1 X10 F1200\nM62 P3\nG4 P0.1\nG1 Y10\n"
                   "M64 P0\nM9\nG1 X0\nM63 P3\nM5\nG1 Y0\nM65 P0\nG0 Z10\nM30\n")


def test_tool_outputs_follow_the_csv_output_columns_change_for_change(tmp_path):
    from armtwin.controllers.gcode.outputs import OUTPUT_COLUMNS
    prog = tmp_path / "p.ngc"
    prog.write_text(OUTPUTS_PROGRAM)
    out_csv, out_mcap = tmp_path / "run.csv", tmp_path / "run.mcap"
    for log in (out_csv, out_mcap):
        assert main(["run", str(prog), "--robot", "irb120", "--log", str(log)]) == 0
    rows = list(csv.DictReader(open(out_csv, newline="")))
    changes, last = [], None        # (time s, output columns) at the start and where a column changes
    for r in rows:
        vals = tuple(float(r[c]) for c in OUTPUT_COLUMNS)
        if vals != last:
            changes.append((float(r["time_s"]), vals))
            last = vals
    msgs = _messages(out_mcap, ["/tool_outputs", "/joint_states"])
    t0 = next(ns for t, ns, _ in msgs if t == "/joint_states")
    got = [((ns - t0) / 1e9, d) for t, ns, d in msgs if t == "/tool_outputs"]
    assert all(d.name == list(OUTPUT_COLUMNS) and not d.velocity and not d.effort for _, d in got)
    assert len(got) == len(changes)
    for (t_got, d), (t_csv, vals) in zip(got, changes):
        assert abs(t_got - t_csv) < 1e-4 + 1e-9              # the CSV has 4 decimals
        assert np.allclose(d.position, vals, atol=1e-4, rtol=0), (t_csv, d.position, vals)
        assert d.header.stamp.sec * 10**9 + d.header.stamp.nanosec == round(t_got * 1e9) + t0
    col = {c: i for i, c in enumerate(OUTPUT_COLUMNS)}
    seq = [(int(d.position[col["tool_on"]]), d.position[col["s"]], int(d.position[col["flood"]]),
            int(d.position[col["dout"]])) for _, d in got]
    # the program's own order: start all off; M3 S8000; M8; M62 P3 with the next move; then M64 P0 and M9 at
    # the same node (one control period sees both); M63 P3 (with the next move) and M5 at the next node; M65 P0
    assert seq == [(0, 0, 0, 0), (1, 8000, 0, 0), (1, 8000, 1, 0), (1, 8000, 1, 8), (1, 8000, 0, 9), (0, 8000, 0, 1),
                   (0, 8000, 0, 0)], seq


# ----- armtwin compare --log compare.mcap -------------------------------------------------------

def test_compare_log_holds_every_models_run_under_its_namespace(tmp_path, capsys):
    from armtwin.envs.compare import build_motion, run_motion
    from armtwin.envs.sim import JointMode
    from armtwin.envs.telemetry.topics import compare_topics
    log = tmp_path / "cmp.mcap"
    dt = 1 / 240
    assert main(["compare", "irb120", "--motion", "swing", "--payload", "0", "--no-sweeps", "--out", str(tmp_path / "o"),
                 "--log", str(log), "--json"]) == 0
    assert str(log) in capsys.readouterr().out
    traj = build_motion(IRB, "swing")
    n_periods = int(np.ceil(traj.duration / dt - 1e-9))
    models = [m.value for m in JointMode]
    with open(log, "rb") as f:
        summary = make_reader(f).get_summary()
    counts = {c.topic: summary.statistics.channel_message_counts.get(i, 0) for i, c in summary.channels.items()}
    assert set(counts) == set(compare_topics(models))
    msgs = _messages(log)
    for mode in JointMode:
        m = mode.value
        for topic in ("joint_states", "joint_states/commanded", "tf", "tool_pose"):
            assert counts[f"/{m}/{topic}"] == n_periods, (m, topic)
        own = run_motion(IRB, traj, mode, dt=dt)              # compare's own run of this model (deterministic)
        js = [d for t, _, d in msgs if t == f"/{m}/joint_states"]
        assert np.array_equal(np.array([d.position for d in js]), own.q)
        assert np.array_equal(np.array([d.effort for d in js]), own.tau)
        ref = [d for t, _, d in msgs if t == f"/{m}/joint_states/commanded"]
        assert np.array_equal(np.array([d.position for d in ref]), own.q_ref)
        stamps = np.array([ns for t, ns, _ in msgs if t == f"/{m}/joint_states"])
        assert np.allclose((stamps - stamps[0]) / 1e9, own.t - own.t[0], atol=1e-9)
        tf = [d for t, _, d in msgs if t == f"/{m}/tf"][-1]
        assert [e.child_frame_id for e in tf.transforms] == [f"{m}/link_{i}" for i in range(1, 7)]
    starts = {t: ns for t, ns, _ in reversed(msgs) if t.endswith("/joint_states")}
    assert len(set(starts.values())) == 1                     # the three runs on one time axis
    (static,) = [d for t, _, d in msgs if t == "/tf_static"]
    roots = {e.child_frame_id: e.transform.translation.y for e in static.transforms if e.header.frame_id == "world"}
    assert sorted(roots) == sorted(f"{m}/base_link" for m in models) and len(set(roots.values())) == 3
    # plot reads the compare log: every model's run on one axis, its joints those compare ran
    from armtwin.envs.telemetry.reader import read_joint_runs
    runs = read_joint_runs(log)
    assert list(runs.runs) == models
    for mode in JointMode:
        own = run_motion(IRB, traj, mode, dt=dt)
        got = runs.runs[mode.value]
        assert np.array_equal(got.q, own.q) and np.array_equal(got.q_ref, own.q_ref)
        assert np.abs(got.t - (own.t - own.t[0])).max() < 1e-9 * len(own.t)
    capsys.readouterr()
    assert main(["plot", str(log)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "cmp.png") and (tmp_path / "cmp.png").stat().st_size > 10_000


def test_compare_log_refuses_other_endings(capsys):
    assert main(["compare", "irb120", "--log", "x.csv", "--no-sweeps"]) == 2
    err = capsys.readouterr().err
    assert "--log x.csv" in err and ".mcap" in err and err.count("\n") == 1


def test_plot_of_a_compare_log_with_a_prismatic_joint_has_a_mm_panel(tmp_path, capsys):
    """The SCARA's J3 is prismatic: its error is read in metres and plotted in mm on a panel of its own;
    the reader gives back the measured and commanded joints the log was written with."""
    from types import SimpleNamespace

    from armtwin.envs.telemetry.comparelog import write_compare_mcap
    from armtwin.envs.telemetry.reader import read_joint_runs
    from armtwin.scripts.cmd_plot import plot_runs
    scara = get("scara")
    rng = np.random.default_rng(7)
    n, dof = 50, scara.dof
    t = np.arange(1, n + 1) / 100
    runs = {}
    for k, model in enumerate(("kinematic", "hinge")):
        q_ref = rng.uniform(-0.05, 0.05, (n, dof))
        q = q_ref + rng.normal(0, 1e-3 * k, (n, dof))
        runs[model] = SimpleNamespace(t=t, q_ref=q_ref, qd_ref=np.zeros((n, dof)), q=q, qd=np.zeros((n, dof)),
                                      tau=np.zeros((n, dof)), stable=True, message="")
    log = tmp_path / "scara.mcap"
    write_compare_mcap(log, scara, runs)
    got = read_joint_runs(log)
    assert got.prismatic == [j.type.value == "prismatic" for j in scara.joints] and any(got.prismatic)
    for model, run in runs.items():
        assert np.array_equal(got.runs[model].q, run.q) and np.array_equal(got.runs[model].q_ref, run.q_ref)
        assert np.allclose(got.runs[model].t, t - t[0], atol=1e-9)
    fig = plot_runs(got, "scara.mcap")
    labels = [a.get_ylabel() for a in fig.axes]
    assert len(fig.axes) == 3 and "deg" in labels[1] and "mm" in labels[2], labels
    assert main(["plot", str(log)]) == 0 and (tmp_path / "scara.png").exists()


def test_plot_of_an_mcap_without_joints_is_one_line(tmp_path, capsys):
    bad = tmp_path / "x.mcap"
    bad.write_bytes(b"not an mcap file at all")
    assert main(["plot", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "x.mcap" in err and "MCAP" in err and err.count("\n") == 1 and not (tmp_path / "x.png").exists()


def test_the_robot_description_names_its_meshes_by_absolute_uris():
    """``/robot_description`` resolves every mesh on the machine that wrote it (file:// URIs of
    files that exist), with the same links and joints as the robot's URDF file."""
    import xml.etree.ElementTree as ET
    from urllib.parse import unquote, urlparse

    from armtwin import robots
    from armtwin.envs.telemetry.common import description
    for name in ("irb120", "aubo_i5", "scara"):
        spec = robots.get(name)
        root = ET.fromstring(description(spec.urdf_path))
        meshes = [m.get("filename") for m in root.iter("mesh")]
        assert meshes, name
        for uri in meshes:
            u = urlparse(uri)
            assert u.scheme == "file" and Path(unquote(u.path)).is_file(), uri
        orig = ET.fromstring(spec.urdf_path.read_bytes())
        assert [e.get("name") for e in root.iter("link")] == [e.get("name") for e in orig.iter("link")]
        assert [e.get("name") for e in root.iter("joint")] == [e.get("name") for e in orig.iter("joint")]
