"""Closed-form IK: round trips against the FK, branches, singularities, statuses, choice, batch, path."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from armtwin import robots
from armtwin.controllers.ik import (
    LIMIT_TOL,
    IKStatus,
    branch_labels,
    branch_of,
    default_weights,
    pose_from_quat,
    pose_from_rpy,
    robot_ik,
    solve,
    solve_batch,
    solve_path,
)
from armtwin.controllers.kinematics import chain_of, fk, fk_batch
from armtwin.controllers.transforms import matrix_to_quat, rotation_angle
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

ROBOTS = ("irb120", "aubo_i5", "scara")
POS_TOL = 1e-9   # m
ROT_TOL = 1e-9   # rad


# Examples per property test run; raise it locally to hunt for rare failures, e.g.
# ARMTWIN_IK_EXAMPLES=3000 pytest tests/test_ik.py -k round_trip --hypothesis-seed=1
PROPERTY_EXAMPLES = int(os.environ.get("ARMTWIN_IK_EXAMPLES", "150"))


def _joint_strategy(spec):
    """Joint vectors inside the ranges, biased toward what breaks closed-form IK: values exactly at
    or a hair inside a limit, and exactly or nearly zero (wrist and elbow singularities)."""
    def joint(lo, hi):
        lo, hi = float(lo), float(hi)
        return st.one_of(
            st.floats(lo, hi, allow_nan=False),
            st.sampled_from([lo, hi, 0.0]),
            st.floats(0.0, 1e-6).map(lambda e: lo + e),
            st.floats(0.0, 1e-6).map(lambda e: hi - e),
            st.floats(-1e-6, 1e-6).map(lambda e: min(max(e, lo), hi)),
        )
    return st.tuples(*[joint(lo, hi) for lo, hi in zip(spec.lower, spec.upper)]).map(np.array)


def _pose_error(spec, T_a, T_b) -> tuple[float, float]:
    """(position error m, orientation error rad); the SCARA's orientation is only the tool roll."""
    dp = float(np.linalg.norm(T_a[:3, 3] - T_b[:3, 3]))
    if spec.name == "scara":
        ra = math.atan2(T_a[1, 0], T_a[0, 0])
        rb = math.atan2(T_b[1, 0], T_b[0, 0])
        return dp, abs(math.remainder(ra - rb, 2 * math.pi))
    return dp, float(rotation_angle(T_a[:3, :3], T_b[:3, :3]))


def _same_joints(q_a, q_b, tol=1e-9) -> bool:
    """Equal joint vectors, joint by joint (not modulo 2*pi: a 2*pi equivalent is another solution)."""
    return bool(np.allclose(q_a, q_b, rtol=0.0, atol=tol))


def _check_all_reach(spec, result, T, labels=True):
    chain = chain_of(spec)
    assert result.solutions, "a reachable pose must have solutions"
    for s in result.solutions:
        assert np.all(np.isfinite(s.q))
        dp, da = _pose_error(spec, fk(chain, s.q), T)
        assert dp < POS_TOL and da < ROT_TOL, (s.branch, dp, da)
        assert s.within_limits == bool(spec.within_limits(s.q))
        if labels:
            assert branch_of(spec, s.q) == s.branch


# ----- round trips (property tests) ---------------------------------------------------------

def _doubly_near_singular(spec, q) -> bool:
    """AUBO with a stretched elbow and 0 < |theta5| < 1e-6: the pose fixes the J4 origin only to
    ~d5 * 1e-16 / sin(theta5), so the elbow angle is known only to its square root (the FK round
    trip still holds; recovering q itself to 1e-6 rad is not possible from a float pose)."""
    return spec.name == "aubo_i5" and abs(q[2]) < 1e-3 and 0.0 < abs(math.sin(q[4])) < 1e-6


# Inputs hypothesis once found (q_near = q): each is always tried first.
ROUND_TRIP_EXAMPLES = {
    # J4 exactly at its -160 deg limit, q5 = 5e-10 rad: J4 is only known to ~1e-16 / sin(q5)
    # from the pose and came back 4e-8 rad beyond the limit, so the flipped wrist (1.57 rad of
    # travel) was chosen.
    "irb120": [(-1e-07, 0.0, 1.0, -2.7925268, 5e-10, 1e-09),
               (0.0, 0.0, 0.0, -math.radians(160.0), 2e-10, 0.0),
               (0.0, 0.3, -0.2, math.radians(160.0), -3e-10, math.radians(400.0))],
    # stretched elbow and q5 just above the old 1e-10 cut-off: J6 badly determined, 1.3e-8 m off
    "aubo_i5": [(1.0, 0.0, 0.0, 1.0, 1.96e-10, 0.0),
                (1.0, 0.0, 0.0, 1.0, 5e-10, math.radians(175.0))],
    # stretched arm: q2 (and so J4) only known to ~1e-8 rad; J4 came back beyond -360 deg
    "scara": [(2.3038, 0.0, 0.0, -2.0 * math.pi),
              (math.radians(132.0), 0.0, 0.0, -2.0 * math.pi),
              (-math.radians(132.0), 0.0, 0.2, 2.0 * math.pi)],
}


