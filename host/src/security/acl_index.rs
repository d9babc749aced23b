//! The ACL engine: the set of ACLs, indexed so one decision looks only at
//! the ACLs that can match its resource, and the decision rules of Kafka
//! 3.7's StandardAuthorizer (research notes §2). Pure: no I/O, no locks,
//! no configuration beyond what a decision is handed.
//!
//! Index: per resource type, literal names in a hash map (the wildcard
//! resource `*` is the literal name `*`) and prefixed names in a sorted
//! map, where the prefixes of a name are found by walking down from the
//! name itself (one map step per matching prefix, plus one per point where
//! the walk diverges), never by scanning every ACL.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::ops::Bound;

use super::acl::{AclBinding, Operation, PatternType, Permission, ResourceType};
use super::session::Principal;

/// The literal resource name matching every name of its type.
pub const WILDCARD: &str = "*";

/// The name KIP-679's by-resource-type check first tries as a literal
/// resource (so super users and the no-ACL default apply to it).
pub const HARDCODE: &str = "hardcode";

/// An ACL's host, parsed once.
#[derive(Debug, Clone, PartialEq, Eq)]
enum AclHost {
    Any,
    Ip(IpAddr),
    /// Not an address (only from a hand-edited store): matches no client.
    Never,
}

impl AclHost {
    fn parse(s: &str) -> Self {
        if s == WILDCARD {
            AclHost::Any
        } else {
            s.parse().map_or(AclHost::Never, AclHost::Ip)
        }
    }

    fn matches(&self, ip: IpAddr) -> bool {
        match self {
            AclHost::Any => true,
            AclHost::Ip(a) => *a == ip,
            AclHost::Never => false,
        }
    }
}

/// One ACL's entry, as stored under its resource pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ace {
    principal: Principal,
    host: AclHost,
    operation: Operation,
    permission: Permission,
}

impl Ace {
    fn of(b: &AclBinding) -> Self {
        Ace {
            principal: b.principal.clone(),
            host: AclHost::parse(&b.host),
            operation: b.operation,
            permission: b.permission,
        }
    }

    /// The entry is for `who` (or every user) connecting from `ip`.
    fn applies_to(&self, who: &Principal, ip: IpAddr) -> bool {
        (self.principal == *who || is_wildcard_principal(&self.principal)) && self.host.matches(ip)
    }
}

/// `User:*`: every principal.
fn is_wildcard_principal(p: &Principal) -> bool {
    p.kind == "User" && p.name == WILDCARD
}

/// An ALLOW ACL for `acl` grants `op`: ALL grants everything; READ,
/// WRITE, DELETE and ALTER grant DESCRIBE; ALTER_CONFIGS grants
/// DESCRIBE_CONFIGS.
pub fn allow_covers(acl: Operation, op: Operation) -> bool {
    acl == Operation::All
        || acl == op
        || (op == Operation::Describe
            && matches!(
                acl,
                Operation::Read | Operation::Write | Operation::Delete | Operation::Alter
            ))
        || (op == Operation::DescribeConfigs && acl == Operation::AlterConfigs)
}

/// A DENY ACL for `acl` refuses `op`: only the same operation, or ALL.
pub fn deny_covers(acl: Operation, op: Operation) -> bool {
    acl == Operation::All || acl == op
}

/// The ACLs of one resource type.
#[derive(Debug, Default)]
struct TypeIndex {
    literal: HashMap<String, Vec<Ace>>,
    prefixed: BTreeMap<String, Vec<Ace>>,
}

impl TypeIndex {
    fn section(&mut self, pattern: PatternType, name: &str) -> &mut Vec<Ace> {
        match pattern {
            PatternType::Literal => self.literal.entry(name.to_owned()).or_default(),
            PatternType::Prefixed => self.prefixed.entry(name.to_owned()).or_default(),
        }
    }

    fn remove(&mut self, b: &AclBinding) {
        let ace = Ace::of(b);
        let drop_from = |v: &mut Vec<Ace>| {
            v.retain(|a| *a != ace);
            v.is_empty()
        };
        match b.pattern_type {
            PatternType::Literal => {
                if self
                    .literal
                    .get_mut(&b.resource_name)
                    .is_some_and(drop_from)
                {
                    self.literal.remove(&b.resource_name);
                }
            }
            PatternType::Prefixed => {
                if self
                    .prefixed
                    .get_mut(&b.resource_name)
                    .is_some_and(drop_from)
                {
                    self.prefixed.remove(&b.resource_name);
                }
            }
        }
    }

