//! Collection reads: which organization, and the roles that may read it.

use super::*;

use crate::input::cluster::ListClusters;

/// The first page of the clusters of the organization `org` selects, in every zone.
fn list(org: OrgSelector) -> ListClusters {
    ListClusters {
        org,
        zone: None,
        page: FIRST_PAGE,
        freshness: Freshness::Latest,
    }
}

#[test]
fn list_no_organization_resolvable_is_400() {
    let r = block_on(
        Mocks::new()
            .services()
            .list_clusters(&super_admin_a(), list(sel(None, None))),
    );
    assert_eq!(code(r), "organization_required");
}

#[test]
fn list_query_wins_over_header_which_wins_over_preferred() {
    let mut m = Mocks::new();
    m.clusters
        .expect_list_clusters()
        .withf(|org, _, _, _| *org == ORG_B)
        .times(3)
        .returning(|_, _, _, _| {
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
            list(sel(Some("globex"), Some("acme")))
        ))),
        "ok"
    );
    assert_eq!(
        code(block_on(
            s.list_clusters(&who, list(sel(Some(""), Some("globex"))))
        )),
        "ok",
        "an empty query value does not count"
    );
    who.preferred_organization = Some(ORG_B);
    assert_eq!(
        code(block_on(s.list_clusters(&who, list(sel(None, None))))),
        "ok"
    );
}

#[test]
fn list_organization_by_uuid_rule() {
    let mut m = Mocks::new();
    m.clusters
        .expect_list_clusters()
        .withf(|org, _, _, _| *org == ORG_A)
        .returning(|_, _, _, _| {
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
            list(sel(Some(&ORG_A.to_string()), None))
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
        code(block_on(
            s.list_clusters(&who, list(sel(Some("nosuch"), None)))
        )),
        "not_found"
    );
    assert_eq!(
        code(block_on(
            s.list_clusters(&who, list(sel(Some("globex"), None)))
        )),
        "forbidden"
    );
    assert_eq!(
        code(block_on(s.list_clusters(
            &who,
            list(sel(Some("zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz"), None))
        ))),
        "not_found"
    );
}

#[test]
fn list_asks_the_store_for_the_page_and_an_unknown_zone_is_400() {
    let mut m = Mocks::new();
    m.clusters
        .expect_list_clusters()
        .withf(|_, _, p, f| *p == PageRequest { page: 3, size: 7 } && *f == Freshness::Recent)
        .returning(|_, _, _, _| {
            Ok(Page {
                items: vec![],
                total: 0,
            })
        });
    let s = m.services();
    let who = caller(&[(ORG_A, Role::Member)]);
    let acme = || list(sel(Some("acme"), None));
    let third = ListClusters {
        page: PageRequest { page: 3, size: 7 },
        freshness: Freshness::Recent,
        ..acme()
    };
    let page = block_on(s.list_clusters(&who, third));
    assert_eq!(page.map(|p| (p.page, p.size)), Ok((3, 7)));
    let unknown_zone = ListClusters {
        zone: Some("zone-9".into()),
        ..acme()
    };
    assert_eq!(
        code(block_on(s.list_clusters(&who, unknown_zone))),
        "unknown_zone"
    );
}

#[test]
fn catalog_resolves_its_organization_and_zone() {
    let s = Mocks::new().services();
    let who = caller(&[(ORG_A, Role::ProjectAdmin)]);
    assert_eq!(
        code(block_on(s.catalog(&who, &sel(None, None), None))),
        "organization_required"
    );
    let view = block_on(s.catalog(&who, &sel(None, Some("acme")), Some("zone-1"))).unwrap();
    assert_eq!(view.zone.id, "zone-1");
    assert_eq!(
        code(block_on(s.catalog(
            &who,
            &sel(None, Some("acme")),
            Some("nowhere")
        ))),
        "unknown_zone"
    );
}