@pytest.mark.parametrize("name", ROBOTS)
def test_round_trip_property(name):
    spec = robots.get(name)
    chain = chain_of(spec)

    @settings(max_examples=PROPERTY_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_joint_strategy(spec))
    def check(q):
        T = fk(chain, q)
        # with q_near = q even the free joints of singular poses come back as they were
        r = solve(spec, T, q)
        assert r.status is IKStatus.SOLVED
        dp, da = _pose_error(spec, fk(chain, r.best), T)
        assert dp < POS_TOL and da < ROT_TOL
        # (labels are checked away from branch boundaries, below: hypothesis likes q = 0 exactly)
        _check_all_reach(spec, r, T, labels=False)
        if not _doubly_near_singular(spec, q):
            assert any(_same_joints(s.q, q) for s in r.solutions)
            # the chosen solution travels no more than q itself (weighted): it is q
            assert np.abs(r.best - q) @ default_weights(spec) < 1e-6
        assert spec.within_limits(r.best)   # with the same 1e-9 tolerance as the IK

    for q in ROUND_TRIP_EXAMPLES[name]:
        check = example(np.array(q, dtype=float))(check)
    check()


def test_limit_tolerance_matches_the_spec():
    """Within LIMIT_TOL beyond a limit counts as inside (as RobotSpec.within_limits says), and the
    joint is returned as it is (not clamped: that would move the flange); further out it is not."""
    spec = robots.get("scara")
    chain = chain_of(spec)
    for q4 in (spec.upper[3] + 0.5 * LIMIT_TOL, spec.lower[3] - 0.5 * LIMIT_TOL):
        q = np.array([0.3, 0.8, 0.1, q4])
        T = fk(chain, q)
        r = solve(spec, T, q)
        assert r.ok and abs(r.best[3] - q4) < 1e-12 and spec.within_limits(r.best)
        assert all(spec.within_limits(s.q) == s.within_limits for s in r.solutions)
        assert abs(solve_batch(spec, T[None], q).q[0, 3] - r.best[3]) < 1e-12
    # further beyond the limit: out of range, so the 2 pi equivalent is chosen instead
    q = np.array([0.3, 0.8, 0.1, spec.upper[3] + 1e-8])
    r = solve(spec, fk(chain, q), q)
    assert r.ok and abs(r.best[3] - (q[3] - 2 * math.pi)) < 1e-9
    # prismatic J3, metres
    for dz, ok in ((0.5 * LIMIT_TOL, True), (1e-8, False)):
        q = np.array([0.3, 0.8, spec.upper[2] + dz, 0.0])
        r = solve(spec, fk(chain, q), q)
        assert r.ok is ok


@pytest.mark.parametrize("name", ["irb120", "aubo_i5"])
def test_nearly_free_wrist_joint_keeps_q_near(name):
    """Near the wrist singularity the free joint keeps q_near's value where that reproduces the pose
    (to float precision), and the pose is reproduced to 1e-9 for any q_near."""
    spec = robots.get(name)
    chain = chain_of(spec)
    free = 3 if name == "irb120" else 5
    rng = np.random.default_rng(11)
    for s5 in (1e-11, 3e-10, 1e-9, 1e-8, 1e-7, 1e-5):
        for _ in range(20):
            q = rng.uniform(spec.lower, spec.upper) * 0.9
            q[4] = s5 * rng.choice([-1.0, 1.0])
            T = fk(chain, q)
            r = solve(spec, T, q)
            assert r.ok and abs(r.best[free] - q[free]) < 1e-12   # kept (up to a flip's rounding)
            other = rng.uniform(spec.lower, spec.upper)
            for qn in (q, other):
                for s in solve(spec, T, qn).solutions:
                    dp, da = _pose_error(spec, fk(chain, s.q), T)
                    assert dp < POS_TOL and da < ROT_TOL, (s5, dp, da)


@pytest.mark.parametrize("name", ROBOTS)
def test_original_among_solutions_from_home(name):
    """Away from singularities the solutions do not depend on q_near: q is found from home."""
    spec = robots.get(name)
    chain = chain_of(spec)
    rng = np.random.default_rng(7)
    for q in rng.uniform(spec.lower, spec.upper, (200, spec.dof)):
        T = fk(chain, q)
        r = solve(spec, T, spec.home)
        assert any(_same_joints(s.q, q) for s in r.solutions), np.degrees(q)
        _check_all_reach(spec, r, T)   # including branch_of(solution) == its label
        assert not r.singular and r.free_joints == ()   # random poses are regular


