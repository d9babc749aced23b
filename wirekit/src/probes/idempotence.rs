//! Idempotent producers on the partition leader: sequence checks (any
//! first sequence, in order, gaps, overlaps, wrap), duplicates of the five
//! most recent batches answered with their original offsets, epochs (old,
//! bumped by the producer with sequence 0 or not), producer ids the broker
//! never issued, acks other than -1, and what DescribeProducers and a
//! Fetch show of the producer's state. Spec §5 (PS-01..PS-09); the rest
//! ID-nn. Producer ids and epochs are observed relative to InitProducerId's.

use anyhow::{Context as _, ensure};
use kafka_protocol::messages::DescribeProducersRequest;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::produce_response::PartitionProduceResponse;

use crate::ctx::{Ctx, topic};
use crate::kit::Probe;
use crate::records::{Batch, decode, values_of};

pub fn probes() -> Vec<Probe> {
    crate::probes![
        "PS-01" => any_first_sequence_is_accepted,
        "PS-02" => the_next_sequence_is_accepted,
        "PS-03" => a_sequence_gap_is_out_of_order,
        "PS-04" => a_recent_duplicate_answers_its_original_offset,
        "PS-05" => a_duplicate_beyond_five_batches_is_out_of_order,
        "PS-06" => an_old_epoch_is_fenced,
        "PS-07" => a_new_epoch_starts_at_sequence_zero,
        "PS-08" => a_new_epoch_not_at_zero_is_out_of_order,
        "PS-09" => the_sequence_wraps_after_int_max,
        "ID-01" => a_producer_id_never_issued,
        "ID-02" => idempotent_batches_with_acks_one_and_zero,
        "ID-03" => an_overlapping_batch_is_out_of_order,
        "ID-04" => a_retry_with_another_record_count,
        "ID-05" => idempotent_init_ignores_a_claim,
        "ID-06" => sequences_are_per_partition,
        "ID-07" => duplicates_are_recognised_on_another_connection,
        "ID-08" => a_batch_without_sequence_from_a_producer,
        "ID-09" => an_epoch_bump_recovers_from_a_gap,
        "ID-10" => a_retry_at_the_old_epoch_after_a_bump_is_fenced,
        "ID-11" => an_epoch_may_jump_ahead,
        "ID-12" => describe_producers_shows_the_last_sequence,
        "ID-13" => fetched_batches_keep_the_producer_fields,
        "ID-14" => a_duplicate_inside_a_multi_partition_request,
    ]
}

const V: i16 = 9;

/// A fresh one-partition topic and an idempotent producer: (topic, pid, epoch).
async fn setup(c: &mut Ctx, partitions: i32) -> anyhow::Result<(String, i64, i16)> {
    let t = c.name("t");
    c.create_ready_topic(&t, partitions, &[]).await?;
    let (pid, epoch) = c.idempotent_producer().await?;
    Ok((t, pid, epoch))
}

/// `n` records from (pid, epoch) at `seq` to partition `p` (acks -1, v9).
async fn send(
    c: &mut Ctx,
    t: &str,
    p: i32,
    pid: i64,
    epoch: i16,
    seq: i32,
    n: usize,
) -> anyhow::Result<PartitionProduceResponse> {
    c.produce(
        t,
        p,
        Batch::values(n).idempotent(pid, epoch, seq).encode()?,
        V,
    )
    .await
}

fn said(r: &PartitionProduceResponse) -> String {
    format!("error={} base={}", r.error_code, r.base_offset)
}

/// `send`, recorded under `key`.
async fn sent(
    c: &mut Ctx,
    key: &str,
    t: &str,
    pid: i64,
    epoch: i16,
    seq: i32,
    n: usize,
) -> anyhow::Result<i16> {
    let r = send(c, t, 0, pid, epoch, seq, n).await?;
    c.see(key, said(&r));
    Ok(r.error_code)
}

/// A setup write that must succeed.
async fn must(
    c: &mut Ctx,
    t: &str,
    pid: i64,
    epoch: i16,
    seq: i32,
    n: usize,
) -> anyhow::Result<i64> {
    let r = send(c, t, 0, pid, epoch, seq, n).await?;
    ensure!(
        r.error_code == 0,
        "idempotent produce seq {seq}: error {}",
        r.error_code
    );
    Ok(r.base_offset)
}

