//! Wire-level contract probes (`kaas conformance --bootstrap HOST:PORT`):
//! the seed's "shell suite" as a program. Each probe talks to a live broker
//! with exact requests under fresh transactional ids and checks the rejoin
//! contract both shipped policies share: KIP-360 claims (v3 and v4), stale
//! and half-set claims, the retry of a bump, CONCURRENT_TRANSACTIONS while
//! an ongoing transaction is fenced and aborted, and fencing of the old
//! epoch afterwards.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, CreateTopicsRequest, EndTxnRequest, InitProducerIdRequest,
    ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::CaseResult;
use super::client::Client;

const PROBE_TOPIC: &str = "kaas-conformance-probe";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

struct Probe<'a> {
    client: Client,
    addr: &'a str,
    run: String,
}

impl Probe<'_> {
    fn txn(&self, name: &str) -> String {
        format!("kaas-probe-{}-{name}", self.run)
    }

    async fn init(
        &mut self,
        txn: Option<&str>,
        claim: (i64, i16),
        version: i16,
    ) -> anyhow::Result<(i16, i64, i16)> {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(txn.map(|t| TransactionalId(s(t))))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(claim.0))
            .with_producer_epoch(claim.1);
        let r = self.client.call(&req, version).await?;
        Ok((r.error_code, r.producer_id.0, r.producer_epoch))
    }

    async fn add(&mut self, txn: &str, pid: i64, epoch: i16) -> anyhow::Result<i16> {
        let req = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(s(txn)))
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(s(PROBE_TOPIC)))
                    .with_partitions(vec![0]),
            ]);
        let r = self.client.call(&req, 3).await?;
        let code = r
            .results_by_topic_v3_and_below
            .first()
            .and_then(|t| t.results_by_partition.first())
            .map(|p| p.partition_error_code)
            .context("no partition result")?;
        Ok(code)
    }

    async fn end(&mut self, txn: &str, pid: i64, epoch: i16, commit: bool) -> anyhow::Result<i16> {
        let req = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(s(txn)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(commit);
        Ok(self.client.call(&req, 3).await?.error_code)
    }
}

fn expect(
    what: &str,
    got: (i16, i64, i16),
    code: i16,
    pid: Option<i64>,
    epoch: Option<i16>,
) -> anyhow::Result<()> {
    ensure!(
        got.0 == code,
        "{what}: expected error {code}, got {} (pid {}, epoch {})",
        got.0,
        got.1,
        got.2
    );
    if let Some(p) = pid {
        ensure!(got.1 == p, "{what}: expected pid {p}, got {}", got.1);
    }
    if let Some(e) = epoch {
        ensure!(got.2 == e, "{what}: expected epoch {e}, got {}", got.2);
    }
    Ok(())
}

async fn half_set_claims_are_invalid_request(p: &mut Probe<'_>) -> anyhow::Result<()> {
    let t = p.txn("half-set");
    expect(
        "pid set, epoch -1",
        p.init(Some(&t), (1000, -1), 4).await?,
        42,
        Some(-1),
        Some(-1),
    )?;
    expect(
        "pid -1, epoch set",
        p.init(Some(&t), (-1, 3), 4).await?,
        42,
        None,
        None,
    )?;
    expect(
        "idempotent half-set",
        p.init(None, (-1, 3), 4).await?,
        42,
        None,
        None,
    )
}

async fn first_init_and_noclaim_bumps(p: &mut Probe<'_>) -> anyhow::Result<()> {
    let t = p.txn("bump");
    let (code, pid, epoch) = p.init(Some(&t), (-1, -1), 4).await?;
    ensure!(
        code == 0 && epoch == 0,
        "first InitProducerId: ({code}, {pid}, {epoch})"
    );
    expect(
        "noclaim bump",
        p.init(Some(&t), (-1, -1), 4).await?,
        0,
        Some(pid),
        Some(1),
    )?;
    expect(
        "noclaim bump again",
        p.init(Some(&t), (-1, -1), 2).await?,
        0,
        Some(pid),
        Some(2),
    )
}

async fn current_claim_bumps_and_its_retry_is_stable(p: &mut Probe<'_>) -> anyhow::Result<()> {
    let t = p.txn("claim");
    let (_, pid, _) = p.init(Some(&t), (-1, -1), 4).await?;
    expect(
        "claim (pid, 0)",
        p.init(Some(&t), (pid, 0), 4).await?,
        0,
        Some(pid),
        Some(1),
    )?;
    expect(
        "retry of the bump",
        p.init(Some(&t), (pid, 0), 4).await?,
        0,
        Some(pid),
        Some(1),
    )?;
    expect(
        "claim (pid, 1)",
        p.init(Some(&t), (pid, 1), 3).await?,
        0,
        Some(pid),
        Some(2),
    )
}

