//! CreateAcls (key 30): adds ACLs. Needs ALTER on the cluster;
//! answers SECURITY_DISABLED when the broker enforces no ACLs. Each
//! creation is checked on its own (INVALID_REQUEST with the reason), an
//! ACL that exists already is a success, and past `--max-acls` a creation
//! is refused with POLICY_VIOLATION. Blocking (the store writes a file or
//! etcd): dispatched off the runtime's workers.

use std::sync::Arc;

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{ApiKey, CreateAclsRequest, CreateAclsResponse, ResponseKind};

use super::str_bytes;
use crate::broker::Broker;
use crate::codes;
use crate::security::Session;
use crate::security::acl::{CLUSTER_NAME, Operation, ResourceType};
use crate::security::acl_filter::{AclFields, new_binding};
use crate::security::authorizer::AclChangeError;

/// The message of SECURITY_DISABLED answers (the three ACL APIs).
pub const NO_AUTHORIZER: &str = "No authorizer is configured on the broker (--authorizer)";
/// The message of CLUSTER_AUTHORIZATION_FAILED answers (the three ACL APIs).
pub const CLUSTER_DENIED: &str = "Cluster authorization failed.";

fn result(code: i16, message: Option<&str>) -> AclCreationResult {
    AclCreationResult::default()
        .with_error_code(code)
        .with_error_message(message.map(str_bytes))
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Session,
    req: CreateAclsRequest,
    _version: i16,
) -> ResponseKind {
    let every = |code, message| {
        let results = req
            .creations
            .iter()
            .map(|_| result(code, Some(message)))
            .collect();
        ResponseKind::CreateAcls(CreateAclsResponse::default().with_results(results))
    };
    if !broker.authz.is_enabled() {
        return every(codes::SECURITY_DISABLED, NO_AUTHORIZER);
    }
    if !broker.authz.authorize(
        session,
        ApiKey::CreateAcls,
        Operation::Alter,
        ResourceType::Cluster,
        CLUSTER_NAME,
    ) {
        return every(codes::CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED);
    }
    let checked: Vec<_> = req
        .creations
        .iter()
        .map(|c| {
            new_binding(AclFields {
                resource_type: c.resource_type,
                resource_name: Some(&c.resource_name),
                pattern_type: c.resource_pattern_type,
                principal: Some(&c.principal),
                host: Some(&c.host),
                operation: c.operation,
                permission: c.permission_type,
            })
        })
        .collect();
    let valid = checked
        .iter()
        .filter_map(|c| c.as_ref().ok())
        .cloned()
        .collect();
    let mut stored = broker.authz.create(valid).into_iter();
    let results = checked
        .iter()
        .map(|c| match c {
            Err(why) => result(codes::INVALID_REQUEST, Some(why)),
            Ok(_) => match stored.next() {
                Some(Ok(())) => result(codes::NONE, None),
                Some(Err(e @ AclChangeError::Limit(_))) => {
                    result(codes::POLICY_VIOLATION, Some(&e.to_string()))
                }
                Some(Err(e @ AclChangeError::Store(_))) => {
                    tracing::error!(error = %e, "CreateAcls: the ACLs could not be stored");
                    result(codes::UNKNOWN_SERVER_ERROR, Some(&e.to_string()))
                }
                None => result(codes::UNKNOWN_SERVER_ERROR, Some("no result")),
            },
        })
        .collect();
    ResponseKind::CreateAcls(CreateAclsResponse::default().with_results(results))
}