async fn hw(c: &mut Ctx, t: &str) -> anyhow::Result<i64> {
    Ok(c.fetch(t, 0, 0, 0).await?.high_watermark)
}

async fn any_first_sequence_is_accepted(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    sent(c, "seq 17-19", &t, pid, e, 17, 3).await?;
    let h = hw(c, &t).await?;
    c.see("high watermark", h);
    Ok(())
}

async fn the_next_sequence_is_accepted(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    must(c, &t, pid, e, 17, 3).await?;
    sent(c, "seq 20-24", &t, pid, e, 20, 5).await?;
    sent(c, "seq 25", &t, pid, e, 25, 1).await?;
    let h = hw(c, &t).await?;
    c.see("high watermark", h);
    Ok(())
}

async fn a_sequence_gap_is_out_of_order(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    must(c, &t, pid, e, 20, 5).await?;
    sent(c, "seq 30 after 24", &t, pid, e, 30, 1).await?;
    sent(c, "seq 26 after 24", &t, pid, e, 26, 1).await?;
    let h = hw(c, &t).await?;
    c.see("high watermark after the gaps", h);
    sent(c, "seq 25 after 24", &t, pid, e, 25, 1).await?;
    Ok(())
}

async fn a_recent_duplicate_answers_its_original_offset(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    must(c, &t, pid, e, 20, 5).await?;
    for s in 25..=28 {
        must(c, &t, pid, e, s, 1).await?;
    }
    sent(c, "retry of 25", &t, pid, e, 25, 1).await?;
    sent(c, "retry of 28 (the last)", &t, pid, e, 28, 1).await?;
    sent(c, "retry of 20-24 (fifth most recent)", &t, pid, e, 20, 5).await?;
    let h = hw(c, &t).await?;
    c.see("high watermark (nothing appended)", h);
    sent(c, "seq 29", &t, pid, e, 29, 1).await?;
    Ok(())
}

async fn a_duplicate_beyond_five_batches_is_out_of_order(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    must(c, &t, pid, e, 20, 5).await?;
    for s in 25..=29 {
        must(c, &t, pid, e, s, 1).await?;
    }
    sent(c, "retry of 20-24 (sixth most recent)", &t, pid, e, 20, 5).await?;
    sent(c, "retry of 25 (fifth most recent)", &t, pid, e, 25, 1).await?;
    let h = hw(c, &t).await?;
    c.see("high watermark", h);
    Ok(())
}

async fn an_old_epoch_is_fenced(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    must(c, &t, pid, e + 3, 0, 2).await?;
    for v in [3i16, 7, 9] {
        let r = c
            .produce(
                &t,
                0,
                Batch::values(1).idempotent(pid, e + 2, 2).encode()?,
                v,
            )
            .await?;
        c.see(format!("epoch E+2 after E+3, Produce v{v}"), said(&r));
    }
    let r = send(c, &t, 0, pid, e + 2, 0, 1).await?;
    c.see("epoch E+2 seq 0", said(&r));
    sent(c, "epoch E+3 seq 2", &t, pid, e + 3, 2, 1).await?;
    Ok(())
}

async fn a_new_epoch_starts_at_sequence_zero(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    must(c, &t, pid, e, 0, 3).await?;
    sent(c, "epoch E+1 seq 0", &t, pid, e + 1, 0, 2).await?;
    sent(c, "epoch E+1 seq 2", &t, pid, e + 1, 2, 1).await?;
    sent(c, "epoch E+1 retry of seq 0", &t, pid, e + 1, 0, 2).await?;
    let h = hw(c, &t).await?;
    c.see("high watermark", h);
    Ok(())
}

async fn a_new_epoch_not_at_zero_is_out_of_order(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    must(c, &t, pid, e, 0, 3).await?;
    sent(c, "epoch E+1 seq 5", &t, pid, e + 1, 5, 1).await?;
    sent(
        c,
        "epoch E+1 seq 3 (the old epoch's next)",
        &t,
        pid,
        e + 1,
        3,
        1,
    )
    .await?;
    sent(c, "epoch E seq 3 still", &t, pid, e, 3, 1).await?;
    Ok(())
}

