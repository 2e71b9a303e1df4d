//! Gateway auth servers: create, read, PATCH, credentials.

use super::*;

use crate::input::auth_server::{
    AuthServerPatch, BasicConfigPatch, BasicConfigRequest, BasicCredentialRequest, ConfigPatch,
    CreateAuthServerRequest, CreateConfig, CredentialRequest, OidcConfigRequest,
    TokenConfigRequest, TokenCredentialRequest,
};
use crate::model::audit::AuditResource;
use crate::model::auth_server::AuthServerType;
use crate::model::auth_server::{
    AuthServer, AuthServerConfig, AuthServerConfigView, BasicConfig, BasicCredential,
    CredentialView,
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

/// A create in `acme`'s `production` environment.
fn create(name: &str, kind: AuthServerType, config: CreateConfig) -> CreateAuthServerRequest {
    CreateAuthServerRequest {
        organization: Some("acme".into()),
        name: Some(name.into()),
        environment: Some("production".into()),
        kind: Some(kind),
        config: Some(config),
    }
}

fn machines() -> CreateAuthServerRequest {
    create(
        "machines",
        AuthServerType::Token,
        CreateConfig::Token(TokenConfigRequest {
            tokens: vec![Secret::new("0123456789abcdefWXYZ")],
        }),
    )
}

fn basic_credential(username: &str, password: &str) -> CredentialRequest {
    CredentialRequest::Basic(BasicCredentialRequest {
        username: username.into(),
        password: Secret::new(password),
    })
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
        "partners",
        AuthServerType::Basic,
        CreateConfig::Basic(BasicConfigRequest {
            realm: None,
            credentials: vec![BasicCredentialRequest {
                username: "alice".into(),
                password: Secret::new("hunter2-hunter2"),
            }],
        }),
    );
    let v = block_on(
        m.services()
            .create_auth_server(Command::new(&super_admin_a()), body),
    )
    .unwrap()
    .fresh()
    .unwrap();
    let text = format!("{v:?}");
    assert!(!text.contains("hunter2"), "{text}");
    match &v.config {
        AuthServerConfigView::Basic { realm, credentials } => {
            assert_eq!(realm, "partners", "the realm defaults to the server's name");
            assert!(
                matches!(&credentials[..], [CredentialView::Basic { username, .. }] if username == "alice")
            );
        }
        other => panic!("{other:?}"),
    }
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
        "sso",
        AuthServerType::Oidc,
        CreateConfig::Oidc(OidcConfigRequest {
            issuer_url: "https://id.example.com".into(),
            redirect_path: "/cb".into(),
            client_id: "app".into(),
            client_secret: Secret::new("top-secret-value"),
            authorized_domain: "app.example.com".into(),
            username_claim: None,
            email_claim: None,
            role_claim: None,
            group_claim: None,
        }),
    );
    let v = block_on(s.create_auth_server(Command::new(&super_admin_a()), oidc))
        .unwrap()
        .fresh()
        .unwrap();
    assert!(matches!(
        v.config,
        AuthServerConfigView::Oidc {
            client_secret_set: true,
            ..
        }
    ));
    assert!(!format!("{v:?}").contains("top-secret-value"));
    let token = machines();
    let v = block_on(s.create_auth_server(Command::new(&super_admin_a()), token))
        .unwrap()
        .fresh()
        .unwrap();
    assert!(
        matches!(&v.config, AuthServerConfigView::Token { tokens } if matches!(&tokens[..], [CredentialView::Token { hint, .. }] if hint == "…WXYZ"))
    );
    assert!(!format!("{v:?}").contains("0123456789abcdef"));
}

#[test]
fn auth_server_name_taken_in_the_organization_and_environment_is_409() {
    let mut m = Mocks::new().with_organizations(vec![organization(ORG_A, Plan::Postpaid, 0)]);
    vault(&mut m);
    m.auth_servers
        .expect_write_auth_server()
        .returning(|_| Err(StoreError::Duplicate(UniqueRule::AuthServerName)));
    let body = machines();
    assert_eq!(
        code(block_on(
            m.services()
                .create_auth_server(Command::new(&super_admin_a()), body)
        )),
        "name_conflict"
    );
}

#[test]
fn auth_server_create_needs_super_admin_there() {
    let body = machines();
    let r = block_on(
        Mocks::new()
            .services()
            .create_auth_server(Command::new(&caller(&[(ORG_A, Role::Member)])), body),
    );
    assert_eq!(code(r), "forbidden");
}

#[test]
fn auth_server_removing_the_last_credential_is_409_and_unknown_is_404() {
    let mut m = Mocks::new();
    m.auth_servers
        .expect_auth_server()
        .returning(|_| Ok(Some(basic_server(&["alice"]))));
    let s = m.services();
    let id = uuid::Uuid::from_u128(0xa5);
    assert_eq!(
        code(block_on(s.remove_credential(
            Command::new(&super_admin_a()),
            id,
            uuid::Uuid::from_u128(1)
        ))),
        "last_credential"
    );
    assert_eq!(
        code(block_on(s.remove_credential(
            Command::new(&super_admin_a()),
            id,
            uuid::Uuid::from_u128(99)
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
    let id = uuid::Uuid::from_u128(0xa5);
    let dup = basic_credential("alice", "alices-long-password");
    assert_eq!(
        code(block_on(s.add_credential(
            Command::new(&super_admin_a()),
            id,
            dup
        ))),
        "name_conflict"
    );
    let wrong_shape = CredentialRequest::Token(TokenCredentialRequest {
        token: Secret::new("0123456789abcdefWXYZ"),
    });
    assert_eq!(
        code(block_on(s.add_credential(
            Command::new(&super_admin_a()),
            id,
            wrong_shape
        ))),
        "validation_failed"
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
    let add = basic_credential("one-more", "one-more-password");
    let r = block_on(m.services().add_credential(
        Command::new(&super_admin_a()),
        uuid::Uuid::from_u128(0xa5),
        add,
    ));
    assert_eq!(code(r), "validation_failed");
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
        .withf(|w| matches!(&w.change, AuthServerChange::Update { server, .. } if server.config.credential_count() == 2) && w.audit.action == "created" && w.audit.resource == AuditResource::Credential)
        .returning(|_| Ok(()));
    let add = basic_credential("bob", "bobs-long-password");
    let v = block_on(m.services().add_credential(
        Command::new(&super_admin_a()),
        uuid::Uuid::from_u128(0xa5),
        add,
    ))
    .unwrap()
    .fresh()
    .unwrap();
    assert!(matches!(v.value, CredentialView::Basic { ref username, .. } if username == "bob"));
}

#[test]
fn auth_server_patch_merges_and_is_audited_without_secrets() {
    let mut m = Mocks::new();
    m.auth_servers
        .expect_auth_server()
        .returning(|_| Ok(Some(basic_server(&["alice"]))));
    m.auth_servers
        .expect_write_auth_server()
        .withf(|w| w.audit.action == "updated" && w.audit.changes.to_string().contains("realm"))
        .returning(|_| Ok(()));
    let patch = AuthServerPatch {
        config: Some(ConfigPatch::basic(BasicConfigPatch {
            realm: Some(Some("Partner area".into())),
        })),
        ..Default::default()
    };
    let v = fresh(block_on(m.services().patch_auth_server(
        Command::new(&super_admin_a()),
        uuid::Uuid::from_u128(0xa5),
        patch,
        None,
    )))
    .unwrap();
    assert!(
        matches!(&v.config, AuthServerConfigView::Basic { realm, .. } if realm == "Partner area"),
        "{v:?}"
    );
}