def test_irb120_has_8_branches_and_j6_equivalents():
    spec = robots.get("irb120")
    q = np.radians([10, 20, -30, 40, 50, 20])
    r = solve(spec, fk(chain_of(spec), q))
    assert {s.branch for s in r.solutions} == set(branch_labels(spec))
    # q6 = 20 deg has equivalents -340 and +380 inside +-400 deg, on the same branch
    same = [s for s in r.solutions if np.allclose(s.q[:5], q[:5], atol=1e-9)]
    assert sorted(np.round(np.degrees([s.q[5] for s in same]), 6)) == [-340.0, 20.0, 380.0]


def test_aubo_returns_only_real_branches_near_the_edge():
    spec = robots.get("aubo_i5")
    chain = chain_of(spec)
    q = np.radians([0, 10, 5, 0, 60, 0])   # nearly stretched: only some branches are real
    T = fk(chain, q)
    r = solve(spec, T)
    assert 0 < len(r.solutions) < 8
    _check_all_reach(spec, r, T)


# ----- singular poses -----------------------------------------------------------------------

def test_irb120_wrist_singular_keeps_j4():
    spec = robots.get("irb120")
    chain = chain_of(spec)
    T = fk(chain, np.radians([20, 10, 10, 50, 0, -30]))
    q_near = np.radians([20, 10, 10, 35, 5, 0])
    r = solve(spec, T, q_near)
    assert r.ok
    _check_all_reach(spec, r, T, labels=False)
    assert r.best[3] == pytest.approx(q_near[3], abs=1e-12)
    # J4 + J6 carries the roll: 50 - 30 = 20 deg
    assert math.degrees(r.best[3] + r.best[5]) == pytest.approx(20.0, abs=1e-9)


def test_irb120_stretched_arm_and_wrist_on_j1_axis():
    spec = robots.get("irb120")
    g = spec.geometry
    chain = chain_of(spec)
    phi = math.atan2(g.d4, g.a3)
    q = np.array([0.3, 0.0, -phi, 0.2, 0.4, 0.1])   # arm stretched straight up, wrist centre on J1
    T = fk(chain, q)
    wc = T[:3, 3] - g.d6 * T[:3, 2]
    assert abs(wc[0]) < 1e-12 and abs(wc[1]) < 1e-12
    q_near = np.array([-0.4, 0.0, -1.0, 0.5, 0.3, 0.0])
    r = solve(spec, T, q_near)
    assert r.ok
    _check_all_reach(spec, r, T, labels=False)
    assert r.best[0] == pytest.approx(q_near[0], abs=1e-12)   # J1 free: kept
    assert len({s.branch for s in r.solutions}) >= 2          # stretched: one elbow per shoulder


def test_aubo_wrist_singular_and_target_on_j1_axis():
    spec = robots.get("aubo_i5")
    chain = chain_of(spec)
    q = np.radians([30, -20, 80, 10, 0, 40])
    T = fk(chain, q)
    q_near = q.copy()
    q_near[5] = math.radians(25)
    r = solve(spec, T, q_near)
    assert r.ok
    _check_all_reach(spec, r, T, labels=False)
    assert r.best[5] == pytest.approx(q_near[5], abs=1e-12)
    # The flange can never be on the J1 axis: the J5 centre must be d2 from it and is only d6
    # from the flange. With the tool pointing radially inward it misses by d2 - d6 = 27.5 mm.
    g = spec.geometry
    T2 = pose_from_rpy((0.0, 0.0, 0.6), (0.0, -math.pi / 2, 0.0))   # tool z along -x
    assert np.allclose(T2[:3, 2], [-1, 0, 0])
    r2 = solve(spec, T2)
    assert r2.status is IKStatus.UNREACHABLE
    assert r2.distance == pytest.approx(g.d2 - g.d6, abs=1e-12)
    # ... and a J5 centre exactly d2 from the axis (shoulder singularity: the two J1 roots meet)
    T3 = fk(chain, np.radians([0, 0, 0, 0, 40, 0]))
    r3 = solve(spec, T3)
    assert r3.ok
    _check_all_reach(spec, r3, T3, labels=False)
    assert np.ptp([s.q[0] for s in r3.solutions]) < 1e-6


def _aubo_check_singular_solved(spec, chain, T, r):
    assert r.status is IKStatus.SOLVED, r.reason
    assert np.all(np.isfinite(r.best)) and spec.within_limits(r.best)
    dp, da = _pose_error(spec, fk(chain, r.best), T)
    assert dp < POS_TOL and da < ROT_TOL, (dp, da)
    _check_all_reach(spec, r, T, labels=False)


