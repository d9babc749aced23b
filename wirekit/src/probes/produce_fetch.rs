//! Produce and Fetch as a plain client sees them: base offsets, acks,
//! missing topics and partitions, auto-creation through Metadata, record
//! validation (timestamps, sizes, keys on compacted topics, one batch per
//! partition, CRC), compression codecs and the topic's compression.type,
//! LogAppendTime, fetch positions (end, beyond, before the log start,
//! inside a batch), byte limits, DeleteRecords, ListOffsets and
//! OffsetForLeaderEpoch. Offsets are the probe's own (each probe writes
//! to fresh topics), never a broker-assigned timestamp or id.

use anyhow::{Context as _, ensure};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    BrokerId, DeleteRecordsRequest, ListOffsetsRequest, MetadataRequest, MetadataResponse,
    OffsetForLeaderEpochRequest, ProduceRequest, ProduceResponse, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable as _, HeaderVersion as _};
use kafka_protocol::records::Compression;

use crate::ctx::{Ctx, topic};
use crate::kit::Probe;
use crate::records::{Batch, decode, values_of};

pub fn probes() -> Vec<Probe> {
    crate::probes![
        "PF-01" => consecutive_produces_get_consecutive_base_offsets,
        "PF-02" => produce_to_a_missing_topic_does_not_create_it,
        "PF-03" => metadata_auto_creates_only_when_allowed,
        "PF-04" => produce_to_a_missing_partition,
        "PF-05" => acks_zero_gets_no_answer_but_appends,
        "PF-06" => acks_one_and_invalid_acks,
        "PF-07" => null_and_empty_records,
        "PF-08" => two_batches_in_one_partition_are_refused,
        "PF-09" => a_corrupt_crc_is_refused,
        "PF-10" => log_append_time_topic_stamps_the_batch,
        "PF-11" => create_time_topic_keeps_the_producer_timestamp,
        "PF-12" => timestamps_before_the_allowed_window,
        "PF-13" => timestamps_after_the_allowed_window,
        "PF-14" => a_batch_over_max_message_bytes,
        "PF-15" => gzip_round_trip,
        "PF-16" => snappy_round_trip,
        "PF-17" => lz4_round_trip,
        "PF-18" => zstd_round_trip,
        "PF-19" => zstd_needs_produce_v7,
        "PF-20" => topic_compression_gzip_recompresses,
        "PF-21" => topic_compression_producer_keeps_the_codec,
        "PF-22" => keyless_records_on_a_compacted_topic,
        "PF-23" => fetch_at_the_end_and_beyond,
        "PF-24" => fetch_inside_a_batch_returns_the_whole_batch,
        "PF-25" => fetch_with_a_tiny_partition_limit_returns_one_whole_batch,
        "PF-26" => delete_records_moves_the_log_start,
        "PF-27" => list_offsets_earliest_latest_and_by_timestamp,
        "PF-28" => list_offsets_max_timestamp,
        "PF-29" => fetch_an_unknown_topic_or_partition,
        "PF-30" => list_offsets_of_an_unknown_topic_or_partition,
        "PF-31" => offset_for_leader_epoch_basics,
        "PF-32" => fetch_v4_and_v12_return_the_same_records,
        "PF-33" => read_committed_on_plain_data_reads_up_to_the_high_watermark,
        "PF-34" => one_produce_request_to_two_partitions,
        "PF-35" => list_offsets_across_versions,
        "PF-36" => fetch_with_a_tiny_request_limit_returns_one_whole_batch,
        "PF-37" => records_without_timestamp,
    ]
}

/// One batch header of fetched bytes: base offset, record count, codec
/// (attributes & 7) and timestamp type (attributes bit 3), max timestamp.
#[derive(Debug, Clone, Copy)]
struct Header {
    base: i64,
    count: i32,
    codec: i16,
    log_append: bool,
    max_ts: i64,
}

/// The headers of the whole batches in `records`.
fn headers(records: Option<&Bytes>) -> Vec<Header> {
    let mut out = Vec::new();
    let Some(b) = records else { return out };
    let mut at = 0usize;
    while b.len() >= at + 61 {
        let be = |o: usize, n: usize| {
            b[at + o..at + o + n]
                .iter()
                .fold(0i64, |a, x| (a << 8) | i64::from(*x))
        };
        let size = be(8, 4) as usize;
        if b.len() < at + 12 + size {
            break;
        }
        let attrs = be(21, 2) as i16;
        out.push(Header {
            base: be(0, 8),
            count: be(57, 4) as i32,
            codec: attrs & 7,
            log_append: attrs & 8 != 0,
            max_ts: be(35, 8),
        });
        at += 12 + size;
    }
    out
}

fn codec_name(c: i16) -> &'static str {
    match c {
        0 => "none",
        1 => "gzip",
        2 => "snappy",
        3 => "lz4",
        4 => "zstd",
        _ => "?",
    }
}

const PRODUCE_V: i16 = 9;

/// Produce one batch (acks -1, v9); records "error", "base" and
/// "record errors" under `key`.
async fn produce_seen(
    c: &mut Ctx,
    key: &str,
    t: &str,
    p: i32,
    batch: Bytes,
) -> anyhow::Result<i16> {
    let r = c.produce(t, p, batch, PRODUCE_V).await?;
    c.see(format!("{key} error"), r.error_code);
    c.see(format!("{key} base offset"), r.base_offset);
    if !r.record_errors.is_empty() {
        let idx: Vec<_> = r
            .record_errors
            .iter()
            .map(|e| e.batch_index.to_string())
            .collect();
        c.see(format!("{key} record errors at"), idx.join(","));
    }
    Ok(r.error_code)
}

async fn metadata(c: &mut Ctx, t: &str, auto: bool) -> anyhow::Result<MetadataResponse> {
    let req = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic(t))),
        ]))
        .with_allow_auto_topic_creation(auto);
    c.call(&req, 9).await
}

