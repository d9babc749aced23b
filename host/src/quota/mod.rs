//! Client quotas (Kafka 3.7's `producer_byte_rate`, `consumer_byte_rate`,
//! `request_percentage`, `controller_mutation_rate`): the configured table,
//! the per-entity measurements, and the throttle times they give.
//!
//! - [`entity`]: entities, the table, precedence, Alter/Describe checks.
//! - [`rate`]: Kafka's sampled rate, throttle formula and token bucket.
//! - [`store`]: the table on disk (single node) and its etcd encoding.
//! - [`Quotas`] (here): the live table and one measurement ("sensor") per
//!   (quota type, user label, client-id label), bounded: at most
//!   `max_entities` sensors; one idle for `idle_expiry` is dropped (Kafka
//!   expires its sensors after an hour); at the bound the least recently
//!   used goes first. It takes time from its own monotonic origin and knows
//!   nothing of requests or sockets: the wire layer (`wire::throttling`)
//!   asks it for throttle times and mutes connections.
//!
//! docs/design.md "Client quotas" says what is enforced and how it
//! differs from Kafka.

pub mod entity;
pub mod rate;
pub mod store;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

pub use entity::{Kind, QuotaTable, Resolved};
use rate::{SampledRate, TokenBucket};

/// THROTTLING_QUOTA_EXCEEDED's message (Kafka's).
pub const THROTTLED_MESSAGE: &str = "The throttling quota has been exceeded.";

/// A throttle time as the wire's `throttle_time_ms`.
pub fn clamp_ms(ms: u64) -> i32 {
    i32::try_from(ms).unwrap_or(i32::MAX)
}

/// The quota settings (broker flags, Kafka's names).
#[derive(Debug, Clone)]
pub struct QuotaSettings {
    /// quota.window.num: samples in a rate.
    pub window_num: usize,
    /// quota.window.size.seconds, in milliseconds.
    pub window_ms: u64,
    /// The most measurements kept at once (a client inventing client ids
    /// cannot grow memory past it).
    pub max_entities: usize,
    /// A measurement untouched this long is dropped (Kafka: one hour).
    pub idle_expiry_ms: u64,
}

impl Default for QuotaSettings {
    fn default() -> Self {
        QuotaSettings {
            window_num: 11,
            window_ms: 1000,
            max_entities: 10_000,
            idle_expiry_ms: 3_600_000,
        }
    }
}

/// Whose measurement: the quota type and the labels the match gave.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    kind: Kind,
    user: String,
    client_id: String,
}

/// One entity's measurement and its counters (for /metrics).
#[derive(Debug)]
struct Sensor {
    rate: SampledRate,
    /// controller_mutation_rate only.
    bucket: Option<TokenBucket>,
    /// Total recorded (bytes, percent-seconds, partitions).
    recorded: f64,
    /// Responses throttled, and the sum of their throttle times.
    throttled: u64,
    throttle_ms_total: u64,
    /// The last throttle time given (Kafka's throttle-time sensor, kept as
    /// the latest value and the sum).
    last_throttle_ms: u64,
    last_used: u64,
}

/// How one /metrics series reads a sensor at a time.
type Reading = fn(&mut Sensor, u64) -> f64;

/// The live quota table and measurements.
#[derive(Debug)]
pub struct Quotas {
    settings: QuotaSettings,
    origin: Instant,
    table: RwLock<Arc<QuotaTable>>,
    /// Whether any entity sets each quota type (the fast path skips the
    /// rest), indexed as [`Kind::ALL`].
    enabled: [AtomicBool; 4],
    sensors: Mutex<HashMap<Key, Sensor>>,
    /// Serialises alterations (read, change, persist, apply).
    pub alter_lock: Mutex<()>,
    /// Measurements dropped because the bound was reached.
    evicted: std::sync::atomic::AtomicU64,
}

fn index(kind: Kind) -> usize {
    Kind::ALL.iter().position(|k| *k == kind).unwrap_or(0)
}

impl Quotas {
    pub fn new(settings: QuotaSettings, table: QuotaTable) -> Self {
        let q = Quotas {
            settings,
            origin: Instant::now(),
            table: RwLock::new(Arc::new(QuotaTable::default())),
            enabled: Default::default(),
            sensors: Mutex::new(HashMap::new()),
            alter_lock: Mutex::new(()),
            evicted: Default::default(),
        };
        q.replace(table);
        q
    }

    pub fn settings(&self) -> &QuotaSettings {
        &self.settings
    }