def test_aubo_wrist_singular_moves_j6_where_the_arm_reaches():
    """Issue 3: at q5 = 0 only J6 + (J2..J4) is fixed by the pose. Keeping q_near's J6 left the
    planar J2-J4 problem out of reach (or out of range) for ~5 % of such poses; J6 now takes the
    value nearest q_near's for which J2-J4 have an in-range solution."""
    spec = robots.get("aubo_i5")
    chain = chain_of(spec)
    q = np.radians([40.8412, -57.7208, 33.2454, -25.1476, 0.0, -47.8964])
    T = fk(chain, q)
    r = solve(spec, T)   # from home (J6 = 0): with J6 kept at 0 the J4 origin was 31.4 mm out of reach
    _aubo_check_singular_solved(spec, chain, T, r)
    assert r.singular and r.free_joints == (5,)
    assert abs(r.best[4]) < 1e-12
    assert 0.0 < -r.best[5] < -q[5]   # moved from home's 0 toward the original, not past it
    assert f"J6 set to {np.degrees(r.best[5]):.1f}°, the nearest value to 0.0° at which the arm reaches" in r.reason
    # nearest: no J6 closer to home's has an in-range solution (none is kept from such a q_near)
    for x in np.linspace(r.best[5], 0.0, 41)[1:]:
        qn = spec.home.copy()
        qn[5] = x
        assert not any(s.within_limits and abs(s.q[5] - x) < 1e-12 for s in solve(spec, T, qn).solutions)
    b = solve_batch(spec, T[None])
    assert b.ok[0] and b.singular[0] and np.allclose(b.q[0], r.best, atol=1e-12) and b.branch[0] == r.best_branch
    # where q_near's J6 works it is kept (q_near = q: q itself comes back)
    r2 = solve(spec, T, q)
    assert r2.ok and np.allclose(r2.best, q, atol=1e-9)


@pytest.mark.parametrize("q5", [0.0, 1e-12, -1e-12])
def test_aubo_wrist_singular_poses_are_all_solved(q5):
    """FK of random in-range joints with J5 = 0 (or 1e-12, singular to float precision) is solved
    in range from home and from random q_near, one by one and in a batch, alike."""
    spec = robots.get("aubo_i5")
    chain = chain_of(spec)
    rng = np.random.default_rng(2024)
    Q = rng.uniform(spec.lower, spec.upper, (500, 6))
    Q[:, 4] = q5
    T = fk_batch(chain, Q)
    for QN in (np.broadcast_to(spec.home, Q.shape), rng.uniform(spec.lower, spec.upper, Q.shape)):
        b = solve_batch(spec, T, QN)
        assert b.ok.all()
        for i in range(len(T)):
            r = solve(spec, T[i], QN[i])
            _aubo_check_singular_solved(spec, chain, T[i], r)
            assert np.allclose(b.q[i], r.best, atol=1e-12) and b.branch[i] == r.best_branch
            assert b.singular[i] == r.singular


def test_scara_stretched_gives_one_solution():
    spec = robots.get("scara")
    T = fk(chain_of(spec), np.array([0.5, 0.0, 0.1, 0.2]))
    r = solve(spec, T, np.array([0.5, 0.0, 0.1, 0.2]))
    assert r.ok and {s.branch for s in r.solutions} == {"right"}    # one elbow ...
    assert sorted(s.q[3] for s in r.solutions) == pytest.approx([0.2 - 2 * math.pi, 0.2])   # ... two J4 equivalents
    _check_all_reach(spec, r, T, labels=False)


# ----- unreachable and out of range --------------------------------------------------------

def test_irb120_unreachable_distance():
    spec = robots.get("irb120")
    g = spec.geometry
    phi = math.atan2(g.d4, g.a3)
    T = fk(chain_of(spec), np.array([0.0, 0.0, -phi, 0.0, 0.0, 0.0]))   # stretched straight up
    T[2, 3] += 0.05
    r = solve(spec, T)
    assert r.status is IKStatus.UNREACHABLE and not r.ok and r.best is None
    assert r.distance == pytest.approx(0.05, abs=1e-9)
    assert "50.0 mm" in r.reason


def test_scara_unreachable_outside_and_inside():
    spec = robots.get("scara")
    far = solve(spec, pose_from_rpy((0.7, 0.0, 0.3), (math.pi, 0, 0)))
    assert far.status is IKStatus.UNREACHABLE and far.distance == pytest.approx(0.1, abs=1e-12)
    near = solve(spec, pose_from_rpy((0.0, 0.01, 0.3), (math.pi, 0, 0)))
    assert near.status is IKStatus.UNREACHABLE and near.distance == pytest.approx(0.04, abs=1e-12)


def test_aubo_unreachable_distance_bounded_by_the_shift():
    spec = robots.get("aubo_i5")
    T = fk(chain_of(spec), np.zeros(6))   # arm stretched straight up
    T[2, 3] += 0.05
    r = solve(spec, T)
    assert r.status is IKStatus.UNREACHABLE
    assert 0.0 < r.distance <= 0.05 + 1e-9


