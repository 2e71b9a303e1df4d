//! Use-case rules against mocked ports, one test per rule, named after it: spec §7's table,
//! §4's behaviours 1-11, §3's phase rules and §5's role rules.
#![allow(clippy::unwrap_used)]

use futures::executor::block_on;
use mockall::predicate::eq;
use serde_json::json;

use crate::error::{Conflict, DomainError};
use crate::input::cluster::{ClusterPatch, CreateClusterRequest, ExposurePatch};
use crate::input::elastic_ip::CreateElasticIpRequest;
use crate::input::firewall::CreateFirewallRuleRequest;
use crate::input::node_pool::{NodePoolPatch, NodePoolRequest};
use crate::model::cluster::{
    ClusterPhase, Exposure, ExposureChange, ExposureChangeStatus, NetworkMode,
};
use crate::model::elastic_ip::{AddressPool, ElasticIp, ElasticIpStatus};
use crate::model::firewall::Ipv4Cidr;
use crate::model::idempotency::{
    IdempotencyRecord, IdempotencyScope, IdempotencyState, RequestFingerprint, StoredResponse,
};
use crate::model::identity::{ClientKind, Plan, Role};
use crate::model::kubeconfig::SealedCredentials;
use crate::model::node_pool::PoolStatus;
use crate::model::secret::{SealedSecret, Secret};
use crate::names::IdempotencyKey;
use crate::ports::identity::IdentityError;
use crate::ports::storage::{Change, ClaimOutcome, ClusterWrite, Page, StoreError};
use crate::service::{Answer, IdempotencyRequest, KubeconfigAnswer};
use crate::testing::*;

fn code<T: std::fmt::Debug>(r: Result<T, DomainError>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(e) => e.code(),
    }
}

fn status<T: std::fmt::Debug>(r: Result<T, DomainError>) -> u16 {
    match r {
        Ok(_) => 200,
        Err(e) => e.status(),
    }
}

fn create_body(extra: serde_json::Value) -> CreateClusterRequest {
    let mut body = json!({"organization": "acme", "name": "prod-1",
                          "node_pools": [{"size": "kube.c5.large", "count": 3}]});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(body).unwrap()
}

fn super_admin_a() -> crate::model::identity::Caller {
    caller(&[(ORG_A, Role::SuperAdmin)])
}

/// Mocks where acme (postpaid) exists, the zone has room and commits succeed.
fn create_ready() -> Mocks {
    let mut m = Mocks::new().with_organizations(vec![
        organization(ORG_A, Plan::Postpaid, 0),
        organization(ORG_B, Plan::Prepaid, 0),
    ]);
    m.clusters.expect_zone_node_demand().returning(|_| Ok(0));
    m.cloud.expect_zone_capacity().returning(|_| 10_000);
    m.clusters.expect_commit().returning(|_| Ok(1));
    m
}

// ---- spec §4 behaviour 1 and 2: create ----

#[test]
fn create_takes_the_organization_from_the_body_and_starts_pending() {
    let mut m = create_ready();
    m.clusters.checkpoint();
    m.clusters.expect_zone_node_demand().returning(|_| Ok(0));
    m.clusters
        .expect_commit()
        .withf(|w: &ClusterWrite| {
            w.expected_revision.is_none() && w.reconcile && matches!(&w.changes[..], [Change::InsertCluster(c)] if c.phase == ClusterPhase::Pending && c.organization_id == ORG_A)
        })
        .times(1)
        .returning(|_| Ok(1));
    let s = m.services();
    let c = block_on(s.create_cluster(&super_admin_a(), create_body(json!({})), None))
        .unwrap()
        .fresh()
        .unwrap();
    assert_eq!(c.organization_slug, "acme");
    assert_eq!(
        c.version, "v1.32.4",
        "the recommended version is the default"
    );
    assert_eq!(c.zone, "zone-1", "the default zone");
    assert_eq!(
        c.exposure,
        Exposure::Public,
        "the catalog's default exposure"
    );
    assert_eq!(c.network_mode, NetworkMode::Intranet);
    assert_eq!(
        c.control_plane_option_id, "cp-standard",
        "the zone's active option is applied"
    );
    assert_eq!(
        c.node_pools[0].root_volume_size_gib, 50,
        "root volume = the tier's disk"
    );
    assert_eq!(c.node_pools[0].status, PoolStatus::Provisioning);
}

#[test]
fn create_without_organization_is_422_even_with_a_preferred_organization() {
    let mut who = super_admin_a();
    who.preferred_organization = Some(ORG_A);
    let body: CreateClusterRequest = serde_json::from_value(
        json!({"name": "a", "node_pools": [{"size": "kube.c5.large", "count": 1}]}),
    )
    .unwrap();
    let r = block_on(create_ready().services().create_cluster(&who, body, None));
    assert_eq!(status(r), 422);
}

#[test]
fn create_unknown_zone_version_or_tier_is_400() {
    let s = create_ready().services();
    let who = super_admin_a();
    assert_eq!(
        code(block_on(s.create_cluster(
            &who,
            create_body(json!({"zone": "zone-9"})),
            None
        ))),
        "unknown_zone"
    );
    assert_eq!(
        code(block_on(s.create_cluster(
            &who,
            create_body(json!({"version": "v1.0.0"})),
            None
        ))),
        "unknown_version"
    );
    let tier = create_body(json!({"node_pools": [{"size": "kube.x9.huge", "count": 1}]}));
    let e = block_on(s.create_cluster(&who, tier, None)).unwrap_err();
    assert_eq!((e.status(), e.code()), (400, "unknown_machine_tier"));
    assert!(e.to_string().contains("node_pools[0].size"));
}

#[test]
fn create_count_zero_without_auto_scale_is_422() {
    let body = create_body(json!({"node_pools": [{"size": "kube.c5.large", "count": 0}]}));
    assert_eq!(
        status(block_on(create_ready().services().create_cluster(
            &super_admin_a(),
            body,
            None
        ))),
        422
    );
}

#[test]
fn create_into_an_organization_where_not_super_admin_is_403() {
    let member = caller(&[(ORG_A, Role::Member)]);
    assert_eq!(
        status(block_on(create_ready().services().create_cluster(
            &member,
            create_body(json!({})),
            None
        ))),
        403
    );
    let other = caller(&[(ORG_B, Role::SuperAdmin)]);
    assert_eq!(
        status(block_on(create_ready().services().create_cluster(
            &other,
            create_body(json!({})),
            None
        ))),
        403
    );
}

#[test]
fn create_into_an_unknown_slug_is_404() {
    let r = block_on(create_ready().services().create_cluster(
        &super_admin_a(),
        create_body(json!({"organization": "nosuch"})),
        None,
    ));
    assert_eq!(code(r), "not_found");
}

#[test]
fn create_prepaid_without_credit_is_402() {
    let who = caller(&[(ORG_B, Role::SuperAdmin)]);
    let r = block_on(create_ready().services().create_cluster(
        &who,
        create_body(json!({"organization": "globex"})),
        None,
    ));
    assert_eq!((status(r.clone()), code(r)), (402, "insufficient_credit"));
}

#[test]
fn create_past_zone_capacity_is_503() {
    let mut m = Mocks::new().with_organizations(vec![organization(ORG_A, Plan::Postpaid, 0)]);
    m.clusters
        .expect_zone_node_demand()
        .returning(|_| Ok(9_998));
    m.cloud.expect_zone_capacity().returning(|_| 10_000);
    m.clusters.expect_commit().never();
    let r = block_on(
        m.services()
            .create_cluster(&super_admin_a(), create_body(json!({})), None),
    );
    assert_eq!((status(r.clone()), code(r)), (503, "capacity_exhausted"));
}

#[test]
fn create_at_zone_capacity_exactly_is_accepted() {
    let mut m = Mocks::new().with_organizations(vec![organization(ORG_A, Plan::Postpaid, 0)]);
    m.clusters
        .expect_zone_node_demand()
        .returning(|_| Ok(9_997));
    m.cloud.expect_zone_capacity().returning(|_| 10_000);
    m.clusters.expect_commit().returning(|_| Ok(1));
    assert_eq!(
        code(block_on(m.services().create_cluster(
            &super_admin_a(),
            create_body(json!({})),
            None
        ))),
        "ok"
    );
}