async fn the_sequence_wraps_after_int_max(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    must(c, &t, pid, e, i32::MAX - 1, 2).await?;
    sent(c, "seq 0 after int max", &t, pid, e, 0, 1).await?;
    sent(c, "seq 1", &t, pid, e, 1, 1).await?;
    sent(c, "retry of int max - 1", &t, pid, e, i32::MAX - 1, 2).await?;
    // A batch across the wrap.
    let (pid2, e2) = c.idempotent_producer().await?;
    let r = send(c, &t, 0, pid2, e2, i32::MAX - 1, 3).await?;
    c.see("batch int max - 1 .. 0 (across the wrap)", said(&r));
    let r = send(c, &t, 0, pid2, e2, 1, 1).await?;
    c.see("seq 1 after it", said(&r));
    let h = hw(c, &t).await?;
    c.see("high watermark", h);
    Ok(())
}

async fn a_producer_id_never_issued(c: &mut Ctx) -> anyhow::Result<()> {
    let t = c.name("t");
    c.create_ready_topic(&t, 1, &[]).await?;
    // Far above any id a broker hands out (in blocks from 0); the topic is
    // fresh, so no partition has state for it.
    let pid = 0x3fff_0000_0000_0000_i64;
    sent(c, "unknown pid seq 0", &t, pid, 0, 0, 2).await?;
    sent(c, "unknown pid seq 2", &t, pid, 0, 2, 1).await?;
    sent(c, "another unknown pid seq 9 epoch 4", &t, pid + 1, 4, 9, 1).await?;
    let h = hw(c, &t).await?;
    c.see("high watermark", h);
    Ok(())
}

async fn idempotent_batches_with_acks_one_and_zero(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    let r = c
        .produce_with(
            &t,
            0,
            Some(Batch::values(2).idempotent(pid, e, 0).encode()?),
            1,
            None,
            V,
        )
        .await?;
    c.see("acks=1 seq 0", said(&r));
    let r = c
        .produce_with(
            &t,
            0,
            Some(Batch::values(2).idempotent(pid, e, 0).encode()?),
            1,
            None,
            V,
        )
        .await?;
    c.see("acks=1 retry of seq 0", said(&r));
    // acks 0: no answer; the next Metadata tells whether the connection lives.
    let req = kafka_protocol::messages::ProduceRequest::default()
        .with_acks(0)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![
            kafka_protocol::messages::produce_request::TopicProduceData::default()
                .with_name(topic(&t))
                .with_partition_data(vec![
                    kafka_protocol::messages::produce_request::PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(Batch::values(1).idempotent(pid, e, 2).encode()?)),
                ]),
        ]);
    let (_, frame) = c.client.frame(&req, V)?;
    c.client.send_raw(&frame).await?;
    let m = kafka_protocol::messages::MetadataRequest::default()
        .with_topics(Some(vec![]))
        .with_allow_auto_topic_creation(false);
    let ok = c.call(&m, 9).await.is_ok();
    c.see("acks=0 seq 2: the next answer is the Metadata's", ok);
    if !ok {
        c.reconnect().await?;
    }
    sent(c, "acks=-1 seq 3", &t, pid, e, 3, 1).await?;
    let h = hw(c, &t).await?;
    c.see("high watermark", h);
    Ok(())
}

async fn an_overlapping_batch_is_out_of_order(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    must(c, &t, pid, e, 0, 3).await?;
    sent(c, "seq 1-3 after 0-2", &t, pid, e, 1, 3).await?;
    sent(c, "seq 2-4 after 0-2", &t, pid, e, 2, 3).await?;
    sent(c, "seq 3-5 after 0-2", &t, pid, e, 3, 3).await?;
    Ok(())
}

