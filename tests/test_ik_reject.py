"""The IK's solution filter (``reject``): the seam collision-aware IK plugs into.

A trivial filter (J1 > 0 is refused, or J6 > 0) stands in for a collision check: the choice takes
the nearest solution the filter accepts, in solve, solve_batch and solve_path alike.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from armtwin import robots
from armtwin.controllers.ik import IKStatus, default_weights, pose_from_rpy, solve, solve_batch, solve_path
from armtwin.controllers.kinematics import chain_of, fk, fk_batch

ROBOTS = ("irb120", "aubo_i5", "scara")


def j1_positive(q: np.ndarray) -> str | None:
    return f"J1 = {math.degrees(q[0]):.1f}° > 0" if q[0] > 0 else None


def _brute_force(spec, T, q_near, keep) -> np.ndarray | None:
    """The nearest in-range solution that ``keep`` accepts, from the full solution list."""
    w = default_weights(spec)
    ok = [s.q for s in solve(spec, T, q_near).solutions if s.within_limits and keep(s.q)]
    return min(ok, key=lambda q: float(np.abs(q - q_near) @ w)) if ok else None


def test_refused_pick_gives_the_nearest_accepted_solution():
    spec = robots.get("aubo_i5")
    q = np.radians([30, -20, 80, 10, 60, 0])
    T = fk(chain_of(spec), q)
    assert solve(spec, T, q).best[0] > 0   # without the filter J1 = 30°
    r = solve(spec, T, q, reject=j1_positive)
    assert r.ok and r.best[0] <= 0
    assert np.allclose(r.best, _brute_force(spec, T, q, lambda s: s[0] <= 0), atol=1e-12)
    assert "2 nearer solutions rejected, the nearest front/up/noflip: J1 = 30.0° > 0" in r.reason
    # every solution carries the filter's verdict
    assert r.solutions and all((s.rejected != "") == (s.q[0] > 0) for s in r.solutions)
    assert all(s.rejected.startswith("J1 = ") for s in r.solutions if s.rejected)


def test_other_turns_of_a_wide_joint_are_candidates_too():
    """IRB120 J6 (±400°): refusing J6 > 0 keeps the arm and takes J6 - 360° (a cheaper change than the flipped wrist)."""
    spec = robots.get("irb120")
    q = np.radians([0, 10, 10, 30, 40, 20])
    T = fk(chain_of(spec), q)
    r = solve(spec, T, q, reject=lambda v: bool(v[5] > 0))
    assert r.ok and r.best_branch == "front/up/noflip"
    assert np.allclose(r.best[:5], q[:5], atol=1e-12) and math.degrees(r.best[5]) == pytest.approx(-340.0, abs=1e-9)
    assert "rejected by the solution filter" in r.reason   # True gives a generic reason


def test_every_in_range_solution_refused_is_its_own_status():
    spec = robots.get("irb120")
    T = fk(chain_of(spec), np.radians([30, 10, 10, 20, 40, 10]))   # every in-range solution has J1 = 30°
    r = solve(spec, T, reject=j1_positive)
    assert r.status is IKStatus.REJECTED and not r.ok and r.best is None and r.best_branch is None
    assert r.reason.startswith("every solution inside the joint ranges was rejected (5 in all)")
    assert "front/up/noflip: J1 = 30.0° > 0" in r.reason
    # unreachable stays unreachable: the filter is only asked about solutions
    far = solve(spec, pose_from_rpy((2.0, 0.0, 0.3), (0, math.pi, 0)), reject=lambda v: "never asked")
    assert far.status is IKStatus.UNREACHABLE


@pytest.mark.parametrize("name", ROBOTS)
def test_an_accepting_filter_is_asked_once_and_changes_nothing(name):
    spec = robots.get(name)
    rng = np.random.default_rng(8)
    Q = rng.uniform(spec.lower, spec.upper, (60, spec.dof))
    T = fk_batch(chain_of(spec), Q)
    for Ti, qn in zip(T, rng.uniform(spec.lower, spec.upper, Q.shape)):
        asked = []
        r = solve(spec, Ti, qn, reject=lambda v: asked.append(v.copy()) or v.fill(0.0))   # returns None
        plain = solve(spec, Ti, qn)
        assert r.status is plain.status and r.reason == plain.reason and r.best_branch == plain.best_branch
        if plain.ok:
            assert np.array_equal(r.best, plain.best)   # the filter got a copy: zeroing it changed nothing
            assert len(asked) == 1 and np.array_equal(asked[0], plain.best)


@pytest.mark.parametrize("name", ROBOTS)
def test_batch_with_a_filter_equals_single(name):
    spec = robots.get(name)
    rng = np.random.default_rng(9)
    Q = rng.uniform(spec.lower, spec.upper, (120, spec.dof))
    T = fk_batch(chain_of(spec), Q)
    q_near = rng.uniform(spec.lower, spec.upper, Q.shape)
    refused = 0
    for stay in (False, True):
        b = solve_batch(spec, T, q_near, stay_on_branch=stay, reject=j1_positive)
        for i in range(len(T)):
            r = solve(spec, T[i], q_near[i], stay_on_branch=stay, reject=j1_positive)
            assert b.status[i] is r.status and b.ok[i] == r.ok and b.singular[i] == r.singular
            if r.ok:
                assert b.q[i, 0] <= 0 and np.allclose(b.q[i], r.best, atol=1e-9) and b.branch[i] == r.best_branch
            else:
                assert np.all(np.isnan(b.q[i])) and b.branch[i] == ""
            refused += r.status is IKStatus.REJECTED
    assert refused > 0   # the rows where every in-range solution has J1 > 0 were met


def test_path_stops_where_the_filter_refuses_the_configuration():
    """J1 crosses 0 along the line: with J1 > 0 refused and no other solution in the start
    configuration, the path ends at the first sample past the crossing."""
    spec = robots.get("irb120")
    y = np.linspace(-0.1, 0.1, 81)
    T = np.stack([pose_from_rpy((0.4, yi, 0.3), (0.0, math.pi, 0.0)) for yi in y])
    q0 = solve(spec, T[0]).best
    free = solve_path(spec, T, q0)
    assert free.all_ok
    p = solve_path(spec, T, q0, reject=j1_positive)
    first = int(np.argmax(free.q[:, 0] > 0))
    assert p.first_failure == first and p.ok[:first].all() and not p.ok[first:].any()
    assert np.array_equal(p.q[:first], free.q[:first])
    assert f"sample {first}: every solution in the start configuration front/up/noflip" in p.reason and "J1 = " in p.reason
