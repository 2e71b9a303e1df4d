//! The state long-poll.

use super::*;

#[test]
fn state_answers_at_once_when_version_is_past_since() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.changes.expect_wait().never();
    let a =
        block_on(
            m.services()
                .cluster_state(&caller(&[(ORG_A, Role::Member)]), CLUSTER_1, 4, 25),
        )
        .unwrap();
    assert_eq!(
        (a.version, a.changed, a.phase),
        (5, true, ClusterPhase::Provisioned)
    );
}

#[test]
fn state_waits_for_a_change_then_answers_changed() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioning));
    m.changes
        .expect_wait()
        .with(eq(CLUSTER_1), eq(5), mockall::predicate::always())
        .times(1)
        .returning(|_, _, _| crate::ports::storage::Wake::Maybe);
    m.clusters
        .expect_revision()
        .returning(|_| Ok(Some((6, ClusterPhase::ControlPlaneReady))));
    let a =
        block_on(
            m.services()
                .cluster_state(&caller(&[(ORG_A, Role::Member)]), CLUSTER_1, 5, 10),
        )
        .unwrap();
    assert_eq!(
        (a.version, a.changed, a.phase),
        (6, true, ClusterPhase::ControlPlaneReady)
    );
}

#[test]
fn state_with_timeout_zero_answers_unchanged_at_once() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.changes.expect_wait().never();
    let a =
        block_on(
            m.services()
                .cluster_state(&caller(&[(ORG_A, Role::Member)]), CLUSTER_1, 5, 0),
        )
        .unwrap();
    assert_eq!((a.version, a.changed), (5, false));
}

#[test]
fn a_stopping_process_answers_a_waiting_poll_with_the_version_there_is() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioning));
    m.changes
        .expect_wait()
        .times(1)
        .returning(|_, _, _| crate::ports::storage::Wake::Closing);
    m.clusters
        .expect_revision()
        .returning(|_| Ok(Some((5, ClusterPhase::Provisioning))));
    let a =
        block_on(
            m.services()
                .cluster_state(&caller(&[(ORG_A, Role::Member)]), CLUSTER_1, 5, 60),
        )
        .unwrap();
    assert_eq!((a.version, a.changed), (5, false));
}