/// ListOffsets (v7, read_uncommitted) of one partition: (error, offset, timestamp).
async fn list_offsets(c: &mut Ctx, t: &str, p: i32, ts: i64) -> anyhow::Result<(i16, i64, i64)> {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic(t))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(p)
                        .with_current_leader_epoch(-1)
                        .with_timestamp(ts),
                ]),
        ]);
    let r = c.call(&req, 7).await?;
    let p = r
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .context("ListOffsets answered no partition")?;
    Ok((p.error_code, p.offset, p.timestamp))
}

/// Writes `n` one-record batches v0.. (keyless) to partition 0 of a fresh topic.
async fn topic_with(
    c: &mut Ctx,
    what: &str,
    configs: &[(&str, &str)],
    batches: &[usize],
) -> anyhow::Result<String> {
    let t = c.name(what);
    c.create_ready_topic(&t, 1, configs).await?;
    for &n in batches {
        let r = c
            .produce(&t, 0, Batch::values(n).encode()?, PRODUCE_V)
            .await?;
        ensure!(r.error_code == 0, "produce: error {}", r.error_code);
    }
    Ok(t)
}

async fn consecutive_produces_get_consecutive_base_offsets(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[]).await?;
    for (i, n) in [3usize, 2, 1].into_iter().enumerate() {
        let r = c
            .produce(&t, 0, Batch::values(n).encode()?, PRODUCE_V)
            .await?;
        c.see(
            format!("produce {i} ({n} records)"),
            format!(
                "error={} base={} log_start={}",
                r.error_code, r.base_offset, r.log_start_offset
            ),
        );
        c.see(
            format!("produce {i} log_append_time is -1"),
            r.log_append_time_ms == -1,
        );
    }
    let f = c.fetch(&t, 0, 0, 0).await?;
    c.see("fetch error", f.error_code);
    c.see("high watermark", f.high_watermark);
    c.see("last stable offset", f.last_stable_offset);
    c.see("log start offset", f.log_start_offset);
    let recs = decode(f.records.as_ref())?;
    c.see("values", values_of(&recs).join(","));
    c.see(
        "offsets",
        recs.iter()
            .map(|r| r.offset.to_string())
            .collect::<Vec<_>>()
            .join(","),
    );
    let bases: Vec<_> = headers(f.records.as_ref())
        .iter()
        .map(|h| format!("{}+{}", h.base, h.count))
        .collect();
    c.see("batches", bases.join(" "));
    Ok(())
}

async fn produce_to_a_missing_topic_does_not_create_it(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("missing");
    let r = c
        .produce(&t, 0, Batch::values(1).encode()?, PRODUCE_V)
        .await?;
    c.see("produce error", r.error_code);
    c.see("produce base offset", r.base_offset);
    let m = metadata(c, &t, false).await?;
    c.see(
        "metadata (no auto-creation) error",
        m.topics.first().map_or(-100, |t| t.error_code),
    );
    Ok(())
}

async fn metadata_auto_creates_only_when_allowed(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("auto");
    let m = metadata(c, &t, false).await?;
    c.see(
        "allow=false error",
        m.topics.first().map_or(-100, |t| t.error_code),
    );
    c.see(
        "allow=false partitions",
        m.topics.first().map_or(0, |t| t.partitions.len()),
    );
    let m = metadata(c, &t, true).await?;
    c.see(
        "allow=true first answer",
        m.topics.first().map_or(-100, |t| t.error_code),
    );
    let parts = c
        .wait_until(
            std::time::Duration::from_secs(20),
            "the auto-created topic's leader",
            async |c| {
                let m = metadata(c, &t, false).await?;
                Ok(m.topics
                    .first()
                    .filter(|t| {
                        t.error_code == 0
                            && t.partitions.iter().all(|p| p.leader_id.0 >= 0)
                            && !t.partitions.is_empty()
                    })
                    .map(|t| t.partitions.len()))
            },
        )
        .await?;
    c.see("auto-created partitions", parts);
    let r = c
        .produce(&t, 0, Batch::values(2).encode()?, PRODUCE_V)
        .await?;
    c.see(
        "produce to it",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    Ok(())
}

async fn produce_to_a_missing_partition(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 2, &[]).await?;
    let r = c
        .produce(&t, 2, Batch::values(1).encode()?, PRODUCE_V)
        .await?;
    c.see(
        "partition 2 of 2",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    let r = c
        .produce(&t, -1, Batch::values(1).encode()?, PRODUCE_V)
        .await?;
    c.see(
        "partition -1",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    let r = c
        .produce(&t, 1, Batch::values(1).encode()?, PRODUCE_V)
        .await?;
    c.see(
        "partition 1 of 2",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    Ok(())
}

fn produce_req(t: &str, p: i32, records: Option<Bytes>, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(topic(t))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(p)
                        .with_records(records),
                ]),
        ])
}

async fn acks_zero_gets_no_answer_but_appends(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[]).await?;
    let req = produce_req(&t, 0, Some(Batch::values(2).encode()?), 0);
    let (_, frame) = c.client.frame(&req, PRODUCE_V)?;
    c.client.send_raw(&frame).await?;
    // The next answer on the connection must be the Metadata's.
    let next = metadata(c, &t, false).await;
    c.see("the next answer is the Metadata's", next.is_ok());
    if next.is_err() {
        c.reconnect().await?;
    }
    // Requests on one connection are handled in order: the acks=0 records
    // are there for the next Fetch on it, without waiting.
    let f = c.fetch(&t, 0, 0, 0).await?;
    c.see("high watermark", f.high_watermark);
    c.see("values", values_of(&decode(f.records.as_ref())?).join(","));
    // acks 0 with an error (a missing partition): still no answer.
    let req = produce_req(&t, 5, Some(Batch::values(1).encode()?), 0);
    let (_, frame) = c.client.frame(&req, PRODUCE_V)?;
    c.client.send_raw(&frame).await?;
    let next = metadata(c, &t, false).await;
    c.see(
        "after a failed acks=0 produce, the next answer is the Metadata's",
        next.is_ok(),
    );
    Ok(())
}

