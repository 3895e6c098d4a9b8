"""An MCAP file with ROS 2 (CDR) channels, written by a background thread.

Why a thread: encoding, chunking and zstd-compressing a 1 MiB chunk take milliseconds, which a
500 Hz control loop cannot spend. The loop hands each record to :meth:`McapFile.submit` (a put
on an unbounded queue: nothing is ever dropped, and the caller never waits for the disk); the
writer thread encodes and writes it, in order. :meth:`McapFile.close` queues the end, lets the
thread drain the queue and write the summary, and waits for it: a run stopped by SIGINT or
SIGTERM ends with a complete, indexed file. The thread is not a daemon, so even an exception in
the closing caller cannot keep the file from being finished before the interpreter exits.

A process killed outright (SIGKILL) leaves a file without its summary whose complete chunks
still read (:func:`armtwin.envs.telemetry.reader.read_twin_mcap` and ``mcap recover``).
"""

from __future__ import annotations

import os
import queue
import threading
import time
from typing import Any, Callable

from ... import __version__
from ...controllers.choices import Choice
from .rosmsg import MessageType

__all__ = ["McapFile", "Compression", "MCAP_SUFFIX"]

#: the file name ending that makes ``--log`` write MCAP instead of CSV
MCAP_SUFFIX = ".mcap"


class Compression(Choice):
    """Compression of the MCAP chunks."""

    __label__ = "compression"

    ZSTD = "zstd"
    LZ4 = "lz4"
    NONE = "none"

    @property
    def mcap(self):
        """The ``mcap`` library's CompressionType (imported here: choosing one needs no extra)."""
        from mcap.writer import CompressionType
        return {"zstd": CompressionType.ZSTD, "lz4": CompressionType.LZ4, "none": CompressionType.NONE}[self.value]


_END = object()


class McapFile:
    """An MCAP file (profile ``ros2``) written by its own thread.

    Args:
        path: the ``.mcap`` file (replaced if it exists), or None for none (only ``live``).
        channels: ``{topic: message type}``, registered before anything is written.
        live: a :class:`~.live.LiveServer` that gets every message too (closed with this file).
        compression: chunk compression.
        chunk_size: bytes of messages per chunk (a SIGKILL loses at most the chunk being built).

    Raises:
        OSError: the file cannot be created.
    """

    def __init__(self, path: str | os.PathLike | None, channels: dict[str, MessageType], *,
                 compression: Compression = Compression.ZSTD, chunk_size: int = 256 * 1024, live=None) -> None:
        self.path = os.fspath(path) if path is not None else None
        self.live = live
        self.channels: dict[str, int] = {}
        self._f = self._w = None
        if self.path is not None:
            from mcap.writer import Writer
            self._f = open(self.path, "wb")
            try:
                self._w = Writer(self._f, chunk_size=chunk_size, compression=Compression.parse(compression).mcap)
                self._w.start(profile="ros2", library=f"armtwin {__version__}")
                schemas: dict[str, int] = {}
                for topic, mtype in channels.items():
                    if mtype.name not in schemas:
                        schemas[mtype.name] = self._w.register_schema(mtype.name, "ros2msg", mtype.definition.encode())
                    self.channels[topic] = self._w.register_channel(topic, "cdr", schemas[mtype.name])
            except BaseException:
                self._f.close()
                raise
        else:
            self.channels = {topic: i for i, topic in enumerate(channels)}
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._seq = dict.fromkeys(self.channels.values(), 0)
        #: messages written so far (by the writer thread)
        self.messages = 0
        self.error: BaseException | None = None
        #: CPU time the writer thread used, s (known after :meth:`close`; ``armtwin bench log``)
        self.thread_cpu_s = 0.0
        self._closed = False
        name = os.path.basename(self.path) if self.path else "live"
        self._thread = threading.Thread(target=self._drain, name=f"McapFile({name})")
        self._thread.start()

    # ----- the caller's side ------------------------------------------------------------------
    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(self, *args)`` on the writer thread, after everything submitted before.

        ``fn`` calls :meth:`message` (and :meth:`attach`); pass it values that nobody changes
        afterwards (copies of arrays that the loop reuses).
        """
        if self._closed:
            raise ValueError(f"{self.path}: the MCAP file is closed")
        self._q.put((fn, args))

    def close(self) -> None:
        """Write everything queued, the summary and the footer; close the file (idempotent).

        Raises:
            OSError: the writer thread failed (a full disk): the file is incomplete.
        """
        if not self._closed:
            self._closed = True
            self._q.put(_END)
        self._thread.join()
        if self.error is not None:
            err, self.error = self.error, None
            raise err if isinstance(err, OSError) else OSError(f"{self.path}: {err}")

    def __enter__(self) -> "McapFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ----- the writer thread's side -----------------------------------------------------------
    def message(self, topic: str, log_time_ns: int, data: bytes) -> None:
        """Write one message (writer thread only: call it from a function given to :meth:`submit`)."""
        ch = self.channels[topic]
        seq = self._seq[ch]
        self._seq[ch] = seq + 1
        if self._w is not None:
            self._w.add_message(ch, log_time=log_time_ns, data=data, publish_time=log_time_ns, sequence=seq)
        if self.live is not None:
            self.live.message(topic, log_time_ns, data)
        self.messages += 1

    def attach(self, name: str, media_type: str, data: bytes, log_time_ns: int) -> None:
        """Write an attachment (writer thread only; nothing without a file)."""
        if self._w is not None:
            self._w.add_attachment(create_time=time.time_ns(), log_time=log_time_ns, name=name, media_type=media_type,
                                   data=data)

    def metadata(self, name: str, data: dict[str, str]) -> None:
        """Write a metadata record (writer thread only; nothing without a file)."""
        if self._w is not None:
            self._w.add_metadata(name, data)

    def _drain(self) -> None:
        while True:
            item = self._q.get()
            if item is _END:
                break
            if self.error is None:
                fn, args = item
                try:
                    fn(self, *args)
                except BaseException as exc:  # noqa: BLE001 - reported by close(); the caller never blocks
                    self.error = exc
        try:
            if self.error is None and self._w is not None:
                self._w.finish()
            self.thread_cpu_s = time.thread_time()
        except BaseException as exc:  # noqa: BLE001
            self.error = exc
        finally:
            try:
                if self._f is not None:
                    self._f.close()
            except OSError as exc:
                self.error = self.error or exc
            if self.live is not None:
                self.live.close()
