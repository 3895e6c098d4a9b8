"""Reading a twin-sync log back: :func:`armtwin.envs.rig.read_twin_log`, the one check of a log
that ``armtwin plot`` and ``armtwin replay`` share. Real logs (NaN servo values while the link
is down, LINK/POWER faults) pass; garbage is refused naming its line and column."""

import csv
import math

import numpy as np
import pytest

from armtwin.controllers import rigproto as rp
from armtwin.envs.rig import (FAULT_NAMES, SyncSample, TwinLog, TwinLogError, read_twin_log)
from armtwin.scripts.cli import main

HEADER = ["STT", "Time", "Error_j1", "Error_j2", "Virtual_j1", "Virtual_j2", "Servo_j1", "Servo_j2", "Latency_ms",
          "Fault"]


def _sample(k, faults=rp.Fault.NONE, servo=(9.5, -4.0), latency=3.2):
    virt = np.array([10.0 + k, -5.0])
    servo = np.array(servo, dtype=float)
    return SyncSample(k, 0.002 * k, virt, servo, virt - servo, latency, faults)


def _twin_log(path, n=20):
    """A log written by TwinLog itself: a LINK window with no servo values and no latency, a
    POWER window, a LATE sample."""
    with TwinLog(path, (0, 1)) as log:
        for k in range(n):
            if 5 <= k < 9:
                log.write(_sample(k, rp.Fault.LINK, servo=(math.nan, math.nan), latency=math.nan))
            elif 9 <= k < 12:
                log.write(_sample(k, rp.Fault.POWER | rp.Fault.WATCHDOG))
            elif k == 15:
                log.write(_sample(k, rp.Fault.LATE | rp.Fault.RX_ERROR))
            else:
                log.write(_sample(k))
    return path


def _edit(path, line, column, value):
    """Set ``column`` of the row on (1-based) ``line`` to ``value``."""
    rows = list(csv.reader(open(path, newline="")))
    rows[line - 1][HEADER.index(column)] = value
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)


def test_a_log_written_by_twinlog_reads_back_with_its_nan_values(tmp_path):
    d = read_twin_log(_twin_log(tmp_path / "twin.csv"))
    assert list(d) == HEADER and d.labels == ["j1", "j2"]
    assert d["STT"].tolist() == list(range(20)) and d["STT"].dtype == np.int64
    assert np.all(np.isnan(d["Servo_j1"][5:9])) and np.all(np.isnan(d["Error_j2"][5:9]))
    assert np.all(np.isnan(d["Latency_ms"][5:9])) and np.isfinite(d["Latency_ms"][4])
    assert d["Fault"][5] == "LINK" and d["Fault"][9] == "POWER|WATCHDOG" and d["Fault"][15] == "RX_ERROR|LATE"
    assert d.line_of(0) == 2 and d.line_of(19) == 21  # the header is line 1
    assert set(FAULT_NAMES) == {"POWER", "WATCHDOG", "STALL", "RANGE", "RX_ERROR", "LINK", "LATE"}


def test_empty_servo_error_and_latency_cells_read_as_nan(tmp_path):
    p = _twin_log(tmp_path / "twin.csv")
    for col in ("Servo_j1", "Error_j1", "Latency_ms"):
        _edit(p, 4, col, "")
    d = read_twin_log(p)
    assert np.isnan(d["Servo_j1"][2]) and np.isnan(d["Error_j1"][2]) and np.isnan(d["Latency_ms"][2])


@pytest.mark.parametrize("column, value, words", [
    ("Time", "inf", "column Time: 'inf' is not a time"),
    ("Time", "nan", "column Time: 'nan' is not a time"),
    ("Time", "-0.5", "column Time: '-0.5' is not a time"),
    ("Time", "0.001", "column Time: 0.001 s goes back (the row before has 0.008 s)"),
    ("Virtual_j1", "1e308", "column Virtual_j1: '1e308' is not a value in ±10000 deg"),
    ("Virtual_j2", "-inf", "column Virtual_j2: '-inf' is not a value in ±10000 deg"),
    ("Virtual_j1", "nan", "column Virtual_j1: 'nan' is not a number (the virtual joint is always known)"),
    ("Virtual_j1", "", "column Virtual_j1: '' is not a number"),
    ("Servo_j1", "inf", "column Servo_j1: 'inf' is not a value in ±10000 deg (or nan)"),
    ("Servo_j2", "-1e308", "column Servo_j2: '-1e308'"),
    ("Error_j1", "inf", "column Error_j1: 'inf'"),
    ("Latency_ms", "-1", "column Latency_ms: '-1' is not a value in 0..1000000 ms"),
    ("Latency_ms", "1e308", "column Latency_ms: '1e308'"),
    ("Servo_j1", "twelve", "column Servo_j1: 'twelve' is not a number"),
    ("Fault", "BOGUS", "column Fault: 'BOGUS' is not OK or fault names joined by |"),
    ("Fault", "OK|POWER", "column Fault: 'OK|POWER'"),
    ("Fault", "POWER|", "column Fault: 'POWER|'"),
    ("Fault", "", "column Fault: ''"),
    ("STT", "4", "column STT: 4 after 4 (the sample numbers count up by 1"),
    ("STT", "1.5", "column STT: '1.5' is not a sample number"),
])
def test_garbage_is_refused_naming_its_line_and_column(tmp_path, column, value, words):
    p = _twin_log(tmp_path / "twin.csv")
    _edit(p, 7, column, value)  # line 7 = the 6th sample (STT 5, in the LINK window)
    with pytest.raises(TwinLogError) as e:
        read_twin_log(p)
    assert str(e.value).startswith(f"{p}: line 7, column {column}:") and words in str(e.value), str(e.value)


