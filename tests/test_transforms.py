"""Rotation conversions: property tests."""

import numpy as np
from hypothesis import given, settings, strategies as st

from armtwin.controllers import transforms as tf

angles = st.floats(-np.pi, np.pi, allow_nan=False)


@given(angles, st.floats(-1.5, 1.5), angles)
@settings(max_examples=300, deadline=None)
def test_rpy_round_trip_and_convention(r, p, y):
    m = tf.rpy_to_matrix([r, p, y])
    assert np.allclose(m, tf.rot_z(y) @ tf.rot_y(p) @ tf.rot_x(r), atol=1e-12)
    assert np.allclose(tf.rpy_to_matrix(tf.matrix_to_rpy(m)), m, atol=1e-9)


@given(st.lists(st.floats(-1, 1), min_size=4, max_size=4).filter(lambda v: np.linalg.norm(v) > 0.1))
@settings(max_examples=300, deadline=None)
def test_quaternion_round_trip(v):
    q = np.array(v) / np.linalg.norm(v)
    m = tf.quat_to_matrix(q)
    assert np.allclose(m @ m.T, np.eye(3), atol=1e-12) and np.linalg.det(m) > 0
    q2 = tf.matrix_to_quat(m)
    assert q2[3] >= 0
    assert np.allclose(q2, q, atol=1e-9) or np.allclose(q2, -q, atol=1e-9)


def test_invert_and_rotation_angle():
    t = tf.transform(tf.rpy_to_matrix([0.3, -0.2, 1.0]), [0.1, 0.2, 0.3])
    assert np.allclose(tf.invert(t) @ t, np.eye(4), atol=1e-12)
    assert abs(tf.rotation_angle(np.eye(3), tf.rot_z(0.25)) - 0.25) < 1e-12
    assert abs(tf.rotation_angle(tf.rot_x(1e-10), np.eye(3)) - 1e-10) < 1e-16
