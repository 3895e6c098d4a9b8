"""Pure-numpy rigid-body dynamics (controllers/dynamics.py) against PyBullet and against physics."""

from __future__ import annotations

import numpy as np
import pytest

from armtwin import robots
from armtwin.controllers.dynamics import RigidBodies, gravity_torque, inverse_dynamics, mass_matrix, sphere_inertia
from armtwin.controllers.tools import default_tools
from armtwin.envs.sim import World
from armtwin.robots.bodies import rigid_bodies

ALL = robots.names()


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("load", ["bare", "payload", "tool"])
def test_rnea_equals_pybullets_inverse_dynamics_and_mass_matrix(name, load):
    spec = robots.get(name)
    payload = spec.payload if load == "payload" else 0.0
    tool = default_tools()[1] if load == "tool" else None
    rng = np.random.default_rng(3)
    Q = rng.uniform(spec.lower, spec.upper, (60, spec.dof))
    QD = rng.uniform(-1, 1, Q.shape) * spec.max_velocity
    QDD = rng.normal(0.0, 10.0, Q.shape)
    bodies = rigid_bodies(spec, payload=payload, tool=tool)
    with World(ground=False) as w:
        r = w.add_robot(spec, "kinematic", payload=payload, tool=tool)
        want = np.array([r.inverse_dynamics(a, b, c) for a, b, c in zip(Q, QD, QDD)])
        want_m = np.array([r.mass_matrix(q) for q in Q[:10]])
    got = inverse_dynamics(bodies, Q, QD, QDD)
    scale = np.abs(want).max()
    assert scale > 1.0
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-8 * scale)
    np.testing.assert_allclose(mass_matrix(bodies, Q[:10]), want_m, rtol=0, atol=1e-8 * np.abs(want_m).max())
    # one state at a time gives the same as the batch
    np.testing.assert_allclose(inverse_dynamics(bodies, Q[0], QD[0], QDD[0]), got[0], rtol=0, atol=1e-12 * scale)


@pytest.mark.parametrize("name", ALL)
def test_mass_matrix_is_symmetric_positive_definite_and_power_balances(name):
    """d/dt(½ q̇ᵀM q̇) + d/dt(potential) = τ·q̇ along any motion (finite differences)."""
    spec = robots.get(name)
    b = rigid_bodies(spec, payload=1.0)
    rng = np.random.default_rng(9)
    q = rng.uniform(spec.lower, spec.upper) * 0.8
    qd = rng.uniform(-1, 1, spec.dof)
    qdd = rng.uniform(-2, 2, spec.dof)
    M = mass_matrix(b, q)
    np.testing.assert_allclose(M, M.T, atol=1e-12)
    assert np.linalg.eigvalsh(M).min() > 0
    h = 1e-5

    def energy(t):
        qt, qdt = q + qd * t + 0.5 * qdd * t * t, qd + qdd * t
        kinetic = 0.5 * qdt @ mass_matrix(b, qt) @ qdt
        # potential: work against gravity = ∫ g(q)·dq along a straight path from q to qt
        s = np.linspace(0.0, 1.0, 41)
        path = q + np.outer(s, qt - q)
        g = gravity_torque(b, path)
        return kinetic + np.trapezoid(g @ (qt - q), s)

    de = (energy(h) - energy(-h)) / (2 * h)
    power = inverse_dynamics(b, q, qd, qdd) @ qd
    assert de == pytest.approx(power, rel=1e-5, abs=1e-6)


def test_a_load_on_the_flange_adds_its_weight_times_its_lever():
    """with_load: a 2 kg point 100 mm out along the flange's z adds m·g·lever at a horizontal arm
    (positive J2/J3 tip the arm forward and down, so holding a load out front takes negative torque)."""
    spec = robots.get("irb120")
    bare = rigid_bodies(spec)
    loaded = bare.with_load(2.0, com=(0, 0, 0.1))
    q = np.zeros(spec.dof)            # forearm along +x; the flange's z points along +x too
    extra = gravity_torque(loaded, q) - gravity_torque(bare, q)
    lever_j2 = 0.302 + 0.072 + 0.1    # J2 axis (x = 0) to the load, m
    assert extra[1] == pytest.approx(-2.0 * 9.81 * lever_j2, rel=1e-9)
    assert extra[2] == pytest.approx(-2.0 * 9.81 * lever_j2, rel=1e-9)   # J3 sits straight above J2 at zero
    with pytest.raises(ValueError, match="load mass"):
        bare.with_load(-1.0)
    assert bare.with_load(0.0) is bare


def test_prismatic_quill_carries_its_weight_and_accelerates():
    spec = robots.get("scara")
    b = rigid_bodies(spec)
    q = spec.home
    moved = spec.links[3].mass + spec.links[4].mass + 1e-3    # quill, roll link, flange token
    tau = inverse_dynamics(b, q, np.zeros(4), np.array([0, 0, 2.0, 0]))
    # J3 pushes along -z: holding the quill is a negative force; accelerating it down (+2 m/s² along -z) lowers it
    assert tau[2] == pytest.approx(-moved * 9.81 + moved * 2.0, rel=1e-9)


def test_bad_shapes_and_values_are_refused():
    b = rigid_bodies(robots.get("irb120"))
    with pytest.raises(ValueError, match="6 values per row"):
        inverse_dynamics(b, np.zeros(5))
    with pytest.raises(ValueError, match="same shape"):
        inverse_dynamics(b, np.zeros((3, 6)), np.zeros((2, 6)))
    with pytest.raises(ValueError, match="RigidBodies.mass"):
        RigidBodies(b.chain, np.zeros(5), b.com, b.inertia, b.gravity)
    with pytest.raises(ValueError, match="payload"):
        rigid_bodies(robots.get("irb120"), payload=-1)
    assert sphere_inertia(0.0) == 0.0
    # 3 kg of aluminium: r = 64.3 mm, I = 0.4 m r²
    assert sphere_inertia(3.0) == pytest.approx(0.4 * 3.0 * (3 * 3.0 / (4 * np.pi * 2700)) ** (2 / 3))


# ----- the hinge gains' design rule (robots/gains.py) -------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_every_robots_hinge_gains_are_the_rules_output(name):
    """The data files' gains are what robots/gains.py designs from their inertias (rerun it after
    changing masses or inertias: ``python -m armtwin.robots.gains``)."""
    from armtwin.robots.gains import design_hinge_gains, rule_for
    spec = robots.get(name)
    assert design_hinge_gains(spec, rule_for(name)) == spec.drive


@pytest.mark.parametrize("name", ALL)
def test_designed_gains_sit_at_half_the_explicit_euler_limit(name):
    from armtwin.robots.gains import POSES, TARGET, stability_eigenvalue
    spec = robots.get(name)
    Q = np.random.default_rng(0).uniform(spec.lower, spec.upper, (POSES, spec.dof))
    worst = stability_eigenvalue(spec, spec.drive, Q, 1.0 / 240.0).max()
    assert worst == pytest.approx(TARGET, rel=0.06)       # two significant digits of rounding
    assert stability_eigenvalue(spec, spec.drive, Q, 1.0 / 240.0, payload=spec.payload).max() < worst