async fn a_retry_with_another_record_count(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    must(c, &t, pid, e, 0, 3).await?;
    must(c, &t, pid, e, 3, 1).await?;
    sent(c, "seq 0 with 2 records (was 0-2)", &t, pid, e, 0, 2).await?;
    sent(c, "seq 0 with 4 records (was 0-2)", &t, pid, e, 0, 4).await?;
    sent(c, "seq 0 with 3 records (the same)", &t, pid, e, 0, 3).await?;
    let h = hw(c, &t).await?;
    c.see("high watermark", h);
    Ok(())
}

async fn idempotent_init_ignores_a_claim(c: &mut Ctx) -> anyhow::Result<()> {
    let (pid, epoch) = c.idempotent_producer().await?;
    c.see("first epoch", epoch);
    for v in [3i16, 4] {
        let (err, p, ep) = c.init_producer_with(None, 60_000, (pid, epoch), v).await?;
        c.see(
            format!("claim (P,E) v{v}"),
            format!("error={err} same pid={} epoch={ep}", p == pid),
        );
    }
    let (err, p, ep) = c
        .init_producer_with(None, 60_000, (pid, epoch + 7), 4)
        .await?;
    c.see(
        "claim (P,E+7) v4",
        format!("error={err} same pid={} epoch={ep}", p == pid),
    );
    let (err, p, ep) = c.init_producer_with(None, 60_000, (-1, -1), 2).await?;
    c.see(
        "no claim v2",
        format!("error={err} same pid={} epoch={ep}", p == pid),
    );
    Ok(())
}

async fn sequences_are_per_partition(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 2).await?;
    let r = send(c, &t, 0, pid, e, 0, 3).await?;
    c.see("p0 seq 0-2", said(&r));
    let r = send(c, &t, 1, pid, e, 0, 1).await?;
    c.see("p1 seq 0", said(&r));
    let r = send(c, &t, 1, pid, e, 3, 1).await?;
    c.see("p1 seq 3 (p0's next)", said(&r));
    let r = send(c, &t, 1, pid, e, 1, 1).await?;
    c.see("p1 seq 1", said(&r));
    let r = send(c, &t, 0, pid, e, 3, 1).await?;
    c.see("p0 seq 3", said(&r));
    Ok(())
}

async fn duplicates_are_recognised_on_another_connection(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    must(c, &t, pid, e, 0, 2).await?;
    must(c, &t, pid, e, 2, 3).await?;
    c.reconnect().await?;
    sent(c, "retry of 2-4 on a new connection", &t, pid, e, 2, 3).await?;
    sent(c, "retry of 0-1 on a new connection", &t, pid, e, 0, 2).await?;
    let h = hw(c, &t).await?;
    c.see("high watermark", h);
    Ok(())
}

async fn a_batch_without_sequence_from_a_producer(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    sent(c, "pid set, seq -1", &t, pid, e, -1, 1).await?;
    sent(c, "pid set, epoch -1, seq 0", &t, pid, -1, 0, 1).await?;
    sent(c, "pid set, seq 0", &t, pid, e, 0, 1).await?;
    let mut b = Batch::values(1);
    b.base_sequence = 0;
    let r = c.produce(&t, 0, b.encode()?, V).await?;
    c.see("pid -1, seq 0", said(&r));
    Ok(())
}

async fn an_epoch_bump_recovers_from_a_gap(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    must(c, &t, pid, e, 0, 3).await?;
    sent(c, "gap: seq 10", &t, pid, e, 10, 1).await?;
    sent(c, "epoch E+1 seq 0", &t, pid, e + 1, 0, 1).await?;
    sent(c, "epoch E+1 seq 1", &t, pid, e + 1, 1, 1).await?;
    let h = hw(c, &t).await?;
    c.see("high watermark", h);
    Ok(())
}

async fn a_retry_at_the_old_epoch_after_a_bump_is_fenced(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    must(c, &t, pid, e, 0, 2).await?;
    must(c, &t, pid, e + 1, 0, 1).await?;
    sent(c, "retry of (E, 0-1)", &t, pid, e, 0, 2).await?;
    sent(c, "retry of (E+1, 0)", &t, pid, e + 1, 0, 1).await?;
    Ok(())
}

