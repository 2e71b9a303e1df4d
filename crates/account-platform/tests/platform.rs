//! The HTTP account platform client against the stub platform: answers, failures, caches.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use account_platform::dev::{ACME_ID, GLOBEX_ID, TOKEN_ACME_ASSISTANT, TOKEN_TWO_ORGS};
use account_platform::{Directory, HttpAccountPlatform, PlatformConfig};
use domain::model::identity::{Caller, ClientKind, Role, User};
use domain::model::secret::Secret;
use domain::names::OrgRef;
use domain::ports::identity::{IdentityError, IdentityProvider};
use futures::future::join_all;
use platform_stub::{Fault, StubHandle, StubPlatform};

/// A token that must never show up in an error or a debug dump.
const CANARY: &str = "canary-token-1f2e3d4c5b6a79880706a5b4c3d2e1f0";

fn config(stub: &StubHandle) -> PlatformConfig {
    PlatformConfig::new(stub.url(), Secret::new(stub.service_token()))
}

fn client(cfg: PlatformConfig) -> HttpAccountPlatform {
    HttpAccountPlatform::new(cfg).expect("client")
}

fn user(id: &str) -> Caller {
    Caller {
        user: User {
            id: id.into(),
            email: None,
        },
        preferred_organization: None,
        memberships: vec![],
        client: ClientKind::Api,
    }
}

