"""Collision-aware IK (issue 18.3): the workcell's collision check as the IK's solution filter.

The reference is a brute-force contact query made independently of the filter: the robot loaded
from its URDF (its own collision shapes) into a world of its own with the cell's bodies, and
``getClosestPoints`` between every pair the allowed-collision matrix leaves (link–link) and
between every moving link and every cell body, at each solution, by the documented rule: a pair
is in contact when it overlaps by more than CONTACT_EPS, the end effector on a work body by more
than the cell's ``touch`` (docs/WORKCELL.md).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pybullet
import pytest

from armtwin import robots
from armtwin.controllers.ik import IKStatus, branch_of, default_weights, pose_from_rpy, solve, solve_path
from armtwin.controllers.kinematics import chain_of, fk
from armtwin.controllers.tools import default_tools
from armtwin.controllers.transforms import matrix_to_quat
from armtwin.envs.collision import CONTACT_EPS, CollisionModel, allowed_pairs
from armtwin.envs.interference import CollisionFilter, PairKind
from armtwin.envs.sim import World
from armtwin.envs.workcell import mount_of, place_cell
from armtwin.robots.workcell import BodyRole, Cell, CellBody, ShapeKind, default_cell, end_effector_links
from armtwin.scripts.cli import main

ROBOTS = ("irb120", "aubo_i5", "scara")
POSES = 50
#: brute-force distances this close to a pair's threshold are too close to call (engine precision), m
AMBIGUOUS = 1e-6


class BruteForce:
    """The robot's URDF and the cell's bodies in a world of their own: every pair queried.

    The URDF is loaded with its cylinders as cylinders (PyBullet otherwise makes them convex
    hulls a millimetre or so off), joints set by name."""

    def __init__(self, spec, cell: Cell) -> None:
        self.world = World(ground=False)
        c = self.world.client
        pos, rot = mount_of(cell)
        self.body = pybullet.loadURDF(str(spec.urdf_path), pos.tolist(), matrix_to_quat(rot).tolist(),
                                      useFixedBase=True, flags=pybullet.URDF_USE_IMPLICIT_CYLINDER, physicsClientId=c)
        joint, link = {}, {spec.links[0].name: -1}
        for j in range(pybullet.getNumJoints(self.body, physicsClientId=c)):
            info = pybullet.getJointInfo(self.body, j, physicsClientId=c)
            joint[info[1].decode()] = j
            link[info[12].decode()] = j
        self.joints = [joint[n] for n in spec.joint_names]
        self.bodies = place_cell(self.world, cell).bodies
        names = [lk.name for lk in spec.links]
        allowed = allowed_pairs(spec)
        ee = set(end_effector_links(spec))
        # (link index a, body, link index b, how deep it may press in m, names)
        self.pairs = [(link[a], self.body, link[b], 0.0, (a, b))
                      for i, a in enumerate(names) for b in names[i + 1:] if (a, b) not in allowed]
        self.pairs += [(link[a], self.bodies[body.name], -1,
                        cell.touch if (a in ee and body.role is BodyRole.WORK) else 0.0, (a, body.name))
                       for a in names[1:] for body in cell.bodies]

    def contacts(self, q) -> tuple[set, int]:
        """(names of the pairs in contact at ``q``, how many were too close to call)."""
        c = self.world.client
        for j, v in zip(self.joints, q):
            pybullet.resetJointState(self.body, j, float(v), physicsClientId=c)
        found, unsure = set(), 0
        for la, b, lb, allowed, names in self.pairs:
            pts = pybullet.getClosestPoints(self.body, b, 0.01, linkIndexA=la, linkIndexB=lb,
                                            physicsClientId=c)
            d = min((p[8] for p in pts), default=0.01) + allowed + CONTACT_EPS
            unsure += abs(d) < AMBIGUOUS
            if d < 0:
                found.add(names)
        return found, unsure

    def close(self) -> None:
        self.world.close()


def _cell(spec) -> Cell:
    """The robot's default cell (its table, work) and a post (an obstacle) where the SCARA's left
    elbow passes when it reaches over the table — the SCARA's branches differ only there."""
    base = default_cell(spec)
    pose = np.eye(4)
    pose[:3, 3] = (0.22, 0.26, 0.45)
    post = CellBody("post", ShapeKind.CYLINDER, pose, (0.03, 0.9))
    return Cell(f"{spec.name} table and post", base.mount, base.bodies + (post,), base.touch)


@pytest.fixture(scope="module", params=ROBOTS)
def setup(request):
    spec = robots.get(request.param)
    cell = _cell(spec)
    model = CollisionModel(spec, cell)
    brute = BruteForce(spec, cell)
    yield spec, cell, CollisionFilter(model), brute
    brute.close()
    model.close()


