"""The exactly-once copier (tests/clients/eos_copier.py, same arguments)
with its consumer in a KIP-848 consumer-protocol group.

It runs that script unchanged, with confluent_kafka.Consumer swapped for
one that asks for group.protocol=consumer and leaves out the two settings
that protocol takes from the broker instead (session.timeout.ms,
heartbeat.interval.ms: librdkafka refuses them with it).
"""

import runpy
from pathlib import Path

import confluent_kafka

COPIER = Path(__file__).resolve().parent.parent / "clients" / "eos_copier.py"
BROKER_SIDE = ("session.timeout.ms", "heartbeat.interval.ms")


class ConsumerProtocolConsumer(confluent_kafka.Consumer):
    def __init__(self, conf: dict):
        conf = {k: v for k, v in conf.items() if k not in BROKER_SIDE}
        conf["group.protocol"] = "consumer"
        super().__init__(conf)


confluent_kafka.Consumer = ConsumerProtocolConsumer
runpy.run_path(str(COPIER), run_name="__main__")