async fn acks_one_and_invalid_acks(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[]).await?;
    for acks in [1i16, 2, -2, 3] {
        let r = c
            .produce_with(
                &t,
                0,
                Some(Batch::values(1).encode()?),
                acks,
                None,
                PRODUCE_V,
            )
            .await?;
        c.see(
            format!("acks={acks}"),
            format!("error={} base={}", r.error_code, r.base_offset),
        );
    }
    let f = c.fetch(&t, 0, 0, 0).await?;
    c.see("high watermark", f.high_watermark);
    Ok(())
}

async fn null_and_empty_records(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[]).await?;
    let req = produce_req(&t, 0, None, -1);
    let (_, frame) = c.client.frame(&req, PRODUCE_V)?;
    c.client.send_raw(&frame).await?;
    let answer =
        tokio::time::timeout(std::time::Duration::from_secs(2), c.client.read_frame()).await;
    let seen = match answer {
        Err(_) => "no answer within 2 s".to_owned(),
        Ok(None) => "connection closed".to_owned(),
        Ok(Some(mut frame)) => {
            let _ = ResponseHeader::decode(&mut frame, ProduceResponse::header_version(PRODUCE_V))?;
            let r = ProduceResponse::decode(&mut frame, PRODUCE_V)?;
            let p = r
                .responses
                .first()
                .and_then(|t| t.partition_responses.first())
                .context("no partition")?;
            format!("error={} base={}", p.error_code, p.base_offset)
        }
    };
    c.see("null records", seen);
    c.reconnect().await?;
    let r = c
        .produce_with(&t, 0, Some(Bytes::new()), -1, None, PRODUCE_V)
        .await?;
    c.see(
        "zero bytes",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    let f = c.fetch(&t, 0, 0, 0).await?;
    c.see("high watermark", f.high_watermark);
    Ok(())
}

async fn two_batches_in_one_partition_are_refused(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[]).await?;
    let mut two = BytesMut::new();
    two.extend_from_slice(&Batch::values(1).encode()?);
    two.extend_from_slice(&Batch::values(2).encode()?);
    let r = c.produce(&t, 0, two.freeze(), PRODUCE_V).await?;
    c.see(
        "two batches",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    let f = c.fetch(&t, 0, 0, 0).await?;
    c.see("high watermark", f.high_watermark);
    Ok(())
}

async fn a_corrupt_crc_is_refused(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[]).await?;
    let mut b = BytesMut::from(&Batch::values(2).encode()?[..]);
    let last = b.len() - 1;
    b[last] ^= 0x5a;
    let r = c.produce(&t, 0, b.freeze(), PRODUCE_V).await?;
    c.see(
        "flipped last byte",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    let f = c.fetch(&t, 0, 0, 0).await?;
    c.see("high watermark", f.high_watermark);
    Ok(())
}

async fn log_append_time_topic_stamps_the_batch(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[("message.timestamp.type", "LogAppendTime")])
        .await?;
    let r = c
        .produce(&t, 0, Batch::values(2).encode()?, PRODUCE_V)
        .await?;
    c.see("error", r.error_code);
    c.see("log_append_time is set", r.log_append_time_ms > 0);
    let f = c.fetch(&t, 0, 0, 0).await?;
    let h = headers(f.records.as_ref());
    c.see(
        "fetched batch is LogAppendTime",
        h.first().is_some_and(|h| h.log_append),
    );
    c.see(
        "fetched max timestamp is the log append time",
        h.first().is_some_and(|h| h.max_ts == r.log_append_time_ms),
    );
    let recs = decode(f.records.as_ref())?;
    c.see(
        "records carry the log append time",
        recs.iter().all(|x| x.timestamp == r.log_append_time_ms),
    );
    let lo = list_offsets(c, &t, 0, -3).await?;
    c.see(
        "max-timestamp offset",
        format!("error={} offset={}", lo.0, lo.1),
    );
    Ok(())
}

async fn create_time_topic_keeps_the_producer_timestamp(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[("message.timestamp.type", "CreateTime")])
        .await?;
    let ts = 1_700_000_000_000;
    let r = c
        .produce(&t, 0, Batch::values(3).at(ts).encode()?, PRODUCE_V)
        .await?;
    c.see("error", r.error_code);
    c.see("log_append_time", r.log_append_time_ms);
    let f = c.fetch(&t, 0, 0, 0).await?;
    let h = headers(f.records.as_ref());
    c.see(
        "fetched batch is LogAppendTime",
        h.first().is_some_and(|h| h.log_append),
    );
    c.see(
        "fetched max timestamp - ts",
        h.first().map_or(-1, |h| h.max_ts - ts),
    );
    let recs = decode(f.records.as_ref())?;
    c.see(
        "record timestamps - ts",
        recs.iter()
            .map(|x| (x.timestamp - ts).to_string())
            .collect::<Vec<_>>()
            .join(","),
    );
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

async fn timestamps_before_the_allowed_window(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[("message.timestamp.before.max.ms", "3600000")])
        .await?;
    let r = c
        .produce(
            &t,
            0,
            Batch::values(2).at(now_ms() - 2 * 3_600_000).encode()?,
            PRODUCE_V,
        )
        .await?;
    c.see(
        "two hours old",
        format!(
            "error={} base={} record_errors={}",
            r.error_code,
            r.base_offset,
            r.record_errors.len()
        ),
    );
    c.see("message is null", r.error_message.is_none());
    let r = c
        .produce(
            &t,
            0,
            Batch::values(2).at(now_ms() - 60_000).encode()?,
            PRODUCE_V,
        )
        .await?;
    c.see(
        "a minute old",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    Ok(())
}

