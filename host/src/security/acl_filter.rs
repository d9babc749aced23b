//! What the ACL admin APIs send, checked: a new ACL from CreateAcls'
//! fields (Kafka's creation rules; a refusal is a message for
//! INVALID_REQUEST), and a filter from DescribeAcls' or DeleteAcls'
//! fields with Kafka's matching rules (research notes §2). Pure.

use std::net::IpAddr;

use super::acl::{AclBinding, CLUSTER_NAME, Operation, PatternType, Permission, ResourceType};
use super::acl_index::WILDCARD;
use super::session::Principal;

/// Wire codes of the filter-only values, and of values kaas stores none of.
const ANY: i8 = 1;
const MATCH: i8 = 2;
/// DELEGATION_TOKEN and USER: valid in Kafka, but kaas has no such
/// resources (no delegation tokens), so it stores no ACL on them.
const UNSTORED_RESOURCE_TYPES: [i8; 2] = [6, 7];
/// CREATE_TOKENS and DESCRIBE_TOKENS (delegation tokens, as above).
const UNSTORED_OPERATIONS: [i8; 2] = [13, 14];

/// The fields of one ACL or one filter, as the wire carries them.
#[derive(Debug, Clone, Copy)]
pub struct AclFields<'a> {
    pub resource_type: i8,
    pub resource_name: Option<&'a str>,
    pub pattern_type: i8,
    pub principal: Option<&'a str>,
    pub host: Option<&'a str>,
    pub operation: i8,
    pub permission: i8,
}

/// A CreateAcls creation as an ACL, or why it cannot be one.
pub fn new_binding(f: AclFields<'_>) -> Result<AclBinding, String> {
    let resource_type = ResourceType::from_code(f.resource_type).ok_or_else(|| {
        if UNSTORED_RESOURCE_TYPES.contains(&f.resource_type) {
            format!(
                "resourceType {} is not supported by this broker (no delegation tokens)",
                f.resource_type
            )
        } else {
            format!("Invalid resourceType {}", f.resource_type)
        }
    })?;
    let pattern_type = PatternType::from_code(f.pattern_type)
        .ok_or_else(|| format!("Invalid patternType {}", f.pattern_type))?;
    let operation = Operation::from_code(f.operation).ok_or_else(|| {
        if UNSTORED_OPERATIONS.contains(&f.operation) {
            format!(
                "operation {} is not supported by this broker (no delegation tokens)",
                f.operation
            )
        } else {
            format!("Invalid operation {}", f.operation)
        }
    })?;
    let permission = Permission::from_code(f.permission)
        .ok_or_else(|| format!("Invalid permissionType {}", f.permission))?;
    let name = f.resource_name.unwrap_or("");
    if name.is_empty() {
        return Err("Resource name should not be empty".into());
    }
    if resource_type == ResourceType::Cluster && name != CLUSTER_NAME {
        return Err(format!(
            "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        ));
    }
    let principal_text = f.principal.unwrap_or("");
    let principal = Principal::parse(principal_text).ok_or_else(|| {
        format!("Invalid principal {principal_text:?}: expected Type:name, e.g. User:alice")
    })?;
    let host = f.host.unwrap_or("");
    if host != WILDCARD && host.parse::<IpAddr>().is_err() {
        return Err(format!(
            "Invalid host {host:?}: expected * or an IP address"
        ));
    }
    Ok(AclBinding {
        resource_type,
        resource_name: name.to_owned(),
        pattern_type,
        principal,
        host: host.to_owned(),
        operation,
        permission,
    })
}

/// How a filter matches resource patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternFilter {
    /// Any pattern type (the name, if given, must be equal).
    Any,
    /// Every pattern that applies to the literal name.
    Match,
    /// This pattern type, and the name (if given) equal.
    Exact(PatternType),
}

/// A DescribeAcls / DeleteAcls filter. `None` fields match anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: Option<ResourceType>,
    pub resource_name: Option<String>,
    pub pattern: PatternFilter,
    /// Exact text, e.g. `User:alice` (`User:*` matches only ACLs for `User:*`).
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<Operation>,
    pub permission: Option<Permission>,
    /// A valid filter on a resource type or operation kaas stores no ACL
    /// for: matches nothing.
    pub matches_nothing: bool,
}

impl AclFilter {
    /// The filter matching every ACL.
    pub fn any() -> Self {
        AclFilter {
            resource_type: None,
            resource_name: None,
            pattern: PatternFilter::Any,
            principal: None,
            host: None,
            operation: None,
            permission: None,
            matches_nothing: false,
        }
    }

