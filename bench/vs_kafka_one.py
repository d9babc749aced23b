#!/usr/bin/env python3
"""One load of bench/vs_kafka.py against one broker, with the client's CPU
beside the broker's: for profiling the figures where kaas trails Kafka.

    .venv/bin/python bench/vs_kafka_one.py                 # kaas --fsync always
    .venv/bin/python bench/vs_kafka_one.py --kafka         # Apache Kafka 4.4.0 (kafka-ref)
    .venv/bin/python bench/vs_kafka_one.py --callgrind OUT --profile fetch
        # kaas under callgrind (collection off at start); instrumentation is
        # switched on (callgrind_control -i on) around the chosen load only

The load is vs_kafka's produce_1KiB_p16_rdkafka (round-robin, acks=all,
idempotent, linger.ms 5) of --mb MB into a fresh 16-partition topic, then
fetch_1KiB_p16_rdkafka (assign from the beginning, librdkafka consumer)
of the same topic. Prints one JSON line per load: MB/s, broker CPU s/GB and
the client process's CPU s/GB (the Python thread and librdkafka's threads).
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kaasbench as kb  # noqa: E402
import vs_kafka as vk  # noqa: E402


class Under(kb.Kaas):
    """kaas started through a wrapper (valgrind)."""

    def __init__(self, prefix, *a, **kw):
        super().__init__(*a, **kw)
        self.prefix = prefix

    def command(self):
        return self.prefix + super().command()


def cpu_split(pids):
    """(user, system) CPU seconds of the processes."""
    u = s = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            u += int(fields[11]) / kb.CLK_TCK
            s += int(fields[12]) / kb.CLK_TCK
        except OSError:
            pass
    return u, s


def callgrind(pid, switch):
    subprocess.run(["callgrind_control", "-i", switch, str(pid)], check=True,
                   stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kaas", default=kb.DEFAULT_KAAS)
    ap.add_argument("--fsync", default="always")
    ap.add_argument("--kafka", action="store_true", help="Apache Kafka (kafka-ref) instead of kaas")
    ap.add_argument("--mb", type=float, default=60, help="MB of 1 KiB values (default %(default)s)")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--reps", type=int, default=1, help="fetches of the topic (default %(default)s)")
    ap.add_argument("--callgrind", metavar="OUT", help="run kaas under callgrind, writing OUT")
    ap.add_argument("--profile", choices=("produce", "fetch"), default="fetch")
    ap.add_argument("--data-root", default=kb.DEFAULT_DATA_ROOT)
    args = ap.parse_args()
    args.kafka_heap = None
    root = kb.fresh_dir(args.data_root, "vs-kafka-one")
    try:
        if args.kafka:
            b = vk.KafkaBroker(args, root, "kafka")
        else:
            b = vk.KaasBroker(args, root, "kaas", args.fsync)
            if args.callgrind:
                b.k = Under(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                             f"--callgrind-out-file={os.path.abspath(args.callgrind)}"],
                            args.kaas, b.dir, fsync=args.fsync, metrics=False,
                            log_path=os.path.join(root, "kaas.log"))
        b.start()
        pid = b.pids()[0]
        size, parts = args.size, args.partitions
        n = int(args.mb * kb.MB) // size
        topic = vk.new_topic(b, "one", parts)
        conf = kb.producer_config(b.addr, **{"linger.ms": vk.linger_for(size)})
        if args.callgrind and args.profile == "produce":
            callgrind(pid, "on")
        u0, s0 = cpu_split(b.pids())
        r = kb.produce(conf, topic, parts, os.urandom(size), n)
        u1, s1 = cpu_split(b.pids())
        cpu = u1 + s1 - u0 - s0
        if args.callgrind and args.profile == "produce":
            callgrind(pid, "off")
        gb = n * size / 1e9
        print(json.dumps({"load": "produce", "broker": b.name, "MBps": round(n * size / r["seconds"] / kb.MB, 1),
                          "broker_cpu_s_per_GB": round(cpu / gb, 3),
                          "broker_user_sys_s_per_GB": [round((u1 - u0) / gb, 3), round((s1 - s0) / gb, 3)],
                          "client_cpu_s_per_GB": round(r["process_cpu"] / gb, 3),
                          "errors": len(r["errors"])}), flush=True)
        for _ in range(args.reps):
            if args.callgrind and args.profile == "fetch":
                callgrind(pid, "on")
            u0, s0 = cpu_split(b.pids())
            secs, ccpu, got, nbytes = kb.consume_all(b.addr, topic, parts, n, deadline_s=3600)
            u1, s1 = cpu_split(b.pids())
            cpu = u1 + s1 - u0 - s0
            if args.callgrind and args.profile == "fetch":
                callgrind(pid, "off")
            gb = nbytes / 1e9
            print(json.dumps({"load": "fetch", "broker": b.name, "MBps": round(nbytes / secs / kb.MB, 1),
                              "broker_cpu_s_per_GB": round(cpu / gb, 3),
                              "broker_user_sys_s_per_GB": [round((u1 - u0) / gb, 3), round((s1 - s0) / gb, 3)],
                              "client_cpu_s_per_GB": round(ccpu / gb, 3),
                              "client_cpu_over_wall": round(ccpu / secs, 2), "records": got}), flush=True)
        print(json.dumps({"broker": b.name, "VmHWM_MiB": round(vk.proc_hwm_kib(b.pids()) / 1024, 1)}), flush=True)
    finally:
        for p in list(vk.CHILDREN):
            vk.reap(p)
        try:
            b.stop()
        finally:
            kb.remove(root)


if __name__ == "__main__":
    main()
