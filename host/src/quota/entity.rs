//! Client quota entities and the table of configured quotas: what
//! AlterClientQuotas may write (Kafka 3.7's checks and messages), what
//! DescribeClientQuotas filters match, and which configured entity governs
//! a (user, client id) pair. Pure data: no I/O, no clock.
//!
//! Precedence (Kafka's `DefaultQuotaCallback`), first match wins, per
//! quota type:
//! 1. `/users/<u>/clients/<c>`  2. `/users/<u>/clients/<default>`
//! 3. `/users/<u>`  4. `/users/<default>/clients/<c>`
//! 5. `/users/<default>/clients/<default>`  6. `/users/<default>`
//! 7. `/clients/<c>`  8. `/clients/<default>`
//!
//! The match also says which clients share one measurement (Kafka's
//! metric tags): a quota on a user alone (3, 6) is shared by all of that
//! user's client ids, one on client ids alone (7, 8) by all users of a
//! client id, the others per (user, client id).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// An entity name: a specific one or the `<default>` entity (a null name
/// on the wire).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Name {
    Default,
    Named(String),
}

impl Name {
    fn from_wire(name: Option<&str>) -> Self {
        name.map_or(Name::Default, |n| Name::Named(n.to_owned()))
    }

    /// The wire form: None for `<default>`.
    pub fn as_wire(&self) -> Option<&str> {
        match self {
            Name::Default => None,
            Name::Named(n) => Some(n),
        }
    }

    fn show(&self) -> &str {
        self.as_wire().unwrap_or("<default>")
    }
}

/// A quota entity: a user, a client id, or both.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Entity {
    pub user: Option<Name>,
    pub client_id: Option<Name>,
}

impl std::fmt::Display for Entity {
    /// Kafka's `ClientQuotaEntity` text, for error messages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(u) = &self.user {
            parts.push(format!("{USER}={}", u.as_wire().unwrap_or("null")));
        }
        if let Some(c) = &self.client_id {
            parts.push(format!("{CLIENT_ID}={}", c.as_wire().unwrap_or("null")));
        }
        write!(f, "ClientQuotaEntity(entries={{{}}})", parts.join(", "))
    }
}

impl Entity {
    /// The entity's components as (type, name) pairs, user first.
    pub fn components(&self) -> Vec<(&'static str, Option<&str>)> {
        let mut v = Vec::new();
        if let Some(u) = &self.user {
            v.push((USER, u.as_wire()));
        }
        if let Some(c) = &self.client_id {
            v.push((CLIENT_ID, c.as_wire()));
        }
        v
    }

    /// The path Kafka's docs name the level by (`/users/a/clients/<default>`).
    pub fn path(&self) -> String {
        let mut s = String::new();
        if let Some(u) = &self.user {
            s.push_str("/users/");
            s.push_str(u.show());
        }
        if let Some(c) = &self.client_id {
            s.push_str("/clients/");
            s.push_str(c.show());
        }
        s
    }
}

pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

/// The four client quota types kaas enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    ProducerByteRate,
    ConsumerByteRate,
    RequestPercentage,
    ControllerMutationRate,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::ProducerByteRate,
        Kind::ConsumerByteRate,
        Kind::RequestPercentage,
        Kind::ControllerMutationRate,
    ];

    /// The quota's config key.
    pub fn key(self) -> &'static str {
        match self {
            Kind::ProducerByteRate => "producer_byte_rate",
            Kind::ConsumerByteRate => "consumer_byte_rate",
            Kind::RequestPercentage => "request_percentage",
            Kind::ControllerMutationRate => "controller_mutation_rate",
        }
    }

    pub fn from_key(key: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.key() == key)
    }

    /// Kafka types the byte rates LONG, the others DOUBLE.
    fn is_long(self) -> bool {
        matches!(self, Kind::ProducerByteRate | Kind::ConsumerByteRate)
    }
}