def test_stt_going_back_names_the_row_where_it_happens(tmp_path):
    p = _twin_log(tmp_path / "twin.csv")
    _edit(p, 12, "STT", "2")
    with pytest.raises(TwinLogError, match=r"line 12, column STT: 2 after 9"):
        read_twin_log(p)


def test_a_last_row_cut_by_a_crash_is_skipped_but_a_cut_row_inside_is_refused(tmp_path):
    p = _twin_log(tmp_path / "twin.csv")
    text = open(p, newline="").read()
    (tmp_path / "cut.csv").write_text(text + "20,0.040000,1.0", newline="")
    assert len(read_twin_log(tmp_path / "cut.csv")["STT"]) == 20
    lines = text.splitlines(keepends=True)
    (tmp_path / "mid.csv").write_text("".join(lines[:5]) + "4,0.008\r\n" + "".join(lines[6:]), newline="")
    with pytest.raises(TwinLogError, match=r"line 6: 2 fields, the header has 10"):
        read_twin_log(tmp_path / "mid.csv")


@pytest.mark.parametrize("text, words", [
    ("", "not a twin log"),
    ("a,b\n1,2\n", "not a twin log"),
    ("STT,Time,Latency_ms,Fault\n0,0,1,OK\n", "no Virtual_jN columns"),
    ("STT,Time,Virtual_j1,Latency_ms,Fault\n0,0,1,1,OK\n", "the same joints in each group"),
    ("STT,Time,Error_j1,Virtual_j2,Servo_j1,Latency_ms,Fault\n0,0,0,1,1,1,OK\n", "the same joints in each group"),
    (",".join(HEADER) + "\n", "no samples"),
])
def test_files_that_are_not_twin_logs(tmp_path, text, words):
    p = tmp_path / "x.csv"
    p.write_text(text)
    with pytest.raises(TwinLogError, match=words):
        read_twin_log(p)


def test_binary_files_are_not_twin_logs(tmp_path):
    p = tmp_path / "x.csv"
    p.write_bytes(b"STT,Time\x00\xff\xfe" * 10)
    with pytest.raises(TwinLogError, match="not a text CSV file"):
        read_twin_log(p)


@pytest.mark.parametrize("column, value", [("Time", "inf"), ("Virtual_j1", "1e308"), ("Servo_j1", "-inf"),
                                           ("Fault", "BOGUS"), ("STT", "3")])
