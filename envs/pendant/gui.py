"""The teach pendant's browser GUI (viser): :class:`Pendant` over a :class:`~.core.PendantCore`.

The robot's URDF mirrored live from the simulated joints, sliders, jog buttons, a draggable target
(transform gizmo) that can also be typed as X/Y/Z in mm, readouts, the joint model, teach/save and
run-program controls, and a rig panel while a rig is attached; a background thread runs the
simulation in real time.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import numpy as np

from ...controllers.transforms import (
    invert,
    matrix_to_quat,
    quat_to_matrix,
    transform,
)
from ...robots import RobotSpec
from ..sim import JointMode


from .core import MoveResult, PendantConfig, PendantCore

__all__ = ["Pendant", "rig_markdown", "robot_view"]

class Pendant:
    """The viser teach pendant. Starts serving on construction.

    Args:
        robot: robot id or spec.
        host: interface to bind (default 127.0.0.1: this machine only).
        port: TCP port (0 or None: a free one).
        mode: initial joint model.
        config: settings.
        verbose: let viser print its banner.
        low_graphics: no shadows and no environment map (for software WebGL, e.g. headless tests).
    """

    def __init__(self, robot: str | RobotSpec, *, host: str = "127.0.0.1", port: int | None = 8080,
                 mode: JointMode | str = JointMode.KINEMATIC, config: PendantConfig | None = None,
                 verbose: bool = False, low_graphics: bool = False) -> None:
        import viser
        from viser.extras import ViserUrdf

        from ... import robots
        spec = robots.get(robot) if isinstance(robot, str) else robot
        self.core = PendantCore(spec, mode, config)
        self.spec = spec
        if not port:
            port = _free_port(host)
        try:
            self.server = viser.ViserServer(host=host, port=int(port), verbose=verbose)
        except BaseException:
            self.core.close()  # the world (and nothing else) is open so far
            raise
        self.host, self.port = host, self.server.get_port()
        self._stop = threading.Event()
        self._closed = False
        self._close_lock = threading.Lock()
        self._last_version = -1
        self._status = "ready"
        self._uploaded: tuple[str, str] | None = None
        self._slider_version = -1  # core.version produced by the last slider move (not echoed back)
        self._moving_target = False
        sc = self.server.scene
        sc.set_up_direction("+z")
        if low_graphics:
            sc.configure_default_lights(enabled=True, cast_shadow=False)
            sc.configure_environment_map(hdri=None)
            sc.add_light_ambient("/ambient", intensity=1.2)
        sc.add_grid("/grid", width=2.0, height=2.0, cell_size=0.1, plane="xy")
        self._world_T_report = self.core.robot.world_T_report
        root = "/robot"
        cell = self.core.config.cell
        if cell is not None:     # the cell's bodies, and the robot drawn at the cell's mount
            draw_cell(sc, cell)
            sc.add_frame("/mount", show_axes=False, position=tuple(cell.mount[:3, 3]), wxyz=_wxyz(cell.mount[:3, :3]))
            root = "/mount/robot"
        self.urdf = robot_view(self.server, spec, self.core.config.mounted, ViserUrdf, root)
        names = self.urdf.get_actuated_joint_names()
        self._order = [list(spec.joint_names).index(n) for n in names]
        self.urdf.update_cfg(self.core.joints()[self._order])
        from ..camera import cameras_for
        cam = cameras_for(spec)["iso"]
        self.server.initial_camera.position = tuple(float(v) for v in cam.eye)
        self.server.initial_camera.look_at = tuple(float(v) for v in cam.target)
        self._build_gui()
        self._thread = threading.Thread(target=self._loop, name="armtwin-pendant", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # ----- GUI ----------------------------------------------------------------------------
    def _build_gui(self) -> None:
        gui, spec, cfg = self.server.gui, self.spec, self.core.config
        units = spec.display_units()
        lo, hi = spec.to_display(spec.lower), spec.to_display(spec.upper)
        q_disp = spec.to_display(self.core.q_target)
        self.readout_md = gui.add_markdown("…")
        self.status_md = gui.add_markdown("status: ready")
        self.rig_md = gui.add_markdown("rig", visible=False)  # shown while a rig is attached
        with gui.add_folder("Joints"):
            self.sliders = []
            for i in range(spec.dof):
                s = gui.add_slider(f"J{i + 1} ({units[i]})", min=float(np.floor(lo[i])), max=float(np.ceil(hi[i])),
                                   step=0.1, initial_value=float(q_disp[i]))
                s.on_update(self._slider_cb(i))
                self.sliders.append(s)
            self.mode_dd = gui.add_dropdown("joint model", tuple(m.value for m in JointMode),
                                            initial_value=self.core.robot.mode.value)
            self.mode_dd.on_update(lambda _e: self._guard(lambda: self._set_mode(self.mode_dd.value)))
        with gui.add_folder("Jog"):
            self.joint_step = gui.add_number("joint step (deg/mm)", initial_value=float(cfg.joint_step), min=0.01, max=180.0, step=0.01)
            for i in range(spec.dof):
                g = gui.add_button_group(f"J{i + 1}", (f"J{i + 1} −", f"J{i + 1} +"))
                g.on_click(self._jog_joint_cb(i))
            self.tool_step = gui.add_number("tool step (mm)", initial_value=float(cfg.tool_step), min=0.01, max=500.0, step=0.01)
            self.turn_step = gui.add_number("turn step (deg)", initial_value=float(cfg.turn_step), min=0.01, max=180.0, step=0.01)
            self.jog_frame = gui.add_dropdown("jog frame", ("base", "tool"), initial_value="base")
            move = gui.add_button_group("tool move", ("X−", "X+", "Y−", "Y+", "Z−", "Z+"))
            move.on_click(self._jog_tool_cb(move))
            turns = ("A−", "A+", "B−", "B+", "C−", "C+") if not self._is_scara() else ("C−", "C+")
            turn = gui.add_button_group("tool turn", turns)
            turn.on_click(self._jog_tool_cb(turn))
        with gui.add_folder("IK target"):
            self.branch_dd = gui.add_dropdown("branch", ("nearest",) + self.core.branches(), initial_value="nearest")
            self.target_live = gui.add_checkbox("follow target", initial_value=True)
            snap = gui.add_button("target to tool")
            snap.on_click(lambda _e: self._guard(self._snap_target))
            go = gui.add_button("go to target")
            go.on_click(lambda _e: self._guard(self._go_target))
            p_mm = self.core.target_pose()[:3, 3] * 1000.0
            self.target_xyz = tuple(
                gui.add_number(f"target {a} (mm)", initial_value=round(float(v), 1), min=-10000.0, max=10000.0, step=0.1)
                for a, v in zip("XYZ", p_mm))
            go_xyz = gui.add_button("go to XYZ")
            go_xyz.on_click(lambda _e: self._guard(self._go_xyz))
        with gui.add_folder("Teach"):
            self.points_md = gui.add_markdown("0 points recorded")
            rec = gui.add_button("record point")
            rec.on_click(lambda _e: self._guard(self._record))
            clr = gui.add_button("clear points")
            clr.on_click(lambda _e: self._guard(self._clear))
            self.save_name = gui.add_text("file name", initial_value="taught.ngc")
            self.feed = gui.add_number("feed (mm/min)", initial_value=float(cfg.feed), min=1.0, max=60000.0, step=1.0)
            save = gui.add_button("save as G-code")
            save.on_click(lambda _e: self._guard(self._save))
            self.save_md = gui.add_markdown("", visible=False)  # the outcome, next to the button
        with gui.add_folder("Program"):
            progs = [p.name for p in self.core.list_programs()]
            self.prog_dd = gui.add_dropdown("program", tuple(progs) or ("(no .ngc in examples/)",), initial_value=(progs or ["(no .ngc in examples/)"])[0])
            self.upload = gui.add_upload_button("upload .ngc", mime_type=".ngc,.nc,.gcode,text/plain")
            self.upload.on_upload(lambda _e: self._guard(self._uploaded_cb))
            run = gui.add_button("run program")
            run.on_click(lambda _e: self._guard(self._run_program))
            stop = gui.add_button("stop")
            stop.on_click(lambda _e: self._guard(self.core.stop_program))
        T = self._world_T_report @ self.core.target_pose()
        self.target = self.server.scene.add_transform_controls("/target", scale=0.15, position=tuple(T[:3, 3]),
                                                               wxyz=_wxyz(T[:3, :3]))
        self.target_dot = self.server.scene.add_icosphere("/target/dot", radius=0.012, color=(40, 200, 80))
        self.target.on_update(lambda _e: self._guard(self._target_moved))
        self.tool_frame = self.server.scene.add_frame("/tool", axes_length=0.06, axes_radius=0.003)

    def _is_scara(self) -> bool:
        return self.spec.roll_only

    def _guard(self, fn) -> None:
        """Run a GUI callback; errors become the status line, never a dead server."""
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - shown to the person at the pendant
            self._set_status(f"error: {exc}")

    def _set_status(self, text: str) -> None:
        self._status = text
        self.status_md.content = f"status: {text}"

    def _slider_cb(self, i: int):
        def cb(event) -> None:
            if event.client is None:
                return  # our own update of the slider (the loop showing a jog), not a person
            self._guard(lambda: self._slider_moved(i))
        return cb

    def _slider_moved(self, i: int) -> None:
        # viser runs callbacks on a thread pool, so the updates of one drag can run out of
        # order: read the slider's newest value and apply it under the lock, so the last
        # callback to run applies the last value the browser sent.
        with self.core.lock:
            v = float(self.sliders[i].value)
            if abs(v - float(self.spec.to_display(self.core.q_target)[i])) < 1e-6:
                return
            r = self.core.set_joint_display(i, v)
            if abs(float(self.spec.to_display(r.q)[i]) - v) < 1e-6:
                self._slider_version = self.core.version  # the slider shows it already: no echo
            # else (clipped to the range): the loop moves the slider to the applied value
        self._set_status(r.message)
        self._snap_target()

    def _jog_joint_cb(self, i: int):
        def cb(event) -> None:
            d = -1 if event.target.value.endswith("−") else 1
            self._guard(lambda: self._report(self.core.jog_joint(i, d, float(self.joint_step.value))))
        return cb

    def _jog_tool_cb(self, group):
        def cb(event) -> None:
            v = event.target.value
            d = -1 if v.endswith("−") else 1
            letter = v[0]
            if letter in "XYZ":
                axis, step = letter.lower(), float(self.tool_step.value)
            else:
                axis, step = "r" + "xyz"["ABC".index(letter)], float(self.turn_step.value)
            self._guard(lambda: self._report(self.core.jog_tool(axis, d, step, frame=self.jog_frame.value,
                                                                branch=self._branch())))
        return cb

    def _branch(self) -> str | None:
        b = self.branch_dd.value
        return None if b == "nearest" else b

    def _report(self, r: MoveResult) -> None:
        self._set_status(r.message)
        if r.applied:
            self._snap_target()

    def _set_mode(self, value: str) -> None:
        self.core.set_mode(value)
        self._set_status(f"joint model: {value}")

    def _snap_target(self) -> None:
        T_report = self.core.target_pose()
        T = self._world_T_report @ T_report
        self._moving_target = True
        try:
            self.target.position = tuple(T[:3, 3])
            self.target.wxyz = _wxyz(T[:3, :3])
        finally:
            self._moving_target = False
        self.target_dot.color = (40, 200, 80)
        self._show_target_xyz(T_report[:3, 3])

    def _show_target_xyz(self, p_m: np.ndarray) -> None:
        """Show a target position (3,) m, reporting frame, in the X/Y/Z inputs (mm)."""
        for h, v in zip(self.target_xyz, np.asarray(p_m, float) * 1000.0):
            h.value = round(float(v), 1)

    def _target_pose_report(self) -> np.ndarray:
        T = transform(quat_to_matrix(_xyzw(self.target.wxyz)), np.asarray(self.target.position, float))
        return invert(self._world_T_report) @ T

    def _target_moved(self) -> None:
        if self._moving_target:
            return
        self._show_target_xyz(self._target_pose_report()[:3, 3])
        if self.target_live.value:
            self._go_target()

    def _go_xyz(self) -> None:
        """Move the target to the typed X/Y/Z (mm, reporting frame; its orientation kept) and go there."""
        p = np.array([float(h.value) for h in self.target_xyz]) / 1000.0
        if not np.all(np.isfinite(p)):
            self._set_status("target X/Y/Z must be numbers")
            return
        T = self._target_pose_report()
        T[:3, 3] = p
        W = self._world_T_report @ T
        self._moving_target = True
        try:
            self.target.position = tuple(float(v) for v in W[:3, 3])
        finally:
            self._moving_target = False
        self._go_target()

    def _go_target(self) -> None:
        r = self.core.move_to_pose(self._target_pose_report(), branch=self._branch())
        self._set_status(r.message)
        self.target_dot.color = (40, 200, 80) if r.applied else (230, 40, 40)

    def _record(self) -> None:
        n = self.core.record_point()
        T = self._world_T_report @ self.core.points[-1]
        self.server.scene.add_icosphere(f"/taught/p{n}", radius=0.008, color=(255, 140, 0), position=tuple(T[:3, 3]))
        self.points_md.content = f"{n} point{'s' if n != 1 else ''} recorded"
        self._set_status(f"recorded point {n}")

    def _clear(self) -> None:
        self.core.clear_points()
        self.server.scene.remove_by_name("/taught")
        self.points_md.content = "0 points recorded"

    def _save(self) -> None:
        self.core.config = _replace_feed(self.core.config, float(self.feed.value))
        r = self.core.save_gcode(self.save_name.value)
        text = r.message if r.saved else f"**⚠ {r.message}**"
        self.save_md.content = text
        self.save_md.visible = True
        self._set_status(text)

    def _uploaded_cb(self) -> None:
        f = self.upload.value
        self._uploaded = (f.name, f.content.decode("utf-8", errors="replace"))
        self._set_status(f"uploaded {f.name}; press 'run program'")

    def _run_program(self) -> None:
        if self._uploaded is not None:
            name, text = self._uploaded
            self._uploaded = None
        else:
            match = [p for p in self.core.list_programs() if p.name == self.prog_dd.value]
            if not match:
                self._set_status("no program chosen")
                return
            name, text = match[0].name, match[0].read_text(errors="replace")
        self._set_status(self.core.run_program(text, name))

    # ----- live loop ------------------------------------------------------------------------
    def _loop(self) -> None:
        period = 1.0 / self.core.config.rate
        steps = max(1, int(round(period / self.core.config.dt)))
        next_t = time.monotonic()
        last_text = last_rig = 0.0
        last_q: np.ndarray | None = None
        shown = rig_shown = ""
        while not self._stop.is_set():
            try:
                self.core.tick(steps)
                with self.core.lock:
                    q = self.core.robot.q
                    version = self.core.version
                    echo = version != self._slider_version  # a slider move is shown by the slider already
                    q_target = self.core.q_target.copy()
                    T = self._world_T_report @ self.core.robot.tcp_pose()     # the TCP (the flange without a tool)
                if last_q is None or np.max(np.abs(q - last_q)) > 1e-7:  # only send what changed
                    last_q = q
                    with self.server.atomic():
                        self.urdf.update_cfg(q[self._order])
                        self.tool_frame.position = tuple(T[:3, 3])
                        self.tool_frame.wxyz = _wxyz(T[:3, :3])
                if version != self._last_version and echo:
                    self._last_version = version
                    disp = self.spec.to_display(q_target)
                    for s, v in zip(self.sliders, disp):
                        v = float(np.clip(round(float(v), 3), s.min, s.max))
                        if abs(float(s.value) - v) > 1e-6:
                            s.value = v
                    if self.core.running_program:
                        self._snap_target()
                now = time.monotonic()
                if now - last_rig > 0.1:
                    last_rig = now
                    rig = rig_markdown(self.core.rig_status())
                    if rig != rig_shown:  # attached, detached, a new sample or a fault
                        rig_shown = rig
                        if rig:
                            self.rig_md.content = rig
                        self.rig_md.visible = bool(rig)
                if now - last_text > 0.1:
                    text = self._readout_text()
                    # the clock alone changes the text: refresh it once a second, the rest at once
                    if text.split("\n", 1)[1:] != shown.split("\n", 1)[1:] or now - last_text > 1.0:
                        last_text = now
                        shown = text
                        self.readout_md.content = text
            except Exception as exc:  # noqa: BLE001 - keep serving; show what went wrong
                if self._stop.is_set():
                    return
                self._set_status(f"error: {exc}")
            next_t += period
            delay = next_t - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_t = time.monotonic()

    def _readout_text(self) -> str:
        r = self.core.readout()
        joints = " · ".join(f"J{i + 1} {v:.1f}{'mm' if u == 'mm' else '°'}" for i, (v, u) in enumerate(zip(r["joints"], r["units"])))
        x, y, z = r["position_mm"]
        a, b, c = r["rpy_deg"]
        line = f"  \nprogram line {r['program_line']}" if r["program_line"] else ""
        warn = "  \n**unstable**" if not r["stable"] else ""
        bare = self.core.config.mounted is None
        point, tool = ("tool", "") if bare else ("TCP", f" · {r['tool']}")
        return (f"**{self.spec.title}** · {r['mode']} · t {r['time']:.1f} s{tool}  \n{joints}  \n"
                f"{point} x {x:.1f} y {y:.1f} z {z:.1f} mm · rpy {a:.1f} {b:.1f} {c:.1f}°{line}{warn}")

    # ----- life cycle -------------------------------------------------------------------------
    def serve_forever(self) -> None:
        """Block until interrupted (Ctrl-C)."""
        try:
            while not self._stop.is_set():
                self._stop.wait(0.5)
        finally:
            self.close()

    def close(self) -> None:
        """Stop the loop and the server; close the rig link and log (if attached) and the world (idempotent)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self.server.stop()
        finally:
            self.core.close()

    def __enter__(self) -> Pendant:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


