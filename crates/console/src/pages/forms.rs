//! What the console's change forms share: reading a submitted form, and the idempotency key
//! each drawing of a form carries, recorded as the redirect the first submission got so a
//! double submit does the change once and lands where the first one did.

use std::collections::BTreeMap;

use actix_web::{HttpRequest, HttpResponse};
use api::replay::HttpAnswer;
use domain::DomainError;
use domain::model::idempotency::Replay;
use domain::names::IdempotencyKey;
use domain::service::{Answer, Keyed, Record};

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

    /// The form's idempotency key for the change at `action`, with a fingerprint of every field
    /// but the CSRF token and the key, so the same form sent twice is the same request and a
    /// changed one is not.
    pub fn keyed<'a, T>(
        &self,
        action: &str,
        record: &'a dyn Record<T>,
    ) -> Result<Keyed<'a, T>, ConsoleError> {
        let key = IdempotencyKey::parse(self.get("key")).ok_or(ConsoleError::Forged)?;
        let body: serde_json::Map<String, serde_json::Value> = self
            .0
            .iter()
            .filter(|(k, _)| k.as_str() != "csrf" && k.as_str() != "key")
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        Ok(Keyed {
            key,
            fingerprint: fingerprint(action, &body.into()),
            record,
        })
    }
}

/// The fingerprint of a form posted to `action`: the one the API would give the same body
/// posted there (the form is an HTTP POST), so keys recorded before this console's forms had
/// fingerprints of their own still replay.
pub fn fingerprint(
    action: &str,
    fields: &serde_json::Value,
) -> domain::model::idempotency::Fingerprint {
    api::extract::fingerprint("POST", action, Some(fields))
}

/// A fresh key for one drawing of a form.
pub fn new_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Records a change as the redirect to where it leads: a fixed page, or for a create the new
/// thing's page (known once it exists), so a replay lands where the first submission did.
pub struct Redirect<F>(pub F);

impl<T, F: Fn(&T) -> String + Send + Sync> Record<T> for Redirect<F> {
    fn answer(&self, value: &T) -> Replay {
        HttpAnswer {
            status: 303,
            headers: vec![("location".into(), (self.0)(value))],
            body: Vec::new(),
        }
        .encode()
    }

    fn refusal(&self, e: &DomainError) -> Replay {
        HttpAnswer {
            status: api::problem::status_of(e).as_u16(),
            headers: Vec::new(),
            body: api::problem::detail_of(e).into_bytes(),
        }
        .encode()
    }
}

/// Where a keyed change sends the browser: where it leads, the first time and on a replay; a
/// replayed refusal as a conflict with its words.
pub fn settled<T, F: Fn(&T) -> String>(
    answer: Answer<T>,
    redirect: &Redirect<F>,
) -> Result<HttpResponse, ConsoleError> {
    match answer {
        Answer::Fresh(value) => Ok(see_other(&(redirect.0)(&value))),
        Answer::Replayed(replay) => {
            let stored = HttpAnswer::decode(&replay).ok_or_else(|| {
                ConsoleError::Internal("a replay this console cannot read".into())
            })?;
            match stored.headers.iter().find(|(n, _)| n == "location") {
                Some((_, location)) if stored.status == 303 => Ok(see_other(location)),
                _ => Err(ConsoleError::Replayed(
                    String::from_utf8_lossy(&stored.body).into_owned(),
                )),
            }
        }
    }
}

/// What a change answers: where it sent the browser, or its page drawn again by `redraw` with
/// the refusal's status and words.
pub async fn or_redraw(
    done: Result<HttpResponse, DomainError>,
    redraw: impl AsyncFnOnce(actix_web::http::StatusCode, String) -> Result<HttpResponse, ConsoleError>,
) -> Result<HttpResponse, ConsoleError> {
    match done {
        Ok(response) => Ok(response),
        Err(e) => redraw(api::problem::status_of(&e), refusal(&e)).await,
    }
}

/// The API's field names inside a message, as the pool forms label them ("must not exceed
/// max_nodes (5)" reads "must not exceed the maximum (5)").
pub fn in_form_words(message: &str) -> String {
    message
        .replace("min_nodes..max_nodes", "the minimum and the maximum")
        .replace("auto_scale is true", "autoscale is on")
        .replace("max_nodes", "the maximum")
        .replace("min_nodes", "the minimum")
}

/// A refusal in words, with the field where there is one.
pub fn refusal(e: &DomainError) -> String {
    match e {
        DomainError::Validation(v) => v
            .errors()
            .iter()
            .map(|f| {
                if f.field.is_empty() {
                    f.message.clone()
                } else {
                    format!("{}: {}", f.field.replace('_', " "), f.message)
                }
            })
            .collect::<Vec<_>>()
            .join("; "),
        other => api::problem::detail_of(other),
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
        change: impl AsyncFnOnce(Keyed<'_, T>) -> Result<Answer<T>, DomainError>,
    ) -> Result<Result<HttpResponse, DomainError>, ConsoleError> {
        let redirect = Redirect(move |_: &T| back.clone());
        let request = self.form.keyed(&self.path, &redirect)?;
        match change(request).await {
            Ok(answer) => settled(answer, &redirect).map(Ok),
            Err(DomainError::Internal(cause)) => Err(DomainError::Internal(cause).into()),
            Err(refused) => Ok(Err(refused)),
        }
    }
}