def test_plot_refuses_garbage_logs_in_one_line(tmp_path, capsys, column, value):
    p = _twin_log(tmp_path / "twin.csv")
    _edit(p, 9, column, value)
    assert main(["plot", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"line 9, column {column}" in err and "Traceback" not in err
    assert not (tmp_path / "twin.png").exists()


def test_plot_draws_a_real_log_with_faults_without_warnings(tmp_path, capsys, recwarn):
    p = _twin_log(tmp_path / "twin.csv")
    assert main(["plot", str(p), "--out", str(tmp_path / "twin.svg")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "twin.svg")
    assert (tmp_path / "twin.svg").stat().st_size > 10_000
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in recwarn]


def test_plot_of_a_single_sample_does_not_say_nan(tmp_path, capsys, recwarn):
    p = tmp_path / "one.csv"
    with TwinLog(p, (0, 1)) as log:
        log.write(_sample(0))
    assert main(["plot", str(p)]) == 0
    assert (tmp_path / "one.png").exists()
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize("out", ["x.ngc", "x.csv", "x", "x.jpg"])
def test_plot_out_must_be_png_svg_or_pdf(tmp_path, capsys, out):
    p = _twin_log(tmp_path / "twin.csv")
    assert main(["plot", str(p), "--out", str(tmp_path / out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--out {tmp_path / out}: use a .png or .svg or .pdf file name" in err
    assert not (tmp_path / out).exists()


def test_plot_never_writes_over_its_log(tmp_path, capsys):
    p = _twin_log(tmp_path / "twin.png")  # a log with an image's name: the default --out is the log
    before = p.read_bytes()
    assert main(["plot", str(p)]) == 2
    assert "is the log itself" in capsys.readouterr().err and p.read_bytes() == before


def test_fault_bits_without_a_name_are_logged_as_numbers_and_read_back(tmp_path, capsys):
    """Issue 15.5: a rig state with undefined fault bits wrote an empty Fault cell, and the
    project's own readers then refused the log."""
    faults = rp.Fault(0xE0) | rp.Fault.POWER
    assert faults.names() == "POWER|0x20|0x40|0x80" and rp.Fault(0xE0).names() == "0x20|0x40|0x80"
    assert rp.Fault.parse(faults.names()) == faults
    p = tmp_path / "twin.csv"
    with TwinLog(p, (0, 1)) as log:
        for k in range(30):
            log.write(_sample(k, rp.Fault(0xE0) if 10 <= k < 20 else rp.Fault.NONE))
    d = read_twin_log(p)
    assert d["Fault"][10] == "0x20|0x40|0x80" and rp.Fault.parse(d["Fault"][10]) == rp.Fault(0xE0)
    assert main(["plot", str(p)]) == 0 and (tmp_path / "twin.png").exists()


@pytest.mark.parametrize("value", ["0x3", "0x", "0x123456789", "0xG", "x20", "0x0"])
def test_a_fault_number_must_be_one_bit(tmp_path, value):
    p = _twin_log(tmp_path / "twin.csv")
    _edit(p, 7, "Fault", value)
    with pytest.raises(TwinLogError, match=r"line 7, column Fault: .* or an unnamed bit as 0x20"):
        read_twin_log(p)


@pytest.mark.parametrize("value, words", [
    ("99999999999999999999", "is not a sample number in 0..1000000000000"),
    ("9223372036854775808", "is not a sample number in 0..1000000000000"),
    ("-99999999999999999999", "is not a sample number in 0..1000000000000"),
    ("-1", "is not a sample number in 0..1000000000000"),
    ("1" * 5000, "is not a sample number in 0..1000000000000"),
    ("5_0", "is not a sample number (an integer)"),
])
def test_a_huge_or_odd_first_stt_is_refused_in_one_line(tmp_path, capsys, value, words):
    """Issue 15.10: a huge STT gave OverflowError tracebacks in plot and replay."""
    p = _twin_log(tmp_path / "twin.csv")
    _edit(p, 2, "STT", value)
    with pytest.raises(TwinLogError, match=r"line 2, column STT: ") as e:
        read_twin_log(p)
    assert words in str(e.value) and len(str(e.value)) < 300
    for argv in (["plot", str(p)], ["replay", str(p), "--robot", "irb120", "--video", str(tmp_path / "r.mp4")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "line 2, column STT" in err and "Traceback" not in err


def test_huge_consecutive_sample_numbers_and_times_are_refused(tmp_path):
    p = tmp_path / "big.csv"
    rows = [HEADER] + [[9223372036854775806 + k, 0.01 * k, 0, 0, 1, 1, 1, 1, 1, "OK"] for k in range(3)]
    with open(p, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    with pytest.raises(TwinLogError, match=r"line 2, column STT: '9223372036854775806' is not a sample number"):
        read_twin_log(p)
    _twin_log(p)
    _edit(p, 2, "Time", "1e300")
    with pytest.raises(TwinLogError, match=r"line 2, column Time: '1e300' is not a time \(0..100000000 s\)"):
        read_twin_log(p)


def test_the_target_sent_comes_back_from_the_log_to_the_pulse(tmp_path):
    """The rig is sent round(virtual × 37.5) pulses; the log keeps the virtual joints to 1e-7°, so
    the fit gets the same pulses back even for angles a hair from half a pulse (at 1e-4°, 32 of 29,921
    targets of an identification run came back a pulse off)."""
    rng = np.random.default_rng(3)
    pulses = rng.integers(-3000, 3000, 2000)
    virt = (pulses + 0.5 + rng.choice([-1, 1], 2000) * rng.uniform(1e-5, 3e-3, 2000)) / 37.5
    path = tmp_path / "twin.csv"
    with TwinLog(path, (0,)) as log:
        for k, v in enumerate(virt):
            log.write(SyncSample(k, 0.002 * k, np.array([v]), np.array([v]), np.array([0.0]), math.nan, rp.Fault.NONE))
    back = read_twin_log(path)["Virtual_j1"]
    np.testing.assert_array_equal(np.rint(back * 37.5), np.rint(virt * 37.5))
    assert np.count_nonzero(np.rint(np.round(virt, 4) * 37.5) != np.rint(virt * 37.5)) > 100  # what 1e-4° lost