async fn stale_claims_are_fenced(p: &mut Probe<'_>) -> anyhow::Result<()> {
    let t = p.txn("stale");
    let (_, pid, _) = p.init(Some(&t), (-1, -1), 4).await?;
    expect(
        "bump",
        p.init(Some(&t), (-1, -1), 4).await?,
        0,
        Some(pid),
        Some(1),
    )?;
    expect(
        "bump",
        p.init(Some(&t), (-1, -1), 4).await?,
        0,
        Some(pid),
        Some(2),
    )?;
    expect(
        "stale claim v4",
        p.init(Some(&t), (pid, 0), 4).await?,
        90,
        Some(-1),
        Some(-1),
    )?;
    expect(
        "stale claim v3",
        p.init(Some(&t), (pid, 0), 3).await?,
        47,
        Some(-1),
        Some(-1),
    )?;
    expect(
        "future epoch",
        p.init(Some(&t), (pid, 9), 4).await?,
        90,
        None,
        None,
    )?;
    expect(
        "unrelated pid",
        p.init(Some(&t), (pid + 7_777_777, 2), 4).await?,
        90,
        None,
        None,
    )
}

async fn rejoin_mid_ongoing_answers_concurrent_then_fences(
    p: &mut Probe<'_>,
) -> anyhow::Result<()> {
    let t = p.txn("ongoing");
    let (_, pid, epoch) = p.init(Some(&t), (-1, -1), 4).await?;
    ensure!(
        p.add(&t, pid, epoch).await? == 0,
        "AddPartitionsToTxn failed"
    );
    expect(
        "rejoin mid-Ongoing",
        p.init(Some(&t), (-1, -1), 4).await?,
        51,
        Some(-1),
        Some(-1),
    )?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let next = loop {
        let r = p.init(Some(&t), (-1, -1), 4).await?;
        if r.0 != 51 {
            break r;
        }
        ensure!(
            Instant::now() < deadline,
            "still CONCURRENT_TRANSACTIONS after 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    expect("retry after the abort", next, 0, Some(pid), Some(epoch + 2))?;
    ensure!(
        p.add(&t, pid, epoch).await? == 90,
        "the old epoch's AddPartitionsToTxn must be PRODUCER_FENCED"
    );
    ensure!(
        p.end(&t, pid, epoch, true).await? == 90,
        "the old epoch's EndTxn must be PRODUCER_FENCED"
    );
    ensure!(
        p.end(&t, pid, epoch + 2, true).await? == 48,
        "EndTxn on an Empty entry must be INVALID_TXN_STATE"
    );
    Ok(())
}

async fn concurrent_transactions_while_markers_complete(p: &mut Probe<'_>) -> anyhow::Result<()> {
    let t = p.txn("commit");
    let (_, pid, epoch) = p.init(Some(&t), (-1, -1), 4).await?;
    ensure!(
        p.add(&t, pid, epoch).await? == 0,
        "AddPartitionsToTxn failed"
    );
    let code = p.end(&t, pid, epoch, true).await?;
    ensure!(code == 0, "EndTxn COMMIT: {code}");
    // Until the markers land the entry is PrepareCommit: 51 or, once done, NONE (a retry).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match p.end(&t, pid, epoch, true).await? {
            0 => return Ok(()),
            51 => {}
            other => bail!("EndTxn retry answered {other}"),
        }
        ensure!(Instant::now() < deadline, "the commit never completed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs every probe against the broker at `addr`.
pub async fn run(addr: &str) -> anyhow::Result<Vec<CaseResult>> {
    let mut client = Client::connect(addr).await?;
    let create = CreateTopicsRequest::default().with_topics(vec![
        CreatableTopic::default()
            .with_name(TopicName(s(PROBE_TOPIC)))
            .with_num_partitions(1)
            .with_replication_factor(1),
    ]);
    let r = client.call(&create, 5).await?;
    let code = r.topics.first().map_or(-1, |t| t.error_code);
    ensure!(
        code == 0 || code == 36,
        "creating the probe topic: error {code}"
    );
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    let mut probe = Probe {
        client,
        addr,
        run: run.to_string(),
    };
    let mut results = Vec::new();
    macro_rules! probe {
        ($name:ident) => {{
            let failure = match $name(&mut probe).await {
                Ok(()) => None,
                Err(e) => Some(format!("{e:#}")),
            };
            if failure.is_some() {
                // A failed probe may leave the connection unusable.
                if let Ok(c) = Client::connect(probe.addr).await {
                    probe.client = c;
                }
            }
            results.push(CaseResult {
                id: stringify!($name).to_owned(),
                failure,
            });
        }};
    }
    probe!(half_set_claims_are_invalid_request);
    probe!(first_init_and_noclaim_bumps);
    probe!(current_claim_bumps_and_its_retry_is_stable);
    probe!(stale_claims_are_fenced);
    probe!(rejoin_mid_ongoing_answers_concurrent_then_fences);
    probe!(concurrent_transactions_while_markers_complete);
    Ok(results)
}