async fn timestamps_after_the_allowed_window(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[("message.timestamp.after.max.ms", "3600000")])
        .await?;
    let r = c
        .produce(
            &t,
            0,
            Batch::values(2).at(now_ms() + 2 * 3_600_000).encode()?,
            PRODUCE_V,
        )
        .await?;
    c.see(
        "two hours ahead",
        format!(
            "error={} base={} record_errors={}",
            r.error_code,
            r.base_offset,
            r.record_errors.len()
        ),
    );
    let r = c
        .produce(
            &t,
            0,
            Batch::values(2).at(now_ms() + 60_000).encode()?,
            PRODUCE_V,
        )
        .await?;
    c.see(
        "a minute ahead",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    let r = c
        .produce(
            &t,
            0,
            Batch::values(2).at(1_700_000_000_000).encode()?,
            PRODUCE_V,
        )
        .await?;
    c.see(
        "far in the past (no before limit)",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    Ok(())
}

async fn a_batch_over_max_message_bytes(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[("max.message.bytes", "1000")])
        .await?;
    let mut big = Batch::values(0);
    big.records = vec![(None, Some(vec![b'x'; 2000]))];
    let r = c.produce(&t, 0, big.encode()?, PRODUCE_V).await?;
    c.see(
        "2000-byte value",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    let mut many = Batch::values(0);
    many.records = (0..8).map(|_| (None, Some(vec![b'y'; 200]))).collect();
    let r = c.produce(&t, 0, many.encode()?, PRODUCE_V).await?;
    c.see(
        "8 records of 200 bytes",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    let r = c
        .produce(&t, 0, Batch::values(3).encode()?, PRODUCE_V)
        .await?;
    c.see(
        "small batch",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    Ok(())
}

async fn round_trip(c: &mut Ctx, codec: Compression) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[]).await?;
    let mut b = Batch::values(0).compressed(codec);
    b.records = (0..20)
        .map(|i| {
            (
                Some(format!("k{i}").into_bytes()),
                Some(format!("value-{i}-{}", "z".repeat(50)).into_bytes()),
            )
        })
        .collect();
    let r = c.produce(&t, 0, b.encode()?, PRODUCE_V).await?;
    c.see(
        "produce",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    let r = c
        .produce(
            &t,
            0,
            Batch::values(2).compressed(codec).encode()?,
            PRODUCE_V,
        )
        .await?;
    c.see(
        "second produce",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    let f = c.fetch(&t, 0, 0, 0).await?;
    c.see("high watermark", f.high_watermark);
    let h = headers(f.records.as_ref());
    c.see(
        "batches (base+count codec)",
        h.iter()
            .map(|h| format!("{}+{} {}", h.base, h.count, codec_name(h.codec)))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let recs = decode(f.records.as_ref())?;
    let vals = values_of(&recs);
    c.see("record count", vals.len());
    c.see(
        "values intact",
        (0..20).all(|i| vals.get(i) == Some(&format!("value-{i}-{}", "z".repeat(50)))),
    );
    c.see(
        "keys intact",
        recs.iter()
            .take(20)
            .enumerate()
            .all(|(i, r)| r.key.as_deref() == Some(format!("k{i}").as_bytes())),
    );
    c.see(
        "offsets",
        recs.iter()
            .map(|r| r.offset.to_string())
            .collect::<Vec<_>>()
            .join(","),
    );
    // Fetch from inside the compressed batch: the whole batch comes back.
    let f = c.fetch(&t, 0, 7, 0).await?;
    let recs = decode(f.records.as_ref())?;
    c.see(
        "fetch from 7: first offset",
        recs.first().map_or(-1, |r| r.offset),
    );
    Ok(())
}

async fn gzip_round_trip(c: &mut Ctx) -> anyhow::Result<()> {
    round_trip(c, Compression::Gzip).await
}
async fn snappy_round_trip(c: &mut Ctx) -> anyhow::Result<()> {
    round_trip(c, Compression::Snappy).await
}
async fn lz4_round_trip(c: &mut Ctx) -> anyhow::Result<()> {
    round_trip(c, Compression::Lz4).await
}
async fn zstd_round_trip(c: &mut Ctx) -> anyhow::Result<()> {
    round_trip(c, Compression::Zstd).await
}

async fn zstd_needs_produce_v7(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[]).await?;
    let b = Batch::values(2).compressed(Compression::Zstd).encode()?;
    for v in [3i16, 6, 7] {
        let r = c.produce(&t, 0, b.clone(), v).await?;
        c.see(
            format!("zstd at Produce v{v}"),
            format!("error={} base={}", r.error_code, r.base_offset),
        );
    }
    Ok(())
}

async fn topic_compression_gzip_recompresses(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[("compression.type", "gzip")])
        .await?;
    let r = c
        .produce(&t, 0, Batch::values(3).encode()?, PRODUCE_V)
        .await?;
    c.see(
        "uncompressed produce",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    let r = c
        .produce(
            &t,
            0,
            Batch::values(2).compressed(Compression::Lz4).encode()?,
            PRODUCE_V,
        )
        .await?;
    c.see(
        "lz4 produce",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    let f = c.fetch(&t, 0, 0, 0).await?;
    let h = headers(f.records.as_ref());
    c.see(
        "batches (base+count codec)",
        h.iter()
            .map(|h| format!("{}+{} {}", h.base, h.count, codec_name(h.codec)))
            .collect::<Vec<_>>()
            .join(", "),
    );
    c.see("values", values_of(&decode(f.records.as_ref())?).join(","));
    Ok(())
}

async fn topic_compression_producer_keeps_the_codec(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[("compression.type", "producer")])
        .await?;
    for codec in [Compression::None, Compression::Snappy, Compression::Lz4] {
        let r = c
            .produce(
                &t,
                0,
                Batch::values(2).compressed(codec).encode()?,
                PRODUCE_V,
            )
            .await?;
        ensure!(r.error_code == 0, "produce: error {}", r.error_code);
    }
    let f = c.fetch(&t, 0, 0, 0).await?;
    let h = headers(f.records.as_ref());
    c.see(
        "batches (base+count codec)",
        h.iter()
            .map(|h| format!("{}+{} {}", h.base, h.count, codec_name(h.codec)))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let t2 = c.name("none");
    c.create_ready_topic(&t2, 1, &[("compression.type", "uncompressed")])
        .await?;
    let r = c
        .produce(
            &t2,
            0,
            Batch::values(2).compressed(Compression::Gzip).encode()?,
            PRODUCE_V,
        )
        .await?;
    c.see(
        "gzip into compression.type=uncompressed",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    let f = c.fetch(&t2, 0, 0, 0).await?;
    let h = headers(f.records.as_ref());
    c.see(
        "uncompressed topic batches",
        h.iter()
            .map(|h| format!("{}+{} {}", h.base, h.count, codec_name(h.codec)))
            .collect::<Vec<_>>()
            .join(", "),
    );
    Ok(())
}

async fn keyless_records_on_a_compacted_topic(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[("cleanup.policy", "compact")])
        .await?;
    produce_seen(c, "keyless", &t, 0, Batch::values(2).encode()?).await?;
    let mut mixed = Batch::keyed(&[("a", Some("1")), ("b", Some("2"))]);
    mixed.records.push((None, Some(b"3".to_vec())));
    produce_seen(c, "third keyless", &t, 0, mixed.encode()?).await?;
    produce_seen(
        c,
        "keyed",
        &t,
        0,
        Batch::keyed(&[("a", Some("1")), ("b", None)]).encode()?,
    )
    .await?;
    let t2 = c.name("both");
    c.create_ready_topic(&t2, 1, &[("cleanup.policy", "compact,delete")])
        .await?;
    produce_seen(
        c,
        "keyless compact,delete",
        &t2,
        0,
        Batch::values(1).encode()?,
    )
    .await?;
    Ok(())
}

async fn fetch_at_the_end_and_beyond(c: &mut Ctx) -> anyhow::Result<()> {
    let t = topic_with(c, "t", &[], &[3]).await?;
    let f = c.fetch(&t, 0, 3, 0).await?;
    c.see(
        "at the end",
        format!(
            "error={} hw={} records={}",
            f.error_code,
            f.high_watermark,
            decode(f.records.as_ref())?.len()
        ),
    );
    let f = c.fetch(&t, 0, 4, 0).await?;
    c.see(
        "one beyond",
        format!(
            "error={} hw={} lso={} log_start={} records={}",
            f.error_code,
            f.high_watermark,
            f.last_stable_offset,
            f.log_start_offset,
            decode(f.records.as_ref())?.len()
        ),
    );
    for (key, at) in [("far beyond", 1000i64), ("offset -1", -1)] {
        let f = c.fetch(&t, 0, at, 0).await?;
        c.see(
            key,
            format!(
                "error={} hw={} lso={} log_start={}",
                f.error_code, f.high_watermark, f.last_stable_offset, f.log_start_offset
            ),
        );
    }
    Ok(())
}

async fn fetch_inside_a_batch_returns_the_whole_batch(c: &mut Ctx) -> anyhow::Result<()> {
    let t = topic_with(c, "t", &[], &[4, 2]).await?;
    for at in [1i64, 3, 4, 5] {
        let f = c.fetch(&t, 0, at, 0).await?;
        let recs = decode(f.records.as_ref())?;
        c.see(
            format!("from {at}: offsets"),
            recs.iter()
                .map(|r| r.offset.to_string())
                .collect::<Vec<_>>()
                .join(","),
        );
    }
    Ok(())
}

async fn fetch_with_a_tiny_partition_limit_returns_one_whole_batch(
    c: &mut Ctx,
) -> anyhow::Result<()> {
    let t = topic_with(c, "t", &[], &[5, 5, 5]).await?;
    let f = c.fetch_with(&t, 0, 0, 0, 10, 12).await?;
    let h = headers(f.records.as_ref());
    c.see(
        "limit 10: whole batches",
        h.iter()
            .map(|h| format!("{}+{}", h.base, h.count))
            .collect::<Vec<_>>()
            .join(" "),
    );
    c.see("limit 10: error", f.error_code);
    let one = h
        .first()
        .map_or(0, |_| f.records.as_ref().map_or(0, |r| r.len()));
    // Two batches' worth of bytes returns exactly two.
    let f = c.fetch_with(&t, 0, 0, 0, (one * 2) as i32, 12).await?;
    let h = headers(f.records.as_ref());
    c.see(
        "limit two batches: whole batches",
        h.iter()
            .map(|h| format!("{}+{}", h.base, h.count))
            .collect::<Vec<_>>()
            .join(" "),
    );
    let f = c.fetch_with(&t, 0, 5, 0, 10, 12).await?;
    let h = headers(f.records.as_ref());
    c.see(
        "limit 10 from 5: whole batches",
        h.iter()
            .map(|h| format!("{}+{}", h.base, h.count))
            .collect::<Vec<_>>()
            .join(" "),
    );
    Ok(())
}

async fn delete_records(c: &mut Ctx, t: &str, p: i32, offset: i64) -> anyhow::Result<(i16, i64)> {
    let req = DeleteRecordsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![
            DeleteRecordsTopic::default()
                .with_name(topic(t))
                .with_partitions(vec![
                    DeleteRecordsPartition::default()
                        .with_partition_index(p)
                        .with_offset(offset),
                ]),
        ]);
    let r = c.call(&req, 2).await?;
    let p = r
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .context("DeleteRecords answered no partition")?;
    Ok((p.error_code, p.low_watermark))
}

async fn delete_records_moves_the_log_start(c: &mut Ctx) -> anyhow::Result<()> {
    let t = topic_with(c, "t", &[], &[2, 2, 2]).await?;
    let (e, lw) = delete_records(c, &t, 0, 3).await?;
    c.see("delete before 3", format!("error={e} low_watermark={lw}"));
    let f = c.fetch(&t, 0, 3, 0).await?;
    let recs = decode(f.records.as_ref())?;
    c.see(
        "fetch from 3",
        format!(
            "error={} log_start={} hw={}",
            f.error_code, f.log_start_offset, f.high_watermark
        ),
    );
    c.see(
        "fetch from 3: offsets",
        recs.iter()
            .map(|r| r.offset.to_string())
            .collect::<Vec<_>>()
            .join(","),
    );
    let f = c.fetch(&t, 0, 1, 0).await?;
    c.see(
        "fetch from 1",
        format!(
            "error={} hw={} lso={} log_start={}",
            f.error_code, f.high_watermark, f.last_stable_offset, f.log_start_offset
        ),
    );
    let lo = list_offsets(c, &t, 0, -2).await?;
    c.see("earliest", format!("error={} offset={}", lo.0, lo.1));
    let r = c
        .produce(&t, 0, Batch::values(1).encode()?, PRODUCE_V)
        .await?;
    c.see(
        "produce after",
        format!(
            "error={} base={} log_start={}",
            r.error_code, r.base_offset, r.log_start_offset
        ),
    );
    let (e, lw) = delete_records(c, &t, 0, 2).await?;
    c.see(
        "delete before 2 (below the start)",
        format!("error={e} low_watermark={lw}"),
    );
    let (e, lw) = delete_records(c, &t, 0, 100).await?;
    c.see(
        "delete before 100 (beyond the end)",
        format!("error={e} low_watermark={lw}"),
    );
    let (e, lw) = delete_records(c, &t, 0, -1).await?;
    c.see(
        "delete before -1 (the high watermark)",
        format!("error={e} low_watermark={lw}"),
    );
    let f = c.fetch(&t, 0, 7, 0).await?;
    c.see(
        "fetch at the end after deleting all",
        format!(
            "error={} log_start={} hw={}",
            f.error_code, f.log_start_offset, f.high_watermark
        ),
    );
    let (e, _) = delete_records(c, &t, 3, 1).await?;
    c.see("delete on a missing partition", e);
    Ok(())
}

async fn list_offsets_earliest_latest_and_by_timestamp(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[]).await?;
    let empty = list_offsets(c, &t, 0, -1).await?;
    c.see(
        "empty latest",
        format!("error={} offset={} ts={}", empty.0, empty.1, empty.2),
    );
    let empty = list_offsets(c, &t, 0, -2).await?;
    c.see(
        "empty earliest",
        format!("error={} offset={} ts={}", empty.0, empty.1, empty.2),
    );
    let base = 1_700_000_000_000i64;
    for (i, ts) in [base, base + 100, base + 50].into_iter().enumerate() {
        let r = c
            .produce(&t, 0, Batch::values(2).at(ts).encode()?, PRODUCE_V)
            .await?;
        ensure!(r.error_code == 0, "produce {i}: error {}", r.error_code);
    }
    let lo = list_offsets(c, &t, 0, -1).await?;
    c.see(
        "latest",
        format!("error={} offset={} ts={}", lo.0, lo.1, lo.2),
    );
    let lo = list_offsets(c, &t, 0, -2).await?;
    c.see(
        "earliest",
        format!("error={} offset={} ts={}", lo.0, lo.1, lo.2),
    );
    for q in [
        base - 1,
        base,
        base + 1,
        base + 2,
        base + 51,
        base + 101,
        base + 1000,
    ] {
        let lo = list_offsets(c, &t, 0, q).await?;
        let ts = if lo.2 < 0 {
            lo.2.to_string()
        } else {
            format!("base+{}", lo.2 - base)
        };
        c.see(
            format!("by timestamp base+{}", q - base),
            format!("error={} offset={} ts={ts}", lo.0, lo.1),
        );
    }
    Ok(())
}

async fn list_offsets_max_timestamp(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[]).await?;
    let e = list_offsets(c, &t, 0, -3).await?;
    c.see(
        "empty max-timestamp",
        format!("error={} offset={} ts={}", e.0, e.1, e.2),
    );
    let base = 1_700_000_000_000i64;
    for ts in [base, base + 500, base + 10] {
        let r = c
            .produce(&t, 0, Batch::values(3).at(ts).encode()?, PRODUCE_V)
            .await?;
        ensure!(r.error_code == 0, "produce: error {}", r.error_code);
    }
    let lo = list_offsets(c, &t, 0, -3).await?;
    c.see(
        "max-timestamp",
        format!("error={} offset={} ts=base+{}", lo.0, lo.1, lo.2 - base),
    );
    // The maximum inside a batch, not its last record: offsets 9..=11 at
    // base+700, base+900, base+800.
    let b = with_timestamps(&[base + 700, base + 900, base + 800])?;
    let r = c.produce(&t, 0, b, PRODUCE_V).await?;
    ensure!(r.error_code == 0, "produce: error {}", r.error_code);
    let lo = list_offsets(c, &t, 0, -3).await?;
    c.see(
        "max-timestamp mid-batch",
        format!("error={} offset={} ts=base+{}", lo.0, lo.1, lo.2 - base),
    );
    // Versions below 7 do not know -3.
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(topic(&t))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_current_leader_epoch(-1)
                        .with_timestamp(-3),
                ]),
        ]);
    let r = c.call(&req, 6).await?;
    let p = r
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .context("no partition")?;
    c.see(
        "max-timestamp at v6",
        format!("error={} offset={}", p.error_code, p.offset),
    );
    Ok(())
}

