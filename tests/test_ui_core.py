"""Teach pendant logic (envs/pendant.py PendantCore) without a browser."""

from __future__ import annotations

import math

import numpy as np
import pytest
from armtwin import robots
from armtwin.controllers.gcode.interpreter import Motion, load_program
from armtwin.controllers.kinematics import chain_of, fk
from armtwin.envs.pendant import PendantConfig, PendantCore, gcode_for_points, safe_file_name
from armtwin.envs.sim import JointMode


@pytest.fixture(params=["scara", "irb120", "aubo_i5"])
def core(request, tmp_path):
    c = PendantCore(robots.get(request.param), config=PendantConfig(save_dir=tmp_path))
    yield c
    c.close()


def _settle(c: PendantCore, steps: int = 2) -> None:
    c.tick(steps)


def test_joint_jog_moves_one_joint_by_the_step(core):
    spec = core.spec
    q0 = core.robot.q.copy()
    r = core.jog_joint(1, +1, 2.0)
    _settle(core)
    assert r.applied
    d = core.robot.q - q0
    step = 0.002 if spec.prismatic[1] else math.radians(2.0)
    assert d[1] == pytest.approx(step, abs=1e-9)
    assert np.allclose(np.delete(d, 1), 0.0, atol=1e-12)


def test_joint_jog_beyond_the_range_is_refused(core):
    spec = core.spec
    q = spec.home.copy()
    q[0] = spec.upper[0]
    core.set_joints(q)
    _settle(core)
    r = core.jog_joint(0, +1, 1.0)
    assert not r.applied and "range" in r.message
    _settle(core)
    assert core.robot.q[0] == pytest.approx(spec.upper[0])


def test_tool_jog_moves_the_flange_along_the_axis(core):
    T0 = core.target_pose()
    r = core.jog_tool("z", +1, 10.0)
    _settle(core)
    assert r.applied, r.message
    T1 = core.tool_pose()
    np.testing.assert_allclose(T1[:3, 3] - T0[:3, 3], [0.0, 0.0, 0.010], atol=1e-6)
    np.testing.assert_allclose(T1[:3, :3], T0[:3, :3], atol=1e-6)


def test_tool_turn_about_base_z_keeps_the_tool_point(core):
    T0 = core.target_pose()
    r = core.jog_tool("rz", +1, 10.0)
    assert r.applied, r.message
    T1 = core.target_pose()
    np.testing.assert_allclose(T1[:3, 3], T0[:3, 3], atol=1e-6)
    ang = math.degrees(math.atan2(T1[1, 0], T1[0, 0]) - math.atan2(T0[1, 0], T0[0, 0]))
    assert (ang + 180) % 360 - 180 == pytest.approx(10.0, abs=1e-5)


def test_unreachable_target_is_not_applied(core):
    q_before = core.q_target.copy()
    T = core.target_pose()
    T[:3, 3] = [3.0, 0.0, 0.3]
    r = core.move_to_pose(T)
    assert not r.applied and "not applied" in r.message
    np.testing.assert_array_equal(core.q_target, q_before)


def test_branch_selector_picks_the_asked_branch():
    c = PendantCore(robots.get("irb120"))
    try:
        c.set_joints(np.radians([10.0, 10.0, 10.0, 30.0, 60.0, 0.0]))  # the flipped wrist fits the J4 range here
        T = c.target_pose()
        T[:3, 3] += [0.0, 0.02, -0.02]
        from armtwin.controllers.ik import solve
        others = {s.branch for s in solve(c.spec, T, c.q_target).solutions if s.within_limits}
        other = sorted(others - {c.current_branch()})[0]
        r = c.move_to_pose(T, branch=other)
        assert r.applied and r.branch == other and c.current_branch() == other
        np.testing.assert_allclose(fk(chain_of(c.spec), c.q_target), T, atol=1e-6)
        r = c.move_to_pose(T, branch="no/such/branch")
        assert not r.applied
    finally:
        c.close()


