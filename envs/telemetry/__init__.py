"""Telemetry in the robotics ecosystem's formats: MCAP logs of ROS 2 messages, and a remote store.

One module per concern (the 'telemetry' extra: ``mcap``, ``mcap-ros2-support``, ``paho-mqtt``, ``foxglove-sdk``);
nothing here imports PyBullet, and importing this package imports none of them:

| module | what |
|---|---|
| :mod:`.rosmsg` | ROS 2 message definitions and fast CDR encoders (JointState, TFMessage, PoseStamped, String, Log, armtwin's TwinSample) |
| :mod:`.topics` | the topic tables of the run log and the twin log (types, units) |
| :mod:`.tf` | :class:`RobotFrames` — the robot's TF edges from its joints |
| :mod:`.mcapfile` | :class:`McapFile` — an MCAP file written by a background thread, closed whole |
| :mod:`.common` | what every log writes first: the URDF, ``/tf_static``, metadata; ``/rosout`` notes |
| :mod:`.runlog` | :class:`RunMcapLog` — ``armtwin run --log run.mcap`` |
| :mod:`.twinlog` | :class:`TwinMcapLog` — ``armtwin sync --log twin.mcap`` (the CSV TwinLog's interface) |
| :mod:`.comparelog` | :func:`write_compare_mcap` — ``armtwin compare --log compare.mcap``: each joint model under its own namespace |
| :mod:`.reader` | :func:`read_twin_mcap` — the twin log back as the CSV reader gives it |
| :mod:`.mqtt` | :class:`MqttStore` — JSON records to an MQTT broker, QoS 1, through a bounded queue; :func:`parse_mqtt_url` |
| :mod:`.records` | :class:`TwinPublisher` — down-sampled twin records for the store (the twin log's interface) |
| :mod:`.live` | :class:`LiveServer` — ``--live``: the log's topics to Foxglove over WebSocket |
| :mod:`.broker` | :class:`Broker` — a local mosquitto for the tests and ``armtwin bench log`` |

Topics, message types and units: docs/TELEMETRY.md.
"""