#[test]
fn create_duplicate_name_is_409_name_conflict() {
    let mut m = create_ready();
    m.clusters.checkpoint();
    m.clusters.expect_zone_node_demand().returning(|_| Ok(0));
    m.clusters.expect_commit().returning(|_| {
        Err(StoreError::Duplicate(
            crate::ports::storage::UniqueRule::ClusterName,
        ))
    });
    let e = block_on(
        m.services()
            .create_cluster(&super_admin_a(), create_body(json!({})), None),
    )
    .unwrap_err();
    assert_eq!(e.code(), "name_conflict");
    assert!(e.to_string().contains("prod-1"));
}

#[test]
fn database_unavailable_is_503_service_unavailable() {
    let mut m = create_ready();
    m.clusters.checkpoint();
    m.clusters
        .expect_zone_node_demand()
        .returning(|_| Err(StoreError::Unavailable("pool timeout".into())));
    let r = block_on(
        m.services()
            .create_cluster(&super_admin_a(), create_body(json!({})), None),
    );
    assert_eq!(code(r), "service_unavailable");
}

// ---- spec §4 behaviour 4: idempotency ----

fn key() -> IdempotencyKey {
    IdempotencyKey::parse("create-0001").unwrap()
}

fn fingerprint() -> RequestFingerprint {
    RequestFingerprint::new("POST", "/v1/public/clusters", Some(&json!({"a": 1})))
}

#[test]
fn idempotent_create_commits_the_answer_with_the_cluster() {
    let mut m = create_ready();
    m.idempotency
        .expect_claim()
        .times(1)
        .returning(|_| Ok(ClaimOutcome::Claimed));
    m.clusters.checkpoint();
    m.clusters.expect_zone_node_demand().returning(|_| Ok(0));
    m.clusters
        .expect_commit()
        .withf(|w: &ClusterWrite| {
            w.idempotency
                .as_ref()
                .is_some_and(|c| c.response.status == 201 && c.scope.organization_id == ORG_A)
        })
        .times(1)
        .returning(|_| Ok(1));
    m.idempotency.expect_complete().returning(|_| Ok(()));
    let render = JsonRender(201);
    let req = IdempotencyRequest {
        key: key(),
        fingerprint: fingerprint(),
        render: &render,
    };
    let a = block_on(m.services().create_cluster(
        &super_admin_a(),
        create_body(json!({})),
        Some(req),
    ));
    assert!(matches!(a, Ok(Answer::Fresh(_))));
}

#[test]
fn idempotent_same_key_same_body_replays_the_stored_answer() {
    let stored = StoredResponse {
        status: 201,
        headers: vec![("Location".into(), "/v1/public/clusters/x".into())],
        body: b"{\"id\":\"x\"}".to_vec(),
    };
    let mut m = create_ready();
    let record = IdempotencyRecord {
        scope: IdempotencyScope {
            organization_id: ORG_A,
            key: key(),
        },
        fingerprint: fingerprint(),
        state: IdempotencyState::Completed {
            response: stored.clone(),
        },
        created_at: at(0),
    };
    m.idempotency
        .expect_claim()
        .returning(move |_| Ok(ClaimOutcome::Existing(record.clone())));
    m.clusters.checkpoint();
    m.clusters.expect_commit().never();
    let render = JsonRender(201);
    let req = IdempotencyRequest {
        key: key(),
        fingerprint: fingerprint(),
        render: &render,
    };
    let a = block_on(m.services().create_cluster(
        &super_admin_a(),
        create_body(json!({})),
        Some(req),
    ));
    assert_eq!(a, Ok(Answer::Replayed(stored)));
}

#[test]
fn idempotent_same_key_different_body_is_409_reused() {
    let mut m = create_ready();
    let record = IdempotencyRecord {
        scope: IdempotencyScope {
            organization_id: ORG_A,
            key: key(),
        },
        fingerprint: RequestFingerprint::new("POST", "/v1/public/clusters", Some(&json!({"a": 2}))),
        state: IdempotencyState::Completed {
            response: StoredResponse {
                status: 201,
                headers: vec![],
                body: vec![],
            },
        },
        created_at: at(0),
    };
    m.idempotency
        .expect_claim()
        .returning(move |_| Ok(ClaimOutcome::Existing(record.clone())));
    let render = JsonRender(201);
    let req = IdempotencyRequest {
        key: key(),
        fingerprint: fingerprint(),
        render: &render,
    };
    let r = block_on(m.services().create_cluster(
        &super_admin_a(),
        create_body(json!({})),
        Some(req),
    ));
    assert_eq!(code(r), "idempotency_key_reused");
}

#[test]
fn idempotent_key_in_progress_is_409_in_progress() {
    let mut m = create_ready();
    let record = IdempotencyRecord {
        scope: IdempotencyScope {
            organization_id: ORG_A,
            key: key(),
        },
        fingerprint: fingerprint(),
        state: IdempotencyState::InProgress {
            lease_id: uuid::Uuid::nil(),
            lease_expires_at: at(30),
        },
        created_at: at(0),
    };
    m.idempotency
        .expect_claim()
        .returning(move |_| Ok(ClaimOutcome::Existing(record.clone())));
    let render = JsonRender(201);
    let req = IdempotencyRequest {
        key: key(),
        fingerprint: fingerprint(),
        render: &render,
    };
    let r = block_on(m.services().create_cluster(
        &super_admin_a(),
        create_body(json!({})),
        Some(req),
    ));
    assert_eq!(code(r), "idempotency_key_in_progress");
}

#[test]
fn idempotent_expired_claim_is_taken_over_and_run_anew() {
    let mut m = create_ready();
    let record = IdempotencyRecord {
        scope: IdempotencyScope {
            organization_id: ORG_A,
            key: key(),
        },
        fingerprint: fingerprint(),
        state: IdempotencyState::InProgress {
            lease_id: uuid::Uuid::from_u128(9),
            lease_expires_at: at(-1),
        },
        created_at: at(-100),
    };
    m.idempotency
        .expect_claim()
        .returning(move |_| Ok(ClaimOutcome::Existing(record.clone())));
    m.idempotency
        .expect_take_over()
        .withf(|_, stale, _, _| *stale == uuid::Uuid::from_u128(9))
        .times(1)
        .returning(|_, _, _, _| Ok(true));
    m.idempotency.expect_complete().returning(|_| Ok(()));
    let render = JsonRender(201);
    let req = IdempotencyRequest {
        key: key(),
        fingerprint: fingerprint(),
        render: &render,
    };
    let r = block_on(m.services().create_cluster(
        &super_admin_a(),
        create_body(json!({})),
        Some(req),
    ));
    assert!(matches!(r, Ok(Answer::Fresh(_))));
}

#[test]
fn idempotent_refusal_is_stored_but_a_5xx_releases_the_key() {
    // 402 is stored on the key...
    let mut m = create_ready();
    m.idempotency
        .expect_claim()
        .returning(|_| Ok(ClaimOutcome::Claimed));
    m.idempotency
        .expect_complete()
        .withf(|c| c.response.status == 402)
        .times(1)
        .returning(|_| Ok(()));
    m.idempotency.expect_release().never();
    let who = caller(&[(ORG_B, Role::SuperAdmin)]);
    let render = JsonRender(201);
    let req = IdempotencyRequest {
        key: key(),
        fingerprint: fingerprint(),
        render: &render,
    };
    assert_eq!(
        code(block_on(m.services().create_cluster(
            &who,
            create_body(json!({"organization": "globex"})),
            Some(req)
        ))),
        "insufficient_credit"
    );
    // ...a 503 is not: the key is released so a retry runs anew.
    let mut m = create_ready();
    m.idempotency
        .expect_claim()
        .returning(|_| Ok(ClaimOutcome::Claimed));
    m.clusters.checkpoint();
    m.clusters
        .expect_zone_node_demand()
        .returning(|_| Ok(10_000));
    m.idempotency
        .expect_release()
        .times(1)
        .returning(|_, _| Ok(()));
    m.idempotency.expect_complete().never();
    let req = IdempotencyRequest {
        key: key(),
        fingerprint: fingerprint(),
        render: &render,
    };
    assert_eq!(
        code(block_on(m.services().create_cluster(
            &super_admin_a(),
            create_body(json!({})),
            Some(req)
        ))),
        "capacity_exhausted"
    );
}

