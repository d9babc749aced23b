'use strict'
// kafkajs 2.2.4 against a secured kaas. Run through
// tests/clients/test_security.py, which starts the broker (SASL_SSL and
// SASL_PLAINTEXT listeners, ACL authorizer), creates the topics and the ACLs
// as User:admin, and passes everything in KAAS_SECURITY (JSON):
//   { ca, secure, users: {jess, mallory}, records, txnRecords,
//     cases: { "SCRAM-SHA-512": {broker, ssl, mechanism, topic, group, txn},
//              "PLAIN": {...} },
//     refused: { topic, readable, hidden, group, txn } }
//
// 1-2. jess (WRITE+READ on its topic, READ on its group, WRITE on its
//      transactional id) logs in with SCRAM-SHA-512 over TLS and with PLAIN,
//      produces (idempotent), commits a transaction, and reads everything in
//      a group (read_committed), committing offsets.
// 3.   mallory (READ on `readable`, DESCRIBE on `topic`, the group and the
//      transactional id) is
//      refused: produce to `topic` and the offsets of `hidden` (no ACL) with
//      TOPIC_AUTHORIZATION_FAILED, the group with GROUP_AUTHORIZATION_FAILED,
//      the transactional id with TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
// 4.   A wrong password is a KafkaJSSASLAuthenticationError.

const fs = require('node:fs')
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { Kafka, logLevel } = require('kafkajs')

const CONFIG = JSON.parse(process.env.KAAS_SECURITY || 'null')
if (!CONFIG) throw new Error('KAAS_SECURITY is not set (tests/clients/test_security.py sets it)')
const CA = fs.readFileSync(CONFIG.ca, 'utf-8')
const OP_TIMEOUT_MS = 30_000
const TEST_TIMEOUT_MS = 60_000

function client(broker, ssl, mechanism, username, password) {
  return new Kafka({
    clientId: 'kaas-kafkajs-security',
    brokers: [broker],
    ssl: ssl ? { ca: [CA] } : false,
    sasl: { mechanism, username, password },
    connectionTimeout: 10_000,
    requestTimeout: OP_TIMEOUT_MS,
    retry: { retries: 2, initialRetryTime: 100 },
    logLevel: logLevel.NOTHING,
  })
}

async function until(condition, what, timeoutMs = OP_TIMEOUT_MS) {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}

async function happyPath(c) {
  const kafka = client(c.broker, c.ssl, c.mechanism, 'jess', CONFIG.users.jess)
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const want = []
  const messages = []
  for (let i = 0; i < CONFIG.records; i++) {
    messages.push({ partition: i % 2, value: `v${i}` })
    want.push(`v${i}`)
  }
  await producer.send({ topic: c.topic, acks: -1, messages })
  await producer.disconnect()

  const txn = kafka.producer({ transactionalId: c.txn, idempotent: true, maxInFlightRequests: 1 })
  await txn.connect()
  const t = await txn.transaction()
  const tm = []
  for (let i = 0; i < CONFIG.txnRecords; i++) {
    tm.push({ partition: i % 2, value: `txn${i}` })
    want.push(`txn${i}`)
  }
  await t.send({ topic: c.topic, messages: tm })
  await t.commit()
  await txn.disconnect()

  const consumer = kafka.consumer({ groupId: c.group, readUncommitted: false })
  await consumer.connect()
  await consumer.subscribe({ topic: c.topic, fromBeginning: true })
  const seen = []
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      seen.push(message.value.toString())
      await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }])
    },
  })
  await until(() => seen.length >= want.length, `${want.length} records`)
  await consumer.disconnect()
  assert.deepEqual([...seen].sort(), [...want].sort())

  const admin = kafka.admin()
  await admin.connect()
  const offsets = await admin.fetchOffsets({ groupId: c.group, topics: [c.topic] })
  await admin.disconnect()
  const total = offsets[0].partitions.reduce((s, p) => s + Number(p.offset), 0)
  assert.equal(total, want.length, JSON.stringify(offsets))
}

test('SCRAM-SHA-512 over SASL_SSL: produce, group consume with commits, transaction',
  { timeout: TEST_TIMEOUT_MS }, async () => {
    await happyPath(CONFIG.cases['SCRAM-SHA-512'])
  })

test('PLAIN over SASL_PLAINTEXT: produce, group consume with commits, transaction',
  { timeout: TEST_TIMEOUT_MS }, async () => {
    await happyPath(CONFIG.cases.PLAIN)
  })

async function errorType(f) {
  try {
    await f()
  } catch (e) {
    // kafkajs wraps retried failures (KafkaJSNonRetriableError,
    // KafkaJSNumberOfRetriesExceeded) around the protocol error.
    let err = e
    while (err && !err.type && err.cause) err = err.cause
    return err && (err.type || err.name)
  }
  return 'no error'
}

test('without the ACLs: 29 on produce and offsets, 30 on the group, 53 on the transactional id',
  { timeout: TEST_TIMEOUT_MS }, async () => {
    const r = CONFIG.refused
    const kafka = client(CONFIG.secure, true, 'scram-sha-512', 'mallory', CONFIG.users.mallory)

    const producer = kafka.producer({ idempotent: false, allowAutoTopicCreation: false })
    await producer.connect()
    assert.equal(await errorType(() => producer.send({ topic: r.topic, acks: -1, messages: [{ value: 'x' }] })),
      'TOPIC_AUTHORIZATION_FAILED')
    await producer.disconnect()

    // The offsets of a topic mallory has no ACL on at all.
    const admin = kafka.admin()
    await admin.connect()
    assert.equal(await errorType(() => admin.fetchTopicOffsets(r.hidden)), 'TOPIC_AUTHORIZATION_FAILED')
    await admin.disconnect()

    const consumer = kafka.consumer({ groupId: r.group })
    await consumer.connect()
    await consumer.subscribe({ topic: r.readable, fromBeginning: true })
    let crashed = null
    consumer.on(consumer.events.CRASH, e => { crashed = e.payload.error })
    await consumer.run({ eachMessage: async () => {} })
    await until(() => crashed !== null, 'the consumer to give up')
    let err = crashed
    while (err && !err.type && err.cause) err = err.cause
    assert.equal(err.type, 'GROUP_AUTHORIZATION_FAILED')
    await consumer.disconnect()

    // idempotent: false, because connect() of an idempotent producer first gets a
    // non-transactional producer id, which needs WRITE on some topic (KIP-679)
    // and is refused CLUSTER_AUTHORIZATION_FAILED; transaction() then asks for
    // the transactional one.
    const txn = kafka.producer({ transactionalId: r.txn, idempotent: false, maxInFlightRequests: 1 })
    await txn.connect()
    assert.equal(await errorType(() => txn.transaction()), 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED')
    await txn.disconnect()
  })

test('a wrong password is a KafkaJSSASLAuthenticationError', { timeout: TEST_TIMEOUT_MS }, async () => {
  for (const c of Object.values(CONFIG.cases)) {
    const kafka = client(c.broker, c.ssl, c.mechanism, 'jess', 'wrong')
    const admin = kafka.admin()
    let error = null
    try {
      await admin.connect()
    } catch (e) {
      error = e
    }
    await admin.disconnect()
    assert.ok(error, 'connect succeeded')
    let err = error
    while (err && err.name !== 'KafkaJSSASLAuthenticationError' && err.cause) err = err.cause
    assert.equal(err.name, 'KafkaJSSASLAuthenticationError', `${error.name}: ${error.message}`)
  }
})