async fn an_epoch_may_jump_ahead(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    must(c, &t, pid, e, 0, 1).await?;
    sent(c, "epoch E+5 seq 0", &t, pid, e + 5, 0, 1).await?;
    sent(c, "epoch E+4 seq 1", &t, pid, e + 4, 1, 1).await?;
    sent(c, "epoch 32767 seq 0", &t, pid, i16::MAX, 0, 1).await?;
    Ok(())
}

async fn describe_producers(c: &mut Ctx, t: &str) -> anyhow::Result<String> {
    let req = DescribeProducersRequest::default().with_topics(vec![
        TopicRequest::default()
            .with_name(topic(t))
            .with_partition_indexes(vec![0]),
    ]);
    let r = c.call(&req, 0).await?;
    let p = r
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .context("DescribeProducers answered no partition")?;
    Ok(format!(
        "error={} producers={}",
        p.error_code,
        p.active_producers.len()
    ))
}

async fn describe_producers_shows_the_last_sequence(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    let d = describe_producers(c, &t).await?;
    c.see("before any write", d);
    must(c, &t, pid, e, 17, 3).await?;
    let req = DescribeProducersRequest::default().with_topics(vec![
        TopicRequest::default()
            .with_name(topic(&t))
            .with_partition_indexes(vec![0]),
    ]);
    let r = c.call(&req, 0).await?;
    let p = r
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .context("DescribeProducers answered no partition")?;
    c.see("error", p.error_code);
    let states: Vec<_> = p
        .active_producers
        .iter()
        .map(|s| {
            format!(
                "same pid={} epoch=E{:+} last_sequence={} txn_start={}",
                s.producer_id.0 == pid,
                s.producer_epoch - i32::from(e),
                s.last_sequence,
                s.current_txn_start_offset
            )
        })
        .collect();
    c.see("producers", states.join("; "));
    must(c, &t, pid, e + 1, 0, 2).await?;
    let r = c.call(&req, 0).await?;
    let p = r
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .context("DescribeProducers answered no partition")?;
    let states: Vec<_> = p
        .active_producers
        .iter()
        .map(|s| {
            format!(
                "epoch=E{:+} last_sequence={}",
                s.producer_epoch - i32::from(e),
                s.last_sequence
            )
        })
        .collect();
    c.see("after a bump", states.join("; "));
    let d = describe_producers(c, &c.name("missing")).await?;
    c.see("unknown topic", d);
    Ok(())
}

async fn fetched_batches_keep_the_producer_fields(c: &mut Ctx) -> anyhow::Result<()> {
    let (t, pid, e) = setup(c, 1).await?;
    must(c, &t, pid, e, 40, 3).await?;
    must(c, &t, pid, e, 43, 1).await?;
    let f = c.fetch(&t, 0, 0, 0).await?;
    let recs = decode(f.records.as_ref())?;
    c.see("values", values_of(&recs).join(","));
    c.see("same pid", recs.iter().all(|r| r.producer_id == pid));
    c.see(
        "epochs",
        recs.iter()
            .map(|r| (r.producer_epoch - e).to_string())
            .collect::<Vec<_>>()
            .join(","),
    );
    c.see(
        "sequences",
        recs.iter()
            .map(|r| r.sequence.to_string())
            .collect::<Vec<_>>()
            .join(","),
    );
    c.see("transactional", recs.iter().any(|r| r.transactional));
    Ok(())
}

async fn a_duplicate_inside_a_multi_partition_request(c: &mut Ctx) -> anyhow::Result<()> {
    use kafka_protocol::messages::ProduceRequest;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    let (t, pid, e) = setup(c, 2).await?;
    must(c, &t, pid, e, 0, 2).await?;
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(topic(&t))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(Batch::values(2).idempotent(pid, e, 0).encode()?)),
                    PartitionProduceData::default()
                        .with_index(1)
                        .with_records(Some(Batch::values(1).idempotent(pid, e, 0).encode()?)),
                ]),
        ]);
    let r = c.call(&req, V).await?;
    let mut lines: Vec<_> = r
        .responses
        .iter()
        .flat_map(|t| &t.partition_responses)
        .map(|p| format!("p{}: {}", p.index, said(p)))
        .collect();
    lines.sort();
    c.see("retry on p0 beside a first write on p1", lines.join("; "));
    Ok(())
}