    /// Every group of entries whose pattern matches the literal `name`.
    fn candidates<'a>(&'a self, name: &str) -> Vec<&'a [Ace]> {
        let mut out: Vec<&[Ace]> = Vec::new();
        if let Some(v) = self.literal.get(name) {
            out.push(v);
        }
        if name != WILDCARD
            && let Some(v) = self.literal.get(WILDCARD)
        {
            out.push(v);
        }
        prefixes_of(&self.prefixed, name, &mut out);
        out
    }
}

/// Pushes the entries of every key of `map` that is a prefix of `name`.
/// Walks down from `name`: the greatest key not above the bound is either
/// a prefix (taken; the bound moves just below it) or diverges from `name`
/// at some byte, and then no longer prefix of `name` lies between the
/// common part and that key, so the bound moves to the common part.
fn prefixes_of<'a>(map: &'a BTreeMap<String, Vec<Ace>>, name: &str, out: &mut Vec<&'a [Ace]>) {
    let mut upper: Bound<&str> = Bound::Included(name);
    while let Some((k, v)) = map.range::<str, _>((Bound::Unbounded, upper)).next_back() {
        if name.starts_with(k.as_str()) {
            out.push(v);
            if k.is_empty() {
                return;
            }
            upper = Bound::Excluded(k.as_str());
        } else {
            let mut common = k
                .bytes()
                .zip(name.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            while !name.is_char_boundary(common) {
                common -= 1;
            }
            // `name[..common]` is a proper prefix of `k`, so below it: the
            // walk only goes down.
            upper = Bound::Included(name.get(..common).unwrap_or(""));
        }
    }
}

/// The ACLs a broker enforces, in canonical order and indexed.
#[derive(Debug, Default)]
pub struct AclIndex {
    all: BTreeSet<AclBinding>,
    types: BTreeMap<ResourceType, TypeIndex>,
}

impl AclIndex {
    pub fn new(acls: impl IntoIterator<Item = AclBinding>) -> Self {
        let mut idx = AclIndex::default();
        for a in acls {
            idx.insert(a);
        }
        idx
    }

    /// Adds an ACL; false if it was there already.
    pub fn insert(&mut self, b: AclBinding) -> bool {
        if self.all.contains(&b) {
            return false;
        }
        self.types
            .entry(b.resource_type)
            .or_default()
            .section(b.pattern_type, &b.resource_name)
            .push(Ace::of(&b));
        self.all.insert(b);
        true
    }

    /// Removes an ACL; false if it was not there.
    pub fn remove(&mut self, b: &AclBinding) -> bool {
        if !self.all.remove(b) {
            return false;
        }
        if let Some(t) = self.types.get_mut(&b.resource_type) {
            t.remove(b);
        }
        true
    }