#: what each fault flag means, for the person at the pendant
_FAULT_TEXT = {
    "LINK": "no state from the rig",
    "POWER": "motor supply cut",
    "WATCHDOG": "the rig stopped its motors (no frame for 100 ms)",
    "STALL": "a motor is driven but does not move",
    "RANGE": "a position did not fit the wire and was saturated",
    "RX_ERROR": "the rig dropped a corrupt frame",
    "LATE": "the host stalled",
}


def _deg(v: float, sign: bool = False) -> str:
    return "—" if not math.isfinite(v) else (f"{v:+.2f}°" if sign else f"{v:.1f}°")


def rig_markdown(tw: dict | None) -> str:
    """The page's rig panel (markdown) for :meth:`PendantCore.rig_status`; "" without a rig.

    Shows the port, the servo joints (deg), ΔE per joint (deg), the latency (ms) and a status
    line: ``OK``, or each fault in bold with what it means — a lost link says whether the port
    is gone (reconnecting) or open but silent — then the newest fault changes.
    """
    if tw is None:
        return ""
    joints = tw["joints"]
    servo = " · ".join(f"J{j} {_deg(v)}" for j, v in zip(joints, tw["servo_deg"]))
    err = " · ".join(f"J{j} {_deg(e, True)}" for j, e in zip(joints, tw["error_deg"]))
    lat = "—" if not math.isfinite(tw["latency_ms"]) else f"{tw['latency_ms']:.1f} ms"
    faults = tw["faults"]
    if faults == "OK":
        state = "rig OK"
    elif faults == "WAITING":
        state = "waiting for the first sample"
    else:
        parts = []
        for name in faults.split("|"):
            what = _FAULT_TEXT.get(name, "")
            if name == "LINK":
                what += (" — port open, the rig is silent" if tw["connected"]
                         else f" — port gone, trying to reopen it ({tw['reconnect_attempts']} attempts so far)")
                name = "LINK LOST"
            parts.append(f"**⚠ {name}**" + (f": {what}" if what else ""))
        state = "  \n".join(parts)
    sample = f"sample #{tw['stt']}" if tw["stt"] >= 0 else "no sample yet"
    lines = [f"**Rig** `{tw['port']}` · {sample}",
             f"servo {servo}", f"ΔE {err}", f"latency {lat}", state]
    if tw["error"]:
        lines.append(f"**⚠ sample failed**: {tw['error']}")
    if tw["events"]:
        lines.append("recent faults: " + "; ".join(tw["events"]))
    return "  \n".join(lines)


