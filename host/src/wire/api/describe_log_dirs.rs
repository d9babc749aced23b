//! DescribeLogDirs (key 35, v1–4; kafka-protocol decodes no v0): the data directory as the one log dir,
//! with the size on disk of every partition this broker has open (single
//! node: all; cluster mode: those it leads, so asking every broker covers
//! the cluster once), offset lag 0 (there is no future replica to catch
//! up), and the volume's total and usable bytes (v4). A request naming
//! partitions gets those of them that are open here; a null list, all.
//! Needs DESCRIBE on the cluster; without it the answer is empty, with
//! CLUSTER_AUTHORIZATION_FAILED where the version carries an error (v3+),
//! as Kafka 3.7 answers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{
    ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse, ResponseKind,
};

use super::{str_bytes, topic_name};
use crate::broker::Broker;
use crate::codes;
use crate::security::Operation;

/// The volume's (total, usable) bytes, or (-1, -1) when it cannot be read.
#[allow(unsafe_code)]
fn volume_bytes(dir: &std::path::Path) -> (i64, i64) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return (-1, -1);
    };
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `path` is a NUL-terminated string and `st` a buffer of the
    // right type that statvfs fills (read only when it returns 0).
    if unsafe { libc::statvfs(path.as_ptr(), st.as_mut_ptr()) } != 0 {
        return (-1, -1);
    }
    // SAFETY: statvfs returned 0, so it initialised `st`.
    let st = unsafe { st.assume_init() };
    let unit = st.f_frsize as i64;
    (
        (st.f_blocks as i64).saturating_mul(unit),
        (st.f_bavail as i64).saturating_mul(unit),
    )
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Arc<crate::security::Session>,
    req: DescribeLogDirsRequest,
    version: i16,
) -> ResponseKind {
    let mut checks = super::Checks::new(broker, session, ApiKey::DescribeLogDirs);
    if !checks.cluster(Operation::Describe) {
        let mut resp = DescribeLogDirsResponse::default();
        if version >= 3 {
            resp.error_code = codes::CLUSTER_AUTHORIZATION_FAILED;
        }
        return ResponseKind::DescribeLogDirs(resp);
    }
    let wanted: Option<BTreeMap<String, BTreeSet<i32>>> = req.topics.map(|topics| {
        let mut m: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
        for t in topics {
            m.entry(t.topic.0.to_string())
                .or_default()
                .extend(t.partitions);
        }
        m
    });
    let topics: Vec<DescribeLogDirsTopic> = broker
        .logs
        .topics()
        .iter()
        .filter_map(|t| {
            let asked = match &wanted {
                None => None,
                Some(w) => Some(w.get(&t.name)?),
            };
            let partitions: Vec<DescribeLogDirsPartition> = (0..t.partition_count)
                .filter(|p| asked.is_none_or(|a| a.contains(p)))
                .filter_map(|p| t.partition(p))
                .map(|p| {
                    DescribeLogDirsPartition::default()
                        .with_partition_index(p.id)
                        .with_partition_size(i64::try_from(p.size_bytes()).unwrap_or(i64::MAX))
                        .with_offset_lag(0)
                        .with_is_future_key(false)
                })
                .collect();
            (!partitions.is_empty()).then(|| {
                DescribeLogDirsTopic::default()
                    .with_name(topic_name(&t.name))
                    .with_partitions(partitions)
            })
        })
        .collect();
    let dir = std::fs::canonicalize(&broker.config.data_dir)
        .unwrap_or_else(|_| broker.config.data_dir.clone());
    let mut result = DescribeLogDirsResult::default()
        .with_log_dir(str_bytes(&dir.display().to_string()))
        .with_topics(topics)
        .with_total_bytes(-1)
        .with_usable_bytes(-1);
    if version >= 4 {
        let (total, usable) = volume_bytes(&dir);
        result.total_bytes = total;
        result.usable_bytes = usable;
    }
    ResponseKind::DescribeLogDirs(DescribeLogDirsResponse::default().with_results(vec![result]))
}
