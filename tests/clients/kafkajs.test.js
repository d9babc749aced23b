'use strict'
// kafkajs 2.2.4 against a real kaas broker at KAAS_BOOTSTRAP (127.0.0.1:PORT).
// Run through tests/clients/test_kafkajs.py, which starts the broker:
//   KAAS_BOOTSTRAP=127.0.0.1:PORT node --test tests/clients/kafkajs.test.js
//
// Writes use the public API: an idempotent producer (kafkajs requires
// maxInFlightRequests: 1 and acks -1 for it) and the admin client.
//
// Reads: kafkajs has no consumer without a consumer group, and kaas has no
// group coordinator yet. So records are read back with kafkajs's own Fetch
// implementation, one level down: the cluster object that every kafkajs
// client is built on (reached through a private symbol of the Kafka class;
// kafkajs is pinned to 2.2.4, so that cannot move) and its broker.fetch(),
// which encodes the Fetch request and decodes the response and its record
// batches, codecs included, exactly as kafkajs's consumer does. Replace this
// with a real kafkajs consumer once kaas has consumer groups.
//
// The records and expectations mirror tests/clients/common.py.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const LZ4Codec = require('kafkajs-lz4')
const { ZstdCodec } = require('zstd-codec')

const BOOTSTRAP = process.env.KAAS_BOOTSTRAP
if (!BOOTSTRAP) {
  throw new Error('KAAS_BOOTSTRAP is not set (tests/clients/test_kafkajs.py sets it)')
}

const PARTITIONS = 4
const N = 200
const SEND_CHUNK = 50 // records per producer.send(): one batch per partition each
const OP_TIMEOUT_MS = 30_000
const CONSUME_TIMEOUT_MS = 60_000
const TEST_TIMEOUT_MS = 90_000 // per test; test_kafkajs.py allows for all of them
const READ_COMMITTED = 1 // what a kafkajs consumer sends by default

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP, // built into kafkajs
  snappy: CompressionTypes.Snappy, // kafkajs-snappy
  lz4: CompressionTypes.LZ4, // kafkajs-lz4
  zstd: CompressionTypes.ZSTD, // zstd-codec, adapted below (@kafkajs/zstd does not build on Node 20)
}

// The timestamp test (see common.py).
const TS_PARTITION = 2
const TS_COUNT = 20
const TS_FLUSH_BEFORE = [7, 14]
const TS_CONSUME_FROM = 10

let kafka
let admin
const unique = Math.random().toString(16).slice(2, 10)