#[test]
fn without_a_key_every_call_is_a_new_request() {
    let mut m = create_ready();
    m.idempotency.expect_claim().never();
    m.clusters.checkpoint();
    m.clusters.expect_zone_node_demand().returning(|_| Ok(0));
    m.clusters.expect_commit().times(2).returning(|_| Ok(1));
    let s = m.services();
    let a = block_on(s.create_cluster(&super_admin_a(), create_body(json!({})), None))
        .unwrap()
        .fresh()
        .unwrap();
    let b = block_on(s.create_cluster(&super_admin_a(), create_body(json!({})), None))
        .unwrap()
        .fresh()
        .unwrap();
    assert_ne!(a.id, b.id);
}

// ---- spec §5: collection reads ----

#[test]
fn list_no_organization_resolvable_is_400() {
    let r = block_on(Mocks::new().services().list_clusters(
        &super_admin_a(),
        None,
        None,
        None,
        None,
        None,
    ));
    assert_eq!((status(r.clone()), code(r)), (400, "organization_required"));
}

#[test]
fn list_query_wins_over_header_which_wins_over_preferred() {
    let mut m = Mocks::new();
    m.clusters
        .expect_list_clusters()
        .withf(|org, _, _| *org == ORG_B)
        .times(3)
        .returning(|_, _, _| {
            Ok(Page {
                items: vec![],
                total: 0,
            })
        });
    let s = m.services();
    let mut who = caller(&[(ORG_A, Role::Member), (ORG_B, Role::Member)]);
    who.preferred_organization = Some(ORG_A);
    assert_eq!(
        code(block_on(s.list_clusters(
            &who,
            Some("globex"),
            Some("acme"),
            None,
            None,
            None
        ))),
        "ok"
    );
    assert_eq!(
        code(block_on(s.list_clusters(
            &who,
            Some(""),
            Some("globex"),
            None,
            None,
            None
        ))),
        "ok",
        "an empty query value does not count"
    );
    who.preferred_organization = Some(ORG_B);
    assert_eq!(
        code(block_on(
            s.list_clusters(&who, None, None, None, None, None)
        )),
        "ok"
    );
}

#[test]
fn list_organization_by_uuid_rule() {
    let mut m = Mocks::new();
    m.clusters
        .expect_list_clusters()
        .withf(|org, _, _| *org == ORG_A)
        .returning(|_, _, _| {
            Ok(Page {
                items: vec![],
                total: 0,
            })
        });
    let who = caller(&[(ORG_A, Role::Member)]);
    let s = m.services();
    assert_eq!(
        code(block_on(s.list_clusters(
            &who,
            Some(&ORG_A.to_string()),
            None,
            None,
            None,
            None
        ))),
        "ok"
    );
}

#[test]
fn list_unknown_organization_is_404_and_someone_elses_403() {
    let m = Mocks::new().with_organizations(vec![organization(ORG_B, Plan::Postpaid, 0)]);
    let s = m.services();
    let who = caller(&[(ORG_A, Role::Member)]);
    assert_eq!(
        code(block_on(s.list_clusters(
            &who,
            Some("nosuch"),
            None,
            None,
            None,
            None
        ))),
        "not_found"
    );
    assert_eq!(
        code(block_on(s.list_clusters(
            &who,
            Some("globex"),
            None,
            None,
            None,
            None
        ))),
        "forbidden"
    );
    assert_eq!(
        code(block_on(s.list_clusters(
            &who,
            Some("zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz"),
            None,
            None,
            None,
            None
        ))),
        "not_found"
    );
}

#[test]
fn list_page_and_size_bounds_are_400() {
    let mut m = Mocks::new();
    m.clusters.expect_list_clusters().returning(|_, _, p| {
        assert!(p.size <= 100);
        Ok(Page {
            items: vec![],
            total: 0,
        })
    });
    let s = m.services();
    let who = caller(&[(ORG_A, Role::Member)]);
    let list = |page: Option<&str>, size: Option<&str>| {
        block_on(s.list_clusters(&who, Some("acme"), None, None, page, size))
    };
    assert_eq!(
        list(None, Some("100")).map(|p| (p.page, p.size)),
        Ok((1, 100))
    );
    assert_eq!(code(list(None, Some("101"))), "invalid_query");
    assert_eq!(code(list(Some("0"), None)), "invalid_query");
    assert_eq!(list(None, None).map(|p| (p.page, p.size)), Ok((1, 20)));
    assert_eq!(
        code(block_on(s.list_clusters(
            &who,
            Some("acme"),
            None,
            Some("zone-9"),
            None,
            None
        ))),
        "unknown_zone"
    );
}

#[test]
fn catalog_resolves_its_organization_and_zone() {
    let s = Mocks::new().services();
    let who = caller(&[(ORG_A, Role::ProjectAdmin)]);
    assert_eq!(
        code(block_on(s.catalog(&who, None, None, None))),
        "organization_required"
    );
    let view = block_on(s.catalog(&who, None, Some("acme"), Some("zone-1"))).unwrap();
    assert_eq!(view.zone.id, "zone-1");
    assert_eq!(
        code(block_on(s.catalog(
            &who,
            None,
            Some("acme"),
            Some("nowhere")
        ))),
        "unknown_zone"
    );
}

// ---- spec §5: by-id routes ----

#[test]
fn get_by_id_takes_the_clusters_organization_no_header_needed() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .services();
    assert_eq!(
        code(block_on(s.get_cluster(
            &caller(&[(ORG_A, Role::Member)]),
            &CLUSTER_1.to_string()
        ))),
        "ok"
    );
    assert_eq!(
        code(block_on(s.get_cluster(
            &caller(&[(ORG_A, Role::ProjectAdmin)]),
            &CLUSTER_1.to_string()
        ))),
        "ok"
    );
}

#[test]
fn get_cluster_of_another_organization_is_403() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_B, ClusterPhase::Provisioned))
        .services();
    assert_eq!(
        code(block_on(
            s.get_cluster(&super_admin_a(), &CLUSTER_1.to_string())
        )),
        "forbidden"
    );
}

#[test]
fn get_unknown_or_malformed_cluster_id_is_404() {
    let mut m = Mocks::new();
    m.clusters.expect_cluster().returning(|_| Ok(None));
    let s = m.services();
    assert_eq!(
        code(block_on(s.get_cluster(
            &super_admin_a(),
            &uuid::Uuid::from_u128(77).to_string()
        ))),
        "not_found"
    );
    assert_eq!(
        code(block_on(
            s.get_cluster(&super_admin_a(), "../../etc/passwd")
        )),
        "not_found"
    );
    assert_eq!(
        code(block_on(s.get_cluster(&super_admin_a(), "not-a-uuid"))),
        "not_found"
    );
}

#[test]
fn get_deleted_cluster_is_404() {
    let mut c = cluster(ORG_A, ClusterPhase::Deleting);
    c.deleted_at = Some(at(10));
    let s = Mocks::new().with_cluster(c).services();
    assert_eq!(
        code(block_on(
            s.get_cluster(&super_admin_a(), &CLUSTER_1.to_string())
        )),
        "not_found"
    );
}