    /// A filter from the wire, or why it is invalid (an UNKNOWN value).
    pub fn from_wire(f: AclFields<'_>) -> Result<Self, String> {
        let mut matches_nothing = false;
        let resource_type = match f.resource_type {
            ANY => None,
            c if UNSTORED_RESOURCE_TYPES.contains(&c) => {
                matches_nothing = true;
                None
            }
            c => Some(ResourceType::from_code(c).ok_or("Unknown patternFilter.")?),
        };
        let pattern = match f.pattern_type {
            ANY => PatternFilter::Any,
            MATCH => PatternFilter::Match,
            c => PatternFilter::Exact(PatternType::from_code(c).ok_or("Unknown patternFilter.")?),
        };
        let operation = match f.operation {
            ANY => None,
            c if UNSTORED_OPERATIONS.contains(&c) => {
                matches_nothing = true;
                None
            }
            c => Some(Operation::from_code(c).ok_or("Unknown entryFilter.")?),
        };
        let permission = match f.permission {
            ANY => None,
            c => Some(Permission::from_code(c).ok_or("Unknown entryFilter.")?),
        };
        Ok(AclFilter {
            resource_type,
            resource_name: f.resource_name.map(str::to_owned),
            pattern,
            principal: f.principal.map(str::to_owned),
            host: f.host.map(str::to_owned),
            operation,
            permission,
            matches_nothing,
        })
    }

    /// Whether the filter selects `b`.
    pub fn matches(&self, b: &AclBinding) -> bool {
        !self.matches_nothing
            && self.resource_type.is_none_or(|t| t == b.resource_type)
            && self.matches_pattern(b)
            && self
                .principal
                .as_ref()
                .is_none_or(|p| *p == b.principal.to_string())
            && self.host.as_ref().is_none_or(|h| *h == b.host)
            && self.operation.is_none_or(|o| o == b.operation)
            && self.permission.is_none_or(|p| p == b.permission)
    }