async fn fetch_an_unknown_topic_or_partition(c: &mut Ctx) -> anyhow::Result<()> {
    let missing = c.name("missing");
    let f = c.fetch(&missing, 0, 0, 0).await?;
    c.see(
        "unknown topic",
        format!("error={} hw={}", f.error_code, f.high_watermark),
    );
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[]).await?;
    let f = c.fetch(&t, 1, 0, 0).await?;
    c.see(
        "partition 1 of 1",
        format!("error={} hw={}", f.error_code, f.high_watermark),
    );
    let f = c.fetch(&t, -1, 0, 0).await?;
    c.see(
        "partition -1",
        format!("error={} hw={}", f.error_code, f.high_watermark),
    );
    let m = metadata(c, &missing, false).await?;
    c.see(
        "the fetch did not create the topic",
        m.topics.first().map_or(-100, |t| t.error_code),
    );
    Ok(())
}

async fn list_offsets_of_an_unknown_topic_or_partition(c: &mut Ctx) -> anyhow::Result<()> {
    let missing = c.name("missing");
    let lo = list_offsets(c, &missing, 0, -1).await?;
    c.see("unknown topic", format!("error={} offset={}", lo.0, lo.1));
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[]).await?;
    let lo = list_offsets(c, &t, 4, -1).await?;
    c.see(
        "partition 4 of 1",
        format!("error={} offset={}", lo.0, lo.1),
    );
    let lo = list_offsets(c, &t, 0, -7).await?;
    c.see("timestamp -7", format!("error={} offset={}", lo.0, lo.1));
    Ok(())
}