def test_scara_out_of_range_names_j3():
    spec = robots.get("scara")
    z = spec.geometry.z0 - 0.25   # 50 mm beyond the 200 mm stroke
    r = solve(spec, pose_from_rpy((0.4, 0.2, z), (math.pi, 0, 0)))
    assert r.status is IKStatus.OUT_OF_RANGE and r.best is None
    assert "J3" in r.reason and "50.0 mm" in r.reason
    assert r.solutions and not any(s.within_limits for s in r.solutions)


def test_irb120_out_of_range_names_a_joint():
    spec = robots.get("irb120")
    chain = chain_of(spec)
    q = np.radians([0, 0, 0, 0, 130, 0])    # J5 beyond +-120 deg; its flip needs J4 = 180 (> 160)
    T = fk(chain, q)
    r = solve(spec, T)
    assert r.status is IKStatus.OUT_OF_RANGE
    assert not any(spec.within_limits(s.q) for s in r.solutions)
    assert "J5" in r.reason or "J4" in r.reason
    _check_all_reach(spec, r, T)


# ----- the choice rule ----------------------------------------------------------------------

def _two_arm_branches(spec, q):
    r = solve(spec, fk(chain_of(spec), q))
    inside = [s for s in r.solutions if s.within_limits]
    a = next(s for s in inside if s.branch == "front/up/noflip")
    b = next(s for s in inside if s.branch == "front/down/noflip")
    return a, b


def test_weighted_rule_prefers_the_heavier_joints():
    spec = robots.get("aubo_i5")
    a, b = _two_arm_branches(spec, np.radians([10, -10, 60, 20, 40, 10]))
    q_near = np.concatenate([a.q[:3], b.q[3:]])   # arm like A, wrist like B
    arm_only = solve(spec, fk(chain_of(spec), a.q), q_near, weights=[1, 1, 1, 0, 0, 0])
    wrist_only = solve(spec, fk(chain_of(spec), a.q), q_near, weights=[0, 0, 0, 1, 1, 1])
    assert arm_only.best_branch == a.branch and np.allclose(arm_only.best, a.q)
    assert wrist_only.best_branch == b.branch and np.allclose(wrist_only.best, b.q)
    # the default rule is sum(w * |dq|) with w = (1, 1, 1, .25, .25, .25), computed here by hand
    w = np.array([1, 1, 1, 0.25, 0.25, 0.25])
    expect = a if np.abs(a.q - q_near) @ w < np.abs(b.q - q_near) @ w else b
    assert solve(spec, fk(chain_of(spec), a.q), q_near).best_branch == expect.branch


def test_shortest_travel_picks_nearest_j6_equivalent():
    spec = robots.get("irb120")
    q = np.radians([0, 10, 10, 30, 40, 20])
    q_near = q.copy()
    q_near[5] = math.radians(350)
    r = solve(spec, fk(chain_of(spec), q), q_near)
    assert math.degrees(r.best[5]) == pytest.approx(380.0, abs=1e-9)


def test_stay_on_branch():
    spec = robots.get("irb120")
    T = fk(chain_of(spec), np.radians([0, 10, 10, 30, 5, 0]))
    q_near = np.radians([0, 10, 10, 30, -1, 0])     # wrist "flip" (q5 < 0), but near the noflip one
    assert branch_of(spec, q_near) == "front/up/flip"
    assert solve(spec, T, q_near).best_branch == "front/up/noflip"
    r = solve(spec, T, q_near, stay_on_branch=True)
    assert r.ok and r.best_branch == "front/up/flip"
    assert math.degrees(r.best[3]) == pytest.approx(-150.0, abs=1e-9)


# ----- batch == single ----------------------------------------------------------------------

@pytest.mark.parametrize("name", ROBOTS)
def test_batch_matches_single(name):
    spec = robots.get(name)
    chain = chain_of(spec)
    rng = np.random.default_rng(3)
    Q = rng.uniform(spec.lower * 1.1, spec.upper * 1.1, (150, spec.dof))
    # (nearly) singular rows, where the solvers keep q_near's free joint or elbow
    if spec.dof == 6:
        Q[1::4, 4] = rng.choice([0.0, 1e-11, 3e-10, 1e-8], size=len(Q[1::4]))
    Q[2::5, 2 if spec.dof == 6 else 1] = rng.choice([0.0, 1e-8, -3e-8], size=len(Q[2::5]))
    T = fk_batch(chain, Q)
    T[::10, :3, 3] *= 2.0                     # some out of reach
    q_near = rng.uniform(spec.lower, spec.upper, (150, spec.dof))
    q_near[::2] = Q[::2]
    for stay in (False, True):
        b = solve_batch(spec, T, q_near, stay_on_branch=stay)
        for i in range(len(T)):
            r = solve(spec, T[i], q_near[i], stay_on_branch=stay)
            assert b.status[i] is r.status
            assert b.ok[i] == r.ok and b.singular[i] == r.singular
            assert b.distance[i] == pytest.approx(r.distance, abs=1e-12)
            if r.ok:
                assert np.allclose(b.q[i], r.best, atol=1e-9) and b.branch[i] == r.best_branch
            else:
                assert np.all(np.isnan(b.q[i])) and b.branch[i] == ""