#[test]
fn write_by_id_by_super_admin_nowhere_is_403_before_the_cluster_is_loaded() {
    let mut m = Mocks::new();
    m.clusters.expect_cluster().never();
    let s = m.services();
    let member = caller(&[(ORG_A, Role::Member), (ORG_B, Role::ProjectAdmin)]);
    let id = CLUSTER_1.to_string();
    let patch: ClusterPatch = serde_json::from_value(json!({"description": "x"})).unwrap();
    assert_eq!(
        code(block_on(s.patch_cluster(&member, &id, patch))),
        "forbidden"
    );
    assert_eq!(
        code(block_on(s.delete_cluster(&member, &id, None))),
        "forbidden"
    );
    assert_eq!(
        code(block_on(s.delete_node_pool(&member, &id, "default", None))),
        "forbidden"
    );
    assert_eq!(
        code(block_on(s.delete_cluster(
            &member,
            &uuid::Uuid::from_u128(5).to_string(),
            None
        ))),
        "forbidden",
        "unknown ids too: existence is not revealed"
    );
}

#[test]
fn write_by_member_of_the_organization_is_403() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .services();
    // super_admin elsewhere, member here
    let who = caller(&[(ORG_A, Role::Member), (ORG_B, Role::SuperAdmin)]);
    let patch: ClusterPatch = serde_json::from_value(json!({"tags": ["a"]})).unwrap();
    assert_eq!(
        code(block_on(s.patch_cluster(
            &who,
            &CLUSTER_1.to_string(),
            patch
        ))),
        "forbidden"
    );
}

#[test]
fn write_to_another_organizations_cluster_is_403_and_to_an_unknown_one_404() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_B, ClusterPhase::Provisioned))
        .services();
    assert_eq!(
        code(block_on(s.delete_cluster(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            None
        ))),
        "forbidden"
    );
    let mut m = Mocks::new();
    m.clusters.expect_cluster().returning(|_| Ok(None));
    assert_eq!(
        code(block_on(m.services().delete_cluster(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            None
        ))),
        "not_found"
    );
}

// ---- spec §4 behaviour 8 and CONTRACT §3: PATCH ----

#[test]
fn patch_empty_body_is_422() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .services();
    let r = block_on(s.patch_cluster(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        ClusterPatch::default(),
    ));
    assert_eq!(status(r), 422);
}

#[test]
fn patch_replaces_tags_and_description() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.clusters
        .expect_commit()
        .withf(|w| w.expected_revision == Some(5) && !w.reconcile)
        .returning(|_| Ok(6));
    let patch: ClusterPatch =
        serde_json::from_value(json!({"description": "new", "tags": ["team-a"]})).unwrap();
    let c = block_on(
        m.services()
            .patch_cluster(&super_admin_a(), &CLUSTER_1.to_string(), patch),
    )
    .unwrap();
    assert_eq!(c.description.as_deref(), Some("new"));
    assert_eq!(
        c.tags.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
        ["team-a"]
    );
}

#[test]
fn concurrent_change_is_decided_again_on_a_fresh_read() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    let mut calls = 0;
    m.clusters.expect_commit().times(2).returning(move |_| {
        calls += 1;
        if calls == 1 {
            Err(StoreError::RevisionMismatch)
        } else {
            Ok(7)
        }
    });
    let patch: ClusterPatch = serde_json::from_value(json!({"description": "x"})).unwrap();
    assert_eq!(
        code(block_on(m.services().patch_cluster(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            patch
        ))),
        "ok"
    );
}

#[test]
fn change_to_a_deleting_cluster_is_409_cluster_deleting() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Deleting))
        .services();
    let patch: ClusterPatch = serde_json::from_value(json!({"description": "x"})).unwrap();
    assert_eq!(
        code(block_on(s.patch_cluster(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            patch
        ))),
        "cluster_deleting"
    );
    let add: NodePoolRequest =
        serde_json::from_value(json!({"name": "b", "size": "kube.c5.large", "count": 1})).unwrap();
    assert_eq!(
        code(block_on(s.create_node_pool(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            add,
            None
        ))),
        "cluster_deleting"
    );
}

#[test]
fn failed_cluster_can_only_be_read_and_deleted() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Failed));
    m.clusters.expect_commit().times(1).returning(|_| Ok(6));
    let s = m.services();
    let id = CLUSTER_1.to_string();
    let patch: ClusterPatch = serde_json::from_value(json!({"description": "x"})).unwrap();
    assert_eq!(
        code(block_on(s.patch_cluster(&super_admin_a(), &id, patch))),
        "cluster_failed"
    );
    assert_eq!(
        code(block_on(s.kubeconfig(&super_admin_a(), &id))),
        "cluster_failed"
    );
    assert_eq!(code(block_on(s.get_cluster(&super_admin_a(), &id))), "ok");
    let d = block_on(s.delete_cluster(&super_admin_a(), &id, None))
        .unwrap()
        .fresh()
        .unwrap();
    assert_eq!(d.phase, ClusterPhase::Deleting);
}

#[test]
fn delete_answers_deleting_and_a_second_delete_answers_as_it_is() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.clusters
        .expect_commit()
        .withf(|w| w.reconcile)
        .times(1)
        .returning(|_| Ok(6));
    let d = block_on(
        m.services()
            .delete_cluster(&super_admin_a(), &CLUSTER_1.to_string(), None),
    )
    .unwrap()
    .fresh()
    .unwrap();
    assert_eq!(d.phase, ClusterPhase::Deleting);
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Deleting));
    m.clusters.expect_commit().never();
    let d = block_on(
        m.services()
            .delete_cluster(&super_admin_a(), &CLUSTER_1.to_string(), None),
    )
    .unwrap()
    .fresh()
    .unwrap();
    assert_eq!(d.phase, ClusterPhase::Deleting);
}

// ---- spec §3 and §4 behaviour 6: exposure ----

fn exposure(to: &str) -> ExposurePatch {
    serde_json::from_value(json!({"exposure": to})).unwrap()
}

#[test]
fn exposure_before_provisioned_is_400() {
    for phase in [
        ClusterPhase::Pending,
        ClusterPhase::Provisioning,
        ClusterPhase::ControlPlaneReady,
    ] {
        let s = Mocks::new().with_cluster(cluster(ORG_A, phase)).services();
        let r = block_on(s.change_exposure(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            exposure("public"),
        ));
        assert_eq!(
            (status(r.clone()), code(r)),
            (400, "phase_not_provisioned"),
            "{phase:?}"
        );
    }
}

#[test]
fn exposure_change_starts_and_shows_the_target() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.clusters
        .expect_commit()
        .withf(|w| w.reconcile)
        .returning(|_| Ok(6));
    let o = block_on(m.services().change_exposure(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        exposure("public"),
    ))
    .unwrap();
    assert!(o.started);
    assert_eq!(
        o.cluster.exposure,
        Exposure::Private,
        "exposure shows the current value"
    );
    assert_eq!(
        o.cluster.exposure_change.map(|c| c.to),
        Some(Exposure::Public)
    );
}

#[test]
fn exposure_to_the_current_value_is_200_nothing_started() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.clusters.expect_commit().never();
    let o = block_on(m.services().change_exposure(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        exposure("private"),
    ))
    .unwrap();
    assert!(!o.started);
}

#[test]
fn exposure_while_another_change_is_in_flight_is_409() {
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    c.exposure_change = Some(ExposureChange {
        to: Exposure::Public,
        status: ExposureChangeStatus::InProgress,
    });
    let s = Mocks::new().with_cluster(c).services();
    for to in ["public", "private"] {
        assert_eq!(
            code(block_on(s.change_exposure(
                &super_admin_a(),
                &CLUSTER_1.to_string(),
                exposure(to)
            ))),
            "change_in_flight"
        );
    }
}

#[test]
fn exposure_public_needs_a_zone_with_public_exposure() {
    let text = crate::model::catalog::BUILTIN_CATALOG_JSON.replace(
        "\"public_exposure_enabled\": true",
        "\"public_exposure_enabled\": false",
    );
    let catalog = crate::model::catalog::Catalog::from_json(&text).unwrap();
    let m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    let base = m.services();
    let s = crate::service::Services::new(base.ports().clone(), catalog, Default::default());
    let r =
        block_on(s.change_exposure(&super_admin_a(), &CLUSTER_1.to_string(), exposure("public")));
    assert_eq!(code(r), "public_exposure_unavailable");
}

// ---- spec §3 and §4 behaviour 5: kubeconfig ----

