//! The kubeconfig: not before the control plane is up.

use super::*;

#[test]
fn kubeconfig_before_control_plane_ready_is_202_with_retry_hint() {
    for phase in [ClusterPhase::Pending, ClusterPhase::Provisioning] {
        let s = Mocks::new().with_cluster(cluster(ORG_A, phase)).services();
        let a = block_on(s.kubeconfig(
            &caller(&[(ORG_A, Role::Member)]),
            CLUSTER_1,
            Default::default(),
        ))
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
        let a = block_on(m.services().kubeconfig(
            &caller(&[(ORG_A, Role::Member)]),
            CLUSTER_1,
            Default::default(),
        ))
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
            CLUSTER_1,
            Default::default()
        ))),
        "forbidden"
    );
    assert_eq!(
        code(block_on(s.kubeconfig(
            &super_admin_a(),
            CLUSTER_1,
            Default::default()
        ))),
        "ok"
    );
}

// ---------------------------------------------------------------- credentials of their own

use crate::model::kubeconfig::IssuedCredential;
use crate::model::secret::TokenDigest;
use crate::ports::storage::Revoke;
use crate::service::{KubeconfigRequest, Reviewed};

/// A provisioned acme cluster whose standing token is `standing`; digests are `d:<token>`.
fn with_standing(standing: &'static str) -> Mocks {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.clusters.expect_credentials().returning(|_| {
        Ok(Some(SealedCredentials {
            ca_certificate_pem: "PEM".into(),
            token: SealedSecret("sealed".into()),
        }))
    });
    m.vault
        .expect_open()
        .returning(move |_| Ok(Secret::new(standing)));
    m.vault
        .expect_digest_token()
        .returning(|t| TokenDigest(format!("d:{}", t.expose())));
    m
}

fn issued(holder: &str, expires_at: i64, revoked: bool) -> IssuedCredential {
    IssuedCredential {
        id: uuid::Uuid::from_u128(0xcc),
        cluster_id: CLUSTER_1,
        organization_id: ORG_A,
        issued_to: crate::model::audit::Actor {
            user_id: holder.into(),
            email: None,
            client: ClientKind::Api,
        },
        created_at: at(0),
        expires_at: at(expires_at),
        revoked_at: revoked.then(|| at(1)),
        revoked_by: revoked.then(|| "user-1".into()),
    }
}

#[test]
fn a_lifetime_issues_a_credential_of_its_own_recorded_by_digest_with_its_event() {
    let mut m = with_standing("standing");
    m.credentials
        .expect_issued_credentials()
        .returning(|_| Ok(vec![]));
    m.credentials
        .expect_issue_credential()
        .withf(|c, digest, audit| {
            digest.0.starts_with("d:kc-")
                && c.expires_at - c.created_at == chrono::Duration::seconds(600)
                && audit.resource == crate::model::audit::AuditResource::KubeconfigCredential
                && !audit.changes.to_string().contains("kc-")
        })
        .times(1)
        .returning(|_, _, _| Ok(()));
    let answer = block_on(m.services().kubeconfig(
        &caller(&[(ORG_A, Role::Member)]),
        CLUSTER_1,
        KubeconfigRequest {
            expiry_seconds: Some(600),
        },
    ))
    .unwrap();
    let KubeconfigAnswer::Ready {
        yaml, credential, ..
    } = answer
    else {
        panic!("ready expected")
    };
    let credential = credential.unwrap();
    assert!(!yaml.contains("\"standing\""), "{yaml}");
    assert!(yaml.contains("token: \"kc-"), "{yaml}");
    assert!(yaml.contains(&credential.id.to_string()), "{yaml}");
}

#[test]
fn a_lifetime_out_of_bounds_issues_nothing() {
    for seconds in [
        0,
        59,
        crate::service::KUBECONFIG_EXPIRY_MAX_SECONDS_DEFAULT + 1,
    ] {
        let mut m = with_standing("standing");
        m.credentials.expect_issue_credential().never();
        let r = block_on(m.services().kubeconfig(
            &super_admin_a(),
            CLUSTER_1,
            KubeconfigRequest {
                expiry_seconds: Some(seconds),
            },
        ));
        assert_eq!(code(r), "validation_failed", "{seconds}");
    }
}

