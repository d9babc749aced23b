'use strict'
// kafkajs 2.2.4 transactions against a real kaas broker at KAAS_BOOTSTRAP.
// Run through tests/clients/test_kafkajs_transactions.py, which starts the
// broker (once per shipped policy):
//   KAAS_BOOTSTRAP=127.0.0.1:PORT node --test tests/clients/kafkajs_transactions.test.js
//
// 1. Committed records are read exactly once by a read_committed consumer,
//    aborted ones never; a readUncommitted consumer does see them.
// 2. Consume-transform-produce: a copier (a group member, autoCommit off, and
//    a transactional producer) copies 200 records in chunks, one transaction
//    each, with transaction.sendOffsets() (AddOffsetsToTxn + TxnOffsetCommit);
//    one transaction is aborted after its offsets were sent and is redone.
//    The output is the input transformed exactly once, the group's offsets are
//    the input's end offsets, the aborted offsets never showed, and a new
//    member of the group resumes at those offsets.
// 3. Zombie fencing: a second producer with the same transactionalId fences
//    the first, whose later sends (Produce to a partition already in its
//    transaction, AddPartitionsToTxn for a new one) and commit fail with a
//    fencing error; only the second's records are visible read_committed.
//
// kafkajs sends InitProducerId v0/v1 only (no KIP-360 epoch-bump claims).

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { Kafka, logLevel } = require('kafkajs')

const BOOTSTRAP = process.env.KAAS_BOOTSTRAP
if (!BOOTSTRAP) {
  throw new Error('KAAS_BOOTSTRAP is not set (tests/clients/test_kafkajs_transactions.py sets it)')
}

const OP_TIMEOUT_MS = 30_000
const TEST_TIMEOUT_MS = 60_000
const SESSION_MS = 6_000

let kafka
let admin
const unique = () => Math.random().toString(16).slice(2, 10)

before(async () => {
  kafka = new Kafka({
    clientId: 'kaas-kafkajs-transactions',
    brokers: [BOOTSTRAP],
    connectionTimeout: 10_000,
    requestTimeout: OP_TIMEOUT_MS,
    // The zombie test makes kafkajs log its (expected) fencing errors.
    logLevel: logLevel.NOTHING,
  })
  admin = kafka.admin()
  await admin.connect()
})

after(async () => {
  if (admin) await admin.disconnect()
})

async function createTopic(topic, numPartitions) {
  const created = await admin.createTopics({
    topics: [{ topic, numPartitions, replicationFactor: 1 }],
    waitForLeaders: true,
    timeout: OP_TIMEOUT_MS,
  })
  assert.equal(created, true)
}

function txnProducer(transactionalId) {
  return kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1, transactionTimeout: 60_000 })
}

async function until(condition, what, timeoutMs = OP_TIMEOUT_MS) {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}

// Everything a kafkajs consumer (a member of a fresh group) reads from the
// beginning of each partition up to its high watermark, as [{partition,
// offset, value}]. It has read up to the high watermark once a processed
// batch (aborted records and control records included) ends there.
async function readAll(topic, { readUncommitted }) {
  const high = new Map()
  for (const { partition, high: h } of await admin.fetchTopicOffsets(topic)) {
    if (Number(h) > 0) high.set(partition, Number(h))
  }
  const consumer = kafka.consumer({
    groupId: `reader-${unique()}`,
    readUncommitted,
    sessionTimeout: SESSION_MS,
    heartbeatInterval: 500,
    maxWaitTimeInMs: 100,
  })
  const out = []
  const reached = new Map()
  consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
    const next = Number(payload.lastOffset) + 1
    reached.set(payload.partition, Math.max(reached.get(payload.partition) ?? 0, next))
  })
  try {
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        out.push({ partition, offset: Number(message.offset), value: message.value.toString() })
      },
    })
    await until(() => [...high].every(([p, h]) => (reached.get(p) ?? 0) >= h),
      `a ${readUncommitted ? 'read_uncommitted' : 'read_committed'} read of ${topic} up to ${JSON.stringify([...high])}`)
  } finally {
    await consumer.disconnect()
  }
  return out
}

// [read_committed, read_uncommitted] reads of `topic`, side by side (each
// consumer waits out the group's initial rebalance delay).
const readBoth = topic =>
  Promise.all([readAll(topic, { readUncommitted: false }), readAll(topic, { readUncommitted: true })])

const sortedValues = records => records.map(r => r.value).sort()

