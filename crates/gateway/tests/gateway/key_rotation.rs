//! `SECRETS_KEY` rotated under the gateway: it follows the same ring as the server, so a token
//! digested before the rotation keeps working with the new key current, and, once every value
//! is re-sealed, with the old key gone.

use crate::harness::*;
use store_postgres::{PgStore, SealedColumn};

const TOKEN: &str = "rotation-static-token-0123456789";

/// What `kubesvc-admin keys reseal` does, on the harness's database.
async fn reseal_everything(database_url: &str, ring: &secrets::Vault) {
    let url = database_url.to_owned();
    let store = tokio::task::spawn_blocking(move || {
        PgStore::connect_migrated(&url, 1, std::time::Duration::from_secs(5))
    })
    .await
    .unwrap()
    .expect("store");
    for column in SealedColumn::ALL {
        for v in store.sealed_page(column, None, 1000).await.expect("page") {
            if let Some(new) = ring.reseal(&v.sealed).expect("opens under the ring") {
                assert!(
                    store
                        .replace_sealed(column, &v.row, &v.sealed, &new)
                        .await
                        .expect("replace")
                );
            }
        }
    }
}

async fn status_with(addr: std::net::SocketAddr, token: &str) -> u16 {
    http()
        .get(format!("http://{addr}/app"))
        .bearer_auth(token)
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_digested_before_a_secrets_key_rotation_works_after_it() {
    let h = harness(&[("/app", "machines")]).await;
    h.insert(&h.token_server("acme", "machines", TOKEN)).await;
    let old = h.key.clone();
    let new = secrets::Vault::generate_key();

    // The new key seals, the old one still opens.
    let (rotated, _) = h
        .start_gateway(&[("SECRETS_KEY", &new), ("SECRETS_KEY_PREVIOUS", &old)])
        .await;
    assert_eq!(status_with(rotated, TOKEN).await, 200);
    assert_eq!(
        status_with(rotated, "rotation-static-token-012345678X").await,
        401
    );

    // Before the re-seal the new key alone opens nothing, and the gateway says so at start.
    let refused = h
        .try_launch(&[("SECRETS_KEY", &new)])
        .await
        .err()
        .expect("refused");
    assert!(
        refused
            .to_string()
            .contains("does not open under SECRETS_KEY"),
        "{refused}"
    );
    assert!(!refused.to_string().contains(&new), "no key in the message");

    reseal_everything(&h.db.url, &secrets::Vault::from_keys(&new, &old).unwrap()).await;
    let (after, _) = h.start_gateway(&[("SECRETS_KEY", &new)]).await;
    assert_eq!(status_with(after, TOKEN).await, 200);
    assert_eq!(
        status_with(after, "rotation-static-token-012345678X").await,
        401
    );
}