/// What a (user, client id) pair is held to for one quota type: the bound
/// and the (user, client id) labels of the measurement it shares (empty
/// for a part the quota does not distinguish).
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub bound: f64,
    pub user: String,
    pub client_id: String,
    /// The configured entity that matched, for logs.
    pub level: usize,
}

/// A refusal: a Kafka error code and message.
pub type Refusal = (i16, String);

/// Every configured quota: entity → (key → value). Stored (file, etcd)
/// as a list of entries, JSON maps taking only string keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "Stored", into = "Stored")]
pub struct QuotaTable {
    entries: BTreeMap<Entity, BTreeMap<String, f64>>,
}

/// The stored form of a [`QuotaTable`].
#[derive(Serialize, Deserialize)]
struct Stored {
    entries: Vec<StoredEntry>,
}

#[derive(Serialize, Deserialize)]
struct StoredEntry {
    entity: Entity,
    quotas: BTreeMap<String, f64>,
}

impl From<Stored> for QuotaTable {
    fn from(s: Stored) -> Self {
        QuotaTable {
            entries: s
                .entries
                .into_iter()
                .filter(|e| !e.quotas.is_empty())
                .map(|e| (e.entity, e.quotas))
                .collect(),
        }
    }
}

impl From<QuotaTable> for Stored {
    fn from(t: QuotaTable) -> Self {
        Stored {
            entries: t
                .entries
                .into_iter()
                .map(|(entity, quotas)| StoredEntry { entity, quotas })
                .collect(),
        }
    }
}

/// One requested change: set `key` to a value, or remove it (None).
pub type Op = (String, Option<f64>);

impl QuotaTable {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every entity with its quotas.
    pub fn iter(&self) -> impl Iterator<Item = (&Entity, &BTreeMap<String, f64>)> {
        self.entries.iter()
    }

    /// Whether any entity sets quota `kind` (Kafka's `quotasEnabled`).
    pub fn has(&self, kind: Kind) -> bool {
        self.entries.values().any(|q| q.contains_key(kind.key()))
    }

    fn get(&self, user: Option<Name>, client: Option<Name>, kind: Kind) -> Option<f64> {
        let e = Entity {
            user,
            client_id: client,
        };
        self.entries.get(&e)?.get(kind.key()).copied()
    }

    /// The quota of type `kind` that governs `user` with `client_id`, by
    /// Kafka's precedence; None: unlimited.
    pub fn resolve(&self, kind: Kind, user: &str, client_id: &str) -> Option<Resolved> {
        let u = || Some(Name::Named(user.to_owned()));
        let c = || Some(Name::Named(client_id.to_owned()));
        let d = || Some(Name::Default);
        let levels: [(Option<Name>, Option<Name>, bool, bool); 8] = [
            (u(), c(), true, true),
            (u(), d(), true, true),
            (u(), None, true, false),
            (d(), c(), true, true),
            (d(), d(), true, true),
            (d(), None, true, false),
            (None, c(), false, true),
            (None, d(), false, true),
        ];
        levels
            .into_iter()
            .enumerate()
            .find_map(|(i, (eu, ec, by_user, by_client))| {
                self.get(eu, ec, kind).map(|bound| Resolved {
                    bound,
                    user: if by_user {
                        user.to_owned()
                    } else {
                        String::new()
                    },
                    client_id: if by_client {
                        client_id.to_owned()
                    } else {
                        String::new()
                    },
                    level: i + 1,
                })
            })
    }

    /// Applies one entity's validated changes (removing an entity whose
    /// last quota goes).
    pub fn apply(&mut self, entity: &Entity, ops: &[Op]) {
        let quotas = self.entries.entry(entity.clone()).or_default();
        for (k, v) in ops {
            match v {
                Some(v) => {
                    quotas.insert(k.clone(), *v);
                }
                None => {
                    quotas.remove(k);
                }
            }
        }
        if quotas.is_empty() {
            self.entries.remove(entity);
        }
    }
}