    fn matches_pattern(&self, b: &AclBinding) -> bool {
        if let PatternFilter::Exact(p) = self.pattern
            && p != b.pattern_type
        {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        match (self.pattern, b.pattern_type) {
            (PatternFilter::Any | PatternFilter::Exact(_), _) => *name == b.resource_name,
            (PatternFilter::Match, PatternType::Literal) => {
                *name == b.resource_name || b.resource_name == WILDCARD
            }
            (PatternFilter::Match, PatternType::Prefixed) => name.starts_with(&b.resource_name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields<'a>(
        rt: i8,
        name: Option<&'a str>,
        pt: i8,
        principal: Option<&'a str>,
    ) -> AclFields<'a> {
        AclFields {
            resource_type: rt,
            resource_name: name,
            pattern_type: pt,
            principal,
            host: Some("*"),
            operation: 3,
            permission: 3,
        }
    }

    fn binding(rt: i8, name: &str, pt: i8, principal: &str) -> AclBinding {
        new_binding(fields(rt, Some(name), pt, Some(principal))).unwrap()
    }

    #[test]
    fn a_creation_needs_a_concrete_type_pattern_operation_and_permission() {
        let ok = fields(2, Some("t"), 3, Some("User:alice"));
        assert!(new_binding(ok).is_ok());
        for (bad, why) in [
            (
                AclFields {
                    resource_type: 1,
                    ..ok
                },
                "resourceType",
            ),
            (
                AclFields {
                    resource_type: 0,
                    ..ok
                },
                "resourceType",
            ),
            (
                AclFields {
                    pattern_type: 1,
                    ..ok
                },
                "patternType",
            ),
            (
                AclFields {
                    pattern_type: 2,
                    ..ok
                },
                "patternType",
            ),
            (AclFields { operation: 1, ..ok }, "operation"),
            (AclFields { operation: 0, ..ok }, "operation"),
            (
                AclFields {
                    permission: 1,
                    ..ok
                },
                "permissionType",
            ),
            (
                AclFields {
                    resource_name: Some(""),
                    ..ok
                },
                "should not be empty",
            ),
            (
                AclFields {
                    principal: Some("alice"),
                    ..ok
                },
                "principal",
            ),
            (
                AclFields {
                    principal: Some("User:"),
                    ..ok
                },
                "principal",
            ),
            (
                AclFields {
                    host: Some("example.com"),
                    ..ok
                },
                "host",
            ),
            (
                AclFields {
                    resource_type: 4,
                    ..ok
                },
                "kafka-cluster",
            ),
        ] {
            let e = new_binding(bad).unwrap_err();
            assert!(e.contains(why), "{e:?} should mention {why}");
        }
        assert!(
            new_binding(AclFields {
                resource_type: 4,
                resource_name: Some("kafka-cluster"),
                ..ok
            })
            .is_ok()
        );
        assert!(
            new_binding(AclFields {
                host: Some("::1"),
                ..ok
            })
            .is_ok()
        );
    }

    #[test]
    fn a_filter_with_an_unknown_value_is_invalid() {
        let ok = fields(1, None, 1, None);
        assert!(
            AclFilter::from_wire(AclFields {
                operation: 1,
                permission: 1,
                ..ok
            })
            .is_ok()
        );
        for bad in [
            AclFields {
                resource_type: 0,
                operation: 1,
                permission: 1,
                ..ok
            },
            AclFields {
                pattern_type: 0,
                operation: 1,
                permission: 1,
                ..ok
            },
            AclFields {
                operation: 0,
                permission: 1,
                ..ok
            },
            AclFields {
                operation: 1,
                permission: 0,
                ..ok
            },
        ] {
            assert!(AclFilter::from_wire(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn pattern_any_needs_an_equal_name_of_either_pattern_type() {
        let f = AclFilter::from_wire(AclFields {
            operation: 1,
            permission: 1,
            ..fields(2, Some("foo"), 1, None)
        })
        .unwrap();
        assert!(f.matches(&binding(2, "foo", 3, "User:a")));
        assert!(f.matches(&binding(2, "foo", 4, "User:a")));
        assert!(!f.matches(&binding(2, "foobar", 3, "User:a")));
        assert!(!f.matches(&binding(2, "*", 3, "User:a")));
        assert!(
            !f.matches(&binding(3, "foo", 3, "User:a")),
            "another resource type"
        );
    }

    #[test]
    fn pattern_match_selects_every_pattern_applying_to_the_name() {
        let f = AclFilter::from_wire(AclFields {
            operation: 1,
            permission: 1,
            ..fields(2, Some("foobar"), 2, None)
        })
        .unwrap();
        assert!(f.matches(&binding(2, "foobar", 3, "User:a")));
        assert!(f.matches(&binding(2, "*", 3, "User:a")));
        assert!(f.matches(&binding(2, "foo", 4, "User:a")));
        assert!(
            !f.matches(&binding(2, "foo", 3, "User:a")),
            "a literal foo does not apply to foobar"
        );
        assert!(!f.matches(&binding(2, "foobarz", 4, "User:a")));
    }

    #[test]
    fn pattern_literal_and_prefixed_need_that_type_and_name() {
        let f = AclFilter::from_wire(AclFields {
            operation: 1,
            permission: 1,
            ..fields(2, Some("foo"), 4, None)
        })
        .unwrap();
        assert!(f.matches(&binding(2, "foo", 4, "User:a")));
        assert!(!f.matches(&binding(2, "foo", 3, "User:a")));
        let all_prefixed = AclFilter::from_wire(AclFields {
            operation: 1,
            permission: 1,
            ..fields(1, None, 4, None)
        })
        .unwrap();
        assert!(all_prefixed.matches(&binding(3, "g", 4, "User:a")));
        assert!(!all_prefixed.matches(&binding(3, "g", 3, "User:a")));
    }

    #[test]
    fn entry_filters_compare_exact_text() {
        let f = AclFilter::from_wire(AclFields {
            operation: 1,
            permission: 1,
            ..fields(1, None, 1, Some("User:*"))
        })
        .unwrap();
        assert!(f.matches(&binding(2, "t", 3, "User:*")));
        assert!(
            !f.matches(&binding(2, "t", 3, "User:alice")),
            "User:* as a filter is not a wildcard"
        );
        let f = AclFilter::from_wire(AclFields {
            operation: 4,
            permission: 2,
            ..fields(1, None, 1, None)
        })
        .unwrap();
        let mut b = binding(2, "t", 3, "User:a");
        assert!(!f.matches(&b));
        b.operation = Operation::Write;
        b.permission = Permission::Deny;
        assert!(f.matches(&b));
        let f = AclFilter::from_wire(AclFields {
            host: Some("10.0.0.1"),
            operation: 1,
            permission: 1,
            ..fields(1, None, 1, None)
        })
        .unwrap();
        assert!(!f.matches(&b));
    }

    #[test]
    fn a_filter_on_delegation_tokens_matches_nothing() {
        let f = AclFilter::from_wire(AclFields {
            operation: 1,
            permission: 1,
            ..fields(6, None, 1, None)
        })
        .unwrap();
        assert!(!f.matches(&binding(2, "t", 3, "User:a")));
        let f = AclFilter::from_wire(AclFields {
            operation: 13,
            permission: 1,
            ..fields(1, None, 1, None)
        })
        .unwrap();
        assert!(!f.matches(&binding(2, "t", 3, "User:a")));
        assert!(AclFilter::any().matches(&binding(2, "t", 3, "User:a")));
    }
}