#[test]
fn kubeconfig_before_control_plane_ready_is_202_with_retry_hint() {
    for phase in [ClusterPhase::Pending, ClusterPhase::Provisioning] {
        let s = Mocks::new().with_cluster(cluster(ORG_A, phase)).services();
        let a = block_on(s.kubeconfig(&caller(&[(ORG_A, Role::Member)]), &CLUSTER_1.to_string()))
            .unwrap();
        assert_eq!(
            a,
            KubeconfigAnswer::NotReady {
                phase,
                retry_after_seconds: 5
            }
        );
    }
}

#[test]
fn kubeconfig_from_control_plane_ready_is_served_to_members() {
    for phase in [ClusterPhase::ControlPlaneReady, ClusterPhase::Provisioned] {
        let mut m = Mocks::new().with_cluster(cluster(ORG_A, phase));
        m.clusters.expect_credentials().returning(|_| {
            Ok(Some(SealedCredentials {
                ca_certificate_pem: "PEM".into(),
                token: SealedSecret("sealed".into()),
            }))
        });
        m.vault
            .expect_open()
            .returning(|_| Ok(Secret::new("tok-1")));
        let a = block_on(
            m.services()
                .kubeconfig(&caller(&[(ORG_A, Role::Member)]), &CLUSTER_1.to_string()),
        )
        .unwrap();
        match a {
            KubeconfigAnswer::Ready { yaml, .. } => {
                assert!(yaml.contains("server: https://prod-1-c1c1c1c1.internal:6443"));
                assert!(yaml.contains("token: \"tok-1\""));
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn kubeconfig_may_require_super_admin_by_operator_option() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Pending))
        .services_with(crate::service::Settings {
            kubeconfig_requires_super_admin: true,
            ..Default::default()
        });
    assert_eq!(
        code(block_on(s.kubeconfig(
            &caller(&[(ORG_A, Role::Member)]),
            &CLUSTER_1.to_string()
        ))),
        "forbidden"
    );
    assert_eq!(
        code(block_on(
            s.kubeconfig(&super_admin_a(), &CLUSTER_1.to_string())
        )),
        "ok"
    );
}

// ---- CONTRACT §4: state long-poll ----

#[test]
fn state_answers_at_once_when_version_is_past_since() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.changes.expect_wait().never();
    let a = block_on(m.services().cluster_state(
        &caller(&[(ORG_A, Role::Member)]),
        &CLUSTER_1.to_string(),
        Some("4"),
        None,
    ))
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
        .returning(|_, _, _| ());
    m.clusters
        .expect_revision()
        .returning(|_| Ok(Some((6, ClusterPhase::ControlPlaneReady))));
    let a = block_on(m.services().cluster_state(
        &caller(&[(ORG_A, Role::Member)]),
        &CLUSTER_1.to_string(),
        Some("5"),
        Some("10"),
    ))
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
    let a = block_on(m.services().cluster_state(
        &caller(&[(ORG_A, Role::Member)]),
        &CLUSTER_1.to_string(),
        Some("5"),
        Some("0"),
    ))
    .unwrap();
    assert_eq!((a.version, a.changed), (5, false));
}

#[test]
fn state_query_bounds_are_400() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .services();
    let who = caller(&[(ORG_A, Role::Member)]);
    let id = CLUSTER_1.to_string();
    assert_eq!(
        code(block_on(s.cluster_state(&who, &id, Some("-1"), None))),
        "invalid_query"
    );
    assert_eq!(
        code(block_on(s.cluster_state(&who, &id, None, Some("61")))),
        "invalid_query"
    );
    assert_eq!(
        code(block_on(s.cluster_state(&who, &id, Some("0"), Some("60")))),
        "ok"
    );
}

// ---- node pools: spec §4 behaviour 7, CONTRACT §6 and §10 ----

#[test]
fn pool_size_cannot_change() {
    assert!(serde_json::from_value::<NodePoolPatch>(json!({"size": "kube.m5.large"})).is_err());
}

#[test]
fn last_pool_cannot_be_deleted() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .services();
    let r = block_on(s.delete_node_pool(&super_admin_a(), &CLUSTER_1.to_string(), "default", None));
    assert_eq!((status(r.clone()), code(r)), (409, "last_pool"));
}

#[test]
fn a_deleting_pool_does_not_count_toward_the_last_pool() {
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    let mut old = pool("old", 2);
    old.status = PoolStatus::Deleting;
    c.node_pools.push(old);
    let s = Mocks::new().with_cluster(c).services();
    assert_eq!(
        code(block_on(s.delete_node_pool(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            "default",
            None
        ))),
        "last_pool"
    );
}

#[test]
fn pool_delete_answers_the_pool_deleting() {
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    c.node_pools.push(pool("second", 2));
    let mut m = Mocks::new().with_cluster(c);
    m.clusters.expect_commit().returning(|_| Ok(6));
    let p = block_on(m.services().delete_node_pool(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        "second",
        None,
    ))
    .unwrap()
    .fresh()
    .unwrap();
    assert_eq!(p.status, PoolStatus::Deleting);
}

#[test]
fn pool_name_unique_on_the_cluster_is_409() {
    let mut m = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .with_organizations(vec![organization(ORG_A, Plan::Postpaid, 0)]);
    m.clusters.expect_commit().never();
    let add: NodePoolRequest =
        serde_json::from_value(json!({"size": "kube.c5.large", "count": 1})).unwrap();
    assert_eq!(
        code(block_on(m.services().create_node_pool(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            add,
            None
        ))),
        "name_conflict"
    );
}

fn pool_ready(org_plan: Plan, credit: i64) -> Mocks {
    let mut m = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .with_organizations(vec![organization(ORG_A, org_plan, credit)]);
    m.clusters.expect_zone_node_demand().returning(|_| Ok(3));
    m.cloud.expect_zone_capacity().returning(|_| 10_000);
    m.clusters.expect_commit().returning(|_| Ok(6));
    m
}

#[test]
fn pool_add_needs_credit_when_prepaid() {
    let add = || {
        serde_json::from_value::<NodePoolRequest>(
            json!({"name": "b", "size": "kube.c5.large", "count": 1}),
        )
        .unwrap()
    };
    let r = block_on(pool_ready(Plan::Prepaid, 0).services().create_node_pool(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        add(),
        None,
    ));
    assert_eq!(code(r), "insufficient_credit");
    let p = block_on(pool_ready(Plan::Prepaid, 100).services().create_node_pool(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        add(),
        None,
    ));
    assert_eq!(
        p.unwrap().fresh().map(|p| p.status),
        Some(PoolStatus::Provisioning)
    );
}

#[test]
fn pool_add_with_unknown_tier_is_400() {
    let add: NodePoolRequest =
        serde_json::from_value(json!({"name": "b", "size": "kube.z1.tiny", "count": 1})).unwrap();
    assert_eq!(
        code(block_on(
            pool_ready(Plan::Postpaid, 0).services().create_node_pool(
                &super_admin_a(),
                &CLUSTER_1.to_string(),
                add,
                None
            )
        )),
        "unknown_machine_tier"
    );
}

#[test]
fn pool_add_beyond_twenty_pools_is_422() {
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    for i in 1..20 {
        c.node_pools.push(pool(&format!("p{i}"), 1));
    }
    let s = Mocks::new().with_cluster(c).services();
    let add: NodePoolRequest =
        serde_json::from_value(json!({"name": "b", "size": "kube.c5.large", "count": 1})).unwrap();
    assert_eq!(
        status(block_on(s.create_node_pool(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            add,
            None
        ))),
        422
    );
}

#[test]
fn scale_up_needs_credit_scale_down_never_does() {
    let patch =
        |count: i64| serde_json::from_value::<NodePoolPatch>(json!({"count": count})).unwrap();
    let up = block_on(pool_ready(Plan::Prepaid, 0).services().patch_node_pool(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        "default",
        patch(5),
        None,
    ));
    assert_eq!(code(up), "insufficient_credit");
    let down = block_on(pool_ready(Plan::Prepaid, 0).services().patch_node_pool(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        "default",
        patch(1),
        None,
    ));
    let p = down.unwrap().fresh().unwrap();
    assert_eq!((p.count, p.status), (1, PoolStatus::Scaling));
}

