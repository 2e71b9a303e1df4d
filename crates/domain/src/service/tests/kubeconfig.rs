//! The kubeconfig: not before the control plane is up.

use super::*;

#[test]
fn kubeconfig_before_control_plane_ready_is_202_with_retry_hint() {
    for phase in [ClusterPhase::Pending, ClusterPhase::Provisioning] {
        let s = Mocks::new().with_cluster(cluster(ORG_A, phase)).services();
        let a = block_on(s.kubeconfig(&caller(&[(ORG_A, Role::Member)]), CLUSTER_1)).unwrap();
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
                .kubeconfig(&caller(&[(ORG_A, Role::Member)]), CLUSTER_1),
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
        code(block_on(
            s.kubeconfig(&caller(&[(ORG_A, Role::Member)]), CLUSTER_1)
        )),
        "forbidden"
    );
    assert_eq!(
        code(block_on(s.kubeconfig(&super_admin_a(), CLUSTER_1))),
        "ok"
    );
}