def robot_view(server, spec: RobotSpec, tool, viser_urdf, root: str = "/robot"):
    """The robot drawn in the page (viser's ``ViserUrdf``) under the scene node ``root``, in its
    makers' paints (:func:`painted_urdf`), with the mounted tool's body on its flange
    (:func:`~armtwin.robots.tooling.urdf_with_tool`, the description the simulation loads)."""
    if tool is None:
        return viser_urdf(server, painted_urdf(Path(spec.urdf_path)), root_node_name=root)
    import tempfile

    from ...robots.tooling import urdf_with_tool
    with tempfile.TemporaryDirectory(prefix="armtwin-ui-tool-") as tmp:
        path = Path(tmp) / f"{spec.name}_T{tool.number}.urdf"
        path.write_text(urdf_with_tool(spec.urdf_path, tool))
        return viser_urdf(server, painted_urdf(path), root_node_name=root)


#: how rough the paints look in the page (a matte industrial paint)
PAINT_ROUGHNESS = 0.6


def painted_urdf(path: Path):
    """The URDF at ``path`` loaded with yourdfpy, every visual mesh in its own paint as a matte,
    non-metallic glTF material.

    The meshes' OBJ files name their paint (``usemtl``, robots/meshgen.py), which trimesh reads as
    a simple material; glTF, in which viser sends meshes to the browser, takes a material without a
    metallic factor as fully metallic, so ABB white arrived as dark chrome and the orange wrist as
    brown. Shapes without a material (the tool's cylinder) keep the colour the URDF gives them."""
    from functools import partial

    import yourdfpy
    from trimesh.visual.material import PBRMaterial
    from trimesh.visual.texture import TextureVisuals
    urdf = yourdfpy.URDF.load(path, build_scene_graph=True, load_meshes=True,
                              filename_handler=partial(yourdfpy.filename_handler_magic, dir=path.parent))
    for mesh in urdf.scene.geometry.values():
        visual = mesh.visual
        if isinstance(visual, TextureVisuals) and visual.material is not None:
            color = np.asarray(getattr(visual.material, "diffuse", None)
                               if getattr(visual.material, "diffuse", None) is not None
                               else visual.material.main_color)
            mesh.visual = TextureVisuals(material=PBRMaterial(baseColorFactor=color, metallicFactor=0.0,
                                                              roughnessFactor=PAINT_ROUGHNESS))
    return urdf