test('committed records are read once and aborted never', { timeout: TEST_TIMEOUT_MS }, async () => {
  const topic = `kafkajs-txn-${unique()}`
  await createTopic(topic, 2)
  const producer = txnProducer(`tx-${unique()}`)
  await producer.connect()
  try {
    let txn = await producer.transaction()
    await txn.send({
      topic,
      messages: Array.from({ length: 50 }, (_, i) => ({ partition: i % 2, value: `committed-${i}` })),
    })
    await txn.commit()
    txn = await producer.transaction()
    await txn.send({
      topic,
      messages: Array.from({ length: 20 }, (_, i) => ({ partition: i % 2, value: `aborted-${i}` })),
    })
    await txn.abort()
    txn = await producer.transaction()
    await txn.send({ topic, messages: [{ partition: 0, value: 'committed-last' }] })
    await txn.commit()
  } finally {
    await producer.disconnect()
  }

  const committed = [...Array.from({ length: 50 }, (_, i) => `committed-${i}`), 'committed-last'].sort()
  const aborted = Array.from({ length: 20 }, (_, i) => `aborted-${i}`)
  const [seen, everything] = await readBoth(topic)
  assert.deepEqual(sortedValues(seen), committed)
  assert.deepEqual(
    seen.filter(r => r.partition === 1).map(r => r.value),
    Array.from({ length: 25 }, (_, i) => `committed-${2 * i + 1}`)
  )
  assert.deepEqual(sortedValues(everything), [...committed, ...aborted].sort())
})

// {partition: committed offset} of `groupId` on `topic` (-1: none), through
// the admin client's OffsetFetch.
async function groupOffsets(groupId, topic) {
  const [t] = await admin.fetchOffsets({ groupId, topics: [topic] })
  return Object.fromEntries(t.partitions.map(p => [p.partition, Number(p.offset)]))
}

const sameOffsets = (a, b) => JSON.stringify(a) === JSON.stringify(b)

test('sendOffsets in a consume-transform-produce loop copies the input exactly once', { timeout: TEST_TIMEOUT_MS }, async () => {
  const PARTITIONS = 4
  const N = 200
  const CHUNK = 15
  const id = unique()
  const src = `kafkajs-ctp-in-${id}`
  const dst = `kafkajs-ctp-out-${id}`
  const groupId = `kafkajs-copier-${id}`
  await createTopic(src, PARTITIONS)
  await createTopic(dst, PARTITIONS)
  const input = Array.from({ length: N }, (_, i) => ({ partition: i % PARTITIONS, value: `in-${String(i).padStart(4, '0')}` }))
  const seeder = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await seeder.connect()
  await seeder.send({ topic: src, acks: -1, messages: input })
  await seeder.disconnect()
  const end = Object.fromEntries(Array.from({ length: PARTITIONS }, (_, p) => [p, N / PARTITIONS]))

  const consumer = kafka.consumer({ groupId, sessionTimeout: SESSION_MS, heartbeatInterval: 500, maxWaitTimeInMs: 100 })
  const producer = txnProducer(`copier-tx-${id}`)
  // partition -> next offset to copy, as of the last committed transaction
  const done = Object.fromEntries(Array.from({ length: PARTITIONS }, (_, p) => [p, -1]))
  let commits = 0
  let aborts = 0
  let beforeAbort = null
  let abortRechecked = false
  let failure = null // eachBatch errors are retried by kafkajs: keep the first one
  try {
    await producer.connect()
    await consumer.connect()
    await consumer.subscribe({ topics: [src], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
        if (failure) return
        try {
          const partition = batch.partition
          for (let i = 0; i < batch.messages.length; i += CHUNK) {
            const chunk = batch.messages.slice(i, i + CHUNK)
            const last = chunk[chunk.length - 1].offset
            const next = Number(last) + 1
            for (;;) {
              const txn = await producer.transaction()
              await txn.send({
                topic: dst,
                messages: chunk.map(m => ({ partition, value: `out-${m.value.toString()}` })),
              })
              if (aborts === 1 && !abortRechecked) {
                // This transaction's AddPartitionsToTxn went through, so the
                // aborted one's markers are complete: its offsets are gone
                // for good, not merely not yet published.
                assert.deepEqual(await groupOffsets(groupId, src), beforeAbort)
                abortRechecked = true
              }
              await txn.sendOffsets({
                consumerGroupId: groupId,
                topics: [{ topic: src, partitions: [{ partition, offset: String(next) }] }],
              })
              if (commits === 3 && aborts === 0) {
                beforeAbort = await groupOffsets(groupId, src)
                assert.deepEqual(beforeAbort, done, 'the open transaction\'s offsets are not visible')
                await txn.abort()
                aborts++
                assert.deepEqual(await groupOffsets(groupId, src), beforeAbort, 'aborted offsets became visible')
                continue // process the chunk again, as a copier does after an abort
              }
              await txn.commit()
              commits++
              done[partition] = next
              // A plain OffsetFetch may lag EndTxn (the offsets partition's
              // marker is written after the answer), as in Kafka.
              const want = { ...done }
              await until(async () => sameOffsets(await groupOffsets(groupId, src), want),
                `transaction ${commits}'s offsets ${JSON.stringify(want)}`)
              break
            }
            resolveOffset(last)
            await heartbeat()
          }
        } catch (e) {
          failure = failure || e
        }
      },
    })
    await until(() => failure || sameOffsets(done, end), 'the copier to finish', TEST_TIMEOUT_MS - 15_000)
    if (failure) throw failure
  } finally {
    await consumer.disconnect()
    await producer.disconnect()
  }
  assert.ok(aborts === 1 && abortRechecked && commits >= 4, JSON.stringify({ commits, aborts, abortRechecked }))

  const [out, raw] = await readBoth(dst)
  assert.deepEqual(sortedValues(out), input.map(r => `out-${r.value}`).sort())
  for (let p = 0; p < PARTITIONS; p++) { // each partition copied in order into the same partition
    assert.deepEqual(
      out.filter(r => r.partition === p).map(r => r.value),
      input.filter(r => r.partition === p).map(r => `out-${r.value}`)
    )
  }
  // The aborted transaction's records were written, only never visible read_committed.
  assert.ok(raw.length > N, `${raw.length} records in the output log`)
  assert.deepEqual([...new Set(sortedValues(raw))], input.map(r => `out-${r.value}`).sort())
  assert.deepEqual(await groupOffsets(groupId, src), end)

  // A new member of the group starts at the committed offsets: it reads only
  // records written after the copy.
  const late = Array.from({ length: PARTITIONS }, (_, p) => ({ partition: p, value: `late-${p}` }))
  const seeder2 = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await seeder2.connect()
  await seeder2.send({ topic: src, acks: -1, messages: late })
  await seeder2.disconnect()
  const resumed = []
  const next = kafka.consumer({ groupId, sessionTimeout: SESSION_MS, heartbeatInterval: 500, maxWaitTimeInMs: 100 })
  try {
    await next.connect()
    await next.subscribe({ topics: [src], fromBeginning: true })
    await next.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        resumed.push({ partition, offset: Number(message.offset), value: message.value.toString() })
      },
    })
    await until(() => resumed.length >= PARTITIONS, 'the new member to read the late records')
  } finally {
    await next.disconnect()
  }
  assert.deepEqual(
    resumed.sort((a, b) => a.partition - b.partition),
    late.map(r => ({ ...r, offset: N / PARTITIONS }))
  )
})