/// Checks one AlterClientQuotas entry's entity (Kafka's `validateEntity`
/// and the allowed type combinations).
pub fn parse_entity(components: &[(&str, Option<&str>)]) -> Result<Entity, Refusal> {
    use crate::codes::INVALID_REQUEST;
    if components.is_empty() {
        return Err((INVALID_REQUEST, "Invalid empty client quota entity".into()));
    }
    let mut seen = BTreeSet::new();
    let mut entity = Entity {
        user: None,
        client_id: None,
    };
    let mut ip = false;
    for &(ty, name) in components {
        if !seen.insert(ty) {
            return Err((
                INVALID_REQUEST,
                format!("Invalid empty client quota entity, duplicate entity entry {ty}"),
            ));
        }
        match ty {
            USER => entity.user = Some(Name::from_wire(name)),
            CLIENT_ID => entity.client_id = Some(Name::from_wire(name)),
            IP => ip = true,
            _ => {
                return Err((
                    INVALID_REQUEST,
                    format!("Unhandled client quota entity type: {ty}"),
                ));
            }
        }
        if name == Some("") {
            return Err((INVALID_REQUEST, format!("Empty {ty} not supported")));
        }
    }
    if ip {
        if entity.user.is_some() || entity.client_id.is_some() {
            return Err((INVALID_REQUEST, "Invalid empty client quota entity".into()));
        }
        return Err((
            INVALID_REQUEST,
            "kaas does not enforce ip quotas (connection_creation_rate); see docs/design.md \
             \"Client quotas\""
                .into(),
        ));
    }
    Ok(entity)
}

/// Checks one entity's ops: no key twice, known keys, LONG keys integral,
/// values positive.
pub fn check_ops(entity: &Entity, ops: &[Op]) -> Result<(), Refusal> {
    use crate::codes::INVALID_REQUEST;
    let mut seen = BTreeSet::new();
    for (key, _) in ops {
        if !seen.insert(key.as_str()) {
            return Err((
                INVALID_REQUEST,
                format!("Duplicate quota key {key} not updating quota for this entity {entity}"),
            ));
        }
    }
    for (key, value) in ops {
        let Some(value) = value else { continue };
        let Some(kind) = Kind::from_key(key) else {
            return Err((INVALID_REQUEST, format!("Invalid configuration key {key}")));
        };
        if kind.is_long() {
            let eps = 1e-6;
            let whole = (value + eps).trunc();
            if (whole - value).abs() > eps {
                return Err((
                    INVALID_REQUEST,
                    format!("Configuration {key} must be a Long value"),
                ));
            }
        }
        if !value.is_finite() || *value <= 0.0 {
            return Err((
                INVALID_REQUEST,
                format!("Configuration {key} must be a positive number, not {value}"),
            ));
        }
    }
    Ok(())
}

/// A DescribeClientQuotas filter, checked (Kafka's `ClientQuotasImage
/// .describe` rules).
#[derive(Debug, Default)]
pub struct Filter {
    /// Entity type → the exact name (None: `<default>`).
    exact: BTreeMap<String, Option<String>>,
    /// Entity types that must be present with a specified name.
    specified: BTreeSet<String>,
    strict: bool,
}

pub const MATCH_EXACT: i8 = 0;
pub const MATCH_DEFAULT: i8 = 1;
pub const MATCH_SPECIFIED: i8 = 2;