def draw_cell(scene, cell) -> None:
    """Draw a workcell's bodies in the page (world frame, their colours) under ``/cell``."""
    import trimesh
    for body in cell.bodies:
        name, kind = f"/cell/{body.name}", body.shape.value
        rgb = tuple(int(round(255 * c)) for c in body.color[:3])
        where = {"position": tuple(float(v) for v in body.pose[:3, 3]), "wxyz": _wxyz(body.pose[:3, :3])}
        if kind == "box":
            scene.add_box(name, color=rgb, dimensions=tuple(body.size), **where)
        elif kind == "sphere":
            scene.add_icosphere(name, radius=body.size[0], color=rgb, **where)
        else:
            mesh = trimesh.creation.cylinder(radius=body.size[0], height=body.size[1]) if kind == "cylinder" else \
                trimesh.load(str(body.mesh), force="mesh").apply_scale(body.scale)
            mesh.visual.face_colors = [*rgb, 255]
            scene.add_mesh_trimesh(name, mesh, **where)


def _wxyz(R: np.ndarray) -> tuple[float, float, float, float]:
    x, y, z, w = matrix_to_quat(R)
    return (float(w), float(x), float(y), float(z))


def _xyzw(wxyz) -> np.ndarray:
    w, x, y, z = (float(v) for v in wxyz)
    return np.array([x, y, z, w])


def _replace_feed(cfg: PendantConfig, feed: float) -> PendantConfig:
    from dataclasses import replace
    return replace(cfg, feed=feed)


def _free_port(host: str) -> int:
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
