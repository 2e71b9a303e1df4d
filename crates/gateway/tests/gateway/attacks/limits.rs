//! Guessing passwords at scale: the failed-attempt limit holds however many guesses arrive at
//! once, unknown users cost the same and count the same, and the Argon2id work a flood can
//! cause is bounded.

use crate::harness::*;

async fn basic_routes() -> Harness {
    let h = harness(&[("/basic", "staff"), ("/again", "staff")]).await;
    let staff = h.basic_server(ORG_SLUG, "staff", &[("alice", "alice-password")]);
    h.insert_all(&[&staff], "/basic").await;
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_simultaneous_wrong_passwords_get_at_most_ten_checks() {
    let h = basic_routes().await;
    wait_for_a_fresh_minute().await;
    let c = http();
    let guesses = (0..40).map(|i| {
        c.get(h.url("/basic"))
            .header("authorization", basic(&format!("alice:guess-{i}")))
            .send()
    });
    let answers = futures::future::join_all(guesses).await;
    let mut checked = 0;
    let mut limited = 0;
    for answer in answers {
        let answer = answer.unwrap();
        match answer.status().as_u16() {
            401 => checked += 1,
            429 => {
                assert!(header(&answer, "retry-after").is_some());
                limited += 1;
            }
            other => panic!("unexpected {other}"),
        }
    }
    // Every attempt is counted when it starts: no more than the limit is ever checked. (Those
    // refused as busy, past two checks in flight, were never checked and do not count.)
    assert!(checked <= 10, "{checked} wrong passwords were checked");
    assert_eq!(checked + limited, 40);
    // One by one, the rest of the minute's ten failures, then no more checks.
    let mut more = 0;
    loop {
        let r = c
            .get(h.url("/basic"))
            .header("authorization", basic("alice:one-more-guess"))
            .send()
            .await
            .unwrap();
        if r.status() == 429 {
            break;
        }
        assert_eq!(r.status(), 401);
        more += 1;
        assert!(
            checked + more <= 10,
            "more than ten wrong passwords were checked"
        );
    }
    assert_eq!(checked + more, 10);
    assert_eq!(h.upstream_hits(), 0);
    // Once the failures are used up, the right password waits for the next window too.
    let r = c
        .get(h.url("/basic"))
        .header("authorization", basic("alice:alice-password"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_users_and_malformed_credentials_count_as_failures() {
    let h = basic_routes().await;
    wait_for_a_fresh_minute().await;
    let c = http();
    let attempt = |route: &'static str, value: String| {
        c.get(h.url(route)).header("authorization", value).send()
    };
    for i in 0..5 {
        let r = attempt("/basic", basic(&format!("user-{i}:password")))
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
        let r = attempt("/basic", "Basic %%%not-base64%%%".into())
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
    }
    let r = attempt("/basic", basic("alice:alice-password"))
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        429,
        "ten failures of any kind use the minute up"
    );
    // Counted per route: the same server on another route is still open to this client.
    let r = attempt("/again", basic("alice:alice-password"))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}