async fn offset_for_leader_epoch(
    c: &mut Ctx,
    t: &str,
    p: i32,
    current: i32,
    epoch: i32,
) -> anyhow::Result<(i16, i32, i64)> {
    let req = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            OffsetForLeaderTopic::default()
                .with_topic(topic(t))
                .with_partitions(vec![
                    OffsetForLeaderPartition::default()
                        .with_partition(p)
                        .with_current_leader_epoch(current)
                        .with_leader_epoch(epoch),
                ]),
        ]);
    let r = c.call(&req, 4).await?;
    let p = r
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .context("OffsetForLeaderEpoch answered no partition")?;
    Ok((p.error_code, p.leader_epoch, p.end_offset))
}

async fn offset_for_leader_epoch_basics(c: &mut Ctx) -> anyhow::Result<()> {
    let t = topic_with(c, "t", &[], &[3, 2]).await?;
    let m = metadata(c, &t, false).await?;
    let epoch = m
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .map_or(-1, |p| p.leader_epoch);
    let r = offset_for_leader_epoch(c, &t, 0, -1, epoch).await?;
    c.see(
        "current epoch",
        format!("error={} epoch=E{:+} end={}", r.0, r.1 - epoch, r.2),
    );
    let r = offset_for_leader_epoch(c, &t, 0, epoch, epoch).await?;
    c.see(
        "current epoch, fenced by the current one",
        format!("error={} epoch=E{:+} end={}", r.0, r.1 - epoch, r.2),
    );
    let r = offset_for_leader_epoch(c, &t, 0, epoch + 5, epoch).await?;
    c.see(
        "current leader epoch in the future",
        format!("error={}", r.0),
    );
    let r = offset_for_leader_epoch(c, &t, 0, -1, epoch + 5).await?;
    c.see(
        "a future epoch",
        format!("error={} epoch={} end={}", r.0, r.1, r.2),
    );
    let r = offset_for_leader_epoch(c, &t, 3, -1, epoch).await?;
    c.see("partition 3 of 1", format!("error={}", r.0));
    let missing = c.name("missing");
    let r = offset_for_leader_epoch(c, &missing, 0, -1, 0).await?;
    c.see("unknown topic", format!("error={}", r.0));
    Ok(())
}