    pub fn len(&self) -> usize {
        self.all.len()
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    pub fn contains(&self, b: &AclBinding) -> bool {
        self.all.contains(b)
    }

    /// Every ACL, in canonical order.
    pub fn iter(&self) -> impl Iterator<Item = &AclBinding> {
        self.all.iter()
    }

    /// The ACLs' verdict on `who` from `ip` performing `op` on the literal
    /// resource (`rt`, `name`): Some(false) when a DENY applies, or when
    /// some ACL is on the resource but none allows; Some(true) when an
    /// ALLOW applies and no DENY; None when no ACL at all is on the
    /// resource (the caller's default decides).
    pub fn decide(
        &self,
        who: &Principal,
        ip: IpAddr,
        op: Operation,
        rt: ResourceType,
        name: &str,
    ) -> Option<bool> {
        let sections = self.types.get(&rt)?.candidates(name);
        if sections.iter().all(|s| s.is_empty()) {
            return None;
        }
        let applicable = || {
            sections
                .iter()
                .flat_map(|s| s.iter())
                .filter(|a| a.applies_to(who, ip))
        };
        if applicable().any(|a| a.permission == Permission::Deny && deny_covers(a.operation, op)) {
            return Some(false);
        }
        Some(
            applicable()
                .any(|a| a.permission == Permission::Allow && allow_covers(a.operation, op)),
        )
    }

    /// KIP-679's by-resource-type rule, after the caller's literal check of
    /// [`HARDCODE`] failed: a DENY on literal `*` denies; an ALLOW on
    /// literal `*` allows; otherwise some ALLOW (literal or prefixed) must
    /// not be dominated by a DENY (a literal DENY of the same name for a
    /// literal ALLOW, or a prefixed DENY of a prefix of the allowed name).
    /// Only ACLs for exactly `op` (or ALL) count: no implied operations.
    pub fn any_of_type(
        &self,
        who: &Principal,
        ip: IpAddr,
        op: Operation,
        rt: ResourceType,
    ) -> bool {
        let Some(t) = self.types.get(&rt) else {
            return false;
        };
        let counts = |a: &Ace| a.applies_to(who, ip) && deny_covers(a.operation, op);
        let literal_deny: BTreeSet<&str> = t
            .literal
            .iter()
            .filter(|(_, v)| {
                v.iter()
                    .any(|a| counts(a) && a.permission == Permission::Deny)
            })
            .map(|(k, _)| k.as_str())
            .collect();
        if literal_deny.contains(WILDCARD) {
            return false;
        }
        let has =
            |v: &Vec<Ace>, perm: Permission| v.iter().any(|a| counts(a) && a.permission == perm);
        if t.literal
            .get(WILDCARD)
            .is_some_and(|v| has(v, Permission::Allow))
        {
            return true;
        }
        let prefix_deny: BTreeSet<&str> = t
            .prefixed
            .iter()
            .filter(|(_, v)| has(v, Permission::Deny))
            .map(|(k, _)| k.as_str())
            .collect();
        let dominated_by_prefix = |name: &str| {
            name.char_indices()
                .map(|(i, c)| i + c.len_utf8())
                .any(|end| name.get(..end).is_some_and(|p| prefix_deny.contains(p)))
        };
        let literal_ok = t.literal.iter().any(|(name, v)| {
            has(v, Permission::Allow)
                && !literal_deny.contains(name.as_str())
                && !dominated_by_prefix(name)
        });
        literal_ok
            || t.prefixed
                .iter()
                .any(|(name, v)| has(v, Permission::Allow) && !dominated_by_prefix(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7));

    fn acl(
        rt: ResourceType,
        pattern: PatternType,
        name: &str,
        principal: &str,
        op: Operation,
        perm: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type: rt,
            resource_name: name.into(),
            pattern_type: pattern,
            principal: Principal::parse(principal).unwrap(),
            host: "*".into(),
            operation: op,
            permission: perm,
        }
    }

    fn topic(
        pattern: PatternType,
        name: &str,
        who: &str,
        op: Operation,
        perm: Permission,
    ) -> AclBinding {
        acl(ResourceType::Topic, pattern, name, who, op, perm)
    }

    fn alice() -> Principal {
        Principal::user("alice")
    }

    use Operation::*;
    use PatternType::*;
    use Permission::*;

    #[test]
    fn a_literal_allow_grants_only_its_own_name() {
        let idx = AclIndex::new([topic(Literal, "foo", "User:alice", Read, Allow)]);
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Topic, "foo"),
            Some(true)
        );
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Topic, "foobar"),
            None
        );
        assert_eq!(
            idx.decide(&alice(), IP, Write, ResourceType::Topic, "foo"),
            Some(false)
        );
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Group, "foo"),
            None
        );
    }

    #[test]
    fn a_prefixed_allow_grants_every_name_starting_with_it() {
        let idx = AclIndex::new([topic(Prefixed, "foo", "User:alice", Read, Allow)]);
        for name in ["foo", "foobar", "foo.x"] {
            assert_eq!(
                idx.decide(&alice(), IP, Read, ResourceType::Topic, name),
                Some(true),
                "{name}"
            );
        }
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Topic, "fo"),
            None
        );
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Topic, "bar"),
            None
        );
    }

    #[test]
    fn a_prefixed_star_is_a_prefix_not_a_wildcard() {
        let idx = AclIndex::new([topic(Prefixed, "*", "User:alice", Read, Allow)]);
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Topic, "foo"),
            None
        );
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Topic, "*x"),
            Some(true)
        );
    }

    #[test]
    fn a_literal_star_allow_grants_every_name() {
        let idx = AclIndex::new([topic(Literal, "*", "User:alice", Write, Allow)]);
        assert_eq!(
            idx.decide(&alice(), IP, Write, ResourceType::Topic, "anything"),
            Some(true)
        );
    }

    #[test]
    fn prefixes_are_found_among_many_unrelated_prefixed_acls() {
        let mut acls = vec![
            topic(Prefixed, "f", "User:alice", Read, Allow),
            topic(Prefixed, "foo", "User:alice", Write, Allow),
            topic(Prefixed, "foob", "User:alice", Delete, Allow),
        ];
        for other in ["fa", "fb", "fooa", "foobaz", "fop", "g", "eeee", "foobar2"] {
            acls.push(topic(Prefixed, other, "User:bob", Read, Allow));
        }
        let idx = AclIndex::new(acls);
        let mut out = Vec::new();
        prefixes_of(
            &idx.types[&ResourceType::Topic].prefixed,
            "foobar",
            &mut out,
        );
        assert_eq!(out.len(), 3, "f, foo and foob are the prefixes of foobar");
        for op in [Read, Write, Delete] {
            assert_eq!(
                idx.decide(&alice(), IP, op, ResourceType::Topic, "foobar"),
                Some(true),
                "{op:?}"
            );
        }
    }

    #[test]
    fn prefixes_of_multibyte_names_are_found() {
        let idx = AclIndex::new([
            topic(Prefixed, "é", "User:alice", Read, Allow),
            topic(Prefixed, "éz", "User:bob", Read, Allow),
        ]);
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Topic, "éa"),
            Some(true)
        );
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Topic, "èa"),
            None
        );
    }

    #[test]
    fn deny_on_a_prefix_beats_a_literal_allow() {
        let idx = AclIndex::new([
            topic(Literal, "foobar", "User:alice", Read, Allow),
            topic(Prefixed, "foo", "User:alice", Read, Deny),
        ]);
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Topic, "foobar"),
            Some(false)
        );
    }

    #[test]
    fn deny_on_the_wildcard_beats_a_literal_allow() {
        let idx = AclIndex::new([
            topic(Literal, "foo", "User:alice", Read, Allow),
            topic(Literal, "*", "User:*", Read, Deny),
        ]);
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Topic, "foo"),
            Some(false)
        );
    }

    #[test]
    fn write_implies_describe_but_deny_read_does_not_deny_describe() {
        let idx = AclIndex::new([
            topic(Literal, "t", "User:alice", Write, Allow),
            topic(Literal, "t", "User:alice", Read, Deny),
        ]);
        assert_eq!(
            idx.decide(&alice(), IP, Describe, ResourceType::Topic, "t"),
            Some(true)
        );
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Topic, "t"),
            Some(false)
        );
    }

    #[test]
    fn read_delete_and_alter_imply_describe_and_alter_configs_implies_describe_configs() {
        for op in [Read, Delete, Alter] {
            let idx = AclIndex::new([topic(Literal, "t", "User:alice", op, Allow)]);
            assert_eq!(
                idx.decide(&alice(), IP, Describe, ResourceType::Topic, "t"),
                Some(true),
                "{op:?}"
            );
            assert_eq!(
                idx.decide(&alice(), IP, DescribeConfigs, ResourceType::Topic, "t"),
                Some(false)
            );
        }
        let idx = AclIndex::new([topic(Literal, "t", "User:alice", AlterConfigs, Allow)]);
        assert_eq!(
            idx.decide(&alice(), IP, DescribeConfigs, ResourceType::Topic, "t"),
            Some(true)
        );
        assert_eq!(
            idx.decide(&alice(), IP, Describe, ResourceType::Topic, "t"),
            Some(false)
        );
        let idx = AclIndex::new([topic(Literal, "t", "User:alice", Create, Allow)]);
        assert_eq!(
            idx.decide(&alice(), IP, Describe, ResourceType::Topic, "t"),
            Some(false)
        );
    }

    #[test]
    fn allow_all_grants_every_operation_and_deny_all_refuses_every_operation() {
        let idx = AclIndex::new([topic(Literal, "t", "User:alice", All, Allow)]);
        for op in [
            Read,
            Write,
            Create,
            Delete,
            Alter,
            Describe,
            DescribeConfigs,
            AlterConfigs,
        ] {
            assert_eq!(
                idx.decide(&alice(), IP, op, ResourceType::Topic, "t"),
                Some(true),
                "{op:?}"
            );
        }
        let idx = AclIndex::new([
            topic(Literal, "t", "User:alice", All, Allow),
            topic(Prefixed, "t", "User:alice", All, Deny),
        ]);
        for op in [Read, Write, Describe] {
            assert_eq!(
                idx.decide(&alice(), IP, op, ResourceType::Topic, "t"),
                Some(false),
                "{op:?}"
            );
        }
    }

    #[test]
    fn an_acl_for_the_wildcard_user_applies_to_everyone() {
        let idx = AclIndex::new([topic(Literal, "t", "User:*", Read, Allow)]);
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Topic, "t"),
            Some(true)
        );
        assert_eq!(
            idx.decide(&Principal::user("bob"), IP, Read, ResourceType::Topic, "t"),
            Some(true)
        );
    }

    #[test]
    fn an_acl_for_someone_else_on_the_resource_denies_with_no_verdict_left_to_the_default() {
        let idx = AclIndex::new([topic(Literal, "t", "User:bob", Read, Allow)]);
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Topic, "t"),
            Some(false)
        );
    }

    #[test]
    fn an_acl_host_must_equal_the_client_address_or_be_star() {
        let mut b = topic(Literal, "t", "User:alice", Read, Allow);
        b.host = "10.0.0.8".into();
        let idx = AclIndex::new([b.clone()]);
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Topic, "t"),
            Some(false)
        );
        b.host = "10.0.0.7".into();
        let idx = AclIndex::new([b.clone()]);
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Topic, "t"),
            Some(true)
        );
        b.host = "::ffff:10.0.0.7".into();
        let idx = AclIndex::new([b]);
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Topic, "t"),
            Some(false),
            "no mapping between families"
        );
    }

    #[test]
    fn removing_the_last_acl_of_a_resource_leaves_no_acl_on_it() {
        let b = topic(Prefixed, "foo", "User:alice", Read, Allow);
        let mut idx = AclIndex::new([b.clone()]);
        assert!(!idx.insert(b.clone()), "a duplicate is not added twice");
        assert_eq!(idx.len(), 1);
        assert!(idx.remove(&b));
        assert!(!idx.remove(&b));
        assert_eq!(
            idx.decide(&alice(), IP, Read, ResourceType::Topic, "foo"),
            None
        );
        assert!(idx.is_empty());
    }

    #[test]
    fn by_type_a_literal_star_deny_refuses_and_a_literal_star_allow_grants() {
        let idx = AclIndex::new([
            topic(Literal, "a", "User:alice", Write, Allow),
            topic(Literal, "*", "User:alice", Write, Deny),
        ]);
        assert!(!idx.any_of_type(&alice(), IP, Write, ResourceType::Topic));
        let idx = AclIndex::new([topic(Literal, "*", "User:*", Write, Allow)]);
        assert!(idx.any_of_type(&alice(), IP, Write, ResourceType::Topic));
    }

    #[test]
    fn by_type_an_allow_not_dominated_by_a_deny_grants() {
        let idx = AclIndex::new([
            topic(Literal, "a", "User:alice", Write, Allow),
            topic(Literal, "a", "User:alice", Write, Deny),
        ]);
        assert!(
            !idx.any_of_type(&alice(), IP, Write, ResourceType::Topic),
            "literal deny of the same name"
        );
        let idx = AclIndex::new([
            topic(Prefixed, "foobar", "User:alice", Write, Allow),
            topic(Literal, "foo", "User:alice", Write, Allow),
            topic(Prefixed, "foo", "User:alice", Write, Deny),
        ]);
        assert!(
            !idx.any_of_type(&alice(), IP, Write, ResourceType::Topic),
            "prefix deny dominates both"
        );
        let idx = AclIndex::new([
            topic(Prefixed, "foo", "User:alice", Write, Allow),
            topic(Literal, "foo", "User:alice", Write, Deny),
        ]);
        assert!(
            idx.any_of_type(&alice(), IP, Write, ResourceType::Topic),
            "a literal deny does not dominate a prefix"
        );
        let idx = AclIndex::new([
            topic(Prefixed, "fo", "User:alice", Write, Allow),
            topic(Prefixed, "foo", "User:alice", Write, Deny),
        ]);
        assert!(
            idx.any_of_type(&alice(), IP, Write, ResourceType::Topic),
            "a longer deny does not dominate"
        );
    }

    #[test]
    fn by_type_counts_only_the_exact_operation_or_all() {
        let idx = AclIndex::new([topic(Literal, "a", "User:alice", Read, Allow)]);
        assert!(!idx.any_of_type(&alice(), IP, Write, ResourceType::Topic));
        let idx = AclIndex::new([topic(Literal, "a", "User:alice", All, Allow)]);
        assert!(idx.any_of_type(&alice(), IP, Write, ResourceType::Topic));
        let idx = AclIndex::new([topic(Literal, "a", "User:bob", Write, Allow)]);
        assert!(
            !idx.any_of_type(&alice(), IP, Write, ResourceType::Topic),
            "someone else's ACL"
        );
        assert!(!idx.any_of_type(&alice(), IP, Write, ResourceType::Group));
    }
}
