//! Each organization's write budget: spent by its own writers only, and a spent budget is
//! `RateLimited` with the wait, before anything is written.

use std::sync::Arc;

use uuid::Uuid;

use super::*;
use crate::ports::budget::MockWriteBudget;

fn budget(expect_org: Uuid, times: usize, answer: Result<(), u64>) -> Arc<MockWriteBudget> {
    let mut b = MockWriteBudget::new();
    b.expect_take()
        .withf(move |org| *org == expect_org)
        .times(times)
        .returning(move |_| answer);
    Arc::new(b)
}

#[test]
fn a_write_spends_its_organizations_budget_once_authorized() {
    let m = create_ready();
    let s = m.services().with_write_budget(budget(ORG_A, 1, Ok(())));
    let r = block_on(s.create_cluster(Command::new(&super_admin_a()), cluster_body()));
    assert_eq!(code(r), "ok");
}

#[test]
fn an_outsider_or_a_reader_spends_nothing_of_an_organizations_budget() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .services()
        .with_write_budget(budget(ORG_A, 0, Ok(())));
    let outsider = caller(&[(ORG_B, Role::SuperAdmin)]);
    let member = caller(&[(ORG_A, Role::Member)]);
    for who in [outsider, member] {
        let r =
            block_on(s.patch_cluster(Command::new(&who), CLUSTER_1, description_patch("x"), None));
        assert!(matches!(code(r), "not_found" | "forbidden"));
    }
}

#[test]
fn a_spent_budget_is_rate_limited_with_the_wait_and_writes_nothing() {
    // No commit is expected: the mock fails the test if one comes.
    let s = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .services()
        .with_write_budget(budget(ORG_A, 1, Err(7)));
    let r = block_on(s.patch_cluster(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        description_patch("x"),
        None,
    ));
    assert!(matches!(
        r,
        Err(DomainError::RateLimited {
            retry_after_seconds: 7
        })
    ));
    assert_eq!(
        DomainError::RateLimited {
            retry_after_seconds: 7
        }
        .retry_after_seconds(),
        Some(7)
    );
}
