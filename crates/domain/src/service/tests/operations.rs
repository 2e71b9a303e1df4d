//! The operation a change starts: written with the change, named in the answer.

use super::*;
use crate::model::operation::{OperationKind, OperationStatus};

#[test]
fn work_for_provisioning_starts_an_operation_the_answer_points_at() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    let writes = recording(&mut m);
    let s = m.services().for_request("req-7");
    let answer = block_on(s.delete_cluster(Command::new(&super_admin_a()), CLUSTER_1, None))
        .unwrap()
        .fresh()
        .unwrap();
    let writes = writes.lock().unwrap();
    let op = writes[0].operation.clone().unwrap();
    assert_eq!(
        (op.kind, op.status, op.cluster_id, op.request_id.as_deref()),
        (
            OperationKind::Delete,
            OperationStatus::Running,
            CLUSTER_1,
            Some("req-7")
        )
    );
    assert_eq!(op.requested_by.user_id, "user-1");
    let pointed = answer.operation.unwrap();
    assert_eq!((pointed.cluster_id, pointed.id), (CLUSTER_1, op.id));
    assert!(writes[0].reconcile);
}

#[test]
fn a_change_only_recorded_starts_no_operation() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    let writes = recording(&mut m);
    block_on(m.services().patch_cluster(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        description_patch("x"),
        None,
    ))
    .unwrap();
    assert_eq!(writes.lock().unwrap()[0].operation, None);
}

#[test]
fn a_second_deletion_changes_nothing_and_points_at_nothing() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Deleting));
    m.clusters.expect_commit().never();
    let answer = block_on(m.services().delete_cluster(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        None,
    ))
    .unwrap()
    .fresh()
    .unwrap();
    assert_eq!(answer.operation, None);
    assert_eq!(answer.phase, ClusterPhase::Deleting);
}

#[test]
fn operations_of_another_organizations_cluster_are_refused_before_they_are_read() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_B, ClusterPhase::Provisioned));
    m.operations.expect_cluster_operations().never();
    m.operations.expect_cluster_operation().never();
    let s = m.services();
    let list = block_on(s.list_operations(&super_admin_a(), CLUSTER_1, None, FIRST_PAGE));
    assert_eq!(code(list), "forbidden");
    let one = block_on(s.get_operation(&super_admin_a(), CLUSTER_1, uuid::Uuid::from_u128(1)));
    assert_eq!(code(one), "forbidden");
}