#[test]
fn scale_past_zone_capacity_is_503() {
    let mut m = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .with_organizations(vec![organization(ORG_A, Plan::Postpaid, 0)]);
    m.clusters
        .expect_zone_node_demand()
        .returning(|_| Ok(9_999));
    m.cloud.expect_zone_capacity().returning(|_| 10_000);
    let patch = serde_json::from_value::<NodePoolPatch>(json!({"count": 5})).unwrap();
    assert_eq!(
        code(block_on(m.services().patch_node_pool(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            "default",
            patch,
            None
        ))),
        "capacity_exhausted"
    );
}

#[test]
fn pool_patch_while_scaling_replaces_the_target() {
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    c.node_pools[0].status = PoolStatus::Scaling;
    let mut m = Mocks::new()
        .with_cluster(c)
        .with_organizations(vec![organization(ORG_A, Plan::Postpaid, 0)]);
    m.clusters.expect_zone_node_demand().returning(|_| Ok(3));
    m.cloud.expect_zone_capacity().returning(|_| 10_000);
    m.clusters.expect_commit().returning(|_| Ok(6));
    let patch = serde_json::from_value::<NodePoolPatch>(json!({"count": 7})).unwrap();
    let p = block_on(m.services().patch_node_pool(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        "default",
        patch,
        None,
    ))
    .unwrap()
    .fresh()
    .unwrap();
    assert_eq!((p.count, p.status), (7, PoolStatus::Scaling));
}

#[test]
fn pool_patch_turning_auto_scale_off_needs_count_at_least_one() {
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    c.node_pools[0].auto_scale = true;
    c.node_pools[0].count = 0;
    c.node_pools[0].min_nodes = 0;
    c.node_pools[0].max_nodes = Some(5);
    let s = Mocks::new().with_cluster(c).services();
    let patch = serde_json::from_value::<NodePoolPatch>(json!({"auto_scale": false})).unwrap();
    assert_eq!(
        status(block_on(s.patch_node_pool(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            "default",
            patch,
            None
        ))),
        422
    );
}

#[test]
fn pool_patch_unknown_pool_is_404_and_deleting_pool_409() {
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    let mut d = pool("going", 1);
    d.status = PoolStatus::Deleting;
    c.node_pools.push(d);
    let s = Mocks::new().with_cluster(c).services();
    let patch = || serde_json::from_value::<NodePoolPatch>(json!({"labels": {"a": "b"}})).unwrap();
    assert_eq!(
        code(block_on(s.patch_node_pool(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            "nosuch",
            patch(),
            None
        ))),
        "not_found"
    );
    assert_eq!(
        code(block_on(s.patch_node_pool(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            "going",
            patch(),
            None
        ))),
        "invalid_state"
    );
}

// ---- Elastic IPs: spec §4 behaviours 9 and 10, §1 assistant ----

fn eip(status: ElasticIpStatus) -> ElasticIp {
    ElasticIp {
        id: uuid::Uuid::from_u128(0xe1),
        cluster_id: CLUSTER_1,
        name: None,
        exposure: Exposure::Private,
        status,
        address: std::net::Ipv4Addr::new(10, 96, 0, 1),
        failure_reason: None,
        created_at: at(0),
        updated_at: at(0),
    }
}

fn eip_ready(network_mode: NetworkMode, private: &str, public: Option<&str>) -> Mocks {
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    c.network_mode = network_mode;
    let mut m = Mocks::new().with_cluster(c);
    let private = AddressPool::new(Ipv4Cidr::parse(private).unwrap());
    let public = public.map(|p| AddressPool::new(Ipv4Cidr::parse(p).unwrap()));
    m.cloud.expect_address_pool().returning(move |e| {
        if e == Exposure::Private {
            Some(private)
        } else {
            public
        }
    });
    m.clusters.expect_elastic_ips().returning(|_| Ok(vec![]));
    m.clusters.expect_commit().returning(|_| Ok(6));
    m
}

fn eip_body(v: serde_json::Value) -> CreateElasticIpRequest {
    serde_json::from_value(v).unwrap()
}

#[test]
fn elastic_ip_intranet_allows_only_private() {
    let mut m = eip_ready(
        NetworkMode::Intranet,
        "10.96.0.0/16",
        Some("198.51.100.0/24"),
    );
    m.clusters
        .expect_addresses_in_use()
        .returning(|_| Ok(Default::default()));
    let s = m.services();
    let r = block_on(s.create_elastic_ip(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        eip_body(json!({"exposure": "public"})),
        None,
    ));
    assert_eq!((status(r.clone()), code(r)), (409, "exposure_mismatch"));
    let ok = block_on(s.create_elastic_ip(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        eip_body(json!({"name": "web", "exposure": "private"})),
        None,
    ));
    let v = ok.unwrap().fresh().unwrap();
    assert_eq!(
        (v.status, v.address.clone(), v.annotation.key.as_str()),
        (ElasticIpStatus::Pending, None, "k8s.example.com/elastic-ip")
    );
}

#[test]
fn elastic_ip_internet_allows_only_public() {
    let mut m = eip_ready(
        NetworkMode::Internet,
        "10.96.0.0/16",
        Some("198.51.100.0/24"),
    );
    m.clusters
        .expect_addresses_in_use()
        .returning(|_| Ok(Default::default()));
    let s = m.services();
    let r = block_on(s.create_elastic_ip(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        eip_body(json!({"exposure": "private"})),
        None,
    ));
    assert_eq!(code(r), "exposure_mismatch");
    let ok = block_on(s.create_elastic_ip(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        eip_body(json!({})),
        None,
    ));
    assert_eq!(
        ok.unwrap().fresh().map(|v| v.exposure),
        Some(Exposure::Public),
        "omitted exposure follows the network mode"
    );
}

#[test]
fn elastic_ip_public_pool_disabled_is_503() {
    let s = eip_ready(NetworkMode::Internet, "10.96.0.0/16", None).services();
    let r = block_on(s.create_elastic_ip(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        eip_body(json!({"exposure": "public"})),
        None,
    ));
    assert_eq!((status(r.clone()), code(r)), (503, "capacity_exhausted"));
}

#[test]
fn elastic_ip_exhausted_pool_is_503() {
    let mut m = eip_ready(NetworkMode::Intranet, "192.0.2.0/30", None);
    m.clusters.expect_addresses_in_use().returning(|_| {
        Ok([
            std::net::Ipv4Addr::new(192, 0, 2, 1),
            std::net::Ipv4Addr::new(192, 0, 2, 2),
        ]
        .into_iter()
        .collect())
    });
    let r = block_on(m.services().create_elastic_ip(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        eip_body(json!({})),
        None,
    ));
    assert_eq!(code(r), "capacity_exhausted");
}

#[test]
fn elastic_ip_release_only_from_ready_or_failed() {
    for (from, expected) in [
        (ElasticIpStatus::Ready, "ok"),
        (ElasticIpStatus::Failed, "ok"),
        (ElasticIpStatus::Pending, "invalid_state"),
        (ElasticIpStatus::Provisioning, "invalid_state"),
        (ElasticIpStatus::Deleting, "invalid_state"),
    ] {
        let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
        m.clusters
            .expect_elastic_ips()
            .returning(move |_| Ok(vec![eip(from)]));
        m.clusters.expect_commit().returning(|_| Ok(6));
        let r = block_on(m.services().release_elastic_ip(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            &uuid::Uuid::from_u128(0xe1).to_string(),
            None,
        ));
        assert_eq!(code(r.clone()), expected, "{from:?}");
        if let Ok(a) = r {
            assert_eq!(a.fresh().map(|v| v.status), Some(ElasticIpStatus::Deleting));
        }
    }
}

