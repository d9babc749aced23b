'use strict'
// kafkajs 2.2.4 consumer groups against a real kaas broker at KAAS_BOOTSTRAP.
// Run through tests/clients/test_kafkajs_groups.py, which starts the broker:
//   KAAS_BOOTSTRAP=127.0.0.1:PORT node --test tests/clients/kafkajs_groups.test.js
//
// 1. Two kafkajs consumers in one group split four partitions; one
//    disconnects (commit, LeaveGroup) and the other takes over from the
//    committed offsets: together they read every record, and a record both
//    read lies after the leaver's last commit.
// 2. The admin client's group APIs: setOffsets/fetchOffsets (OffsetCommit and
//    OffsetFetch), listGroups, describeGroups, deleteGroups.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { Kafka, logLevel } = require('kafkajs')

const BOOTSTRAP = process.env.KAAS_BOOTSTRAP
if (!BOOTSTRAP) {
  throw new Error('KAAS_BOOTSTRAP is not set (tests/clients/test_kafkajs_groups.py sets it)')
}

const PARTITIONS = 4
const N = 400
const OP_TIMEOUT_MS = 30_000
const GROUP_TIMEOUT_MS = 60_000
const TEST_TIMEOUT_MS = 120_000
// The broker's group.min.session.timeout.ms (Kafka's default).
const SESSION_MS = 6_000

let kafka
let admin
const unique = Math.random().toString(16).slice(2, 10)

before(async () => {
  kafka = new Kafka({
    clientId: 'kaas-kafkajs-groups',
    brokers: [BOOTSTRAP],
    connectionTimeout: 10_000,
    requestTimeout: OP_TIMEOUT_MS,
    logLevel: logLevel.WARN,
  })
  admin = kafka.admin()
  await admin.connect()
})

after(async () => {
  if (admin) await admin.disconnect()
})

async function createTopic(topic) {
  const created = await admin.createTopics({
    topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }],
    waitForLeaders: true,
    timeout: OP_TIMEOUT_MS,
  })
  assert.equal(created, true)
}

// Writes N values, value i to partition i % 4; returns ["p:value"].
async function produce(topic) {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const produced = []
  try {
    for (let start = 0; start < N; start += 100) {
      const messages = []
      for (let i = start; i < start + 100; i++) {
        const value = `${topic}-${String(i).padStart(5, '0')}`
        messages.push({ partition: i % PARTITIONS, value })
        produced.push(`${i % PARTITIONS}:${value}`)
      }
      await producer.send({ topic, acks: -1, messages })
    }
  } finally {
    await producer.disconnect()
  }
  return produced
}

async function until(condition, what, timeoutMs = GROUP_TIMEOUT_MS) {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}

// A group member that records what it read, its assignment and its commits.
function member(topic, groupId) {
  const consumer = kafka.consumer({
    groupId,
    sessionTimeout: SESSION_MS,
    heartbeatInterval: 500,
    maxWaitTimeInMs: 100,
  })
  const m = { consumer, consumed: [], assignment: new Set(), commits: {} }
  consumer.on(consumer.events.GROUP_JOIN, e => {
    m.assignment = new Set((e.payload.memberAssignment[topic] || []).map(Number))
  })
  consumer.on(consumer.events.COMMIT_OFFSETS, e => {
    for (const t of e.payload.topics) {
      for (const { partition, offset } of t.partitions) {
        m.commits[Number(partition)] = Number(offset)
      }
    }
  })
  m.start = async () => {
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({
      autoCommit: true,
      autoCommitThreshold: 1, // commit after every processed record
      eachMessage: async ({ partition, message }) => {
        await new Promise(resolve => setTimeout(resolve, 2)) // "processing"
        m.consumed.push({ partition, offset: Number(message.offset), value: message.value.toString() })
      },
    })
  }
  return m
}

function isSplit(a, b) {
  const all = new Set([...a, ...b])
  return a.size > 0 && b.size > 0 && [...a].every(p => !b.has(p)) && all.size === PARTITIONS
}

test('two consumers split the partitions and the survivor resumes from the commits', { timeout: TEST_TIMEOUT_MS }, async () => {
  const topic = `kafkajs-groups-split-${unique}`
  await createTopic(topic)
  const produced = await produce(topic)
  const groupId = `${topic}-group`
  const a = member(topic, groupId)
  const b = member(topic, groupId)
  try {
    await Promise.all([a.start(), b.start()])
    await until(() => isSplit(a.assignment, b.assignment), 'the partitions to be split')
    const [na, nb] = [a.consumed.length, b.consumed.length]
    await until(() => a.consumed.length - na >= 20 && b.consumed.length - nb >= 20, 'both members to consume')
    await a.consumer.disconnect() // commits, then LeaveGroup
    const key = r => `${r.partition}:${r.value}`
    const want = new Set(produced)
    await until(() => {
      const seen = new Set([...a.consumed, ...b.consumed].map(key))
      return [...want].every(k => seen.has(k))
    }, 'B to consume the rest')
    assert.deepEqual([...b.assignment].sort(), [0, 1, 2, 3])

    const byA = new Map(a.consumed.map(r => [key(r), r]))
    const seenB = new Set()
    for (const r of b.consumed) {
      assert.ok(!seenB.has(key(r)), `B read ${key(r)} twice`)
      seenB.add(key(r))
    }
    assert.equal(byA.size, a.consumed.length, 'A read a record twice')
    const seen = new Set([...byA.keys(), ...seenB])
    assert.deepEqual([...seen].sort(), [...want].sort())
    // Read by both: only after A's last commit of that partition.
    for (const k of seenB) {
      const r = byA.get(k)
      if (r === undefined) continue
      const committed = a.commits[r.partition] ?? 0
      assert.ok(r.offset >= committed, `${k} (offset ${r.offset}) re-read below A's commit ${committed}`)
    }
  } finally {
    await a.consumer.disconnect()
    await b.consumer.disconnect()
  }
})

test('admin group APIs: offsets, list, describe and delete', { timeout: TEST_TIMEOUT_MS }, async () => {
  const topic = `kafkajs-groups-admin-${unique}`
  await createTopic(topic)
  const groupId = `${topic}-group`
  await admin.setOffsets({
    groupId,
    topic,
    partitions: [0, 1, 2, 3].map(p => ({ partition: p, offset: String(10 + p) })),
  })
  const [fetched] = await admin.fetchOffsets({ groupId, topics: [topic] })
  assert.equal(fetched.topic, topic)
  assert.deepEqual(
    fetched.partitions.map(p => [p.partition, Number(p.offset)]).sort((x, y) => x[0] - y[0]),
    [[0, 10], [1, 11], [2, 12], [3, 13]]
  )
  const { groups } = await admin.listGroups()
  assert.ok(groups.some(g => g.groupId === groupId), JSON.stringify(groups))
  const described = await admin.describeGroups([groupId])
  assert.equal(described.groups[0].state, 'Empty')
  assert.deepEqual(described.groups[0].members, [])

  await admin.deleteGroups([groupId])
  const [after] = await admin.fetchOffsets({ groupId, topics: [topic] })
  assert.ok(after.partitions.every(p => Number(p.offset) === -1), JSON.stringify(after))
  const gone = await admin.describeGroups([groupId])
  assert.equal(gone.groups[0].state, 'Dead')
})