fn assert_unavailable(r: Result<Caller, IdentityError>) -> String {
    match r {
        Err(IdentityError::Unavailable(reason)) => {
            let e = IdentityError::Unavailable(reason.clone());
            assert!(!reason.contains(CANARY), "token in the reason: {reason}");
            assert!(!format!("{e}").contains(CANARY));
            assert!(!format!("{e:?}").contains(CANARY));
            println!("unavailable: {e}");
            reason
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

mod callers {
    use super::*;

    #[tokio::test]
    async fn a_known_token_gives_its_caller() {
        let stub = StubPlatform::start_demo();
        let p = client(config(&stub));
        let c = p.caller(&Secret::new(TOKEN_TWO_ORGS)).await.unwrap();
        assert_eq!(c.role_in(&GLOBEX_ID), Some(Role::SuperAdmin));
        assert_eq!(c.role_in(&ACME_ID), Some(Role::Member));
        assert_eq!(c.preferred_organization, Some(GLOBEX_ID));
        assert_eq!(c.client, ClientKind::Api);
        let a = p.caller(&Secret::new(TOKEN_ACME_ASSISTANT)).await.unwrap();
        assert_eq!(a.client, ClientKind::Assistant);
    }

    #[tokio::test]
    async fn an_unknown_token_is_invalid() {
        let stub = StubPlatform::start_demo();
        let p = client(config(&stub));
        assert_eq!(
            p.caller(&Secret::new(CANARY)).await,
            Err(IdentityError::InvalidToken)
        );
    }

    #[tokio::test]
    async fn extra_fields_and_unknown_role_words_are_tolerated() {
        let stub = StubPlatform::start(Directory::default());
        stub.add_user(
            CANARY,
            &serde_json::json!({
                "user": {"id": "u9", "email": "u9@example.com", "name": "extra"},
                "preferred_organization": null,
                "memberships": [{"organization": {"id": ACME_ID, "slug": "acme"}, "role": "owner"}],
                "client": "robot"
            }),
        );
        let c = client(config(&stub))
            .caller(&Secret::new(CANARY))
            .await
            .unwrap();
        assert_eq!(c.role_in(&ACME_ID), Some(Role::Unknown));
        assert_eq!(c.client, ClientKind::Other);
    }
}

mod failures {
    use super::*;

    #[tokio::test]
    async fn a_refused_connection_is_unavailable() {
        let stub = StubPlatform::start_demo();
        let cfg = config(&stub);
        stub.stop();
        let reason = assert_unavailable(client(cfg).caller(&Secret::new(CANARY)).await);
        assert!(reason.contains("connection failed"), "{reason}");
    }

    /// A platform on a raw socket: each connection is answered by `answers[n]` in turn for
    /// its requests (`true` answers the caller, `false` reads the request and closes the
    /// connection without a word); counts the requests it read.
    async fn socket_platform(
        per_connection: Vec<Vec<bool>>,
    ) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let read = std::sync::Arc::new(AtomicUsize::new(0));
        let counter = read.clone();
        tokio::spawn(async move {
            let body = serde_json::json!({
                "user": {"id": "u1"}, "preferred_organization": null, "memberships": []
            })
            .to_string();
            for answers in per_connection {
                let (mut sock, _) = listener.accept().await.unwrap();
                for answer in answers {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        let n = sock.read(&mut buf).await.unwrap();
                        if n == 0 {
                            return;
                        }
                        request.extend_from_slice(&buf[..n]);
                    }
                    counter.fetch_add(1, Ordering::SeqCst);
                    if !answer {
                        break;
                    }
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    );
                    sock.write_all(head.as_bytes()).await.unwrap();
                    sock.write_all(body.as_bytes()).await.unwrap();
                }
            }
        });
        (url, read)
    }

    fn socket_client(url: String) -> HttpAccountPlatform {
        let cfg = PlatformConfig::new(url, Secret::new("service-token-0123456789"))
            .with_token_cache_ttl(Duration::ZERO);
        client(cfg)
    }

    #[tokio::test]
    async fn a_kept_alive_connection_closed_under_a_get_is_retried_once_on_a_new_one() {
        // The first connection answers once, then closes under the second request; the second
        // connection answers it.
        let (url, read) = socket_platform(vec![vec![true, false], vec![true]]).await;
        let p = socket_client(url);
        for _ in 0..2 {
            let c = p.caller(&Secret::new(CANARY)).await.unwrap();
            assert_eq!(c.user.id, "u1");
        }
        assert_eq!(read.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_platform_that_keeps_dropping_requests_is_tried_twice_then_unavailable() {
        let (url, read) = socket_platform(vec![vec![false], vec![false], vec![true]]).await;
        let reason = assert_unavailable(socket_client(url).caller(&Secret::new(CANARY)).await);
        assert!(reason.contains("request failed"), "{reason}");
        assert_eq!(read.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_hanging_platform_times_out() {
        let stub = StubPlatform::start_demo();
        stub.set_fault(Fault::Hang);
        let p = client(config(&stub).with_timeout(Duration::from_millis(300)));
        let reason = assert_unavailable(p.caller(&Secret::new(CANARY)).await);
        assert!(reason.contains("timed out after 300 ms"), "{reason}");
        let org = p.organization(&OrgRef::classify("acme")).await;
        assert!(matches!(org, Err(IdentityError::Unavailable(_))), "{org:?}");
    }

    #[tokio::test]
    async fn a_500_is_unavailable() {
        let stub = StubPlatform::start_demo();
        stub.set_fault(Fault::Status500);
        let p = client(config(&stub));
        let reason = assert_unavailable(p.caller(&Secret::new(CANARY)).await);
        assert!(reason.contains("500"), "{reason}");
        let org = p.organization(&OrgRef::classify("acme")).await;
        assert!(matches!(org, Err(IdentityError::Unavailable(_))), "{org:?}");
    }

    #[tokio::test]
    async fn garbage_is_unavailable() {
        let stub = StubPlatform::start_demo();
        stub.set_fault(Fault::Garbage);
        let p = client(config(&stub));
        let reason = assert_unavailable(p.caller(&Secret::new(CANARY)).await);
        assert!(reason.contains("unreadable answer"), "{reason}");
        assert!(
            !reason.contains("html"),
            "the body leaked into the reason: {reason}"
        );
        let org = p.organization(&OrgRef::classify("acme")).await;
        assert!(matches!(org, Err(IdentityError::Unavailable(_))), "{org:?}");
    }

    #[tokio::test]
    async fn a_wrong_shape_is_unavailable() {
        let stub = StubPlatform::start(Directory::default());
        stub.add_user(CANARY, &serde_json::json!({"memberships": "nope"}));
        assert_unavailable(client(config(&stub)).caller(&Secret::new(CANARY)).await);
    }

    #[tokio::test]
    async fn a_rejected_service_token_is_unavailable_not_unknown() {
        let stub = StubPlatform::start_demo();
        let mut cfg = config(&stub);
        cfg.service_token = Secret::new(CANARY);
        let r = client(cfg).organization(&OrgRef::classify("acme")).await;
        match r {
            Err(IdentityError::Unavailable(reason)) => {
                assert!(
                    reason.contains("service token") && !reason.contains(CANARY),
                    "{reason}"
                )
            }
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn failures_are_not_cached() {
        let stub = StubPlatform::start(Directory::default());
        stub.add_user(CANARY, &user("u1"));
        let p = client(config(&stub));
        stub.set_fault(Fault::Status500);
        assert_unavailable(p.caller(&Secret::new(CANARY)).await);
        stub.set_fault(Fault::Normal);
        let c = p.caller(&Secret::new(CANARY)).await.unwrap();
        assert_eq!(c.user.id, "u1");
        assert_eq!(
            stub.me_calls(),
            2,
            "the second call must reach the platform"
        );
        assert_eq!(p.metrics_snapshot().failures, 1);
    }

    /// A refusal is remembered for the refusal TTL, so a bad token sent in a loop costs one
    /// call; with that TTL at zero, the next call asks again and sees a token added meanwhile.
    #[tokio::test]
    async fn rejections_are_remembered_for_the_refusal_ttl_only() {
        for (ttl, calls, then) in [
            (Duration::from_secs(30), 1, Err(IdentityError::InvalidToken)),
            (Duration::ZERO, 2, Ok("u1".to_owned())),
        ] {
            let stub = StubPlatform::start(Directory::default());
            let p = client(config(&stub).with_refusal_cache_ttl(ttl));
            assert_eq!(
                p.caller(&Secret::new(CANARY)).await,
                Err(IdentityError::InvalidToken)
            );
            stub.add_user(CANARY, &user("u1"));
            assert_eq!(
                p.caller(&Secret::new(CANARY)).await.map(|c| c.user.id),
                then,
                "{ttl:?}"
            );
            assert_eq!(stub.me_calls(), calls, "{ttl:?}");
        }
    }

    #[tokio::test]
    async fn debug_output_never_holds_a_token() {
        let stub = StubPlatform::start_demo();
        let mut cfg = config(&stub);
        cfg.service_token = Secret::new(CANARY);
        assert!(!format!("{cfg:?}").contains(CANARY));
        let p = client(cfg);
        assert!(!format!("{p:?}").contains(CANARY));
        assert!(!format!("{:?}", Directory::demo()).contains(TOKEN_TWO_ORGS));
        assert!(!format!("{:?}", Secret::new(CANARY)).contains(CANARY));
    }
}

mod organizations {
    use super::*;

    #[tokio::test]
    async fn found_by_slug_and_by_id() {
        let stub = StubPlatform::start_demo();
        let p = client(config(&stub).with_org_cache_ttl(Duration::ZERO));
        let by_slug = p
            .organization(&OrgRef::classify("globex"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(by_slug.id, GLOBEX_ID);
        assert_eq!(by_slug.billing.credit_cents, 50_000);
        let upper = GLOBEX_ID.to_string().to_uppercase();
        let by_id = p.organization(&OrgRef::classify(&upper)).await.unwrap();
        assert_eq!(by_id, Some(by_slug));
        assert_eq!(stub.org_calls(), 2);
    }

    #[tokio::test]
    async fn unknown_is_none() {
        let stub = StubPlatform::start_demo();
        let p = client(config(&stub));
        assert_eq!(
            p.organization(&OrgRef::classify("umbrella")).await,
            Ok(None)
        );
        let id = "7d0f7f4e-3c5e-4d8b-9a51-2f0c1e0b9a77";
        assert_eq!(p.organization(&OrgRef::classify(id)).await, Ok(None));
        assert_eq!(stub.org_calls(), 2);
    }

    #[tokio::test]
    async fn malformed_references_never_reach_the_platform() {
        let stub = StubPlatform::start_demo();
        let p = client(config(&stub));
        for bad in [
            "../v1/me",
            "a/b",
            "acme?x=1",
            "Acme",
            "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz",
            "",
        ] {
            assert_eq!(
                p.organization(&OrgRef::classify(bad)).await,
                Ok(None),
                "{bad}"
            );
        }
        assert_eq!(stub.org_calls(), 0);
    }

    #[tokio::test]
    async fn one_lookup_serves_both_names_until_the_ttl() {
        let stub = StubPlatform::start_demo();
        let p = client(config(&stub));
        let lookups = (0..50).map(|i| {
            let r = if i % 2 == 0 {
                "acme".to_owned()
            } else {
                ACME_ID.to_string()
            };
            let p = p.clone();
            async move { p.organization(&OrgRef::classify(&r)).await }
        });
        // Half by slug first, so the id lookups may race the slug's load: at most two calls.
        for r in join_all(lookups).await {
            assert_eq!(r.unwrap().map(|o| o.id), Some(ACME_ID));
        }
        assert!(stub.org_calls() <= 2, "{} calls", stub.org_calls());
        stub.reset_counters();
        p.organization(&OrgRef::classify("acme")).await.unwrap();
        p.organization(&OrgRef::classify(&ACME_ID.to_string()))
            .await
            .unwrap();
        assert_eq!(stub.org_calls(), 0);
    }

    #[tokio::test]
    async fn a_fresh_read_asks_the_platform_and_refreshes_both_names() {
        let stub = StubPlatform::start_demo();
        let p = client(config(&stub));
        let by_slug = OrgRef::classify("globex");
        let by_id = OrgRef::classify(&GLOBEX_ID.to_string());
        let credit =
            |o: Option<domain::model::identity::Organization>| o.map(|o| o.billing.credit_cents);
        let cached = credit(p.organization(&by_slug).await.unwrap());
        // The platform's credit changes; the cache still says what it said.
        let mut changed = p.organization(&by_id).await.unwrap().unwrap();
        changed.billing.credit_cents = 0;
        stub.add_organization(changed);
        stub.reset_counters();
        assert_eq!(credit(p.organization(&by_slug).await.unwrap()), cached);
        assert_eq!(stub.org_calls(), 0);
        // A fresh read goes to the platform every time, and what it learns is what reads see.
        for _ in 0..2 {
            assert_eq!(credit(p.organization_fresh(&by_id).await.unwrap()), Some(0));
        }
        assert_eq!(stub.org_calls(), 2);
        assert_eq!(credit(p.organization(&by_slug).await.unwrap()), Some(0));
        assert_eq!(credit(p.organization(&by_id).await.unwrap()), Some(0));
        assert_eq!(stub.org_calls(), 2);
    }

    #[tokio::test]
    async fn unknown_answers_are_remembered_briefly() {
        let stub = StubPlatform::start_demo();
        let p = client(config(&stub));
        for _ in 0..10 {
            assert_eq!(
                p.organization(&OrgRef::classify("umbrella")).await,
                Ok(None)
            );
        }
        assert_eq!(stub.org_calls(), 1);
    }
}

mod cache {
    use super::*;

    #[tokio::test]
    async fn one_hundred_concurrent_requests_make_one_call() {
        let stub = StubPlatform::start_demo();
        let p = client(config(&stub));
        let token = Secret::new(TOKEN_TWO_ORGS);
        let calls = (0..100).map(|_| p.caller(&token));
        for r in join_all(calls).await {
            assert_eq!(r.unwrap().user.id, "dave");
        }
        assert_eq!(stub.me_calls(), 1);
        for _ in 0..100 {
            p.caller(&Secret::new(TOKEN_TWO_ORGS)).await.unwrap();
        }
        assert_eq!(stub.me_calls(), 1);
        let m = p.metrics_snapshot();
        assert_eq!(
            (m.me_calls, m.token_cache_misses, m.token_cache_hits),
            (1, 1, 199)
        );
    }

    #[tokio::test]
    async fn with_ttl_zero_every_request_is_a_call() {
        let stub = StubPlatform::start_demo();
        let p = client(config(&stub).with_token_cache_ttl(Duration::ZERO));
        for _ in 0..100 {
            p.caller(&Secret::new(TOKEN_TWO_ORGS)).await.unwrap();
        }
        assert_eq!(stub.me_calls(), 100);
        assert_eq!(p.metrics_snapshot().token_cache_hits, 0);
    }

    #[tokio::test]
    async fn a_thousand_requests_over_ten_tokens_make_ten_calls() {
        let stub = StubPlatform::start(Directory::default());
        let tokens: Vec<String> = (0..10).map(|i| format!("{CANARY}-{i}")).collect();
        for (i, t) in tokens.iter().enumerate() {
            stub.add_user(t, &user(&format!("u{i}")));
        }
        let p = client(config(&stub));
        let calls = (0..1000).map(|i| {
            let p = p.clone();
            let t = Secret::new(tokens[i % 10].clone());
            async move { p.caller(&t).await.map(|c| (i, c.user.id)) }
        });
        for r in join_all(calls).await {
            let (i, id) = r.unwrap();
            assert_eq!(id, format!("u{}", i % 10));
        }
        println!(
            "platform calls per 1,000 requests over 10 tokens: {}",
            stub.me_calls()
        );
        assert_eq!(stub.me_calls(), 10);
    }

    #[tokio::test]
    async fn an_expired_entry_is_fetched_again() {
        let stub = StubPlatform::start_demo();
        let p = client(config(&stub).with_token_cache_ttl(Duration::from_millis(200)));
        p.caller(&Secret::new(TOKEN_TWO_ORGS)).await.unwrap();
        // Poll until the entry expires; no assertion on how long that took.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while stub.me_calls() < 2 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            p.caller(&Secret::new(TOKEN_TWO_ORGS)).await.unwrap();
        }
        assert_eq!(stub.me_calls(), 2);
    }
}