impl Filter {
    /// Parses (entity type, match type, match) components.
    pub fn parse(components: &[(&str, i8, Option<&str>)], strict: bool) -> Result<Self, Refusal> {
        use crate::codes::{INVALID_REQUEST, UNSUPPORTED_VERSION};
        let mut f = Filter {
            strict,
            ..Default::default()
        };
        for &(ty, mt, m) in components {
            if ty.is_empty() {
                return Err((INVALID_REQUEST, "Invalid empty entity type.".into()));
            }
            if f.exact.contains_key(ty) || f.specified.contains(ty) {
                return Err((
                    INVALID_REQUEST,
                    format!("Entity type {ty} cannot appear more than once in the filter."),
                ));
            }
            if ![USER, CLIENT_ID, IP].contains(&ty) {
                return Err((UNSUPPORTED_VERSION, format!("Unsupported entity type {ty}")));
            }
            match mt {
                MATCH_EXACT => {
                    let Some(m) = m else {
                        return Err((
                            INVALID_REQUEST,
                            "Request specified MATCH_TYPE_EXACT, but set match string to null."
                                .into(),
                        ));
                    };
                    f.exact.insert(ty.to_owned(), Some(m.to_owned()));
                }
                MATCH_DEFAULT => {
                    if m.is_some() {
                        return Err((
                            INVALID_REQUEST,
                            "Request specified MATCH_TYPE_DEFAULT, but also specified a match \
                             string."
                                .into(),
                        ));
                    }
                    f.exact.insert(ty.to_owned(), None);
                }
                MATCH_SPECIFIED => {
                    if m.is_some() {
                        return Err((
                            INVALID_REQUEST,
                            "Request specified MATCH_TYPE_SPECIFIED, but also specified a match \
                             string."
                                .into(),
                        ));
                    }
                    f.specified.insert(ty.to_owned());
                }
                other => {
                    return Err((UNSUPPORTED_VERSION, format!("Unknown match type {other}")));
                }
            }
        }
        let has = |t: &str| f.exact.contains_key(t) || f.specified.contains(t);
        if has(IP) && (has(USER) || has(CLIENT_ID)) {
            return Err((
                INVALID_REQUEST,
                "Invalid entity filter component combination. IP filter component should not \
                 be used with user or clientId filter component."
                    .into(),
            ));
        }
        Ok(f)
    }