#[test]
fn assistant_may_list_but_not_allocate_or_release_elastic_ips() {
    let mut who = super_admin_a();
    who.client = ClientKind::Assistant;
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.clusters
        .expect_elastic_ips()
        .returning(|_| Ok(vec![eip(ElasticIpStatus::Ready)]));
    m.clusters.expect_commit().never();
    let s = m.services();
    let id = CLUSTER_1.to_string();
    assert_eq!(
        block_on(s.list_elastic_ips(&who, &id)).map(|l| l.len()),
        Ok(1)
    );
    assert_eq!(
        code(block_on(s.create_elastic_ip(
            &who,
            &id,
            eip_body(json!({})),
            None
        ))),
        "assistant_not_allowed"
    );
    assert_eq!(
        code(block_on(s.release_elastic_ip(
            &who,
            &id,
            &uuid::Uuid::from_u128(0xe1).to_string(),
            None
        ))),
        "assistant_not_allowed"
    );
    let rule: CreateFirewallRuleRequest =
        serde_json::from_value(json!({"protocol": "icmp", "source_cidrs": ["10.0.0.0/8"]}))
            .unwrap();
    assert_eq!(
        code(block_on(s.create_firewall_rule(&who, &id, rule, None))),
        "assistant_not_allowed"
    );
    assert_eq!(
        code(block_on(s.delete_firewall_rule(
            &who,
            &id,
            &uuid::Uuid::from_u128(1).to_string(),
            None
        ))),
        "assistant_not_allowed"
    );
}

// ---- firewall rules: spec §4 behaviour 11, CONTRACT §7 ----

#[test]
fn firewall_rule_create_needs_a_provisioned_cluster() {
    for phase in [
        ClusterPhase::Pending,
        ClusterPhase::Provisioning,
        ClusterPhase::ControlPlaneReady,
    ] {
        let s = Mocks::new().with_cluster(cluster(ORG_A, phase)).services();
        let rule: CreateFirewallRuleRequest =
            serde_json::from_value(json!({"protocol": "icmp", "source_cidrs": ["10.0.0.0/8"]}))
                .unwrap();
        let r =
            block_on(s.create_firewall_rule(&super_admin_a(), &CLUSTER_1.to_string(), rule, None));
        assert_eq!(
            (status(r.clone()), code(r)),
            (409, "cluster_not_provisioned"),
            "{phase:?}"
        );
    }
}

#[test]
fn firewall_rule_create_on_a_provisioned_cluster_is_pending() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.clusters.expect_firewall_rules().returning(|_| Ok(vec![]));
    m.clusters.expect_commit().returning(|_| Ok(6));
    let rule: CreateFirewallRuleRequest = serde_json::from_value(json!({"name": "https", "protocol": "tcp", "source_cidrs": ["203.0.113.0/24"], "port_range": {"from": 443, "to": 443}})).unwrap();
    let r = block_on(m.services().create_firewall_rule(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        rule,
        None,
    ))
    .unwrap()
    .fresh()
    .unwrap();
    assert_eq!(
        r.status,
        crate::model::firewall::FirewallRuleStatus::Pending
    );
}

#[test]
fn firewall_rule_with_17_cidrs_is_422() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .services();
    let cidrs: Vec<String> = (0..17).map(|i| format!("10.{i}.0.0/16")).collect();
    let rule: CreateFirewallRuleRequest = serde_json::from_value(
        json!({"protocol": "udp", "source_cidrs": cidrs, "port_range": {"from": 53, "to": 53}}),
    )
    .unwrap();
    assert_eq!(
        status(block_on(s.create_firewall_rule(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            rule,
            None
        ))),
        422
    );
}

// ---- spec §5: authentication ----

#[test]
fn token_rejected_by_the_platform_is_401_invalid_bearer_token() {
    let mut m = Mocks::new();
    m.identity
        .expect_caller()
        .returning(|_| Err(IdentityError::InvalidToken));
    let e = block_on(m.services().authenticate(Some("Bearer expired"))).unwrap_err();
    assert_eq!(
        (e.status(), e.to_string()),
        (401, "invalid bearer token".to_owned())
    );
}

#[test]
fn platform_unreachable_is_502() {
    let mut m = Mocks::new();
    m.identity
        .expect_caller()
        .returning(|_| Err(IdentityError::Unavailable("connection refused".into())));
    let e = block_on(m.services().authenticate(Some("Bearer t"))).unwrap_err();
    assert_eq!((e.status(), e.code()), (502, "auth_backend_unavailable"));
}

#[test]
fn missing_or_malformed_authorization_is_401_without_asking_the_platform() {
    let mut m = Mocks::new();
    m.identity.expect_caller().never();
    let s = m.services();
    for (header, text) in [
        (None, "Authorization header missing"),
        (Some("Basic x"), "scheme must be Bearer"),
        (Some("Bearer  "), "Bearer token is empty"),
    ] {
        let e = block_on(s.authenticate(header)).unwrap_err();
        assert_eq!((e.status(), e.to_string()), (401, text.to_owned()));
    }
}

#[test]
fn node_delete_marks_it_deleting_and_unknown_names_are_404() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.clusters.expect_nodes().returning(|_, _| {
        Ok(vec![crate::model::node::Node {
            name: crate::names::NodeName::parse("prod-1-default-abcde").unwrap(),
            pool: crate::names::DnsLabel::from_trusted("default".into()),
            status: crate::model::node::NodeStatus::Ready,
            created_at: at(0),
        }])
    });
    m.clusters
        .expect_commit()
        .withf(|w| w.reconcile)
        .returning(|_| Ok(6));
    let s = m.services();
    let n = block_on(s.delete_node(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        "prod-1-default-abcde",
        None,
    ))
    .unwrap()
    .fresh()
    .unwrap();
    assert_eq!(n.status, crate::model::node::NodeStatus::Deleting);
    assert_eq!(
        code(block_on(s.delete_node(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            "prod-1-default-zzzzz",
            None
        ))),
        "not_found"
    );
    assert_eq!(
        code(block_on(s.delete_node(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            "../x",
            None
        ))),
        "not_found"
    );
}

#[test]
fn conflict_variants_render_distinct_codes() {
    assert_eq!(
        DomainError::Conflict(Conflict::LastPool).code(),
        "last_pool"
    );
}

// ---- gateway auth servers: CONTRACT §9 ----

mod auth_servers {
    use super::*;
    use crate::input::auth_server::{AuthServerPatch, CreateAuthServerRequest, CredentialRequest};
    use crate::model::auth_server::{
        AuthServer, AuthServerConfig, BasicConfig, BasicCredential, CredentialView,
    };
    use crate::model::secret::{PasswordHash, TokenDigest};
    use crate::ports::storage::{AuthServerChange, AuthServerWrite, UniqueRule};
    use crate::rules::MAX_CREDENTIALS_PER_AUTH_SERVER;

    fn vault(m: &mut Mocks) {
        m.vault
            .expect_hash_password()
            .returning(|p| Ok(PasswordHash(format!("$argon2id$fake${}", p.len()))));
        m.vault
            .expect_digest_token()
            .returning(|t| TokenDigest(format!("sha256-of-{}", t.len())));
        m.vault
            .expect_seal()
            .returning(|_| Ok(SealedSecret("v1:sealed".into())));
    }

    fn create(v: serde_json::Value) -> CreateAuthServerRequest {
        serde_json::from_value(v).unwrap()
    }

    fn basic_server(usernames: &[&str]) -> AuthServer {
        AuthServer {
            id: uuid::Uuid::from_u128(0xa5),
            organization_id: ORG_A,
            organization_slug: "acme".into(),
            name: crate::names::DnsLabel::from_trusted("partners".into()),
            environment: crate::names::DnsLabel::from_trusted("production".into()),
            config: AuthServerConfig::Basic(BasicConfig {
                realm: None,
                credentials: usernames
                    .iter()
                    .enumerate()
                    .map(|(i, u)| BasicCredential {
                        id: uuid::Uuid::from_u128(i as u128 + 1),
                        username: (*u).into(),
                        password_hash: PasswordHash("h".into()),
                    })
                    .collect(),
            }),
            created_at: at(0),
            updated_at: at(0),
        }
    }