def test_irb120_batch_at_the_wrist_singularity():
    """Regression: solve_batch raised IndexError when some poses had theta5 = 0 (a (N, 2, 1) array
    indexed with (N, 2, 2) indices); singular and regular rows, each as solve() gives it."""
    spec = robots.get("irb120")
    chain = chain_of(spec)
    q = np.array([1.853, -1.612, 0.335, -1.63, 0.0, 0.521])
    q2 = np.array([0.2, 0.1, 0.3, 0.4, 0.5, 0.6])
    T = fk_batch(chain, np.stack([q, q2, q, q]))
    QN = np.stack([q, q2, spec.home, q2])
    b = solve_batch(spec, T, QN)
    for i in range(len(T)):
        r = solve(spec, T[i], QN[i])
        assert b.ok[i] and r.ok and b.branch[i] == r.best_branch
        assert np.allclose(b.q[i], r.best, atol=1e-9)
    assert np.allclose(b.q[0], q, atol=1e-9)   # q_near = q: J4 (free) kept, q comes back
    b1 = solve_batch(spec, T[:1], q)
    assert np.allclose(b1.q[0], solve(spec, T[0], q).best, atol=1e-9)


# ----- the fused choice == the reference rule ------------------------------------------------

@pytest.mark.parametrize("name", ROBOTS)
def test_choose_agrees_with_pick(name):
    """solver.choose() (branches skipped while solving) picks exactly what TravelRule.pick() picks
    from every solution, over random poses, weights and branch filters, including poses near
    singularities and beyond the joint ranges."""
    spec = robots.get(name)
    chain = chain_of(spec)
    ctx = robot_ik(spec)
    solver = ctx.solver
    B = len(solver.labels)
    rng = np.random.default_rng(5)
    Q = rng.uniform(spec.lower * 1.2, spec.upper * 1.2, (300, spec.dof))
    if spec.dof == 6:
        Q[::4, 4] = rng.choice([0.0, 1e-10, 3e-10, 1e-8, -1e-7], size=len(Q[::4]))   # wrist (nearly) singular
    Q[::7, 1] = 0.0                                                                      # stretched elbows
    qns = rng.uniform(spec.lower, spec.upper, (len(Q), spec.dof))
    qns[::3] = Q[::3]
    chosen = 0
    for q, qn in zip(Q, qns):
        t, qn = fk(chain, q).ravel().tolist(), qn.tolist()
        w = rng.uniform(0.0, 2.0, spec.dof) * (rng.random(spec.dof) > 0.2)      # some weights 0
        choice = ctx.rule_for(w.tolist())
        mask = int(rng.integers(0, B))                                            # random branch filter
        choice = choice.with_branch(int(rng.integers(0, B)), mask)
        got = solver.choose(t, qn, choice)
        cands, _, flags = solver.solve_flags(t, qn)
        assert (got and got[:2]) == choice.pick(cands, qn)
        if got is not None:   # the chosen solution's singularity flags are its candidate's
            assert got[2] == flags[[c for _, c in cands].index(got[1])]
        chosen += got is not None
    assert chosen > len(Q) // 4   # not only "nothing qualifies"


# ----- path ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ROBOTS)
def test_path_on_a_line_is_continuous(name):
    spec = robots.get(name)
    chain = chain_of(spec)
    T0 = fk(chain, spec.home)
    s = np.linspace(0.0, 1.0, 300)
    T = np.repeat(T0[None], len(s), axis=0)
    T[:, :3, 3] += s[:, None] * np.array([0.10, 0.08, -0.06])
    p = solve_path(spec, T, spec.home)
    assert p.first_failure is None and p.ok.all()
    assert np.abs(np.diff(p.q, axis=0)).max() < 0.01
    assert {branch_of(spec, q) for q in p.q} == {branch_of(spec, spec.home)}
    for q, Ti in zip(p.q, T):
        dp, da = _pose_error(spec, fk(chain, q), Ti)
        assert dp < POS_TOL and da < ROT_TOL


