//! An HTTP answer as the bytes an idempotency key keeps, and back. The service stores these
//! bytes without reading them; this adapter is the only one that writes and reads them (the
//! console's replays are HTTP answers too, so it uses the same envelope).
//!
//! The envelope, version 1: one byte `1`; the status, 2 bytes big-endian; the length of the
//! headers, 4 bytes big-endian; the headers, a JSON array of `[name, value]` pairs in the order
//! they are sent; then the body. The migration that introduced it converted the keys already
//! stored into exactly this form (SQL function `kubesvc_http_envelope`), so an envelope never
//! changes without a migration that converts what is stored.

use domain::model::idempotency::Replay;

const VERSION: u8 = 1;

/// An answer as it is sent: status, headers in order, body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpAnswer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpAnswer {
    pub fn encode(&self) -> Replay {
        let headers = serde_json::to_vec(&self.headers).unwrap_or_else(|_| b"[]".to_vec());
        let mut out = Vec::with_capacity(7 + headers.len() + self.body.len());
        out.push(VERSION);
        out.extend_from_slice(&self.status.to_be_bytes());
        out.extend_from_slice(&(headers.len() as u32).to_be_bytes());
        out.extend_from_slice(&headers);
        out.extend_from_slice(&self.body);
        Replay(out)
    }

    /// The answer a replay holds; `None` for bytes this adapter did not write.
    pub fn decode(replay: &Replay) -> Option<HttpAnswer> {
        let bytes = replay.0.as_slice();
        let (&version, rest) = bytes.split_first()?;
        if version != VERSION {
            return None;
        }
        let status = u16::from_be_bytes(rest.get(..2)?.try_into().ok()?);
        let len = u32::from_be_bytes(rest.get(2..6)?.try_into().ok()?) as usize;
        let headers = rest.get(6..6usize.checked_add(len)?)?;
        let headers: Vec<(String, String)> = serde_json::from_slice(headers).ok()?;
        let body = rest.get(6 + len..)?.to_vec();
        Some(HttpAnswer {
            status,
            headers,
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_comes_back_as_it_went_in() {
        let a = HttpAnswer {
            status: 201,
            headers: vec![
                ("location".into(), "/v1/public/clusters/x".into()),
                ("content-type".into(), "application/json".into()),
            ],
            body: br#"{"id":"x"}"#.to_vec(),
        };
        assert_eq!(HttpAnswer::decode(&a.encode()), Some(a));
    }

    #[test]
    fn bytes_of_another_writer_are_not_an_answer() {
        for bytes in [
            &b""[..],
            b"\x02\x00\xc8",
            b"\x01\x00\xc8\x00\x00\x00\x09[]",
            b"x",
        ] {
            assert_eq!(
                HttpAnswer::decode(&Replay(bytes.to_vec())),
                None,
                "{bytes:?}"
            );
        }
    }

    /// What the migration's SQL function makes of a stored answer (`headers::text` of jsonb
    /// spaces its separators) decodes to the same answer.
    #[test]
    fn the_migrations_form_of_a_stored_answer_decodes() {
        let headers = br#"[["location", "/x"], ["content-type", "application/json"]]"#;
        let mut bytes = vec![1, 0, 202];
        bytes.extend_from_slice(&(headers.len() as u32).to_be_bytes());
        bytes.extend_from_slice(headers);
        bytes.extend_from_slice(b"{}");
        assert_eq!(
            HttpAnswer::decode(&Replay(bytes)),
            Some(HttpAnswer {
                status: 202,
                headers: vec![
                    ("location".into(), "/x".into()),
                    ("content-type".into(), "application/json".into())
                ],
                body: b"{}".to_vec(),
            })
        );
    }
}
