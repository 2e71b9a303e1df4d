//! Item 6, last part: how soon the gateway acts on a credential change made through the API.
//! Each round adds a token to the Token route's auth server through a server process, then
//! asks the gateway with that token until it is accepted; then removes it and asks until it is
//! refused. Both run from the API's answer (the change committed) to the gateway's first
//! answer showing it: the notification's way through PostgreSQL, the gateway's read of every
//! auth server, and one request.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::server::random_hex;
use crate::results::GatewayReload;
use crate::stats::Summary;

/// How long one change may take to show before the round counts as missed.
const ROUND_LIMIT: Duration = Duration::from_secs(5);

/// What the round waits for on the gateway.
#[derive(Clone, Copy)]
enum Until {
    Accepted,
    Refused,
}

/// A client address for each probe, in the benchmarking range 198.18.0.0/15: the gateway
/// counts refused credentials per client and route (ten, then 429), and every probe before a
/// change shows is one. The gateway of this item believes `X-Forwarded-For` from loopback.
struct Clients(u32);

impl Clients {
    fn next(&mut self) -> String {
        self.0 = self.0.wrapping_add(1);
        let [_, a, b, c] = self.0.to_be_bytes();
        format!("198.{}.{b}.{c}", 18 + (a & 1))
    }
}

/// From now until the gateway answers `token` as `until` wants; `None` past the limit.
async fn until_shown(
    http: &reqwest::Client,
    clients: &mut Clients,
    url: &str,
    token: &str,
    until: Until,
) -> anyhow::Result<Option<Duration>> {
    let start = Instant::now();
    while start.elapsed() < ROUND_LIMIT {
        let status = http
            .get(url)
            .bearer_auth(token)
            .header("x-forwarded-for", clients.next())
            .send()
            .await?
            .status();
        let shown = match until {
            Until::Accepted => status.is_success(),
            Until::Refused => status.as_u16() == 401,
        };
        if shown {
            return Ok(Some(start.elapsed()));
        }
    }
    Ok(None)
}

/// `rounds` tokens added to and removed from auth server `server_id` through `api` (as
/// `admin_token`), each awaited on the gateway's `route_url`.
pub async fn measure(
    api: &str,
    admin_token: &str,
    server_id: &str,
    route_url: &str,
    rounds: usize,
) -> anyhow::Result<GatewayReload> {
    let (admin, probe) = (
        super::one_connection_client()?,
        super::one_connection_client()?,
    );
    let credentials = format!("{api}/v1/public/gateway/auth-servers/{server_id}/credentials");
    let (mut added, mut removed, mut missed) = (Vec::new(), Vec::new(), 0);
    let mut clients = Clients(0);
    for n in 0..rounds {
        let token = format!("bench-reload-token-{n:04}-{}", random_hex(8));
        let answer = admin
            .post(&credentials)
            .bearer_auth(admin_token)
            .json(&json!({ "token": token }))
            .send()
            .await?;
        if answer.status().as_u16() != 201 {
            bail!("adding a token answered {}", answer.status());
        }
        let body: Value = answer.json().await?;
        let id = body["id"]
            .as_str()
            .context("the added credential has no id")?
            .to_owned();
        match until_shown(&probe, &mut clients, route_url, &token, Until::Accepted).await? {
            Some(lag) => added.push(lag),
            None => missed += 1,
        }
        let answer = admin
            .delete(format!("{credentials}/{id}"))
            .bearer_auth(admin_token)
            .send()
            .await?;
        if answer.status().as_u16() != 204 {
            bail!("removing a token answered {}", answer.status());
        }
        match until_shown(&probe, &mut clients, route_url, &token, Until::Refused).await? {
            Some(lag) => removed.push(lag),
            None => missed += 1,
        }
    }
    Ok(GatewayReload {
        rounds,
        missed,
        added: Summary::of(&added),
        removed: Summary::of(&removed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_probe_comes_from_another_benchmarking_address() {
        let mut c = Clients(0);
        assert_eq!(c.next(), "198.18.0.1");
        let mut c = Clients(0x0001_ffff);
        assert_eq!(c.next(), "198.18.0.0", "wraps within 198.18.0.0/15");
        let mut c = Clients(0x0000_ffff);
        assert_eq!(c.next(), "198.19.0.0");
    }
}