async fn fetch_v4_and_v12_return_the_same_records(c: &mut Ctx) -> anyhow::Result<()> {
    let t = topic_with(c, "t", &[], &[2, 3]).await?;
    for v in [4i16, 7, 11, 12] {
        let f = c.fetch_with(&t, 0, 0, 0, 1 << 20, v).await?;
        let vals = values_of(&decode(f.records.as_ref())?);
        c.see(
            format!("v{v}"),
            format!(
                "error={} hw={} values={}",
                f.error_code,
                f.high_watermark,
                vals.join(",")
            ),
        );
    }
    Ok(())
}

async fn read_committed_on_plain_data_reads_up_to_the_high_watermark(
    c: &mut Ctx,
) -> anyhow::Result<()> {
    let t = topic_with(c, "t", &[], &[2, 1]).await?;
    let f = c.fetch(&t, 0, 0, 1).await?;
    c.see(
        "read_committed",
        format!(
            "error={} hw={} lso={} aborted={}",
            f.error_code,
            f.high_watermark,
            f.last_stable_offset,
            f.aborted_transactions
                .as_ref()
                .map_or("null".into(), |a| a.len().to_string())
        ),
    );
    c.see("values", values_of(&decode(f.records.as_ref())?).join(","));
    let f = c.fetch(&t, 0, 0, 0).await?;
    c.see(
        "read_uncommitted aborted list",
        f.aborted_transactions
            .as_ref()
            .map_or("null".into(), |a| a.len().to_string()),
    );
    let lo = {
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(1)
            .with_topics(vec![
                ListOffsetsTopic::default()
                    .with_name(topic(&t))
                    .with_partitions(vec![
                        ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_current_leader_epoch(-1)
                            .with_timestamp(-1),
                    ]),
            ]);
        let r = c.call(&req, 7).await?;
        r.topics
            .first()
            .and_then(|t| t.partitions.first())
            .map(|p| (p.error_code, p.offset))
            .context("no partition")?
    };
    c.see(
        "read_committed latest",
        format!("error={} offset={}", lo.0, lo.1),
    );
    Ok(())
}