#[test]
fn only_the_holder_or_a_super_admin_revokes_a_credential() {
    let cases = [
        ("user-1", Role::Member, "ok"),
        ("someone-else", Role::Member, "forbidden"),
        ("someone-else", Role::ProjectAdmin, "forbidden"),
        ("someone-else", Role::SuperAdmin, "ok"),
    ];
    for (holder, role, expected) in cases {
        let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
        let found = issued(holder, 3600, false);
        m.credentials
            .expect_issued_credentials()
            .returning(move |_| Ok(vec![found.clone()]));
        m.credentials
            .expect_revoke_credentials()
            .withf(|r| r.revoke == Revoke::One(uuid::Uuid::from_u128(0xcc)))
            .returning(|_| Ok(1));
        let r = block_on(m.services().revoke_credential(
            &caller(&[(ORG_A, role)]),
            CLUSTER_1,
            uuid::Uuid::from_u128(0xcc),
        ));
        assert_eq!(code(r), expected, "{holder} as {role:?}");
    }
}

#[test]
fn the_cluster_accepts_the_standing_token_and_active_credentials_of_its_own_only() {
    let cases = [
        ("standing", None, true),
        ("kc-own", Some(issued("user-1", 3600, false)), true),
        ("kc-own", Some(issued("user-1", 3600, true)), false),
        ("kc-own", Some(issued("user-1", 0, false)), false),
        (
            "kc-own",
            Some(IssuedCredential {
                cluster_id: uuid::Uuid::from_u128(0xdead),
                ..issued("user-1", 3600, false)
            }),
            false,
        ),
        ("kc-unknown", None, false),
    ];
    for (token, found, accepted) in cases {
        let mut m = with_standing("standing");
        m.credentials
            .expect_credential_by_digest()
            .returning(move |_| Ok(found.clone()));
        let reviewed = block_on(m.services().review_token(
            CLUSTER_1,
            &Secret::new(token),
            "127.0.0.1".parse().unwrap(),
        ))
        .unwrap();
        assert_eq!(
            reviewed != Reviewed::Refused,
            accepted,
            "{token}: {reviewed:?}"
        );
    }
}

/// Behind an enabled control-plane firewall the cluster refuses a caller from outside its
/// networks whatever the token (not even looked at), and reviews the token of one inside.
#[test]
fn the_cluster_refuses_callers_outside_its_enabled_firewall_before_any_token() {
    use crate::model::cluster::ControlPlaneFirewall;
    use crate::model::firewall::IpCidr;
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    c.control_plane_firewall = ControlPlaneFirewall {
        enabled: true,
        allowed_addresses: vec![
            IpCidr::parse("203.0.113.0/24").unwrap(),
            IpCidr::parse("2001:db8::/32").unwrap(),
        ],
    };
    let cases = [
        ("203.0.113.7", "standing", Reviewed::Standing),
        ("::ffff:203.0.113.7", "standing", Reviewed::Standing),
        ("2001:db8::7", "standing", Reviewed::Standing),
        ("203.0.113.7", "kc-unknown", Reviewed::Refused),
        ("198.51.100.7", "standing", Reviewed::Blocked),
        ("2001:db9::7", "standing", Reviewed::Blocked),
        ("198.51.100.7", "kc-unknown", Reviewed::Blocked),
    ];
    for (from, token, want) in cases {
        let mut m = Mocks::new().with_cluster(c.clone());
        if want != Reviewed::Blocked {
            m.clusters.expect_credentials().returning(|_| {
                Ok(Some(SealedCredentials {
                    ca_certificate_pem: "PEM".into(),
                    token: SealedSecret("sealed".into()),
                }))
            });
            m.vault
                .expect_open()
                .returning(|_| Ok(Secret::new("standing")));
            m.vault
                .expect_digest_token()
                .returning(|t| TokenDigest(format!("d:{}", t.expose())));
            m.credentials
                .expect_credential_by_digest()
                .returning(|_| Ok(None));
        }
        let got = block_on(m.services().review_token(
            CLUSTER_1,
            &Secret::new(token),
            from.parse().unwrap(),
        ))
        .unwrap();
        assert_eq!(got, want, "{token} from {from}");
    }
}