BAD_NAMES = ["../escape", "../../escape.ngc", "/tmp/abs.ngc", "/etc/passwd", "sub/dir.ngc", "sub\\dir.ngc", "..", ".",
             "", "   ", ".hidden", "..ngc", "a..b", "c:x", "C:\\temp\\x.ngc", "bad\nname", "nul\0byte", "x" * 200]


def _tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_save_refuses_a_name_that_is_not_a_plain_file_name(bad, tmp_path):
    save_dir = tmp_path / "saves"
    save_dir.mkdir()
    c = PendantCore(robots.get("scara"), config=PendantConfig(save_dir=save_dir))
    try:
        c.record_point()
        before = _tree(tmp_path)
        r = c.save_gcode(bad)
        assert not r.saved and r.path is None
        assert r.message.startswith("not saved: ") and str(save_dir) in r.message, r.message
        assert _tree(tmp_path) == before  # nothing written anywhere, not even a folder
    finally:
        c.close()


def test_save_keeps_plain_names_in_the_save_folder_and_adds_ngc(core, tmp_path):
    assert core.save_gcode("taught").message == "not saved: no points recorded yet"
    core.record_point()
    for name, written in (("cell 1.v2", "cell 1.v2.ngc"), ("  Done.NGC ", "Done.NGC"), ("part.nc", "part.nc"),
                          ("job.gcode", "job.gcode"), ("notes.txt", "notes.txt.ngc")):
        r = core.save_gcode(name)
        assert r.saved and r.path == tmp_path / written and r.path.is_file(), (name, r)
        assert r.message == f"saved 1 point to {r.path}"
    assert _tree(tmp_path) == sorted(["cell 1.v2.ngc", "Done.NGC", "part.nc", "job.gcode", "notes.txt.ngc"])


def test_save_never_follows_a_symbolic_link_out_of_the_folder(core, tmp_path):
    outside = tmp_path.parent / f"{tmp_path.name}-outside.ngc"
    outside.write_text("keep me\n")
    try:
        (tmp_path / "trap.ngc").symlink_to(outside)
        core.record_point()
        r = core.save_gcode("trap.ngc")
        assert not r.saved and "symbolic link" in r.message
        assert outside.read_text() == "keep me\n"
    finally:
        outside.unlink()


def test_safe_file_name_results():
    assert safe_file_name(" a b ") == ("a b.ngc", "")
    assert safe_file_name("x.GCODE") == ("x.GCODE", "")
    name, why = safe_file_name("../x")
    assert name is None and "no folders" in why
    name, why = safe_file_name("a..b")
    assert name is None and "'..'" in why


def test_page_shows_a_refused_file_name(tmp_path):
    from armtwin.envs.pendant import Pendant
    with Pendant("scara", port=0, config=PendantConfig(save_dir=tmp_path)) as p:
        p.core.record_point()
        p.save_name.value = "../../etc/cron.d/x"
        p._guard(p._save)
        assert p.status_md.content.startswith("status: **⚠ not saved: ") and "no folders" in p.status_md.content
        assert p.save_md.visible and p.save_md.content == p.status_md.content[len("status: "):]  # next to the button too
        p.save_name.value = "ok"
        p._guard(p._save)
        assert p.status_md.content == f"status: saved 1 point to {tmp_path / 'ok.ngc'}" == f"status: {p.save_md.content}"
    assert _tree(tmp_path) == ["ok.ngc"]


def test_record_save_and_run_the_taught_program(core):
    spec = core.spec
    core.jog_tool("x", -1, 20.0)
    core.record_point()
    core.jog_tool("y", +1, 30.0)
    core.record_point()
    core.jog_tool("z", -1, 15.0)
    core.record_point()
    taught = [T.copy() for T in core.points]
    r = core.save_gcode("taught")
    assert r.saved, r.message
    path = r.path
    assert path.suffix == ".ngc" and path.parent == core.config.save_dir
    text = path.read_text()
    assert "G21" in text and "G90" in text and text.count("G1 ") == 2 and text.rstrip().endswith("M2")
    # the interpreter reads it back to the taught positions
    prog = load_program(text, spec)
    assert not prog.faults, prog.faults
    ends = [b.end for b in prog.blocks if isinstance(b, Motion)]
    np.testing.assert_allclose(np.array(ends), np.array([T[:3, 3] for T in taught]), atol=2e-6)
    # and running it from elsewhere ends at the last taught point
    core.jog_joint(0, +1, 5.0)
    msg = core.run_program(text, path.name)
    assert msg.startswith("running"), msg
    for _ in range(10_000):
        if not core.running_program:
            break
        core.tick(50)
    assert not core.running_program
    core.tick(2)
    np.testing.assert_allclose(core.tool_pose()[:3, 3], taught[-1][:3, 3], atol=5e-4)