def test_path_through_the_wrist_singularity_stays_continuous():
    """q5 passes through 0 along the path: the wrist label changes, the joints do not jump."""
    spec = robots.get("irb120")
    chain = chain_of(spec)
    s = np.linspace(0.0, 1.0, 101)                    # sample 50 is exactly q5 = 0
    Q = np.radians([10, 15, 5, 30, 0, 20]) + np.outer(s - 0.5, np.radians([0, 10, 0, 0, 40, 0]))
    T = fk_batch(chain, Q)
    p = solve_path(spec, T, Q[0])
    assert p.first_failure is None
    assert np.allclose(p.q, Q, atol=1e-6)
    assert branch_of(spec, p.q[0]) == "front/up/flip" and branch_of(spec, p.q[-1]) == "front/up/noflip"


def test_path_reports_first_unreachable_sample():
    spec = robots.get("scara")
    x = np.linspace(0.4, 0.7, 301)
    T = np.stack([pose_from_rpy((xi, 0.05, 0.3), (math.pi, 0, 0)) for xi in x])
    p = solve_path(spec, T, solve(spec, T[0], np.array([0.0, 0.5, 0.05, 0.0])).best)
    expected = int(np.argmax(np.hypot(x, 0.05) > 0.6))
    assert p.first_failure == expected
    assert p.ok[:expected].all() and not p.ok[expected:].any()
    assert "out of reach" in p.reason


def test_path_through_the_j1_axis_needs_a_flip():
    """The wrist centre crossing the J1 axis: the front configuration cannot follow continuously."""
    spec = robots.get("irb120")
    x = np.linspace(0.15, -0.15, 121)
    R = np.diag([-1.0, 1.0, -1.0])                   # tool pointing down
    T = np.stack([np.block([[R, np.array([[xi], [0.0], [0.45]])], [np.zeros((1, 3)), np.ones((1, 1))]]) for xi in x])
    r0 = solve(spec, T[0])
    p = solve_path(spec, T, r0.best)
    assert p.first_failure is not None
    wrist_x = x                                        # tool straight down: wrist centre above the flange
    assert wrist_x[p.first_failure - 1] >= 0.0 and p.first_failure <= int(np.argmax(wrist_x < 0)) + 1
    assert p.ok[: p.first_failure].all()


# ----- helpers and input checks -------------------------------------------------------------

def test_pose_helpers_agree():
    q_xyzw = np.array([0.1, -0.2, 0.3, 0.9])
    T = pose_from_quat((0.1, 0.2, 0.3), q_xyzw)
    assert np.allclose(matrix_to_quat(T[:3, :3]), q_xyzw / np.linalg.norm(q_xyzw))
    T2 = pose_from_rpy((0, 0, 0), (0.0, 0.0, math.pi / 2))
    assert np.allclose(T2[:3, 0], [0, 1, 0])


@pytest.mark.parametrize("bad", [np.eye(3), np.full((4, 4), np.nan), np.diag([2.0, 1.0, 1.0, 1.0])])
def test_invalid_input_raises(bad):
    with pytest.raises(ValueError):
        solve(robots.get("irb120"), bad)


def test_invalid_q_near_raises():
    with pytest.raises(ValueError):
        solve(robots.get("irb120"), np.eye(4), q_near=[0.0, 1.0])


@pytest.mark.parametrize("name", ROBOTS)
def test_empty_batch_and_path(name):
    spec = robots.get(name)
    b = solve_batch(spec, np.zeros((0, 4, 4)))
    assert b.q.shape == (0, spec.dof) and b.ok.shape == (0,)
    p = solve_path(spec, np.zeros((0, 4, 4)), spec.home)
    assert p.q.shape == (0, spec.dof) and p.first_failure is None


# ----- singularities are reported ------------------------------------------------------------

def test_irb120_wrist_singularity_is_reported():
    spec = robots.get("irb120")
    chain = chain_of(spec)
    T = fk(chain, np.radians([20, 10, 10, 50, 0, -30]))
    q_near = np.radians([20, 10, 10, 35, 5, 0])
    r = solve(spec, T, q_near)
    assert r.status is IKStatus.SOLVED and r.ok                  # consumers checking ok keep working
    assert r.singular and r.free_joints == (3,)
    assert "wrist singular" in r.reason and "J4 kept at 35.0°" in r.reason
    # a little away from q5 = 0 the pose determines J4: regular
    r2 = solve(spec, fk(chain, np.radians([20, 10, 10, 50, 2, -30])), q_near)
    assert r2.ok and not r2.singular and r2.free_joints == () and "singular" not in r2.reason


def test_irb120_j1_axis_and_stretched_arm_are_reported():
    spec = robots.get("irb120")
    g = spec.geometry
    phi = math.atan2(g.d4, g.a3)
    T = fk(chain_of(spec), np.array([0.3, 0.0, -phi, 0.2, 0.4, 0.1]))   # wrist centre on J1, arm stretched
    r = solve(spec, T, np.array([-0.4, 0.0, -1.0, 0.5, 0.3, 0.0]))
    assert r.ok and r.singular and r.free_joints == (0,)
    assert "J1 axis" in r.reason and "J1 kept at -22.9°" in r.reason and "stretched" in r.reason