before(async () => {
  CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
  CompressionCodecs[CompressionTypes.LZ4] = new LZ4Codec().codec
  const zstd = await new Promise(resolve => ZstdCodec.run(resolve))
  const simple = new zstd.Simple()
  const streaming = new zstd.Streaming()
  CompressionCodecs[CompressionTypes.ZSTD] = () => ({
    async compress(encoder) {
      return Buffer.from(simple.compress(encoder.buffer, 3))
    },
    // Streaming also reads frames that do not record their content size.
    async decompress(buffer) {
      return Buffer.from(streaming.decompress(buffer))
    },
  })

  kafka = new Kafka({
    clientId: 'kaas-kafkajs-test',
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

function topicName(name) {
  return `kafkajs-${name}-${unique}`
}

async function createTopic(topic) {
  const created = await admin.createTopics({
    topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }],
    waitForLeaders: true,
    timeout: OP_TIMEOUT_MS,
  })
  assert.equal(created, true, `createTopics(${topic}) answered that it already existed`)
  const { topics } = await admin.fetchTopicMetadata({ topics: [topic] })
  assert.deepEqual(partitionIds(topics[0]), range(PARTITIONS))
}

function range(n) {
  return [...Array(n).keys()]
}

function partitionIds(topicMetadata) {
  return topicMetadata.partitions.map(p => p.partitionId).sort((a, b) => a - b)
}

async function withIdempotentProducer(fn) {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  try {
    await producer.connect()
    return await fn(producer)
  } finally {
    await producer.disconnect()
  }
}

// {partition: {low, high}} from ListOffsets earliest and latest.
async function offsets(topic) {
  const out = {}
  for (const { partition, low, high } of await admin.fetchTopicOffsets(topic)) {
    out[partition] = { low: Number(low), high: Number(high) }
  }
  return out
}

// Reads each partition of startOffsets ({partition: offset}) from that offset
// up to its high watermark (ListOffsets latest, taken before reading), with
// kafkajs's Fetch. Returns {partition: [record]} with records as kafkajs
// decodes them ({offset, key, value, timestamp, ...}; offsets are strings).
async function consume(topic, startOffsets) {
  const ends = await offsets(topic)
  const createCluster = Object.getOwnPropertySymbols(kafka).find(
    s => s.description === 'private:Kafka:createCluster'
  )
  assert.ok(createCluster, 'kafkajs internals changed: no private:Kafka:createCluster')
  const cluster = kafka[createCluster]({ allowAutoTopicCreation: false })
  await cluster.connect()
  try {
    await cluster.addTargetTopic(topic)
    const got = {}
    for (const [p, start] of Object.entries(startOffsets)) {
      const partition = Number(p)
      const high = ends[partition].high
      const records = []
      let next = start
      const deadline = Date.now() + CONSUME_TIMEOUT_MS
      while (next < high) {
        if (Date.now() > deadline) {
          assert.fail(`partition ${partition}: read up to ${next} of ${high} within ${CONSUME_TIMEOUT_MS} ms`)
        }
        const leaders = cluster.findLeaderForPartitions(topic, [partition])
        const [nodeId] = Object.keys(leaders)
        assert.ok(nodeId !== undefined, `no leader for ${topic}/${partition}`)
        const broker = await cluster.findBroker({ nodeId })
        const { responses } = await broker.fetch({
          maxWaitTime: 500,
          minBytes: 1,
          maxBytes: 1 << 20,
          isolationLevel: READ_COMMITTED,
          topics: [{ topic, partitions: [{ partition, fetchOffset: String(next), maxBytes: 1 << 20 }] }],
        })
        for (const { topicName: t, partitions } of responses) {
          assert.equal(t, topic)
          for (const data of partitions) {
            assert.equal(data.partition, partition)
            assert.equal(data.errorCode, 0)
            assert.equal(Number(data.highWatermark), high, 'high watermark moved')
            for (const record of data.messages) {
              // A batch is returned whole: skip its records before the fetch offset.
              if (Number(record.offset) < next) continue
              records.push(record)
              next = Number(record.offset) + 1
            }
          }
        }
      }
      got[partition] = records
    }
    return got
  } finally {
    await cluster.disconnect()
  }
}

function roundtripRecords(codec) {
  const out = []
  for (let i = 0; i < N; i++) {
    const key = i % 50 === 7 ? null : Buffer.from(`key-${String(i).padStart(4, '0')}`)
    const value = Buffer.from(`${codec} value ${String(i).padStart(4, '0')} `.repeat(8))
    out.push({ partition: i % PARTITIONS, key, value })
  }
  return out
}

function byPartition(records) {
  const out = {}
  for (let p = 0; p < PARTITIONS; p++) out[p] = []
  for (const { partition, key, value } of records) {
    out[partition].push({ offset: out[partition].length, key, value })
  }
  return out
}

const view = r => ({ offset: Number(r.offset), key: r.key, value: r.value })

for (const [codec, compression] of Object.entries(CODECS)) {
  test(`idempotent produce then consume from beginning [${codec}]`, { timeout: TEST_TIMEOUT_MS }, async () => {
    const topic = topicName(`roundtrip-${codec}`)
    await createTopic(topic)
    const records = roundtripRecords(codec)
    const expected = byPartition(records)

    await withIdempotentProducer(async producer => {
      const sent = {}
      for (let p = 0; p < PARTITIONS; p++) sent[p] = 0
      for (let i = 0; i < records.length; i += SEND_CHUNK) {
        const chunk = records.slice(i, i + SEND_CHUNK)
        const acks = await producer.send({ topic, acks: -1, compression, messages: chunk })
        // One ack per partition written, at the offset of its first record in this chunk.
        const want = {}
        for (const { partition } of chunk) {
          if (!(partition in want)) want[partition] = sent[partition]
          sent[partition]++
        }
        assert.deepEqual(
          Object.fromEntries(acks.map(a => [a.partition, [a.errorCode, Number(a.baseOffset)]])),
          Object.fromEntries(Object.entries(want).map(([p, off]) => [p, [0, off]]))
        )
      }
    })

    const want = {}
    for (let p = 0; p < PARTITIONS; p++) want[p] = { low: 0, high: expected[p].length }
    assert.deepEqual(await offsets(topic), want)

    const got = await consume(topic, Object.fromEntries(range(PARTITIONS).map(p => [p, 0])))
    const gotView = {}
    for (const [p, recs] of Object.entries(got)) gotView[p] = recs.map(view)
    assert.deepEqual(gotView, expected)
  })
}

test('list offsets by timestamp', { timeout: TEST_TIMEOUT_MS }, async () => {
  const topic = topicName('timestamps')
  await createTopic(topic)
  const base = (Math.floor(Date.now() / 1000) - 3600) * 1000
  const records = range(TS_COUNT).map(i => ({
    partition: TS_PARTITION,
    key: Buffer.from(`ts-key-${String(i).padStart(2, '0')}`),
    value: Buffer.from(`ts value ${String(i).padStart(2, '0')}`),
    timestamp: String(base + i * 1000),
  }))
  const ts = records.map(r => Number(r.timestamp))

  await withIdempotentProducer(async producer => {
    const cuts = [0, ...TS_FLUSH_BEFORE, TS_COUNT]
    for (let c = 0; c + 1 < cuts.length; c++) {
      const acks = await producer.send({ topic, acks: -1, messages: records.slice(cuts[c], cuts[c + 1]) })
      assert.deepEqual(
        acks.map(a => [a.partition, a.errorCode, Number(a.baseOffset)]),
        [[TS_PARTITION, 0, cuts[c]]]
      )
    }
  })

  // kafkajs answers the high watermark (not -1) when no record is that new.
  const high = TS_COUNT
  const lookups = [
    [ts[0] - 60_000, 0],
    [ts[0], 0],
    [ts[6], 6],
    [ts[7] - 1, 7],
    [ts[10], 10],
    [ts[10] - 500, 10],
    [ts[19], 19],
    [ts[19] + 1, high],
  ]
  const answers = []
  for (const [target] of lookups) {
    const byPart = await admin.fetchTopicOffsetsByTimestamp(topic, target)
    assert.deepEqual(byPart.map(a => a.partition).sort(), range(PARTITIONS))
    answers.push([target, Number(byPart.find(a => a.partition === TS_PARTITION).offset)])
    // Partitions without records: nothing at or after any time, so their high watermark, 0.
    for (const a of byPart) if (a.partition !== TS_PARTITION) assert.equal(Number(a.offset), 0)
  }
  assert.deepEqual(answers, lookups)

  const start = new Map(answers).get(ts[TS_CONSUME_FROM] - 500)
  const got = await consume(topic, { [TS_PARTITION]: start })
  assert.deepEqual(
    got[TS_PARTITION].map(r => ({ ...view(r), timestamp: Number(r.timestamp), timestampType: r.batchContext.timestampType })),
    records.slice(TS_CONSUME_FROM).map((r, j) => ({
      offset: TS_CONSUME_FROM + j,
      key: r.key,
      value: r.value,
      timestamp: Number(r.timestamp),
      timestampType: 0, // CreateTime
    }))
  )
})

test('produce auto-creates the topic with 4 partitions', { timeout: TEST_TIMEOUT_MS }, async () => {
  const topic = topicName('autocreate')
  assert.equal((await admin.listTopics()).includes(topic), false)

  const acks = await withIdempotentProducer(producer =>
    producer.send({
      topic,
      acks: -1,
      messages: [{ key: Buffer.from('auto-key'), value: Buffer.from('auto-value') }],
    })
  )
  assert.equal(acks.length, 1)
  const [{ partition, errorCode, baseOffset }] = acks
  assert.deepEqual([errorCode, Number(baseOffset)], [0, 0])

  const { topics } = await admin.fetchTopicMetadata({ topics: [topic] })
  assert.deepEqual(partitionIds(topics[0]), range(PARTITIONS))

  const got = await consume(topic, Object.fromEntries(range(PARTITIONS).map(p => [p, 0])))
  const gotView = {}
  for (const [p, recs] of Object.entries(got)) gotView[p] = recs.map(view)
  const want = {}
  for (let p = 0; p < PARTITIONS; p++) {
    want[p] = p === partition ? [{ offset: 0, key: Buffer.from('auto-key'), value: Buffer.from('auto-value') }] : []
  }
  assert.deepEqual(gotView, want)
})
