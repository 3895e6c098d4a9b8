"""Typed IK geometry, the robot family read from it, the spec's derived-value cache, the angle helpers."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from armtwin import robots
from armtwin.controllers.ik import (
    KinematicFamily,
    OffsetWristGeometry,
    RobotIK,
    ScaraGeometry,
    SphericalWristGeometry,
    ToolOrientation,
    robot_ik,
    solve,
    solver_for,
)
from armtwin.controllers.ik.angles import TWO_PI, flip_half_turn, turn_near, wrap, wrap_inplace, wrap_np
from armtwin.controllers.kinematics import chain_of, fk
from hypothesis import given, settings
from hypothesis import strategies as st

IRB = dict(d1=0.29, a2=0.27, a3=0.07, d4=0.302, d6=0.072, offsets=(0.0, -math.pi / 2, 0.0, 0.0, 0.0, math.pi))


@pytest.mark.parametrize("name, family, orientation", [
    ("irb120", KinematicFamily.SPHERICAL_WRIST, ToolOrientation.FULL),
    ("aubo_i5", KinematicFamily.OFFSET_WRIST, ToolOrientation.FULL),
    ("scara", KinematicFamily.SCARA, ToolOrientation.ROLL),
])
def test_the_geometry_type_is_the_one_answer_to_the_family(name, family, orientation):
    spec = robots.get(name)
    assert spec.family is family and spec.geometry.family is family
    assert spec.tool_orientation is orientation and spec.roll_only == (orientation is ToolOrientation.ROLL)
    assert type(robot_ik(spec).solver) is type(solver_for(spec.geometry))


def test_geometry_from_the_dh_table_equals_the_published_lengths():
    g = robots.get("irb120").geometry
    assert (g.d1, g.a2, g.a3, g.d4, g.d6) == (0.290, 0.270, 0.070, 0.302, 0.072)
    a = robots.get("aubo_i5").geometry
    assert (a.d1, a.d2, a.a2, a.a3, a.d5, a.d6) == (0.0985, 0.1215, 0.408, 0.376, 0.1025, 0.094)


def test_a_typo_or_a_bad_value_fails_when_the_geometry_is_built():
    with pytest.raises(TypeError):
        SphericalWristGeometry(**{**IRB, "d7": 0.1})                       # no such parameter
    with pytest.raises(TypeError):
        ScaraGeometry(l1=0.3, l2=0.2)                                       # z0 missing
    for bad, words in (({"a2": float("nan")}, "a2 must be a finite length"), ({"a2": 0.0}, "a2 must be > 0"),
                       ({"d1": "0.29"}, "d1 must be a finite length"), ({"offsets": (0.0,) * 5}, "6 finite"),
                       ({"a3": 0.0, "d4": 0.0}, "no forearm")):
        with pytest.raises(ValueError, match=words):
            SphericalWristGeometry(**{**IRB, **bad})
    with pytest.raises(ValueError, match="OffsetWristGeometry.a3 must be > 0"):
        OffsetWristGeometry(d1=0.1, d2=0.1, a2=0.4, a3=-0.3, d5=0.1, d6=0.1, offsets=(0.0,) * 6)
    assert SphericalWristGeometry(**{**IRB, "d1": 1}).d1 == 1.0 and isinstance(SphericalWristGeometry(**IRB).offsets, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        robots.get("scara").geometry.l1 = 0.4   # type: ignore[misc]


def test_a_spec_needs_a_typed_geometry():
    spec = robots.get("scara")
    with pytest.raises(TypeError, match="geometry must be one of SphericalWristGeometry, OffsetWristGeometry, ScaraGeometry"):
        dataclasses.replace(spec, geometry={"l1": 0.325, "l2": 0.275, "z0": 0.36})


def test_a_geometry_that_does_not_fit_the_chain_fails_when_its_ik_is_built():
    spec = dataclasses.replace(robots.get("irb120"), geometry=SphericalWristGeometry(**{**IRB, "a2": 0.28}))
    with pytest.raises(ValueError, match="the spherical_wrist IK does not reproduce the FK"):
        robot_ik(spec)


def test_derived_values_are_built_once_and_not_shared_with_a_replaced_spec():
    """Regression: the spec's cache was an init field, so dataclasses.replace handed the original's
    cache (its chain and IK) to the new spec."""
    spec = robots.get("irb120")
    assert robot_ik(spec) is robot_ik(spec) is spec.derived(RobotIK)
    assert chain_of(spec) is chain_of(spec)
    home = np.radians([10, 20, 30, 0, 40, 0])
    moved = dataclasses.replace(spec, named_poses={**spec.named_poses, "home": tuple(home)})
    assert robot_ik(moved) is not robot_ik(spec) and chain_of(moved) is not chain_of(spec)
    assert robot_ik(moved).home == home.tolist()
    T = fk(chain_of(spec), home)
    assert np.allclose(solve(moved, T).best, home, atol=1e-9)   # the default q_near is the new home
    built = []
    assert spec.derived(lambda s: built.append(s) or len(built)) == 1 and built == [spec]


# ----- angles -------------------------------------------------------------------------------

_angles = st.one_of(st.floats(-50.0, 50.0), st.sampled_from([math.pi, -math.pi, 3 * math.pi, -3 * math.pi, 0.0, -0.0,
                                                              math.nextafter(math.pi, 4.0), math.nextafter(-math.pi, -4.0)]))


@given(_angles)
@settings(max_examples=300, deadline=None)
def test_wraps_agree_and_land_in_the_half_open_interval(a):
    w = wrap(a)
    assert -math.pi < w <= math.pi and math.isclose(math.remainder(w - a, TWO_PI), 0.0, abs_tol=1e-12)
    wn = wrap_np(np.array([a]))[0]
    assert -math.pi < wn <= math.pi and math.isclose(math.remainder(wn - w, TWO_PI), 0.0, abs_tol=1e-12)
    if -3 * math.pi < a <= 3 * math.pi:   # the solvers' inline scalar wrap, bit for bit
        assert wrap_inplace(np.array([a]))[0] == (a - TWO_PI if a > math.pi else (a + TWO_PI if a <= -math.pi else a))
    f = flip_half_turn(np.array([w]))[0]   # the solvers' inline scalar flip, bit for bit
    assert f == (w - math.pi if w > 0.0 else w + math.pi)
    assert -math.pi <= f <= math.pi and math.isclose(abs(math.remainder(f - w, TWO_PI)), math.pi, abs_tol=1e-12)


@given(st.floats(-10.0, 10.0), st.floats(-7.0, 7.0))
@settings(max_examples=300, deadline=None)
def test_turn_near_is_the_nearest_in_range_turn(v, ref):
    lo, hi = -math.radians(400), math.radians(400)
    got = turn_near(v, ref, lo, hi)
    turns = [v + k * TWO_PI for k in range(-6, 7) if lo <= v + k * TWO_PI <= hi]
    assert math.isclose(math.remainder(got - v, TWO_PI), 0.0, abs_tol=1e-9)
    assert lo <= got <= hi
    assert abs(got - ref) <= min(abs(t - ref) for t in turns) + 1e-9