async fn one_produce_request_to_two_partitions(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 2, &[]).await?;
    let missing = c.name("missing");
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(topic(&t))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(Batch::values(2).encode()?)),
                    PartitionProduceData::default()
                        .with_index(1)
                        .with_records(Some(Batch::values(3).encode()?)),
                    PartitionProduceData::default()
                        .with_index(7)
                        .with_records(Some(Batch::values(1).encode()?)),
                ]),
            TopicProduceData::default()
                .with_name(topic(&missing))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(Batch::values(1).encode()?)),
                ]),
        ]);
    let r = c.call(&req, PRODUCE_V).await?;
    let mut lines = Vec::new();
    for tr in &r.responses {
        let which = if tr.name.0.as_str() == t {
            "t"
        } else {
            "missing"
        };
        for p in &tr.partition_responses {
            lines.push(format!(
                "{which}/{}: error={} base={}",
                p.index, p.error_code, p.base_offset
            ));
        }
    }
    lines.sort();
    c.see("answers", lines.join("; "));
    Ok(())
}

async fn list_offsets_across_versions(c: &mut Ctx) -> anyhow::Result<()> {
    let t = topic_with(c, "t", &[], &[2, 3]).await?;
    let (e, _) = delete_records(c, &t, 0, 1).await?;
    ensure!(e == 0, "DeleteRecords: error {e}");
    for v in [1i16, 2, 4, 5, 6, 7] {
        for (what, ts) in [("latest", -1i64), ("earliest", -2)] {
            let req = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![
                    ListOffsetsTopic::default()
                        .with_name(topic(&t))
                        .with_partitions(vec![
                            ListOffsetsPartition::default()
                                .with_partition_index(0)
                                .with_current_leader_epoch(-1)
                                .with_timestamp(ts),
                        ]),
                ]);
            let r = c.call(&req, v).await?;
            let p = r
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .context("no partition")?;
            c.see(
                format!("v{v} {what}"),
                format!(
                    "error={} offset={} ts={}",
                    p.error_code, p.offset, p.timestamp
                ),
            );
        }
    }
    Ok(())
}

async fn fetch_with_a_tiny_request_limit_returns_one_whole_batch(
    c: &mut Ctx,
) -> anyhow::Result<()> {
    use kafka_protocol::messages::FetchRequest;
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    let t = c.name("t");
    c.create_ready_topic(&t, 2, &[]).await?;
    for p in [0, 1] {
        for n in [4usize, 4] {
            let r = c
                .produce(&t, p, Batch::values(n).encode()?, PRODUCE_V)
                .await?;
            ensure!(r.error_code == 0, "produce: error {}", r.error_code);
        }
    }
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default().with_topic(topic(&t)).with_partitions(
                (0..2)
                    .map(|p| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(0)
                            .with_partition_max_bytes(1 << 20)
                    })
                    .collect(),
            ),
        ]);
    let r = c.call(&req, 12).await?;
    let mut lines = Vec::new();
    for tr in &r.responses {
        for p in &tr.partitions {
            let h = headers(p.records.as_ref());
            lines.push(format!(
                "p{}: error={} hw={} batches={}",
                p.partition_index,
                p.error_code,
                p.high_watermark,
                h.iter()
                    .map(|h| format!("{}+{}", h.base, h.count))
                    .collect::<Vec<_>>()
                    .join(" ")
            ));
        }
    }
    lines.sort();
    c.see("max_bytes 1 over two partitions", lines.join("; "));
    Ok(())
}

async fn records_without_timestamp(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[]).await?;
    let mut b = Batch::values(1).at(-1);
    b.records.push((None, Some(b"w".to_vec())));
    // The second record's timestamp is one more: 0.
    let r = c.produce(&t, 0, b.encode()?, PRODUCE_V).await?;
    c.see(
        "timestamps -1 and 0",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    let r = c
        .produce(&t, 0, Batch::values(1).at(-1).encode()?, PRODUCE_V)
        .await?;
    c.see(
        "timestamp -1",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    let r = c
        .produce(&t, 0, Batch::values(1).at(-5).encode()?, PRODUCE_V)
        .await?;
    c.see(
        "timestamp -5",
        format!("error={} base={}", r.error_code, r.base_offset),
    );
    let f = c.fetch(&t, 0, 0, 0).await?;
    let recs = decode(f.records.as_ref())?;
    c.see(
        "fetched timestamps",
        recs.iter()
            .map(|r| r.timestamp.to_string())
            .collect::<Vec<_>>()
            .join(","),
    );
    let lo = list_offsets(c, &t, 0, -3).await?;
    c.see(
        "max-timestamp",
        format!("error={} offset={} ts={}", lo.0, lo.1, lo.2),
    );
    let lo = list_offsets(c, &t, 0, 0).await?;
    c.see(
        "by timestamp 0",
        format!("error={} offset={} ts={}", lo.0, lo.1, lo.2),
    );
    Ok(())
}

/// One uncompressed batch of keyless records `v0..` with these timestamps
/// (Batch gives each next record the previous timestamp plus one).
fn with_timestamps(ts: &[i64]) -> anyhow::Result<Bytes> {
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::records::{Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
    let records: Vec<Record> = ts
        .iter()
        .enumerate()
        .map(|(i, &t)| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: -1 + i as i32,
            timestamp: t,
            key: None,
            value: Some(Bytes::from(format!("v{i}"))),
            headers: IndexMap::new(),
            delete_horizon: false,
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .context("encoding a batch")?;
    Ok(buf.freeze())
}
