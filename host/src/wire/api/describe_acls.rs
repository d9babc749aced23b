//! DescribeAcls (key 29): the ACLs a filter selects, grouped by
//! resource pattern. Needs DESCRIBE on the cluster; answers
//! SECURITY_DISABLED when the broker enforces no ACLs, INVALID_REQUEST for
//! a filter with an UNKNOWN value.

use std::sync::Arc;

use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{ApiKey, DescribeAclsRequest, DescribeAclsResponse, ResponseKind};

use super::create_acls::{CLUSTER_DENIED, NO_AUTHORIZER};
use super::str_bytes;
use crate::broker::Broker;
use crate::codes;
use crate::security::Session;
use crate::security::acl::{AclBinding, CLUSTER_NAME, Operation, ResourceType};
use crate::security::acl_filter::{AclFields, AclFilter};

fn error(code: i16, message: &str) -> ResponseKind {
    ResponseKind::DescribeAcls(
        DescribeAclsResponse::default()
            .with_error_code(code)
            .with_error_message(Some(str_bytes(message))),
    )
}

/// ACLs (in canonical order, so one pattern's are together) grouped by
/// resource pattern.
fn group(acls: Vec<AclBinding>) -> Vec<DescribeAclsResource> {
    let mut out: Vec<DescribeAclsResource> = Vec::new();
    for b in acls {
        let entry = AclDescription::default()
            .with_principal(str_bytes(&b.principal.to_string()))
            .with_host(str_bytes(&b.host))
            .with_operation(b.operation.code())
            .with_permission_type(b.permission.code());
        match out.last_mut() {
            Some(r)
                if r.resource_type == b.resource_type.code()
                    && r.pattern_type == b.pattern_type.code()
                    && r.resource_name.as_str() == b.resource_name =>
            {
                r.acls.push(entry)
            }
            _ => out.push(
                DescribeAclsResource::default()
                    .with_resource_type(b.resource_type.code())
                    .with_resource_name(str_bytes(&b.resource_name))
                    .with_pattern_type(b.pattern_type.code())
                    .with_acls(vec![entry]),
            ),
        }
    }
    out
}

pub fn handle(
    broker: &Arc<Broker>,
    session: &Session,
    req: DescribeAclsRequest,
    _version: i16,
) -> ResponseKind {
    if !broker.authz.is_enabled() {
        return error(codes::SECURITY_DISABLED, NO_AUTHORIZER);
    }
    if !broker.authz.authorize(
        session,
        ApiKey::DescribeAcls,
        Operation::Describe,
        ResourceType::Cluster,
        CLUSTER_NAME,
    ) {
        return error(codes::CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED);
    }
    let filter = AclFilter::from_wire(AclFields {
        resource_type: req.resource_type_filter,
        resource_name: req.resource_name_filter.as_deref(),
        pattern_type: req.pattern_type_filter,
        principal: req.principal_filter.as_deref(),
        host: req.host_filter.as_deref(),
        operation: req.operation,
        permission: req.permission_type,
    });
    match filter {
        Err(why) => error(codes::INVALID_REQUEST, &why),
        Ok(f) => ResponseKind::DescribeAcls(
            DescribeAclsResponse::default().with_resources(group(broker.authz.describe(&f))),
        ),
    }
}