def test_aubo_wrist_singularity_is_reported():
    spec = robots.get("aubo_i5")
    q = np.radians([30, -20, 80, 10, 0, 40])
    r = solve(spec, fk(chain_of(spec), q), q)
    assert r.ok and r.singular and r.free_joints == (5,) and "J6 kept at 40.0°" in r.reason
    q[4] = math.radians(30)
    r2 = solve(spec, fk(chain_of(spec), q), q)
    assert r2.ok and not r2.singular and r2.free_joints == ()


def test_scara_stretched_arm_is_singular_without_free_joints():
    spec = robots.get("scara")
    q = np.array([0.5, 0.0, 0.1, 0.2])
    r = solve(spec, fk(chain_of(spec), q), q)
    assert r.ok and r.singular and r.free_joints == () and "stretched" in r.reason
    r2 = solve(spec, fk(chain_of(spec), np.array([0.5, 0.4, 0.1, 0.2])))
    assert r2.ok and not r2.singular


def test_singular_status_when_the_current_branch_merges():
    """stay_on_branch on the flipped wrist, target at q5 = 0: flip and no flip are one branch there."""
    spec = robots.get("irb120")
    T = fk(chain_of(spec), np.radians([0, 10, 10, 30, 0, 0]))
    q_near = np.radians([0, 10, 10, 30, -1, 0])
    assert branch_of(spec, q_near) == "front/up/flip"
    r = solve(spec, T, q_near, stay_on_branch=True)
    assert r.status is IKStatus.SINGULAR and not r.ok and r.best is None
    assert r.singular and r.free_joints == (3,)
    assert "front/up/flip merges with front/up/noflip" in r.reason
    _check_all_reach(spec, r, T, labels=False)
    # without stay_on_branch the same pose is simply solved (and flagged)
    r2 = solve(spec, T, q_near)
    assert r2.ok and r2.singular and r2.best_branch == "front/up/noflip"
    # away from the singularity the flipped wrist exists again
    q_far = np.radians([0, 10, 10, 30, 60, 0])
    T3 = fk(chain_of(spec), q_far)
    assert solve(spec, T3, q_near, stay_on_branch=True).status is IKStatus.SOLVED


def test_scara_lists_every_j4_equivalent():
    """J4 (+-360 deg) of the SCARA: every 2 pi equivalent in range is a solution; best is the nearest."""
    spec = robots.get("scara")
    chain = chain_of(spec)
    q = np.array([0.3, 0.8, 0.1, math.radians(300)])
    T = fk(chain, q)
    r = solve(spec, T, spec.home)
    assert any(_same_joints(s.q, q) for s in r.solutions)
    same_arm = [s for s in r.solutions if np.allclose(s.q[:3], q[:3], rtol=0.0, atol=1e-12)]
    assert sorted(np.round(np.degrees([s.q[3] for s in same_arm]), 9)) == [-60.0, 300.0]
    assert math.degrees(r.best[3]) == pytest.approx(-60.0, abs=1e-9)         # nearest home's J4 = 0
    near = spec.home.copy()
    near[3] = math.radians(250)
    assert math.degrees(solve(spec, T, near).best[3]) == pytest.approx(300.0, abs=1e-9)
    # at the limit: 360, 0 and -360 are all in range
    q[3] = 2 * math.pi
    r = solve(spec, fk(chain, q), q)
    same_arm = [s for s in r.solutions if np.allclose(s.q[:3], q[:3], rtol=0.0, atol=1e-12)]
    assert sorted(np.round(np.degrees([s.q[3] for s in same_arm]), 9)) == [-360.0, 0.0, 360.0]
    assert r.best[3] == pytest.approx(2 * math.pi, abs=1e-12)
    _check_all_reach(spec, r, fk(chain, q))


def test_one_matrix_to_quat_is_the_batch_form_to_rounding_and_rotates_the_same():
    """matrix_to_quat of one (3, 3) matrix takes a scalar path: it must agree with the batch path
    on random rotations and on the 180° turns where the choice of formula switches."""
    from scipy.spatial.transform import Rotation
    mats = np.concatenate([Rotation.random(500, random_state=3).as_matrix(),
                           np.array([np.eye(3), np.diag([1.0, -1, -1]), np.diag([-1.0, 1, -1]), np.diag([-1.0, -1, 1])])])
    batch = matrix_to_quat(mats)
    one = np.array([matrix_to_quat(m) for m in mats])
    np.testing.assert_allclose(one, batch, rtol=0, atol=1e-15)
    assert np.all(one[:, 3] >= 0)
    back = Rotation.from_quat(one).as_matrix()
    np.testing.assert_allclose(back, mats, atol=1e-12)
