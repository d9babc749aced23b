'use strict';
// kafkajs side of test_cluster_txn_clients.py: one transactional
// producer ($KAAS_TXN_ID) runs the transactions of $KAAS_PLAN in order, each
// [{commit, values: [[partition, value]], offsets: {partition: offset}}]:
// send the values to $KAAS_TOPIC, sendOffsets of $KAAS_SRC for group
// $KAAS_GROUP (AddOffsetsToTxn + TxnOffsetCommit), then commit or abort.
// After each one it checks the group's offsets through the admin client's
// OffsetFetch: a commit's become visible (awaited: the offsets' marker
// follows EndTxn's answer), an abort leaves the previous ones. Prints "ok"
// as its last line on success; exits 1 with the error otherwise.
const { Kafka, logLevel } = require('kafkajs');

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const brokers = env('KAAS_BOOTSTRAP').split(',');
const topic = env('KAAS_TOPIC');
const src = env('KAAS_SRC');
const groupId = env('KAAS_GROUP');
const transactionalId = env('KAAS_TXN_ID');
const plan = JSON.parse(env('KAAS_PLAN'));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const kafka = new Kafka({
  clientId: 'kaas-cluster-txn',
  brokers,
  logLevel: logLevel.WARN,
  connectionTimeout: 5000,
  requestTimeout: 30000,
  retry: { initialRetryTime: 100, maxRetryTime: 2000, retries: 30 },
});

async function offsets(admin) {
  const [t] = await admin.fetchOffsets({ groupId, topics: [src] });
  return Object.fromEntries(t.partitions.map((p) => [p.partition, Number(p.offset)]));
}

const same = (a, b) => Object.keys(b).every((k) => a[k] === b[k]);

async function main() {
  const admin = kafka.admin();
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1,
    transactionTimeout: 60000 });
  await admin.connect();
  await producer.connect(); // InitProducerId at the id's coordinator
  let committed = null;
  try {
    for (const [i, step] of plan.entries()) {
      const txn = await producer.transaction();
      await txn.send({ topic, acks: -1,
        messages: step.values.map(([partition, value]) => ({ partition, value })) });
      await txn.sendOffsets({ consumerGroupId: groupId, topics: [{ topic: src,
        partitions: Object.entries(step.offsets).map(([partition, offset]) =>
          ({ partition: Number(partition), offset: String(offset) })) }] });
      if (step.commit) {
        await txn.commit();
        committed = Object.fromEntries(Object.entries(step.offsets).map(([p, o]) => [p, Number(o)]));
        const deadline = Date.now() + 30000;
        for (;;) {
          const have = await offsets(admin);
          if (same(have, committed)) break;
          if (Date.now() > deadline) throw new Error(`transaction ${i}: offsets ${JSON.stringify(have)}, want ${JSON.stringify(committed)}`);
          await sleep(50);
        }
      } else {
        await txn.abort();
        const have = await offsets(admin);
        const want = committed || Object.fromEntries(Object.keys(step.offsets).map((p) => [p, -1]));
        if (!same(have, want)) throw new Error(`transaction ${i} (aborted): offsets ${JSON.stringify(have)}, want ${JSON.stringify(want)}`);
      }
      console.log(`transaction ${i} ${step.commit ? 'committed' : 'aborted'}`);
    }
  } finally {
    await producer.disconnect();
    await admin.disconnect();
  }
  console.log('ok');
}

main().then(() => process.exit(0), (e) => {
  console.error(`kafkajs transactions failed: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
