"""Makers' published link dynamics, and their transformation into armtwin's link frames.

A :class:`ReferenceModel` holds the numbers of a public robot description as facts: per link
the mass (kg), the centre of mass (m) and the inertia tensor about it (kg·m²) in the
*reference's* link frame, and the reference's own joint chain (URDF joint origins and axes),
with the repository, file and commit they were read from. armtwin's link frames follow its DH
tables and may be turned or shifted against the reference's; the joint values are the same
(both follow the maker's controller).

:meth:`ReferenceModel.inertials` finds the fixed transform of every link from the two
chains — ``X_i = A_i(q)⁻¹ · R_i(q)`` with ``A_i`` armtwin's and ``R_i`` the reference's link
frame in the mounting frame, which must not depend on ``q`` (checked at several poses, and the
flanges must coincide: a wrong chain fails when the robot's data module is imported) — and
carries the data over: ``c = X · c_ref``, ``I = R · I_ref · Rᵀ`` with ``R`` the rotation of ``X``.
A reference value known to be a placeholder is not carried over: the link's inertia is then
derived from its drawing shapes (see :class:`~armtwin.robots.spec.Inertial`) and the source says so.

Pure numpy: no PyBullet. Units: metres, radians, kilograms.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from ..controllers.transforms import invert
from .spec import Inertial, JointSpec, LinkSpec, Origin, check_inertia, inertia_matrix, inertia_tuple

__all__ = ["RefLink", "RefJoint", "ReferenceModel", "FRAME_TOLERANCE"]

#: largest change of a link's fixed transform between poses, and largest flange mismatch, m (and rad)
FRAME_TOLERANCE = 1e-9


@dataclass(frozen=True)
class RefLink:
    """One link of a reference description, its numbers as published.

    Attributes:
        name: the reference's link name.
        mass: kg.
        com: centre of mass, m, in the reference's link frame (URDF ``<inertial><origin xyz>``;
            the references used here have ``rpy="0 0 0"``).
        inertia: (ixx, ixy, ixz, iyy, iyz, izz) about the centre of mass, reference link axes, kg·m².
        placeholder: empty when the inertia is a real value; else why it is not one (armtwin then
            derives the inertia from the link's drawing shapes and keeps the published centre of mass).
    """

    name: str
    mass: float
    com: tuple[float, float, float]
    inertia: tuple[float, float, float, float, float, float]
    placeholder: str = ""


@dataclass(frozen=True)
class RefJoint:
    """One moving joint of a reference description: its origin in the parent link and its axis."""

    name: str
    origin: Origin
    axis: tuple[float, float, float]


@dataclass(frozen=True)
class ReferenceModel:
    """A public robot description's dynamics data and joint chain (see the module docstring).

    Attributes:
        repository: GitHub ``owner/name``.
        path: file inside the repository.
        commit: the commit the numbers were read from (40 hex digits).
        links: root link first, then one per joint, in chain order.
        joints: the moving joints in chain order; joint values equal armtwin's.
        flange: the reference's flange frame in its last link (to check that the chains agree).
        mount: the reference's root link frame in armtwin's root (mounting) link frame.
    """

    repository: str
    path: str
    commit: str
    links: tuple[RefLink, ...]
    joints: tuple[RefJoint, ...]
    flange: Origin = Origin()
    mount: Origin = Origin()

    def __post_init__(self) -> None:
        if len(self.links) != len(self.joints) + 1:
            raise ValueError(f"{self.citation}: need one link more than joints")
        for link in self.links:
            if not link.placeholder:
                check_inertia(inertia_matrix(link.inertia), f"{self.citation}, {link.name}")

    @property
    def citation(self) -> str:
        """``owner/name, path @ commit`` (commit shortened)."""
        return f"{self.repository}, {self.path} @ {self.commit[:10]}"

    # ----- frames -------------------------------------------------------------------------------
    def _frames(self, origins: Sequence[np.ndarray], axes: np.ndarray, root: np.ndarray, q: np.ndarray) -> list[np.ndarray]:
        out = [root]
        t = root
        for o, k, a in zip(origins, axes, q):
            t = t @ o @ _rotation(k, a)
            out.append(t)
        return out

    def link_offsets(self, joints: Sequence[JointSpec], tool: Origin) -> list[np.ndarray]:
        """The fixed transform of every link, armtwin's link frame ← the reference's: (n + 1) × (4, 4).

        Args:
            joints: armtwin's joints (revolute, in chain order; the root is the mounting frame).
            tool: armtwin's flange frame in its last link.

        Raises:
            ValueError: the transforms change with the pose, or the flanges do not coincide —
                the two chains do not describe the same arm (message: link, how far, which pose).
        """
        if len(joints) != len(self.joints):
            raise ValueError(f"{self.citation}: {len(self.joints)} joints, armtwin has {len(joints)}")
        a_orig = [j.origin.matrix for j in joints]
        a_axes = np.array([j.axis for j in joints], dtype=float)
        r_orig = [j.origin.matrix for j in self.joints]
        r_axes = np.array([j.axis for j in self.joints], dtype=float)
        rng = np.random.default_rng(20)
        poses = [np.zeros(len(joints))] + [rng.uniform(-2.5, 2.5, len(joints)) for _ in range(4)]

        def offsets(q: np.ndarray) -> list[np.ndarray]:
            A = self._frames(a_orig, a_axes, np.eye(4), q)
            R = self._frames(r_orig, r_axes, self.mount.matrix, q)
            flange = invert(A[-1] @ tool.matrix) @ R[-1] @ self.flange.matrix
            if np.abs(flange - np.eye(4)).max() > FRAME_TOLERANCE:
                raise ValueError(f"{self.citation}: the reference's flange is {np.abs(flange - np.eye(4)).max():.3g} "
                                 f"(m / rad) off armtwin's at q = {np.round(q, 3).tolist()} rad")
            return [invert(a) @ r for a, r in zip(A, R)]

        first = offsets(poses[0])
        for q in poses[1:]:
            for i, (x0, x) in enumerate(zip(first, offsets(q))):
                dev = float(np.abs(x - x0).max())
                if dev > FRAME_TOLERANCE:
                    raise ValueError(f"{self.citation}: link {self.links[i].name} is not fixed to armtwin's link {i} "
                                     f"(its transform changes by {dev:.3g} at q = {np.round(q, 3).tolist()} rad)")
        return first

    def inertials(self, joints: Sequence[JointSpec], tool: Origin) -> tuple[Inertial, ...]:
        """Centre of mass and inertia of every link in armtwin's link frames (root first).

        Raises:
            ValueError: as :meth:`link_offsets`.
        """
        out = []
        for link, x in zip(self.links, self.link_offsets(joints, tool)):
            # the frames of both chains are built from rounded published numbers: the turns between
            # them are exact to ~1e-16, and rounding them to 1e-12 keeps quarter turns exact
            x = np.round(x, 12) + 0.0
            rot, shift = x[:3, :3], x[:3, 3]
            com = rot @ np.asarray(link.com, dtype=float) + shift
            turned = not np.allclose(x, np.eye(4), rtol=0, atol=1e-15)
            how = " (turned into armtwin's link frame)" if turned else ""
            source = f"{self.citation}, link {link.name}{how}"
            if link.placeholder:
                out.append(Inertial(_snap(com), None, f"{source}; inertia derived from the drawing shapes at uniform "
                                                       f"density: {link.placeholder}"))
            else:
                inertia = rot @ inertia_matrix(link.inertia) @ rot.T
                out.append(Inertial(_snap(com), _snap(inertia_tuple(inertia)), source))
        return tuple(out)

    def apply(self, links: Sequence[LinkSpec], joints: Sequence[JointSpec], tool: Origin) -> tuple[LinkSpec, ...]:
        """``links`` with the reference's inertials (:meth:`inertials`).

        Raises:
            ValueError: a link's mass differs from the reference's, or as :meth:`link_offsets`.
        """
        if len(links) != len(self.links):
            raise ValueError(f"{self.citation}: {len(self.links)} links, armtwin has {len(links)}")
        for link, ref in zip(links, self.links):
            if link.mass != ref.mass:
                raise ValueError(f"{link.name}: mass {link.mass} kg, the reference ({self.citation}, "
                                 f"{ref.name}) says {ref.mass} kg")
        return tuple(replace(link, inertial=inertial) for link, inertial in zip(links, self.inertials(joints, tool)))


def _rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """(4, 4) rotation by ``angle`` rad about the unit ``axis``."""
    k = axis / np.linalg.norm(axis)
    K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    t = np.eye(4)
    t[:3, :3] = np.eye(3) + np.sin(angle) * K + (1.0 - np.cos(angle)) * K @ K
    return t


def _snap(v) -> tuple:
    """Round-off of the frame turns (10⁻¹⁷ where the published value is 0) back to 0."""
    return tuple(0.0 if abs(float(x)) < 1e-15 else float(x) for x in np.ravel(v))