    #[test]
    fn auth_server_secrets_are_protected_before_storage_and_never_answered() {
        let mut m = Mocks::new().with_organizations(vec![organization(ORG_A, Plan::Postpaid, 0)]);
        vault(&mut m);
        m.auth_servers
            .expect_write_auth_server()
            .withf(|w: &AuthServerWrite| match &w.change {
                AuthServerChange::Insert(s) => matches!(&s.config, AuthServerConfig::Basic(b) if b.credentials[0].password_hash.0.starts_with("$argon2id$"))
                    && !format!("{w:?}").contains("hunter2-hunter2"),
                _ => false,
            })
            .times(1)
            .returning(|_| Ok(()));
        let body = create(
            json!({"organization": "acme", "name": "partners", "environment": "production", "type": "basic",
                                 "config": {"credentials": [{"username": "alice", "password": "hunter2-hunter2"}]}}),
        );
        let v = block_on(
            m.services()
                .create_auth_server(&super_admin_a(), body, None),
        )
        .unwrap()
        .fresh()
        .unwrap();
        let text = serde_json::to_string(&v).unwrap();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("\"username\":\"alice\""));
        assert!(
            text.contains("\"realm\":\"partners\""),
            "the realm defaults to the server's name: {text}"
        );
    }

    #[test]
    fn auth_server_oidc_answers_client_secret_set_and_token_hints() {
        let mut m = Mocks::new().with_organizations(vec![organization(ORG_A, Plan::Postpaid, 0)]);
        vault(&mut m);
        m.auth_servers
            .expect_write_auth_server()
            .returning(|_| Ok(()));
        let s = m.services();
        let oidc = create(
            json!({"organization": "acme", "name": "sso", "environment": "production", "type": "oidc",
            "config": {"issuer_url": "https://id.example.com", "redirect_path": "/cb", "client_id": "app", "client_secret": "top-secret-value", "authorized_domain": "app.example.com"}}),
        );
        let v = serde_json::to_value(
            block_on(s.create_auth_server(&super_admin_a(), oidc, None))
                .unwrap()
                .fresh()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(v["config"]["client_secret_set"], true);
        assert!(!v.to_string().contains("top-secret-value"));
        let token = create(
            json!({"organization": "acme", "name": "machines", "environment": "production", "type": "token",
            "config": {"tokens": ["0123456789abcdefWXYZ"]}}),
        );
        let v = serde_json::to_value(
            block_on(s.create_auth_server(&super_admin_a(), token, None))
                .unwrap()
                .fresh()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(v["config"]["tokens"][0]["hint"], "…WXYZ");
        assert!(!v.to_string().contains("0123456789abcdef"));
    }

    #[test]
    fn auth_server_name_taken_in_the_organization_and_environment_is_409() {
        let mut m = Mocks::new().with_organizations(vec![organization(ORG_A, Plan::Postpaid, 0)]);
        vault(&mut m);
        m.auth_servers
            .expect_write_auth_server()
            .returning(|_| Err(StoreError::Duplicate(UniqueRule::AuthServerName)));
        let body = create(
            json!({"organization": "acme", "name": "machines", "environment": "production", "type": "token",
            "config": {"tokens": ["0123456789abcdefWXYZ"]}}),
        );
        assert_eq!(
            code(block_on(m.services().create_auth_server(
                &super_admin_a(),
                body,
                None
            ))),
            "name_conflict"
        );
    }

    #[test]
    fn auth_server_create_needs_super_admin_there() {
        let body = create(
            json!({"organization": "acme", "name": "machines", "environment": "production", "type": "token",
            "config": {"tokens": ["0123456789abcdefWXYZ"]}}),
        );
        let r = block_on(Mocks::new().services().create_auth_server(
            &caller(&[(ORG_A, Role::Member)]),
            body,
            None,
        ));
        assert_eq!(code(r), "forbidden");
    }

    #[test]
    fn auth_server_removing_the_last_credential_is_409_and_unknown_is_404() {
        let mut m = Mocks::new();
        m.auth_servers
            .expect_auth_server()
            .returning(|_| Ok(Some(basic_server(&["alice"]))));
        let s = m.services();
        let id = uuid::Uuid::from_u128(0xa5).to_string();
        assert_eq!(
            code(block_on(s.remove_credential(
                &super_admin_a(),
                &id,
                &uuid::Uuid::from_u128(1).to_string(),
                None
            ))),
            "last_credential"
        );
        assert_eq!(
            code(block_on(s.remove_credential(
                &super_admin_a(),
                &id,
                &uuid::Uuid::from_u128(99).to_string(),
                None
            ))),
            "not_found"
        );
    }

    #[test]
    fn auth_server_duplicate_username_is_409_and_an_oidc_server_takes_no_credentials() {
        let mut m = Mocks::new();
        vault(&mut m);
        m.auth_servers
            .expect_auth_server()
            .returning(|_| Ok(Some(basic_server(&["alice"]))));
        let s = m.services();
        let id = uuid::Uuid::from_u128(0xa5).to_string();
        let dup: CredentialRequest =
            serde_json::from_value(json!({"username": "alice", "password": "x"})).unwrap();
        assert_eq!(
            code(block_on(s.add_credential(&super_admin_a(), &id, dup, None))),
            "name_conflict"
        );
        let wrong_shape: CredentialRequest =
            serde_json::from_value(json!({"token": "0123456789abcdefWXYZ"})).unwrap();
        assert_eq!(
            status(block_on(s.add_credential(
                &super_admin_a(),
                &id,
                wrong_shape,
                None
            ))),
            422
        );
    }

    #[test]
    fn auth_server_at_its_credential_limit_refuses_another_before_hashing_it() {
        let mut m = Mocks::new();
        // No vault expectations: a hash would fail the test.
        let full: Vec<String> = (0..MAX_CREDENTIALS_PER_AUTH_SERVER)
            .map(|i| format!("user{i}"))
            .collect();
        m.auth_servers.expect_auth_server().returning(move |_| {
            let names: Vec<&str> = full.iter().map(String::as_str).collect();
            Ok(Some(basic_server(&names)))
        });
        let add: CredentialRequest =
            serde_json::from_value(json!({"username": "one-more", "password": "pw"})).unwrap();
        let r = block_on(m.services().add_credential(
            &super_admin_a(),
            &uuid::Uuid::from_u128(0xa5).to_string(),
            add,
            None,
        ));
        assert_eq!(status(r), 422);
    }

    #[test]
    fn auth_server_credential_added_answers_id_and_username() {
        let mut m = Mocks::new();
        vault(&mut m);
        m.auth_servers
            .expect_auth_server()
            .returning(|_| Ok(Some(basic_server(&["alice"]))));
        m.auth_servers
            .expect_write_auth_server()
            .withf(|w| matches!(&w.change, AuthServerChange::Update { server, .. } if server.config.credential_count() == 2) && w.audit.action == "credential_added")
            .returning(|_| Ok(()));
        let add: CredentialRequest =
            serde_json::from_value(json!({"username": "bob", "password": "pw"})).unwrap();
        let v = block_on(m.services().add_credential(
            &super_admin_a(),
            &uuid::Uuid::from_u128(0xa5).to_string(),
            add,
            None,
        ))
        .unwrap()
        .fresh()
        .unwrap();
        assert!(matches!(v, CredentialView::Basic { ref username, .. } if username == "bob"));
    }

    #[test]
    fn auth_server_patch_merges_and_is_audited_without_secrets() {
        let mut m = Mocks::new();
        m.auth_servers
            .expect_auth_server()
            .returning(|_| Ok(Some(basic_server(&["alice"]))));
        m.auth_servers
            .expect_write_auth_server()
            .withf(|w| w.audit.action == "updated" && w.audit.details.to_string().contains("realm"))
            .returning(|_| Ok(()));
        let patch: AuthServerPatch =
            serde_json::from_value(json!({"config": {"realm": "Partner area"}})).unwrap();
        let v = block_on(m.services().patch_auth_server(
            &super_admin_a(),
            &uuid::Uuid::from_u128(0xa5).to_string(),
            patch,
        ))
        .unwrap();
        assert_eq!(
            serde_json::to_value(&v).unwrap()["config"]["realm"],
            "Partner area"
        );
    }
}