def _poses(spec, cell, rng, n):
    """``n`` flange poses (reporting frame): half the FK of random joints within the ranges, half
    over and around the table (tool down, tilted by up to 40° for the 6-axis arms), from just above
    its top to 40 mm into it — where elbow-down branches and the wrist meet it."""
    table = cell.body("table")
    report = np.linalg.inv(cell.mount @ spec.report_frame.matrix)     # world -> reporting frame
    top = table.pose[2, 3] + table.size[2] / 2
    out = [fk(chain_of(spec), q) for q in rng.uniform(spec.lower, spec.upper, (n // 2, spec.dof))]
    while len(out) < n:
        p = np.array([*(table.pose[:2, 3] + rng.uniform(-0.25, 0.25, 2)), top + rng.uniform(-0.04, 0.15), 1.0])
        tilt = rng.uniform(-0.7, 0.7, 2) if not spec.roll_only else (0.0, 0.0)
        out.append(pose_from_rpy((report @ p)[:3], (math.pi + tilt[0], tilt[1], rng.uniform(-math.pi, math.pi))))
    return out


def test_ik_all_marks_exactly_the_solutions_a_brute_force_query_finds_in_collision(setup):
    spec, cell, filt, brute = setup
    rng = np.random.default_rng(18)
    checked = mixed = unsure = 0
    kinds: set = set()
    for T in _poses(spec, cell, rng, POSES):
        r = solve(spec, T, reject=filt)
        verdicts = []
        for s in r.solutions:
            want, u = brute.contacts(s.q)
            unsure += u
            got = filt.interference(s.q)
            if u == 0:
                assert {(c.link, c.other) for c in got} == want, (s.branch, np.degrees(s.q))
            assert (s.rejected != "") == bool(got)          # the IK's verdict is the filter's
            kinds |= {c.kind for c in got}
            checked += 1
            if s.within_limits:
                verdicts.append(bool(got))
        mixed += any(verdicts) and not all(verdicts)
    assert unsure <= checked // 100           # almost every pair at every solution decided
    assert mixed >= 3, f"only {mixed} poses where some branches interfere and some do not"
    assert PairKind.BODY in kinds


def test_the_choice_skips_interfering_solutions_and_takes_the_nearest_free_one(setup):
    spec, cell, filt, _ = setup
    rng = np.random.default_rng(19)
    w = default_weights(spec)
    skipped = 0
    for T in _poses(spec, cell, rng, POSES):
        q_near = rng.uniform(spec.lower, spec.upper)
        r = solve(spec, T, q_near, reject=filt)
        free = [s.q for s in r.solutions if s.within_limits and not filt.interference(s.q)]
        if not free:
            assert not r.ok
            if any(s.within_limits for s in r.solutions):
                assert r.status is IKStatus.REJECTED
            continue
        assert r.ok and not filt.interference(r.best)
        nearest = min(free, key=lambda q: float(np.abs(q - q_near) @ w))
        assert float(np.abs(r.best - q_near) @ w) == pytest.approx(float(np.abs(nearest - q_near) @ w), abs=1e-9)
        plain = solve(spec, T, q_near)
        skipped += not np.array_equal(plain.best, r.best)
    assert skipped > 0


def test_a_self_collision_and_a_tool_are_named_by_kind():
    spec = robots.get("irb120")
    q = np.radians([0, 90, 70, 0, 0, 0])          # the forearm folded down into the base
    tool = default_tools()[1]                      # the pen, 100 mm
    with CollisionModel(spec, default_cell(spec), tool=tool) as model:
        filt = CollisionFilter(model)
        kinds = {c.kind for c in filt.interference(q)}
        assert PairKind.SELF in kinds, filt.interference(q)
        # the tool's tip pushed into the table, the flange above it
        T = pose_from_rpy((0.35, 0.0, 0.2 + tool.offset[2] - 0.01), (math.pi, 0.0, math.pi))
        r = solve(spec, T, reject=filt)
        got = [c for s in r.solutions for c in filt.interference(s.q)]
        assert any(c.kind is PairKind.TOOL and c.link == "tool" and c.other == "table" for c in got)


def test_the_filter_remembers_a_bounded_number_of_answers(monkeypatch):
    import armtwin.envs.interference as interference
    monkeypatch.setattr(interference, "MAX_REMEMBERED", 3)
    spec = robots.get("irb120")
    q_in = np.radians([0, 90, 70, 0, 0, 0])                 # the forearm folded into the base
    with CollisionModel(spec, default_cell(spec)) as model:
        filt = CollisionFilter(model)
        first = filt.interference(q_in)
        assert first and filt(q_in) == "; ".join(c.describe() for c in first)
        for k in range(10):
            assert filt(spec.home + 0.01 * k) is None
            assert len(filt._seen) <= 3
        assert filt.interference(q_in) == first           # asked afresh: the same answer


def test_solve_path_follows_its_branch_while_it_is_free_and_stops_where_it_interferes():
    """The IRB120's flange goes straight down onto the default table: with the cell's filter the path
    is the unfiltered one (same branch, same joints) up to the first sample the check finds in
    collision, and ends there naming the pair; a line 50 mm over the AUBO-i5's table is free all
    along, in one arm configuration."""
    spec = robots.get("irb120")
    z = np.linspace(0.25, 0.15, 101)
    T = np.stack([pose_from_rpy((0.35, 0.0, zi), (math.pi, 0.0, math.pi)) for zi in z])
    with CollisionModel(spec, default_cell(spec)) as model:
        filt = CollisionFilter(model)
        q0 = solve(spec, T[0]).best
        free = solve_path(spec, T, q0)
        assert free.all_ok
        first = next(i for i, q in enumerate(free.q) if filt.interference(q))
        assert 0 < first < len(T) - 1
        p = solve_path(spec, T, q0, reject=filt)
        assert p.first_failure == first and p.ok[:first].all()
        assert np.array_equal(p.q[:first], free.q[:first])
        assert p.reason.startswith(f"sample {first}: every solution in the start configuration front/up/noflip")
        assert "link_6 touches table" in p.reason
    spec = robots.get("aubo_i5")
    y = np.linspace(-0.27, 0.03, 31)
    T = np.stack([pose_from_rpy((0.45, yi, 0.25), (math.pi, 0.0, 0.0)) for yi in y])
    with CollisionModel(spec, default_cell(spec)) as model:
        filt = CollisionFilter(model)
        start = solve(spec, T[0], reject=filt)
        assert start.ok
        p = solve_path(spec, T, start.best, reject=filt)
        assert p.all_ok, p.reason
        assert all(not filt.interference(q) for q in p.q)
        arm = {branch_of(spec, q).rsplit("/", 1)[0] for q in p.q}
        assert arm == {p.branch.rsplit("/", 1)[0]}
        assert np.max(np.abs(np.diff(p.q, axis=0))) < 0.2


def test_cli_marks_each_solution_and_exits_5_when_every_one_interferes(capsys):
    assert main(["ik", "irb120", "400", "0", "300", "--rpy", "180", "0", "180", "--all", "--cell", "default",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cell"]["name"] == "irb120 default cell"
    rows = out["solutions"]
    assert any(r["collision"] for r in rows) and any(not r["collision"] for r in rows)
    for r in rows:
        assert r["collision"] == bool(r["contacts"])
        assert all(c["kind"] in ("self", "body", "tool") and c["depth_mm"] > 0 for c in r["contacts"])
    assert not next(r for r in rows if r["chosen"])["collision"]
    # the same without --cell: no verdicts
    assert main(["ik", "irb120", "400", "0", "300", "--rpy", "180", "0", "180", "--all", "--json"]) == 0
    assert all(r["collision"] is None for r in json.loads(capsys.readouterr().out)["solutions"])
    # the flange 10 mm into the table: every solution presses link_6 in
    code = main(["ik", "irb120", "350", "0", "190", "--rpy", "180", "0", "180", "--cell", "default"])
    err = capsys.readouterr().err
    assert code == 5
    assert err.count("\n") == 1 and err.startswith("armtwin: in collision: every solution inside the joint ranges "
                                                   "is in collision") and "link_6 touches table 10.0 mm deep" in err


def test_cli_says_when_it_skipped_the_nearest_solution(capsys):
    argv = ["ik", "aubo_i5", "-90.8", "168.5", "-138.5", "--rpy", "-101.14", "-26.3", "-9.03"]
    assert main(argv) == 0
    plain = capsys.readouterr().out
    assert main(argv + ["--cell", "default"]) == 0
    out = capsys.readouterr().out
    assert "best (back/down/noflip)" in plain
    assert "nearest solution (back/down/noflip) skipped, in collision: base_link touches link forearm_link" in out
    assert "best (back/down/flip)" in out


def test_cli_cell_errors_are_one_line_and_exit_2(tmp_path, capsys):
    assert main(["ik", "irb120", "400", "0", "300", "--rpy", "180", "0", "180", "--cell", str(tmp_path / "none.toml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("armtwin: error: --cell ") and "no such file" in err
    assert main(["ui", "irb120", "--port", "0", "--cell", str(tmp_path)]) == 2       # checked before anything is served
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("armtwin: error: --cell ") and "is a directory" in err


# ----- the pendant ------------------------------------------------------------------------

AUBO_SKIP = ((-0.0908, 0.1685, -0.1385), np.radians((-101.14, -26.3, -9.03)))   # nearest from home: self-collision


def test_the_pendant_refuses_a_target_in_collision_and_skips_an_interfering_nearest_solution():
    from armtwin.envs.pendant import PendantConfig, PendantCore
    spec = robots.get("irb120")
    core = PendantCore(spec, config=PendantConfig(cell=default_cell(spec)))
    try:
        assert "table" in core.placed.bodies
        q0 = core.target_joints()
        r = core.move_to_pose(pose_from_rpy((0.35, 0.0, 0.19), (math.pi, 0.0, math.pi)))   # 10 mm into the table
        assert not r.applied and r.message.startswith("not applied: in collision: every solution")
        assert "link_6 touches table 10.0 mm deep" in r.message
        np.testing.assert_array_equal(core.target_joints(), q0)
        r = core.move_to_pose(pose_from_rpy((0.35, 0.0, 0.25), (math.pi, 0.0, math.pi)))   # 50 mm above it
        assert r.applied and r.message == "IK ok (front/up/noflip)"
    finally:
        core.close()
    spec = robots.get("aubo_i5")
    T = pose_from_rpy(*AUBO_SKIP)
    core = PendantCore(spec, config=PendantConfig(cell=default_cell(spec)))
    try:
        r = core.move_to_pose(T)
        assert r.applied and r.branch == "back/down/flip"
        assert "the nearest solution (back/down/noflip) is in collision: base_link touches link forearm_link" in r.message
        assert not CollisionFilter(core.collisions.model).interference(core.target_joints())
        q1 = core.target_joints()
        r = core.move_to_pose(T, branch="back/down/noflip")
        assert not r.applied and r.message.startswith("not applied: in collision on branch back/down/noflip: base_link")
        np.testing.assert_array_equal(core.target_joints(), q1)
    finally:
        core.close()
    # without a cell nothing is checked: the nearest solution is taken
    core = PendantCore(spec)
    try:
        assert core.collisions is None and core.move_to_pose(T).branch == "back/down/noflip"
    finally:
        core.close()


def test_the_pendant_with_a_tool_refuses_a_target_that_pushes_the_tool_into_the_table():
    from armtwin.envs.pendant import PendantConfig, PendantCore
    spec = robots.get("irb120")
    core = PendantCore(spec, config=PendantConfig(cell=default_cell(spec), tool=1))     # the pen, TCP 100 mm out
    try:
        r = core.move_to_pose(pose_from_rpy((0.35, 0.0, 0.19), (math.pi, 0.0, math.pi)))   # its tip 10 mm in
        assert not r.applied and "tool touches table 10.0 mm deep" in r.message
        r = core.move_to_pose(pose_from_rpy((0.35, 0.0, 0.2), (math.pi, 0.0, math.pi)))    # on the top: free
        assert r.applied, r.message
    finally:
        core.close()


def test_the_page_draws_the_cell_and_the_robot_at_its_mount(tmp_path):
    pytest.importorskip("viser")
    from armtwin.envs.pendant import Pendant, PendantConfig
    spec = robots.get("irb120")
    mount = np.eye(4)
    mount[:3, 3] = (0.1, -0.2, 0.3)
    base = default_cell(spec, mount)
    at = np.eye(4)
    at[:3, 3] = (0.6, 0.4, 0.45)
    post = CellBody("post", ShapeKind.CYLINDER, at, (0.03, 0.9))
    ball = CellBody("ball", ShapeKind.SPHERE, at, (0.05,))
    cell = Cell("table, post and ball", base.mount, base.bodies + (post, ball))
    with Pendant("irb120", port=0, config=PendantConfig(save_dir=tmp_path, cell=cell)) as p:
        nodes = p.server.scene._handle_from_node_name          # viser's own index of the scene's nodes
        assert {"/cell/table", "/cell/post", "/cell/ball", "/mount"} <= set(nodes)
        np.testing.assert_allclose(p.core.robot.world_T_report[:3, 3], (0.1, -0.2, 0.3), atol=1e-12)
        r = p.core.move_to_pose(pose_from_rpy((0.35, 0.0, 0.19), (math.pi, 0.0, math.pi)))
        assert not r.applied and "in collision" in r.message
