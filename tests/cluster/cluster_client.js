// kafkajs side of the cluster tests (run by workload.KafkajsClient).
//
// Until $KAAS_OUT/stop-producing exists: an idempotent producer (acks=-1)
// sends small batches, each to one partition in turn, and logs every value
// it sent (sent.jsonl), every acknowledged one with its offset (acked.jsonl)
// and every failed send (errors.jsonl). Meanwhile a consumer-group member
// ($KAAS_GROUP) logs every delivery (consumed.jsonl).
// When $KAAS_OUT/stop exists: the member leaves, and a fresh consumer reads
// every partition from offset 0 to its high watermark (read.jsonl); exit 0.
'use strict';
const fs = require('fs');
const path = require('path');
const { Kafka, logLevel } = require('kafkajs');

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const brokers = env('KAAS_BOOTSTRAP').split(',');
const topic = env('KAAS_TOPIC');
const partitions = Number(env('KAAS_PARTITIONS'));
const group = env('KAAS_GROUP');
const name = env('KAAS_NAME');
const out = env('KAAS_OUT');
const BATCH = 5;

const log = (file, obj) => fs.appendFileSync(path.join(out, file), JSON.stringify(obj) + '\n');
const exists = (f) => fs.existsSync(path.join(out, f));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const kafka = new Kafka({
  clientId: name,
  brokers,
  logLevel: logLevel.WARN,
  connectionTimeout: 3000,
  requestTimeout: 10000,
  retry: { initialRetryTime: 100, maxRetryTime: 2000, retries: 60 },
});

async function produce() {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, metadataMaxAge: 1000 });
  await producer.connect();
  let seq = 0;
  let batch = 0;
  while (!exists('stop-producing')) {
    const partition = batch++ % partitions;
    const values = [];
    for (let i = 0; i < BATCH; i++) values.push(`${name}-${String(seq++).padStart(7, '0')}`);
    for (const value of values) log('sent.jsonl', { value });
    try {
      const res = await producer.send({ topic, acks: -1, messages: values.map((value) => ({ value, partition })) });
      const r = res.find((x) => x.partition === partition);
      if (!r || r.errorCode !== 0) throw new Error(`bad result ${JSON.stringify(res)}`);
      const base = Number(r.baseOffset);
      values.forEach((value, i) => log('acked.jsonl', { value, partition, offset: base + i }));
    } catch (e) {
      log('errors.jsonl', { error: (e && (e.type || e.name)) || String(e), message: String(e && e.message) });
    }
    await sleep(5);
  }
  await producer.disconnect();
  fs.writeFileSync(path.join(out, 'produced'), '');
}

async function groupMember() {
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000, heartbeatInterval: 1000,
                                    metadataMaxAge: 1000 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    autoCommitInterval: 500,
    eachMessage: async ({ partition, message }) => {
      log('consumed.jsonl', { partition, offset: Number(message.offset), value: message.value.toString() });
    },
  });
  while (!exists('stop')) await sleep(100);
  await consumer.disconnect();
}

async function readAll() {
  const admin = kafka.admin();
  await admin.connect();
  const ends = new Map((await admin.fetchTopicOffsets(topic)).map((o) => [o.partition, Number(o.high)]));
  await admin.disconnect();
  const pos = new Map([...ends.keys()].map((p) => [p, 0]));
  const done = () => [...ends].every(([p, end]) => pos.get(p) >= end);
  if (done()) return;
  const reader = kafka.consumer({ groupId: `${group}-read-${name}`, metadataMaxAge: 1000 });
  await reader.connect();
  await reader.subscribe({ topic, fromBeginning: true });
  await reader.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      const offset = Number(message.offset);
      if (offset >= (ends.get(partition) || 0)) return;
      log('read.jsonl', { partition, offset, value: message.value.toString() });
      pos.set(partition, offset + 1);
    },
  });
  const deadline = Date.now() + 120000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`full read stuck at ${JSON.stringify([...pos])}`);
    await sleep(100);
  }
  await reader.disconnect();
}

(async () => {
  await Promise.all([produce(), groupMember()]);
  await readAll();
  process.exit(0);
})().catch((e) => {
  console.error('cluster_client.js failed:', e);
  process.exit(1);
});
