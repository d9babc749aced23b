//! `kaas txn describe --bootstrap HOST:PORT TXN_ID`: an operator's view of
//! one transactional id, over the wire like any Kafka admin client
//! (FindCoordinator, then DescribeTransactions on the coordinator), plus
//! what Kafka's schema has no field for: the policy that made the entry's
//! last transition and the one deciding now (the tagged fields of
//! [`crate::wire::api::describe_transactions`]). It only reads.

use std::fmt::Write as _;

use anyhow::Context as _;
use kafka_protocol::messages::{
    DescribeTransactionsRequest, FindCoordinatorRequest, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use crate::conformance::client::Client;
use crate::wire::api::describe_transactions::{TAG_CURRENT_POLICY, TAG_DECIDED_BY};

/// What `kaas txn describe` learned about one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    pub transactional_id: String,
    /// The coordinator that answered (host:port).
    pub coordinator: String,
    pub state: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub start_time_ms: i64,
    /// `topic-partition` of each partition in the transaction.
    pub partitions: Vec<String>,
    /// Identity of the policy that made the entry's last transition.
    pub decided_by: Option<String>,
    /// Identity of the policy the coordinator decides with now.
    pub current_policy: Option<String>,
}

impl Described {
    /// The lines `kaas txn describe` prints.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "transactional id: {}", self.transactional_id);
        let _ = writeln!(out, "coordinator: {}", self.coordinator);
        let _ = writeln!(out, "state: {}", self.state);
        let _ = writeln!(out, "producer id: {}", self.producer_id);
        let _ = writeln!(out, "producer epoch: {}", self.producer_epoch);
        let _ = writeln!(out, "timeout ms: {}", self.timeout_ms);
        let _ = writeln!(out, "start time ms: {}", self.start_time_ms);
        let _ = writeln!(out, "partitions: {}", self.partitions.join(", "));
        let unknown = || "unknown (the broker did not say)".to_string();
        let _ = writeln!(
            out,
            "decided by: {}",
            self.decided_by.clone().unwrap_or_else(unknown)
        );
        let _ = writeln!(
            out,
            "current policy: {}",
            self.current_policy.clone().unwrap_or_else(unknown)
        );
        out
    }
}

const TRANSACTION_KEY_TYPE: i8 = 1;

/// Finds `txn_id`'s coordinator through `bootstrap` and describes the id.
pub async fn describe(bootstrap: &str, txn_id: &str) -> anyhow::Result<Described> {
    let mut client = Client::connect(bootstrap).await?;
    let found = client
        .call(
            &FindCoordinatorRequest::default()
                .with_key_type(TRANSACTION_KEY_TYPE)
                .with_coordinator_keys(vec![StrBytes::from_string(txn_id.to_owned())]),
            4,
        )
        .await
        .context("FindCoordinator")?;
    let c = found
        .coordinators
        .first()
        .context("FindCoordinator answered no coordinator")?;
    anyhow::ensure!(
        c.error_code == 0,
        "FindCoordinator for {txn_id:?} answered error {}{}",
        c.error_code,
        c.error_message
            .as_ref()
            .map(|m| format!(" ({})", m.as_str()))
            .unwrap_or_default()
    );
    let coordinator = format!("{}:{}", c.host.as_str(), c.port);
    let mut client = if coordinator == bootstrap {
        client
    } else {
        Client::connect(&coordinator).await?
    };
    let resp = client
        .call(
            &DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(
                StrBytes::from_string(txn_id.to_owned()),
            )]),
            0,
        )
        .await
        .context("DescribeTransactions")?;
    let s = resp
        .transaction_states
        .first()
        .context("DescribeTransactions answered no state")?;
    anyhow::ensure!(
        s.error_code == 0,
        "DescribeTransactions for {txn_id:?} answered error {}{}",
        s.error_code,
        match s.error_code {
            105 => " (TRANSACTIONAL_ID_NOT_FOUND)",
            16 => " (NOT_COORDINATOR)",
            53 => " (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)",
            _ => "",
        }
    );
    let text = |b: Option<&bytes::Bytes>| b.map(|b| String::from_utf8_lossy(b).into_owned());
    let mut partitions = Vec::new();
    for t in &s.topics {
        for p in &t.partitions {
            partitions.push(format!("{}-{p}", t.topic.0.as_str()));
        }
    }
    Ok(Described {
        transactional_id: txn_id.to_owned(),
        coordinator,
        state: s.transaction_state.as_str().to_owned(),
        producer_id: s.producer_id.0,
        producer_epoch: s.producer_epoch,
        timeout_ms: s.transaction_timeout_ms,
        start_time_ms: s.transaction_start_time_ms,
        partitions,
        decided_by: text(s.unknown_tagged_fields.get(&TAG_DECIDED_BY)),
        current_policy: text(resp.unknown_tagged_fields.get(&TAG_CURRENT_POLICY)),
    })
}