    /// Whether `entity` matches: every component of the filter is met;
    /// strict: the entity has no other component.
    pub fn matches(&self, entity: &Entity) -> bool {
        let comps: BTreeMap<&str, Option<&str>> = entity.components().into_iter().collect();
        if self.strict && comps.len() != self.exact.len() + self.specified.len() {
            return false;
        }
        self.exact
            .iter()
            .all(|(t, n)| comps.get(t.as_str()) == Some(&n.as_deref()))
            && self
                .specified
                .iter()
                .all(|t| matches!(comps.get(t.as_str()), Some(Some(_))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Option<Name> {
        Some(if s == "<default>" {
            Name::Default
        } else {
            Name::Named(s.into())
        })
    }

    fn set(t: &mut QuotaTable, user: Option<Name>, client: Option<Name>, v: f64) {
        let e = Entity {
            user,
            client_id: client,
        };
        t.apply(&e, &[("producer_byte_rate".into(), Some(v))]);
    }

    /// Every one of the eight levels, most specific first: removing the
    /// winner hands the decision to the next.
    #[test]
    fn the_eight_levels_match_in_kafkas_order() {
        let mut t = QuotaTable::default();
        let levels = [
            (n("alice"), n("app")),
            (n("alice"), n("<default>")),
            (n("alice"), None),
            (n("<default>"), n("app")),
            (n("<default>"), n("<default>")),
            (n("<default>"), None),
            (None, n("app")),
            (None, n("<default>")),
        ];
        for (i, (u, c)) in levels.iter().enumerate() {
            set(&mut t, u.clone(), c.clone(), (i + 1) as f64 * 100.0);
        }
        for (i, (u, c)) in levels.iter().enumerate() {
            let r = t.resolve(Kind::ProducerByteRate, "alice", "app").unwrap();
            assert_eq!(r.level, i + 1);
            assert_eq!(r.bound, (i + 1) as f64 * 100.0);
            let e = Entity {
                user: u.clone(),
                client_id: c.clone(),
            };
            t.apply(&e, &[("producer_byte_rate".into(), None)]);
        }
        assert!(t.resolve(Kind::ProducerByteRate, "alice", "app").is_none());
        assert!(t.is_empty());
    }

    #[test]
    fn a_user_quota_is_shared_by_its_client_ids_and_a_client_quota_by_its_users() {
        let mut t = QuotaTable::default();
        set(&mut t, n("alice"), None, 1000.0);
        set(&mut t, None, n("<default>"), 50.0);
        let a = t.resolve(Kind::ProducerByteRate, "alice", "x").unwrap();
        assert_eq!((a.user.as_str(), a.client_id.as_str()), ("alice", ""));
        let b = t.resolve(Kind::ProducerByteRate, "bob", "x").unwrap();
        assert_eq!(
            (b.user.as_str(), b.client_id.as_str(), b.bound),
            ("", "x", 50.0)
        );
        // Other quota types are independent.
        assert!(t.resolve(Kind::ConsumerByteRate, "alice", "x").is_none());
    }

    #[test]
    fn alter_validation_answers_kafkas_messages() {
        let bad = |c: &[(&str, Option<&str>)]| parse_entity(c).unwrap_err().1;
        assert_eq!(bad(&[]), "Invalid empty client quota entity");
        assert_eq!(
            bad(&[("group", Some("g"))]),
            "Unhandled client quota entity type: group"
        );
        assert_eq!(bad(&[("user", Some(""))]), "Empty user not supported");
        assert_eq!(
            bad(&[("user", Some("a")), ("user", Some("b"))]),
            "Invalid empty client quota entity, duplicate entity entry user"
        );
        let e = parse_entity(&[("user", Some("a")), ("client-id", None)]).unwrap();
        assert_eq!(e.path(), "/users/a/clients/<default>");
        let ops = |o: &[(&str, Option<f64>)]| -> Vec<Op> {
            o.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        assert_eq!(
            check_ops(&e, &ops(&[("producer_byte_rate", Some(1.5))]))
                .unwrap_err()
                .1,
            "Configuration producer_byte_rate must be a Long value"
        );
        assert_eq!(
            check_ops(&e, &ops(&[("foo", Some(1.0))])).unwrap_err().1,
            "Invalid configuration key foo"
        );
        assert!(
            check_ops(
                &e,
                &ops(&[
                    ("request_percentage", Some(1.5)),
                    ("x", Some(1.0)),
                    ("x", None)
                ])
            )
            .unwrap_err()
            .1
            .starts_with("Duplicate quota key x")
        );
        check_ops(
            &e,
            &ops(&[("request_percentage", Some(1.5)), ("nope", None)]),
        )
        .unwrap();
    }

    #[test]
    fn describe_filters_match_exact_default_specified_and_strict() {
        let a = Entity {
            user: n("a"),
            client_id: None,
        };
        let ad = Entity {
            user: n("a"),
            client_id: n("<default>"),
        };
        let d = Entity {
            user: n("<default>"),
            client_id: None,
        };
        let f = Filter::parse(&[("user", MATCH_EXACT, Some("a"))], false).unwrap();
        assert!(f.matches(&a) && f.matches(&ad) && !f.matches(&d));
        let f = Filter::parse(&[("user", MATCH_EXACT, Some("a"))], true).unwrap();
        assert!(f.matches(&a) && !f.matches(&ad));
        let f = Filter::parse(&[("user", MATCH_DEFAULT, None)], false).unwrap();
        assert!(!f.matches(&a) && f.matches(&d));
        let f = Filter::parse(&[("user", MATCH_SPECIFIED, None)], false).unwrap();
        assert!(f.matches(&a) && f.matches(&ad) && !f.matches(&d));
        let f = Filter::parse(&[], false).unwrap();
        assert!(f.matches(&a) && f.matches(&d));
        let f = Filter::parse(&[], true).unwrap();
        assert!(!f.matches(&a));
        let err = |c: &[(&str, i8, Option<&str>)]| Filter::parse(c, false).unwrap_err();
        assert_eq!(
            err(&[("x", 0, Some("a"))]).0,
            crate::codes::UNSUPPORTED_VERSION
        );
        assert_eq!(
            err(&[("user", 0, None)]).1,
            "Request specified MATCH_TYPE_EXACT, but set match string to null."
        );
        assert_eq!(err(&[("user", 7, None)]).1, "Unknown match type 7");
        assert_eq!(
            err(&[("user", 1, None), ("user", 2, None)]).1,
            "Entity type user cannot appear more than once in the filter."
        );
    }
}