// A fencing error, wherever kafkajs wraps it: INVALID_PRODUCER_EPOCH (47), or
// PRODUCER_FENCED (90), which kafkajs 2.2.4 does not know by name.
function isFenced(e) {
  for (let err = e; err; err = err.cause || err.originalError) {
    if (err.type === 'INVALID_PRODUCER_EPOCH' || err.type === 'PRODUCER_FENCED') return true
    if (err.type === 'KAFKAJS_UNKNOWN_ERROR_CODE' && err.message === 'Unknown error code 90') return true
    if (err.cause === err || err.originalError === err) break
  }
  return false
}

test('a second producer with the same transactionalId fences the first', { timeout: TEST_TIMEOUT_MS }, async () => {
  const topic = `kafkajs-zombie-${unique()}`
  await createTopic(topic, 2)
  const transactionalId = `shared-${unique()}`
  const zombie = txnProducer(transactionalId)
  const fresh = txnProducer(transactionalId)
  try {
    await zombie.connect() // InitProducerId
    const zt = await zombie.transaction()
    await zt.send({ topic, messages: [{ partition: 0, value: 'zombie' }] })
    await fresh.connect() // InitProducerId again: fences the zombie and aborts its transaction
    const ft = await fresh.transaction()
    await ft.send({ topic, messages: [{ partition: 1, value: 'fresh' }] })
    await ft.commit()
    // Partition 0 is already in the zombie's transaction: its record goes
    // straight out as Produce with the old epoch. Partition 1 is not: it
    // needs AddPartitionsToTxn first. Both are refused.
    await assert.rejects(zt.send({ topic, messages: [{ partition: 0, value: 'zombie-late-0' }] }), e => {
      assert.ok(isFenced(e), `send to partition 0: ${e.name} ${e.type} ${e.message}`)
      return true
    })
    await assert.rejects(zt.send({ topic, messages: [{ partition: 1, value: 'zombie-late-1' }] }), e => {
      assert.ok(isFenced(e), `send to partition 1: ${e.name} ${e.type} ${e.message}`)
      return true
    })
    await assert.rejects(zt.commit(), e => {
      assert.ok(isFenced(e), `commit: ${e.name} ${e.type} ${e.message}`)
      return true
    })
  } finally {
    await zombie.disconnect()
    await fresh.disconnect()
  }
  const [seen, everything] = await readBoth(topic)
  assert.deepEqual(seen.map(r => [r.partition, r.value]), [[1, 'fresh']])
  // The zombie's first record was written and aborted; the late ones never written.
  assert.deepEqual(sortedValues(everything), ['fresh', 'zombie'])
})
