//! Probes and their runner. A probe is a named case with an id (the spec's
//! where a scenario exists: IT-04, IX-08, …) that talks to a live broker
//! and records what it sees as ordered `key = value` observations. The same
//! probe run against kaas and against Apache Kafka must observe the same
//! lines (compare.rs); a probe fails on its own only when it cannot do its
//! job (a setup step refused, the connection lost where none should be).

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use crate::ctx::Ctx;

/// What a probe's body returns.
pub type ProbeFuture<'a> = Pin<Box<dyn Future<Output = anyhow::Result<()>> + 'a>>;

/// One named case of the kit.
#[derive(Clone, Copy)]
pub struct Probe {
    /// A stable id: the spec's scenario id, or the area's prefix and a number.
    pub id: &'static str,
    /// The function's name: what the probe proves.
    pub name: &'static str,
    /// The body.
    pub run: for<'a> fn(&'a mut Ctx) -> ProbeFuture<'a>,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.id, self.name)
    }
}

/// Builds `Probe`s from `"ID" => path::to::async_fn` pairs.
#[macro_export]
macro_rules! probes {
    ($($id:literal => $f:path),* $(,)?) => {
        vec![$(
            $crate::kit::Probe {
                id: $id,
                name: {
                    let full = stringify!($f);
                    match full.rfind(':') { Some(i) => full.split_at(i + 1).1, None => full }
                },
                run: {
                    fn run(c: &mut $crate::ctx::Ctx) -> $crate::kit::ProbeFuture<'_> {
                        Box::pin($f(c))
                    }
                    run
                },
            }
        ),*]
    };
}

/// What one probe saw on one broker.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub id: &'static str,
    pub name: &'static str,
    /// The observations in the order they were made.
    pub seen: Vec<(String, String)>,
    /// Set when the probe could not do its job.
    pub error: Option<String>,
    pub elapsed: Duration,
}

/// How long one probe may take before it is failed.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(90);

/// Which probes to run: all, or those whose id or name starts with one of
/// `only`'s entries.
pub fn select(all: Vec<Probe>, only: &[String]) -> Vec<Probe> {
    if only.is_empty() {
        return all;
    }
    all.into_iter()
        .filter(|p| {
            only.iter()
                .any(|o| p.id.starts_with(o.as_str()) || p.name.starts_with(o.as_str()))
        })
        .collect()
}

/// Runs `probes` one after the other against `bootstrap`, each on a fresh
/// connection and with names of its own.
pub async fn run(bootstrap: &str, probes: &[Probe]) -> anyhow::Result<Vec<Outcome>> {
    let run_id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() % 100_000_000);
    crate::ctx::prepare(bootstrap).await?;
    let mut out = Vec::with_capacity(probes.len());
    for p in probes {
        let started = Instant::now();
        let mut seen = Vec::new();
        let error = match Ctx::new(bootstrap, run_id, p.id).await {
            Err(e) => Some(format!("connecting: {e:#}")),
            Ok(mut ctx) => {
                let r = tokio::time::timeout(PROBE_TIMEOUT, (p.run)(&mut ctx)).await;
                let error = match r {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(format!("{e:#}")),
                    Err(_) => Some(format!("timed out after {PROBE_TIMEOUT:?}")),
                };
                seen = ctx.into_seen();
                error
            }
        };
        out.push(Outcome {
            id: p.id,
            name: p.name,
            seen,
            error,
            elapsed: started.elapsed(),
        });
    }
    Ok(out)
}
