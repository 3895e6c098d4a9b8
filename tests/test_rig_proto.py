"""Protocol v1: CRC, COBS, frames, the streaming decoder's drop-and-resync behaviour."""

import struct

from hypothesis import given, settings, strategies as st

from armtwin.controllers import rigproto as rp

i16 = st.integers(-32768, 32767)
u8 = st.integers(0, 255)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)

messages = st.one_of(
    st.builds(rp.Hello, u8, u8, u16, u32, u16),
    st.builds(rp.ModeMsg, st.sampled_from(list(rp.Mode)), u16, u8),
    st.builds(rp.JointTargets, st.tuples(i16, i16)),
    st.builds(rp.JointStates, u8, u8, st.tuples(i16, i16), st.tuples(st.integers(-255, 255), st.integers(-255, 255))),
    st.just(rp.Heartbeat()),
    st.builds(rp.Power, st.integers(0, 1)),
)


def test_crc_is_ccitt_false():
    assert rp.crc16_ccitt_false(b"123456789") == 0x29B1  # the catalogue check value
    assert rp.crc16_ccitt_false(b"") == 0xFFFF


@given(st.binary(max_size=600))
@settings(deadline=None)
def test_cobs_roundtrip_and_no_zeros(data):
    enc = rp.cobs_encode(data)
    assert 0 not in enc
    assert len(enc) <= len(data) + len(data) // 254 + 1
    assert rp.cobs_decode(enc) == data


@given(messages, u16, u32)
@settings(deadline=None)
def test_frame_roundtrip(msg, seq, t_us):
    wire = rp.encode_frame(msg, seq, t_us)
    assert wire[-1] == 0 and 0 not in wire[:-1]
    assert len(wire) == rp.wire_bytes(msg.TYPE)
    f = rp.decode_frame(wire[:-1])
    assert (f.seq, f.t_us, f.msg, f.version) == (seq, t_us, msg, rp.PROTOCOL_VERSION)


def test_header_layout_is_little_endian_and_versioned():
    raw = rp.cobs_decode(rp.encode_frame(rp.JointTargets((1000, -2)), 0x1234, 0x89ABCDEF)[:-1])
    assert raw[:8] == bytes([rp.PROTOCOL_VERSION, 0x03, 0x34, 0x12, 0xEF, 0xCD, 0xAB, 0x89])
    assert struct.unpack("<hh", raw[8:12]) == (1000, -2)
    assert (raw[12] << 8 | raw[13]) == rp.crc16_ccitt_false(raw[:12])


@given(messages, st.data())
@settings(max_examples=200, deadline=None)
def test_any_single_bit_flip_is_dropped(msg, data):
    wire = bytearray(rp.encode_frame(msg, 7, 1234))
    i = data.draw(st.integers(0, len(wire) - 2))
    bit = data.draw(st.integers(0, 7))
    wire[i] ^= 1 << bit
    dec = rp.StreamDecoder()
    frames = dec.feed(bytes(wire) + rp.encode_frame(msg, 8, 99))
    # the damaged frame never comes out as a message; the next intact frame always does
    assert [f.seq for f in frames] == [8]
    assert dec.stats.dropped >= 1


@given(st.lists(messages, min_size=1, max_size=8), st.binary(max_size=80), st.data())
@settings(max_examples=100, deadline=None)
def test_resync_after_garbage_and_any_chunking(msgs, garbage, data):
    frames = b"".join(rp.encode_frame(m, k, k) for k, m in enumerate(msgs))
    stream = garbage + b"\x00" + frames  # garbage, then a line break, then good frames
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    dec = rp.StreamDecoder()
    out = []
    for a, b in zip([0] + cuts, cuts + [len(stream)]):
        out += dec.feed(stream[a:b])
    got = [f.msg for f in out]
    assert got[-len(msgs):] == msgs  # every good frame after the delimiter decodes
    assert len(got) <= len(msgs) + 1  # garbage may (rarely) hold a valid frame, never more


def test_corrupt_frames_are_counted_by_kind():
    dec = rp.StreamDecoder()
    good = rp.encode_frame(rp.Heartbeat(), 1, 2)
    bad_crc = bytearray(good)
    bad_crc[3] ^= 0x40
    v2 = rp.cobs_encode(bytes(b"\x01\x05" + bytes(6)) + rp.crc16_ccitt_false(b"\x01\x05" + bytes(6)).to_bytes(2, "big")) + b"\x00"
    frames = dec.feed(bytes(bad_crc) + v2 + b"\x01\x01\x00" + b"\x55" * 200 + b"\x00" + good)
    assert len(frames) == 1
    assert dec.stats.by_kind == {"crc": 1, "version": 1, "length": 1, "overflow": 1}
    assert dec.stats.dropped == 4


def test_fault_names_roundtrip():
    f = rp.Fault.POWER | rp.Fault.LINK
    assert f.names() == "POWER|LINK"
    assert rp.Fault.parse(f.names()) == f
    assert rp.Fault.NONE.names() == "OK" and rp.Fault.parse("OK") == rp.Fault.NONE


def test_state_frames_fit_500_hz_at_115200_baud():
    # 10 bits per byte on the wire; the loop target needs >= 500 state frames/s
    assert 115200 / 10 / rp.wire_bytes(rp.MsgType.JOINT_STATES) >= 500
    assert 115200 / 10 / rp.wire_bytes(rp.MsgType.JOINT_TARGETS) >= 500