def test_faulty_program_is_refused_without_moving(core):
    q0 = core.q_target.copy()
    msg = core.run_program("G1 X0 Y0 Z0 Q3\n", "bad")
    assert msg.startswith("not run") and "line 1" in msg
    assert not core.running_program
    np.testing.assert_array_equal(core.q_target, q0)


def test_joint_model_switch_keeps_the_target():
    c = PendantCore(robots.get("irb120"))
    try:
        c.jog_joint(1, +1, 10.0)
        c.set_mode("hinge")
        assert c.robot.mode is JointMode.HINGE
        c.tick(240)  # 1 s under gravity with the drive holding the target
        assert c.robot.stable
        assert np.max(np.abs(c.robot.q - c.q_target)) < math.radians(3.0)
    finally:
        c.close()


def test_gcode_for_points_writes_c_only_for_the_scara():
    spec = robots.get("scara")
    T = fk(chain_of(spec), spec.home)
    text = gcode_for_points(spec, [T, T])
    assert " A" not in text and " B" not in text and " C" in text
    spec6 = robots.get("irb120")
    text6 = gcode_for_points(spec6, [fk(chain_of(spec6), spec6.home)])
    assert " A" in text6 and " B" in text6 and " C" in text6


def test_program_list_puts_the_robots_own_programs_first(tmp_path):
    for name in ("irb120_b.ngc", "aubo_i5_a.ngc", "irb120_a.ngc", "notes.txt"):
        (tmp_path / name).write_text("M2\n")
    c = PendantCore(robots.get("irb120"), config=PendantConfig(program_dir=tmp_path))
    try:
        assert [p.name for p in c.list_programs()] == ["irb120_a.ngc", "irb120_b.ngc", "aubo_i5_a.ngc"]
    finally:
        c.close()


@pytest.mark.parametrize("args, words", [(("ui", "nosuchbot"), "unknown robot"),
                                         (("ui", "irb120", "--port", "70000"), "--port"),
                                         (("ui", "irb120", "--save-dir", "/no/such/dir"), "--save-dir")])
def test_armtwin_ui_rejects_bad_input_in_one_line(args, words):
    import subprocess
    import sys
    code = "import sys; from armtwin.scripts.cli import main; sys.exit(main(sys.argv[1:]))"
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("armtwin:")]
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in p.stderr


def test_joint_reads_are_copies_taken_under_the_lock(core, monkeypatch):
    core.jog_joint(0, +1, 3.0)
    events: list[str] = []
    lock, read = core.lock, core.robot._read

    class Probe:  # the core's lock, recording when it is held
        def __enter__(self):
            lock.acquire()
            events.append("lock")

        def __exit__(self, *exc):
            events.append("unlock")
            lock.release()

    def spy_read():
        events.append("read")
        return read()

    monkeypatch.setattr(core, "lock", Probe())
    monkeypatch.setattr(core.robot, "_read", spy_read)
    q = core.joints()
    assert events == ["lock", "read", "unlock"]  # the engine is read only while the lock is held
    monkeypatch.undo()
    np.testing.assert_array_equal(q, core.robot.q)
    q[:] = 99.0
    target = core.target_joints()
    target[:] = 99.0
    assert not np.any(core.robot.q == 99.0) and not np.any(core.q_target == 99.0)  # copies


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, 1e9])
def test_a_bad_jog_step_is_refused_and_the_pendant_keeps_working(core, bad):
    q0 = core.q_target.copy()
    for call in (lambda: core.jog_joint(0, +1, bad), lambda: core.jog_tool("x", +1, bad),
                 lambda: core.jog_tool("rz", +1, bad)):
        with pytest.raises(ValueError, match="step"):
            call()
    assert np.array_equal(core.q_target, q0)  # nothing stored
    assert core.jog_joint(0, +1, 1.0).applied  # later jogs still work
    with pytest.raises(ValueError, match="finite"):
        core.move_to_pose(np.full((4, 4), np.nan))


