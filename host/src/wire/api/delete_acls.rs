//! DeleteAcls (key 31): removes the ACLs each filter selects
//! and reports them per filter. Needs ALTER on the cluster; answers
//! SECURITY_DISABLED when the broker enforces no ACLs; a filter with an
//! UNKNOWN value gets INVALID_REQUEST (the others still apply). Blocking
//! (the store writes a file or etcd): dispatched off the runtime's workers.

use std::sync::Arc;

use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{ApiKey, DeleteAclsRequest, DeleteAclsResponse, ResponseKind};

use super::create_acls::{CLUSTER_DENIED, NO_AUTHORIZER};
use super::str_bytes;
use crate::broker::Broker;
use crate::codes;
use crate::security::Session;
use crate::security::acl::{AclBinding, CLUSTER_NAME, Operation, ResourceType};
use crate::security::acl_filter::{AclFields, AclFilter};

fn failed(code: i16, message: &str) -> DeleteAclsFilterResult {
    DeleteAclsFilterResult::default()
        .with_error_code(code)
        .with_error_message(Some(str_bytes(message)))
}

fn matching(b: &AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(b.resource_type.code())
        .with_resource_name(str_bytes(&b.resource_name))
        .with_pattern_type(b.pattern_type.code())
        .with_principal(str_bytes(&b.principal.to_string()))
        .with_host(str_bytes(&b.host))
        .with_operation(b.operation.code())
        .with_permission_type(b.permission.code())
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Session,
    req: DeleteAclsRequest,
    _version: i16,
) -> ResponseKind {
    let every = |code, message| {
        let results = req.filters.iter().map(|_| failed(code, message)).collect();
        ResponseKind::DeleteAcls(DeleteAclsResponse::default().with_filter_results(results))
    };
    if !broker.authz.is_enabled() {
        return every(codes::SECURITY_DISABLED, NO_AUTHORIZER);
    }
    if !broker.authz.authorize(
        session,
        ApiKey::DeleteAcls,
        Operation::Alter,
        ResourceType::Cluster,
        CLUSTER_NAME,
    ) {
        return every(codes::CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED);
    }
    let checked: Vec<Result<AclFilter, String>> = req
        .filters
        .iter()
        .map(|f| {
            AclFilter::from_wire(AclFields {
                resource_type: f.resource_type_filter,
                resource_name: f.resource_name_filter.as_deref(),
                pattern_type: f.pattern_type_filter,
                principal: f.principal_filter.as_deref(),
                host: f.host_filter.as_deref(),
                operation: f.operation,
                permission: f.permission_type,
            })
        })
        .collect();
    let valid: Vec<AclFilter> = checked
        .iter()
        .filter_map(|c| c.as_ref().ok())
        .cloned()
        .collect();
    let deleted = match broker.authz.delete(&valid) {
        Ok(d) => d,
        Err(e) => {
            tracing::error!(error = %e, "DeleteAcls: the change could not be stored");
            let message = e.to_string();
            let results = checked
                .iter()
                .map(|c| match c {
                    Err(why) => failed(codes::INVALID_REQUEST, why),
                    Ok(_) => failed(codes::UNKNOWN_SERVER_ERROR, &message),
                })
                .collect();
            return ResponseKind::DeleteAcls(
                DeleteAclsResponse::default().with_filter_results(results),
            );
        }
    };
    let mut deleted = deleted.into_iter();
    let results = checked
        .iter()
        .map(|c| match c {
            Err(why) => failed(codes::INVALID_REQUEST, why),
            Ok(_) => DeleteAclsFilterResult::default().with_matching_acls(
                deleted
                    .next()
                    .unwrap_or_default()
                    .iter()
                    .map(matching)
                    .collect(),
            ),
        })
        .collect();
    ResponseKind::DeleteAcls(DeleteAclsResponse::default().with_filter_results(results))
}
