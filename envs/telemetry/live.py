"""``--live``: the same topics as the MCAP logs, streamed to Foxglove over its WebSocket protocol.

A :class:`LiveServer` is a Foxglove WebSocket server (the ``foxglove-sdk`` package) on
127.0.0.1 with one channel per topic of a log's topic table (``ros2msg`` schemas, ``cdr``
messages: the very bytes the MCAP file gets). The log's writer thread hands every message to
it (:class:`~.mcapfile.McapFile`'s ``live``), so the control loop pays nothing more. Foxglove:
*Open connection* → *Foxglove WebSocket* → ``ws://127.0.0.1:PORT``.

Messages are sent only to clients connected at the time: a viewer that connects late has missed
``/robot_description`` and ``/tf_static`` (load the URDF from the file; docs/TELEMETRY.md).
"""

from __future__ import annotations

from .rosmsg import MessageType

__all__ = ["LiveServer", "LIVE_PORT"]

#: the Foxglove WebSocket protocol's usual port
LIVE_PORT = 8765
#: how long :meth:`LiveServer.close` waits for the port to be released, s
STOP_WAIT_S = 5.0


def _wait_closed(port: int) -> None:
    """Until nothing accepts connections on 127.0.0.1:``port`` (at most :data:`STOP_WAIT_S`)."""
    import socket
    import time
    end = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < end:
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) != 0:
                return
        time.sleep(0.02)


class LiveServer:
    """A Foxglove WebSocket server with a channel per topic.

    Args:
        channels: ``{topic: message type}``.
        port: TCP port on 127.0.0.1 (0: any free one; see :attr:`port`).
        name: the server's name, as Foxglove shows it.

    Raises:
        OSError: the port cannot be bound (in use).
    """

    def __init__(self, channels: dict[str, MessageType], port: int = LIVE_PORT, name: str = "armtwin") -> None:
        import foxglove
        self._context = foxglove.Context()
        try:
            self._server = foxglove.start_server(name=name, host="127.0.0.1", port=port, context=self._context)
        except RuntimeError as exc:     # the SDK reports a bind failure as RuntimeError
            raise OSError(f"--live: cannot serve on 127.0.0.1:{port}: {exc}") from None
        self._channels = {
            topic: foxglove.Channel(topic, message_encoding="cdr", context=self._context,
                                    schema=foxglove.Schema(name=t.name, encoding="ros2msg", data=t.definition.encode()))
            for topic, t in channels.items()}
        self._closed = False

    @property
    def port(self) -> int:
        """The port it listens on."""
        return self._server.port

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def message(self, topic: str, log_time_ns: int, data: bytes) -> None:
        """Send one message (CDR bytes) to the clients subscribed to ``topic``."""
        self._channels[topic].log(data, log_time=log_time_ns)

    def close(self) -> None:
        """Stop the server (idempotent) and wait, up to :data:`STOP_WAIT_S`, until its port takes no
        more connections: the SDK's server stops on a thread of its own, and a busy machine let a
        caller find the port still taken right after ``stop()``."""
        if not self._closed:
            self._closed = True
            port = self.port
            for ch in self._channels.values():
                ch.close()
            self._server.stop()
            _wait_closed(port)