# ----- a tool on the flange (issue 17.1): the pendant works at the TCP -----------------------------

@pytest.fixture(params=["scara", "irb120", "aubo_i5"])
def tooled(request, tmp_path):
    """A pendant with T1 (the built-in 100 mm pen holder) on the flange, as ``armtwin ui R --tool 1``."""
    c = PendantCore(robots.get(request.param), config=PendantConfig(save_dir=tmp_path, tool=1))
    yield c
    c.close()


def _tip_axis(c: PendantCore) -> tuple[np.ndarray, np.ndarray]:
    """The engine's flange position and tool axis (the flange's z), m."""
    F = c.robot.flange_pose()
    return F[:3, 3], F[:3, 2]


def test_readout_and_target_are_the_tcp_100mm_along_the_tool_axis(tooled):
    tooled.jog_joint(0, +1, 10.0)
    tooled.tick(2)
    r = tooled.readout()
    flange, axis = _tip_axis(tooled)
    np.testing.assert_allclose(r["position_mm"], (flange + 0.100 * axis) * 1000.0, atol=1e-3)
    np.testing.assert_allclose(tooled.target_pose()[:3, 3], flange + 0.100 * axis, atol=1e-6)
    assert r["tool"].startswith("T1 pen holder") and "100 mm" in r["tool"]
    assert "tcp" in tooled.robot.link_index        # the tool's body (and mass) is on the simulated flange


def test_ik_target_puts_the_tool_tip_on_the_target(tooled):
    T = tooled.target_pose()
    T[:3, 3] += [0.02, -0.03, -0.04]
    r = tooled.move_to_pose(T)
    assert r.applied, r.message
    tooled.tick(2)
    np.testing.assert_allclose(tooled.tool_pose()[:3, 3], T[:3, 3], atol=1e-6)
    flange, axis = _tip_axis(tooled)
    np.testing.assert_allclose(flange, T[:3, 3] - 0.100 * axis, atol=1e-6)   # the flange 100 mm behind the tip


def test_jog_in_tool_space_moves_and_turns_about_the_tip(tooled):
    T0 = tooled.target_pose()
    r = tooled.jog_tool("z", +1, 10.0, frame="tool")         # along the tool axis: toward the work
    assert r.applied, r.message
    T1 = tooled.target_pose()
    np.testing.assert_allclose(T1[:3, 3] - T0[:3, 3], 0.010 * T0[:3, 2], atol=1e-6)
    np.testing.assert_allclose(T1[:3, :3], T0[:3, :3], atol=1e-6)
    flange_before = tooled.kinematics.flange_of(T1)[:3, 3]
    r = tooled.jog_tool("rz", +1, 15.0, frame="tool")        # a turn about the tool axis keeps the tip
    assert r.applied, r.message
    T2 = tooled.target_pose()
    np.testing.assert_allclose(T2[:3, 3], T1[:3, 3], atol=1e-6)
    if not tooled.spec.roll_only:   # a tilt about base x keeps the tip; the flange swings around it
        r = tooled.jog_tool("rx", +1, 10.0, frame="base")
        assert r.applied, r.message
        T3 = tooled.target_pose()
        np.testing.assert_allclose(T3[:3, 3], T2[:3, 3], atol=1e-6)
        swing = np.linalg.norm(tooled.kinematics.flange_of(T3)[:3, 3] - flange_before)
        assert swing == pytest.approx(2 * 0.100 * math.sin(math.radians(5.0)), abs=1e-4)


