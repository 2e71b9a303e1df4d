//! What the console's change forms share: reading a submitted form, and the idempotency key
//! each drawing of a form carries, recorded as the redirect the first submission got so a
//! double submit does the change once and lands where the first one did.

use std::collections::BTreeMap;

use actix_web::{HttpRequest, HttpResponse};
use domain::DomainError;
use domain::model::idempotency::{RequestFingerprint, StoredResponse};
use domain::names::IdempotencyKey;
use domain::service::{Answer, IdempotencyRequest, Render};

use crate::error::ConsoleError;
use crate::pages::{check_form, see_other};
use crate::session::Signed;

/// A submitted form: the first value of each field.
pub struct Submitted(BTreeMap<String, String>);

impl Submitted {
    pub fn read(body: &[u8]) -> Result<Submitted, ConsoleError> {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_bytes(body).map_err(|e| ConsoleError::BadForm(e.to_string()))?;
        let mut fields = BTreeMap::new();
        for (k, v) in pairs {
            fields.entry(k).or_insert(v);
        }
        Ok(Submitted(fields))
    }

    pub fn get(&self, name: &str) -> &str {
        self.0.get(name).map_or("", String::as_str)
    }

    /// A trimmed value, absent when empty.
    pub fn text(&self, name: &str) -> Option<String> {
        Some(self.get(name).trim().to_owned()).filter(|s| !s.is_empty())
    }

    pub fn checked(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// The form's idempotency request for the change at `action`: its key, and a fingerprint
    /// of every field but the CSRF token and the key, so the same form sent twice is the same
    /// request and a changed one is not.
    pub fn keyed<'a, T>(
        &self,
        action: &str,
        render: &'a Redirect,
    ) -> Result<IdempotencyRequest<'a, T>, ConsoleError> {
        let key = IdempotencyKey::parse(self.get("key")).ok_or(ConsoleError::Forged)?;
        let body: serde_json::Map<String, serde_json::Value> = self
            .0
            .iter()
            .filter(|(k, _)| k.as_str() != "csrf" && k.as_str() != "key")
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        Ok(IdempotencyRequest {
            key,
            fingerprint: RequestFingerprint::new("POST", action, Some(&body.into())),
            render,
        })
    }
}

/// A fresh key for one drawing of a form.
pub fn new_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Records a change as the redirect to `location`.
pub struct Redirect(pub String);

impl<T> Render<T> for Redirect {
    fn ok(&self, _: &T) -> StoredResponse {
        StoredResponse {
            status: 303,
            headers: vec![("location".into(), self.0.clone())],
            body: Vec::new(),
        }
    }

    fn err(&self, e: &DomainError) -> StoredResponse {
        StoredResponse {
            status: api::problem::status_of(e).as_u16(),
            headers: Vec::new(),
            body: api::problem::detail_of(e).into_bytes(),
        }
    }
}

/// Where a keyed change sends the browser: the redirect, the first time and on a replay; a
/// replayed refusal as a conflict with its words.
pub fn settled<T>(answer: Answer<T>, redirect: &Redirect) -> Result<HttpResponse, ConsoleError> {
    match answer {
        Answer::Fresh(_) => Ok(see_other(&redirect.0)),
        Answer::Replayed(stored) if stored.status == 303 => Ok(see_other(
            stored
                .headers
                .iter()
                .find(|(n, _)| n == "location")
                .map_or(redirect.0.as_str(), |(_, l)| l.as_str()),
        )),
        Answer::Replayed(stored) => Err(ConsoleError::Replayed(
            String::from_utf8_lossy(&stored.body).into_owned(),
        )),
    }
}

/// A change form's submission: read, checked against the session (CSRF token, same site),
/// and keyed by its own idempotency key for the path it was posted to.
pub struct Change {
    pub form: Submitted,
    path: String,
}

impl Change {
    pub fn read(req: &HttpRequest, signed: &Signed, body: &[u8]) -> Result<Change, ConsoleError> {
        let form = Submitted::read(body)?;
        check_form(req, &signed.session, form.get("csrf"))?;
        Ok(Change {
            form,
            path: req.path().to_owned(),
        })
    }

    /// Runs the change under the form's key and sends the browser to `back`; a refusal by the
    /// use case comes back as `Ok(Err(_))` for the page to show, a fault of ours as `Err`.
    pub async fn run<T>(
        &self,
        back: String,
        change: impl AsyncFnOnce(IdempotencyRequest<'_, T>) -> Result<Answer<T>, DomainError>,
    ) -> Result<Result<HttpResponse, DomainError>, ConsoleError> {
        let redirect = Redirect(back);
        let request = self.form.keyed(&self.path, &redirect)?;
        match change(request).await {
            Ok(answer) => settled(answer, &redirect).map(Ok),
            Err(DomainError::Internal(cause)) => Err(DomainError::Internal(cause).into()),
            Err(refused) => Ok(Err(refused)),
        }
    }
}
