"""Hardening of the files armtwin reads and writes: robot data, videos, taught programs, pipes.

Each test states a promise of the README ("bad input gets one clear line and a documented exit
code, never a traceback, a hang or lost data"; "a video is playable or absent"; "no temporary
file outlives the process") and attacks it with the inputs that broke it before.
"""

from __future__ import annotations

import configparser
import glob
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import imageio.v3 as iio
import pytest

from armtwin import robots
from armtwin.robots.urdfcheck import RobotDataError, check_urdf

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def _cli(*args, env=None, preexec=None, timeout=120):
    return subprocess.run([PY, "-m", "armtwin", *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=env, preexec_fn=preexec)


def _one_line(p, *words, code=2):
    assert p.returncode == code, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("armtwin:")]
    assert len(lines) == 1, p.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


# ----- robot data ------------------------------------------------------------------------------

def _broken_urdfs(tmp_path: Path, good: Path) -> dict[str, Path]:
    text = good.read_text()
    rng = random.Random(7)
    cases = {}
    d = tmp_path / "folder.urdf"
    d.mkdir()
    cases["is a folder"] = d
    (tmp_path / "empty.urdf").write_text("")
    cases["is empty"] = tmp_path / "empty.urdf"
    (tmp_path / "truncated.urdf").write_text(text[: len(text) // 2])
    cases["not well-formed"] = tmp_path / "truncated.urdf"
    (tmp_path / "random.urdf").write_bytes(bytes(rng.randrange(256) for _ in range(4000)))
    cases["not well-formed "] = tmp_path / "random.urdf"
    cases["does not exist"] = tmp_path / "deleted.urdf"
    (tmp_path / "other.urdf").write_text("<robot name='x'><link name='a'/></robot>")
    cases["has no joint"] = tmp_path / "other.urdf"
    (tmp_path / "html.urdf").write_text("<html><body/></html>")
    cases["root element is <html>"] = tmp_path / "html.urdf"
    os.mkfifo(tmp_path / "fifo.urdf")
    cases["not a regular file"] = tmp_path / "fifo.urdf"
    return cases


def test_broken_robot_descriptions_are_named_before_pybullet_reads_them(tmp_path):
    spec = robots.get("irb120")
    joints = list(zip(spec.joint_names, (t.value for t in spec.joint_types)))
    assert check_urdf(spec.urdf_path, joints) == spec.urdf_path
    for why, path in _broken_urdfs(tmp_path, spec.urdf_path).items():
        with pytest.raises(RobotDataError, match=re.escape(why.strip())) as e:
            check_urdf(path, joints)
        assert str(path) in str(e.value)


def test_the_world_and_the_gym_env_refuse_a_broken_description_without_a_crash(tmp_path):
    from armtwin.envs.sim import World
    spec = robots.get("scara")
    with World() as w:
        for path in _broken_urdfs(tmp_path, spec.urdf_path).values():
            with pytest.raises(RobotDataError):
                w.add_robot(spec, urdf_path=path)
        assert len(w.robots) == 0
        w.add_robot(spec)       # the world still works


@pytest.mark.parametrize("kind", ["folder", "empty", "truncated", "deleted"])
@pytest.mark.parametrize("cmd", ["show", "run", "gym"])
def test_commands_with_broken_robot_data_end_in_one_line(tmp_path, kind, cmd):
    """The robot data itself is broken (a folder where the URDF should be, an empty, truncated or
    deleted file): one line and exit 2 — PyBullet used to abort the process (exit -6)."""
    urdf = tmp_path / "urdf"
    urdf.mkdir()
    good = robots.get("irb120").urdf_path.read_text()
    target = urdf / "irb120.urdf"
    if kind == "folder":
        target.mkdir()
    elif kind == "empty":
        target.write_text("")
    elif kind == "truncated":
        target.write_text(good[:1000])
    prog = tmp_path / "p.ngc"
    prog.write_text("G21 G90\nG1 X10 F600\n")
    call = {"show": f"main(['show', 'irb120', '--video', {str(tmp_path / 'v.mp4')!r}, '--seconds', '0.2'])",
            "run": f"main(['run', {str(prog)!r}, '--robot', 'irb120'])",
            "gym": "gym_main()"}[cmd]
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        import armtwin.robots.spec as s
        s.URDF_DIR = Path({str(urdf)!r})
        from armtwin.scripts.cli import main
        def gym_main():
            import gymnasium as gym, armtwin.envs
            try:
                gym.make("armtwin/IRB120Reach-v0").reset(seed=0)
            except ValueError as exc:
                print(f"armtwin: error: {{exc}}", file=sys.stderr)
                return 2
            return 0
        sys.exit({call})
    """)
    p = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120)
    _one_line(p, "robot description", str(target))


def test_robots_get_refuses_what_is_not_an_id():
    for bad in (None, 3, b"irb120", ["irb120"]):
        with pytest.raises(robots.UnknownRobotError, match="known robots"):
            robots.get(bad)  # type: ignore[arg-type]
    assert robots.get(" IRB120 ").name == "irb120"


# ----- optional extras --------------------------------------------------------------------------

def test_every_optional_package_the_cli_names_is_in_that_extra():
    """`pip install -e ".[ui]"` then `armtwin ui` failed on yourdfpy: the hint named an extra
    that did not install the package. Every package the hint knows must be in its extra."""
    from armtwin.scripts.cli import _EXTRA_OF
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    extras = {k: {re.split(r"[<>=!~ \[]", ln.strip())[0].lower().replace("-", "_")
                  for ln in v.splitlines() if ln.strip() and not ln.strip().startswith("#")}
              for k, v in cfg["options.extras_require"].items()}
    # the distributions that install each import name (paho -> paho-mqtt, mcap_ros2 ->
    # mcap-ros2-support), as pip recorded them; the name itself for a package not installed here
    from importlib.metadata import packages_distributions
    dists = packages_distributions()
    for module, extra in _EXTRA_OF.items():
        names = {d.lower().replace("-", "_") for d in dists.get(module, [])} | {module.lower()}
        assert names & extras[extra], f"{module} ({', '.join(sorted(names))}) is not in the {extra!r} extra"


_BLOCK = textwrap.dedent("""
    import sys
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, Block())
    from armtwin.scripts.cli import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.mark.parametrize("blocked, argv, extra", [
    ("viser", ["ui", "irb120", "--port", "0"], "ui"),
    ("yourdfpy", ["ui", "irb120", "--port", "0"], "ui"),
])
def test_a_missing_extra_is_the_same_one_line_hint(blocked, argv, extra):
    p = subprocess.run([PY, "-c", f"BLOCKED = {{{blocked!r}}}\n" + _BLOCK, *argv], capture_output=True, text=True,
                       timeout=120)
    _one_line(p, f"'{blocked}' package of the '{extra}' extra", f'pip install -e ".[{extra}]"')


# ----- pipes --------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [["robots"], ["fk", "irb120", "0", "0", "0", "0", "0", "0", "--json"], ["validate"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(argv):
    """`armtwin … | head`: no "[Errno 32] Broken pipe", exit code 141 as a Unix tool."""
    p = subprocess.Popen([PY, "-m", "armtwin", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()          # the reader is gone before anything is written
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141, err
    assert err == ""


# ----- taught programs ------------------------------------------------------------------------------

@pytest.fixture
def core(tmp_path):
    from armtwin.envs.pendant import PendantConfig, PendantCore
    c = PendantCore(robots.get("irb120"), config=PendantConfig(save_dir=tmp_path / "saved"))
    c.record_point()
    c.jog_joint(0, 1, 10.0)
    c.record_point()
    yield c
    c.close()


def test_save_refuses_a_fifo_of_that_name_without_blocking(core, tmp_path):
    folder = tmp_path / "saved"
    folder.mkdir()
    os.mkfifo(folder / "trap.ngc")
    result = []
    t = threading.Thread(target=lambda: result.append(core.save_gcode("trap.ngc")), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "save blocked on a FIFO"
    assert not result[0].saved and "FIFO" in result[0].message
    assert [p.name for p in folder.iterdir()] == ["trap.ngc"]          # no temporary file left


def test_save_never_writes_through_a_hard_link_to_a_file_outside(core, tmp_path):
    folder = tmp_path / "saved"
    folder.mkdir()
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    os.link(outside, folder / "linked.ngc")
    r = core.save_gcode("linked.ngc")
    assert not r.saved and "hard links" in r.message
    assert outside.read_text() == "keep me"


def test_save_replaces_a_plain_file_whole_and_leaves_no_temporary_file(core, tmp_path):
    folder = tmp_path / "saved"
    r = core.save_gcode("taught")
    assert r.saved and r.path == folder / "taught.ngc"
    first = r.path.read_text()
    core.record_point()
    r = core.save_gcode("taught")
    assert r.saved and r.path.read_text() != first and r.path.read_text().count("G1") > first.count("G1")
    assert sorted(p.name for p in folder.iterdir()) == ["taught.ngc"]
    assert (r.path.stat().st_mode & 0o777) == 0o644


# ----- videos ---------------------------------------------------------------------------------------

def _shm_files() -> set[str]:
    return set(glob.glob("/dev/shm/armtwin-*"))


def test_the_recorder_shares_frames_without_a_named_file(tmp_path):
    from armtwin.envs.sim import PhysicsConfig, World
    from armtwin.envs.video import VideoRecorder
    before = _shm_files()
    with World(PhysicsConfig(dt=1 / 60)) as w:
        r = w.add_robot(robots.get("scara"))
        with VideoRecorder(w, r, tmp_path / "a.mp4", size=(64, 48), progress=False) as rec:
            assert _shm_files() == before and not list(Path(tempfile_dir()).glob("armtwin-frames-*"))
            for _ in range(10):
                w.step()
                rec.maybe_capture()
    assert _shm_files() == before
    assert len(list(iio.imiter(tmp_path / "a.mp4"))) == rec.result.frames


def tempfile_dir() -> str:
    import tempfile
    return tempfile.gettempdir()


def test_a_video_without_frames_is_absent_not_a_broken_file(tmp_path):
    from armtwin.envs.frames import EncoderProcess, FrameSettings
    for name in ("none.mp4", "none.gif"):
        enc = EncoderProcess(FrameSettings((str(tmp_path / name),), 30.0, (64, 48), 7.0, True, True, "t", ()))
        assert enc.close() == ()
        assert not (tmp_path / name).exists()


_RECORD = textwrap.dedent("""
    import sys, time
    from armtwin import robots
    from armtwin.envs.sim import PhysicsConfig, World
    from armtwin.envs.video import VideoRecorder
    w = World(PhysicsConfig(dt=1 / 100))
    r = w.add_robot(robots.get("irb120"))
    rec = VideoRecorder(w, r, sys.argv[1], size=(160, 120), progress=False)
    print("helper", rec._enc._proc.pid, flush=True)
    try:
        for k in range(100000):
            w.step()
            r.command(r.q + 0.001)
            rec.maybe_capture()
            time.sleep(0.002)
    finally:
        rec.close()
""")


def _wait_gone(pid: int, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} still runs")


def _interrupt_trials(tmp_path: Path, trials: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    outcomes = []
    for i in range(trials):
        sig = rng.choice([signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
        delay = rng.uniform(0.0, 1.0)
        path = tmp_path / f"t{i}.mp4"
        before = _shm_files()
        p = subprocess.Popen([PY, "-c", _RECORD, str(path)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        helper = int(p.stdout.readline().split()[1]) if rng.random() < 0.7 else None   # else: at any moment of the start
        time.sleep(delay)
        p.send_signal(sig)
        p.wait(timeout=60)
        if helper is None:
            out = p.stdout.read().split()
            helper = int(out[1]) if len(out) > 1 else None
        if helper is not None:
            _wait_gone(helper)          # it finishes the file after the simulation has gone
        assert _shm_files() == before, f"{sig.name} after {delay:.2f} s left shared memory behind"
        if path.exists():
            frames = len(list(iio.imiter(path)))
            assert frames >= 1, f"{sig.name} after {delay:.2f} s: {path} has no frame"
            outcomes.append(f"{sig.name}:{frames}")
        else:
            outcomes.append(f"{sig.name}:absent")
        assert not list(tmp_path.glob(f".t{i}*")), "a temporary file was left"
    return outcomes


def test_an_interrupted_recording_leaves_a_playable_video_or_none(tmp_path):
    out = _interrupt_trials(tmp_path, trials=4, seed=1)
    assert len(out) == 4


@pytest.mark.slow
def test_interrupts_at_random_moments_of_the_first_second_never_leave_a_broken_video(tmp_path):
    out = _interrupt_trials(tmp_path, trials=18, seed=2026)
    assert any(o.endswith("absent") or o.split(":")[1].isdigit() for o in out)


def _file_size_limit(limit: int):
    def apply():
        import resource
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)     # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.parametrize("cmd", ["show", "run"])
def test_a_video_that_cannot_be_written_is_one_line_and_no_partial_file(tmp_path, cmd):
    """A full disk (here: a file-size limit, which fails the same write) used to end in a 40-line
    traceback with ffmpeg's dump."""
    video = tmp_path / "v.mp4"
    if cmd == "show":
        args = ["show", "irb120", "--video", video, "--seconds", "6", "--size", "640x480"]
    else:
        args = ["run", ROOT / "examples" / "irb120_word.ngc", "--robot", "irb120", "--video", video,
                "--size", "640x480"]
    p = _cli(*args, preexec=_file_size_limit(60_000), timeout=300)
    line = _one_line(p, str(video), "File too large")
    assert "ffmpeg" not in p.stderr.lower() or "FFMPEG STDERR" not in p.stderr, line
    assert not video.exists()


# ----- seeded fuzzing of the robot-data surface ----------------------------------------------------

def _mutations(text: str, rng: random.Random, n: int) -> list[str]:
    """``n`` mutated copies of a URDF text: numbers made absurd, elements deleted or duplicated,
    bytes flipped, cut at a random point."""
    numbers = [m.span() for m in re.finditer(r"-?\d+(\.\d+)?(e-?\d+)?", text)]
    elements = [m.span() for m in re.finditer(r"<(inertial|visual|collision|joint|limit|origin|mass|inertia)\b[^>]*?(/>|>)", text)]
    out = []
    for _ in range(n):
        kind = rng.randrange(5)
        if kind == 0:
            a, b = rng.choice(numbers)
            out.append(text[:a] + rng.choice(["nan", "inf", "-inf", "1e308", "-1", "0", "1e-320", "", "x"]) + text[b:])
        elif kind == 1:
            a, b = rng.choice(elements)
            out.append(text[:a] + text[b:])
        elif kind == 2:
            a, b = rng.choice(elements)
            out.append(text[:b] + text[a:b] + text[b:])
        elif kind == 3:
            t = bytearray(text.encode())
            for _ in range(rng.randrange(1, 8)):
                t[rng.randrange(len(t))] = rng.randrange(256)
            out.append(t.decode("latin-1"))
        else:
            out.append(text[: rng.randrange(len(text))])
    return out


_LOAD_ALL = textwrap.dedent("""
    import sys, json
    from pathlib import Path
    from armtwin import robots
    from armtwin.envs.sim import World, SimulationError
    from armtwin.robots.urdfcheck import RobotDataError
    spec = robots.get(sys.argv[1])
    out = []
    with World() as w:
        for f in sorted(Path(sys.argv[2]).glob("*.urdf")):
            print(f.name, flush=True)             # the last name printed is the culprit of a crash
            try:
                r = w.add_robot(spec, urdf_path=f)
                r.command(spec.home); w.step(2)
                out.append("loaded")
            except RobotDataError:
                out.append("refused")
            except SimulationError:
                out.append("pybullet-refused")
    print(json.dumps(out))
""")


@pytest.mark.parametrize("robot", ["irb120", "scara", "aubo_i5"])
def test_mutated_robot_descriptions_are_refused_in_one_line_or_load_never_crash(tmp_path, robot):
    """Seeded fuzzing of broken robot data: every mutation is either refused by the check (a
    RobotDataError naming the file) or loads; PyBullet never aborts the process."""
    spec = robots.get(robot)
    joints = list(zip(spec.joint_names, (t.value for t in spec.joint_types)))
    rng = random.Random(f"urdf-{robot}")
    muts = _mutations(spec.urdf_path.read_text(), rng, 60)
    for i, m in enumerate(muts):
        (tmp_path / f"m{i:03d}.urdf").write_bytes(m.encode("utf-8", "surrogateescape") if isinstance(m, str) else m)
    refused = 0
    for f in sorted(tmp_path.glob("*.urdf")):
        try:
            check_urdf(f, joints)
        except RobotDataError as exc:
            refused += 1
            assert str(f) in str(exc) and "\n" not in str(exc)
    p = subprocess.run([PY, "-c", _LOAD_ALL, robot, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"crashed (exit {p.returncode}) loading {p.stdout.split()[-1:]}: {p.stderr[-500:]}"
    results = __import__("json").loads(p.stdout.strip().splitlines()[-1])
    assert len(results) == len(muts) and results.count("refused") == refused
    assert refused > len(muts) // 3          # the mutations do break things: the test can fail


# ----- seeded fuzzing of the pendant's file names ---------------------------------------------------

def test_random_file_names_never_leave_the_save_folder(tmp_path):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from armtwin.envs.pendant import safe_file_name
    folder = (tmp_path / "saved").resolve()
    alphabet = st.characters(codec="utf-8") | st.sampled_from(list("/\\.:~$%*?\0\n\r\t "))

    @settings(max_examples=400, derandomize=True, deadline=None)
    @given(st.text(alphabet=alphabet, max_size=200))
    def check(name):
        safe, why = safe_file_name(name)
        if safe is None:
            assert why
            return
        assert (folder / safe).resolve().parent == folder and "/" not in safe and "\0" not in safe
        assert safe.lower().endswith((".ngc", ".nc", ".gcode")) and not safe.startswith(".")

    check()


# ----- signals: SIGTERM ends every command as Ctrl-C does ---------------------------------------

@pytest.mark.parametrize("sig, code, word", [(signal.SIGTERM, 143, "terminated (SIGTERM)"),
                                             (signal.SIGINT, 130, "interrupted")])
def test_sigterm_and_sigint_end_a_command_cleanly_with_its_documented_code(tmp_path, sig, code, word):
    video = tmp_path / "v.mp4"
    p = subprocess.Popen([PY, "-m", "armtwin", "show", "irb120", "--video", str(video), "--seconds", "60",
                          "--size", "160x120"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (video.exists() and video.stat().st_size > 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    assert "Traceback" not in err and f"armtwin: {word}" in err
    assert len(list(iio.imiter(video))) > 1                     # the video so far, playable


def test_bench_env_without_panda_gym_gives_the_extras_hint():
    p = subprocess.run([PY, "-c", "BLOCKED = {'panda_gym'}\n" + _BLOCK, "bench", "env", "--steps", "8", "--num-envs", "0",
                        "--image-size", "0", "--frames", "0"], capture_output=True, text=True, timeout=300)
    _one_line(p, "'panda_gym' package of the 'bench' extra", 'pip install -e ".[bench]"')