def test_taught_points_saved_and_run_with_the_same_tool_reproduce_the_tcp_poses(tooled, tmp_path):
    from armtwin.controllers.gcode import compile_program, machine_for
    from armtwin.envs.runner import RunConfig, run_program
    spec = tooled.spec
    tooled.jog_tool("x", -1, 20.0)
    tooled.record_point()
    tooled.jog_tool("y", +1, 30.0)
    tooled.jog_tool("rz", +1, 20.0)
    tooled.record_point()
    tooled.jog_tool("z", -1, 15.0, frame="tool")
    tooled.record_point()
    taught = [T.copy() for T in tooled.points]
    r = tooled.save_gcode("tooled")
    assert r.saved, r.message
    text = r.path.read_text()
    assert "G43 H1" in text and "--tool 1" in text
    # the program's points are the taught TCP positions, read with the tool mounted (run --tool 1) ...
    machine = machine_for(spec, tool=1)
    prog = load_program(text, spec, machine)
    assert not prog.faults, prog.faults
    ends = [b.end for b in prog.blocks if isinstance(b, Motion)]
    np.testing.assert_allclose(np.array(ends), np.array([T[:3, 3] for T in taught]), atol=2e-6)
    # ... and `armtwin run --tool 1` puts the engine's TCP on the taught poses (orientation included)
    compiled = compile_program(text, spec, machine)
    assert compiled.ok, compiled.refusal
    _, q, _ = compiled.trajectory.arrays()
    np.testing.assert_allclose(tooled.kinematics.fk(q[-1]), taught[-1], atol=1e-5)
    log = tmp_path / "run.csv"
    res = run_program(compiled, spec, RunConfig(), log_path=str(log))
    assert res.stable and res.max_error_mm < 0.01
    # the pendant runs it the same way and ends with the tip on the last taught pose
    tooled.jog_joint(0, +1, 5.0)
    msg = tooled.run_program(text, r.path.name)
    assert msg.startswith("running"), msg
    for _ in range(10_000):
        if not tooled.running_program:
            break
        tooled.tick(50)
    tooled.tick(2)
    np.testing.assert_allclose(tooled.tool_pose(), taught[-1], atol=5e-4)


def test_page_reads_out_the_tcp_and_draws_the_tool(tmp_path):
    from armtwin.envs.pendant import Pendant
    with Pendant("irb120", port=0, config=PendantConfig(save_dir=tmp_path, tool=2)) as p:
        text = p._readout_text()
        assert "T2 spindle" in text and "TCP x" in text
        z = float(text.split("TCP x")[1].split(" z ")[1].split(" mm")[0])
        assert z == pytest.approx(p.core.tool_pose()[2, 3] * 1000.0, abs=0.05)
        flange_z = p.core.robot.flange_pose()[2, 3] * 1000.0
        assert flange_z - z == pytest.approx(120.0, abs=0.1)      # the spindle points down from the flange
    # the page draws the robot from the description the simulation loads: with the tool's links
    from armtwin.envs.pendant.gui import robot_view
    links = lambda server, urdf, root_node_name: set(urdf.link_map)     # noqa: E731 - stands in for ViserUrdf
    assert "tcp" in robot_view(None, robots.get("irb120"), p.core.config.mounted, links)
    assert "tcp" not in robot_view(None, robots.get("irb120"), None, links)


def test_a_tool_outside_the_table_is_refused():
    with pytest.raises(ValueError, match="PendantConfig.tool 9"):
        PendantConfig(tool=9)
    with pytest.raises(ValueError, match="PendantConfig.tool"):
        PendantConfig(tool=True)


@pytest.mark.parametrize("args, words", [(("ui", "irb120", "--tool", "9"), "--tool 9"),
                                         (("ui", "irb120", "--tools", "/no/such/tools.toml"), "--tools")])
def test_armtwin_ui_rejects_a_bad_tool_in_one_line(args, words):
    test_armtwin_ui_rejects_bad_input_in_one_line(args, words)