    fn now(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// The configured quotas now.
    pub fn table(&self) -> Arc<QuotaTable> {
        self.table.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Makes `table` the configured quotas. Measurements keep their
    /// history (Kafka changes a sensor's bound in place; each record reads
    /// the bound again); those of a quota type no entity sets any more are
    /// dropped.
    pub fn replace(&self, table: QuotaTable) {
        for k in Kind::ALL {
            self.enabled[index(k)].store(table.has(k), Ordering::Release);
        }
        let table = Arc::new(table);
        *self.table.write().unwrap_or_else(|p| p.into_inner()) = table.clone();
        let mut sensors = self.sensors.lock().unwrap_or_else(|p| p.into_inner());
        sensors.retain(|k, _| table.has(k.kind));
    }

    /// Whether any quota of `kind` is set.
    pub fn enabled(&self, kind: Kind) -> bool {
        self.enabled[index(kind)].load(Ordering::Acquire)
    }

    /// The quota of `kind` for (user, client id), if any.
    pub fn resolve(&self, kind: Kind, user: &str, client_id: &str) -> Option<Resolved> {
        if !self.enabled(kind) {
            return None;
        }
        self.table().resolve(kind, user, client_id)
    }

    /// Runs `f` on the sensor of `r`, creating it (within the bound).
    fn with_sensor<T>(&self, kind: Kind, r: &Resolved, f: impl FnOnce(&mut Sensor, u64) -> T) -> T {
        let now = self.now();
        let key = Key {
            kind,
            user: r.user.clone(),
            client_id: r.client_id.clone(),
        };
        let mut sensors = self.sensors.lock().unwrap_or_else(|p| p.into_inner());
        if !sensors.contains_key(&key) {
            self.make_room(&mut sensors, now);
            let s = &self.settings;
            sensors.insert(
                key.clone(),
                Sensor {
                    rate: SampledRate::new(s.window_num, s.window_ms, now),
                    bucket: (kind == Kind::ControllerMutationRate)
                        .then(|| TokenBucket::new(r.bound, s.window_num, s.window_ms, now)),
                    recorded: 0.0,
                    throttled: 0,
                    throttle_ms_total: 0,
                    last_throttle_ms: 0,
                    last_used: now,
                },
            );
        }
        let Some(sensor) = sensors.get_mut(&key) else {
            // Unreachable: inserted above under the same lock.
            return f(
                &mut Sensor {
                    rate: SampledRate::new(2, 1000, now),
                    bucket: None,
                    recorded: 0.0,
                    throttled: 0,
                    throttle_ms_total: 0,
                    last_throttle_ms: 0,
                    last_used: now,
                },
                now,
            );
        };
        sensor.last_used = now;
        f(sensor, now)
    }

    /// Drops idle sensors, then (still full) the least recently used.
    fn make_room(&self, sensors: &mut HashMap<Key, Sensor>, now: u64) {
        let max = self.settings.max_entities.max(1);
        if sensors.len() < max {
            return;
        }
        let expiry = self.settings.idle_expiry_ms;
        sensors.retain(|_, s| now.saturating_sub(s.last_used) < expiry);
        while sensors.len() >= max {
            let Some(oldest) = sensors
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            sensors.remove(&oldest);
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records `value` against the byte-rate or request quota `kind` of
    /// (user, client id); the throttle time it asks for (0: none).
    /// `request_percentage` is bounded at one window, as Kafka bounds it.
    pub fn record(&self, kind: Kind, user: &str, client_id: &str, value: f64) -> u64 {
        let Some(r) = self.resolve(kind, user, client_id) else {
            return 0;
        };
        let cap = (kind == Kind::RequestPercentage).then_some(self.settings.window_ms);
        self.with_sensor(kind, &r, |s, now| {
            s.recorded += value;
            let t = s.rate.record_and_throttle(value, now, r.bound);
            t.min(cap.unwrap_or(u64::MAX))
        })
    }

    /// Takes back a value recorded at `record` (a throttled fetch answers
    /// nothing, so its bytes do not count).
    pub fn unrecord(&self, kind: Kind, user: &str, client_id: &str, value: f64) {
        if let Some(r) = self.resolve(kind, user, client_id) {
            self.with_sensor(kind, &r, |s, now| {
                s.recorded -= value;
                s.rate.record(-value, now);
            });
        }
    }

    /// Notes that a response was throttled for `ms` under `kind` (the
    /// throttle-time metrics).
    pub fn note_throttle(&self, kind: Kind, user: &str, client_id: &str, ms: u64) {
        if ms == 0 {
            return;
        }
        if let Some(r) = self.resolve(kind, user, client_id) {
            self.with_sensor(kind, &r, |s, _| {
                s.throttled += 1;
                s.throttle_ms_total += ms;
                s.last_throttle_ms = ms;
            });
        }
    }

    /// The most `kind` one request may take without being throttled even
    /// with nothing else in the window (Kafka's `getMaxValueInQuotaWindow`:
    /// quota × (samples − 1) × window); None: unlimited.
    pub fn max_in_window(&self, kind: Kind, user: &str, client_id: &str) -> Option<f64> {
        let r = self.resolve(kind, user, client_id)?;
        let s = &self.settings;
        Some(r.bound * (s.window_num.saturating_sub(1)) as f64 * (s.window_ms as f64 / 1000.0))
    }

    /// A controller-mutation quota for one request: strict (over the
    /// quota → THROTTLING_QUOTA_EXCEEDED) or permissive (accepted, then
    /// throttled), as Kafka picks by request version.
    pub fn mutation(self: &Arc<Self>, user: &str, client_id: &str, strict: bool) -> MutationQuota {
        MutationQuota {
            quotas: self.clone(),
            resolved: self.resolve(Kind::ControllerMutationRate, user, client_id),
            strict,
            throttle_ms: 0,
        }
    }

    /// The Prometheus text of every tracked entity.
    pub fn render(&self, out: &mut String) {
        let now = self.now();
        let mut sensors = self.sensors.lock().unwrap_or_else(|p| p.into_inner());
        let expiry = self.settings.idle_expiry_ms;
        sensors.retain(|_, s| now.saturating_sub(s.last_used) < expiry);
        let mut rows: Vec<_> = sensors.iter_mut().collect();
        rows.sort_by(|a, b| {
            (a.0.kind, &a.0.user, &a.0.client_id).cmp(&(b.0.kind, &b.0.user, &b.0.client_id))
        });
        let _ = writeln!(out, "# TYPE kaas_quota_entities gauge");
        let _ = writeln!(out, "kaas_quota_entities {}", rows.len());
        let _ = writeln!(out, "# TYPE kaas_quota_entities_evicted_total counter");
        let _ = writeln!(
            out,
            "kaas_quota_entities_evicted_total {}",
            self.evicted.load(Ordering::Relaxed)
        );
        let metrics: [(&str, &str, Reading); 5] = [
            ("kaas_quota_rate", "gauge", |s, now| s.rate.rate(now)),
            ("kaas_quota_recorded_total", "counter", |s, _| s.recorded),
            ("kaas_quota_throttled_total", "counter", |s, _| {
                s.throttled as f64
            }),
            ("kaas_quota_throttle_time_ms_total", "counter", |s, _| {
                s.throttle_ms_total as f64
            }),
            ("kaas_quota_throttle_time_ms", "gauge", |s, _| {
                s.last_throttle_ms as f64
            }),
        ];
        for (name, kind, f) in metrics {
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for (k, s) in rows.iter_mut() {
                let _ = writeln!(
                    out,
                    "{name}{{quota_type=\"{}\",user=\"{}\",client_id=\"{}\"}} {}",
                    k.kind.key(),
                    crate::metrics::escape(&k.user),
                    crate::metrics::escape(&k.client_id),
                    f(s, now)
                );
            }
        }
    }
}

/// One request's controller-mutation quota (Kafka's
/// `ControllerMutationQuota`): [`Self::admit`] before each mutation.
#[derive(Debug)]
pub struct MutationQuota {
    quotas: Arc<Quotas>,
    resolved: Option<Resolved>,
    strict: bool,
    /// The throttle time the request's mutations asked for.
    throttle_ms: u64,
}

impl MutationQuota {
    /// Asks to mutate `permits` partitions. Strict: refused (Err with the
    /// throttle time) when the bucket is already empty, else taken even if
    /// it goes below zero; permissive: always taken, the debt throttles.
    pub fn admit(&mut self, permits: u32) -> Result<(), u64> {
        let Some(r) = self.resolved.clone() else {
            return Ok(());
        };
        let (n, w) = (
            self.quotas.settings.window_num,
            self.quotas.settings.window_ms,
        );
        let strict = self.strict;
        let out = self
            .quotas
            .with_sensor(Kind::ControllerMutationRate, &r, |s, now| {
                let Some(b) = s.bucket.as_mut() else {
                    return Ok(0);
                };
                if strict {
                    let owed = b.throttle_ms(r.bound, n, w, now);
                    if owed > 0 {
                        return Err(owed);
                    }
                }
                b.take(f64::from(permits), r.bound, n, w, now);
                s.recorded += f64::from(permits);
                s.rate.record(f64::from(permits), now);
                Ok(if strict {
                    0
                } else {
                    b.throttle_ms(r.bound, n, w, now)
                })
            });
        match out {
            Ok(t) => {
                self.throttle_ms = self.throttle_ms.max(t);
                Ok(())
            }
            Err(t) => {
                self.throttle_ms = self.throttle_ms.max(t);
                Err(t)
            }
        }
    }

    /// The throttle time for the response (0: none).
    pub fn throttle_ms(&self) -> u64 {
        self.throttle_ms
    }
}

#[cfg(test)]
mod tests {
    use super::entity::{Entity, Name};
    use super::*;

    fn table(user: &str, key: &str, v: f64) -> QuotaTable {
        let mut t = QuotaTable::default();
        t.apply(
            &Entity {
                user: Some(if user == "<default>" {
                    Name::Default
                } else {
                    Name::Named(user.into())
                }),
                client_id: None,
            },
            &[(key.into(), Some(v))],
        );
        t
    }

    #[test]
    fn without_a_quota_nothing_is_measured() {
        let q = Quotas::new(QuotaSettings::default(), QuotaTable::default());
        assert_eq!(q.record(Kind::ProducerByteRate, "a", "c", 1e9), 0);
        assert!(q.sensors.lock().unwrap().is_empty());
    }

    #[test]
    fn a_default_user_quota_is_measured_per_user_and_bounded_in_entities() {
        let s = QuotaSettings {
            max_entities: 3,
            ..Default::default()
        };
        let q = Quotas::new(s, table("<default>", "producer_byte_rate", 100.0));
        for i in 0..10 {
            q.record(Kind::ProducerByteRate, &format!("u{i}"), "c", 1.0);
        }
        assert_eq!(q.sensors.lock().unwrap().len(), 3);
        assert_eq!(q.evicted.load(Ordering::Relaxed), 7);
        // Many client ids of one user share its one measurement.
        let q = Quotas::new(
            QuotaSettings::default(),
            table("a", "producer_byte_rate", 100.0),
        );
        for i in 0..100 {
            q.record(Kind::ProducerByteRate, "a", &format!("c{i}"), 1.0);
        }
        assert_eq!(q.sensors.lock().unwrap().len(), 1);
    }

    #[test]
    fn request_percentage_throttle_is_bounded_at_one_window() {
        let q = Quotas::new(
            QuotaSettings::default(),
            table("a", "request_percentage", 1.0),
        );
        // 50 s of handler time in percent-seconds: far over 1 %.
        let t = q.record(Kind::RequestPercentage, "a", "c", 5000.0);
        assert_eq!(t, 1000);
    }

    #[test]
    fn strict_mutations_are_refused_once_the_bucket_is_empty() {
        let q = Arc::new(Quotas::new(
            QuotaSettings::default(),
            table("a", "controller_mutation_rate", 1.0),
        ));
        // Burst: 1/s × 10 s = 10 partitions.
        let mut m = q.mutation("a", "c", true);
        assert!(m.admit(25).is_ok());
        assert!(m.admit(1).is_err());
        assert!(m.throttle_ms() >= 14_000);
        // Permissive: accepted, and throttled.
        let mut p = q.mutation("a", "c", false);
        assert!(p.admit(1).is_ok());
        assert!(p.throttle_ms() >= 15_000);
        // Another user is not limited.
        let mut o = q.mutation("b", "c", true);
        assert!(o.admit(1000).is_ok());
        assert_eq!(o.throttle_ms(), 0);
    }

    #[test]
    fn metrics_name_each_entity() {
        let q = Quotas::new(
            QuotaSettings::default(),
            table("a\"b", "producer_byte_rate", 10.0),
        );
        let t = q.record(Kind::ProducerByteRate, "a\"b", "c", 1000.0);
        q.note_throttle(Kind::ProducerByteRate, "a\"b", "c", t);
        let mut out = String::new();
        q.render(&mut out);
        assert!(out.contains(
            "kaas_quota_throttled_total{quota_type=\"producer_byte_rate\",user=\"a\\\"b\",client_id=\"\"} 1"
        ), "{out}");
    }
}
