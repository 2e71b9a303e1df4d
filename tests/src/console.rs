//! A browser's part in the console tests, without the browser: a cookie jar that keeps what
//! the console sets, forms posted as a browser posts them, redirects left for the test to see.

use std::collections::BTreeMap;

use reqwest::header::{COOKIE, HeaderMap, SET_COOKIE};
use reqwest::redirect::Policy;
use reqwest::{Client, Method};

use crate::TestApp;

/// A page as the console answered it.
#[derive(Debug)]
pub struct Page {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Page {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    /// Every `Set-Cookie` of the answer.
    pub fn set_cookies(&self) -> Vec<String> {
        self.headers
            .get_all(SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect()
    }

    /// The value of the first form field named `name` (hidden inputs: nonce, csrf).
    pub fn field(&self, name: &str) -> Option<String> {
        let marker = format!("name=\"{name}\" value=\"");
        let start = self.body.find(&marker)? + marker.len();
        let end = self.body[start..].find('"')?;
        Some(self.body[start..start + end].to_owned())
    }

    /// The CSRF token and idempotency key of the form that posts to `action`.
    pub fn form_keys(&self, action: &str) -> (String, String) {
        let at = self
            .body
            .find(&format!("action=\"{action}\""))
            .unwrap_or_else(|| panic!("no form posting to {action} in {}", self.body));
        let rest = Page {
            status: self.status,
            headers: self.headers.clone(),
            body: self.body[at..].to_owned(),
        };
        (
            rest.field("csrf").unwrap_or_default(),
            rest.field("key").unwrap_or_default(),
        )
    }

    /// The value of attribute `attribute` of the element with id `id`, HTML entities of a
    /// URL's query undone (`&amp;`).
    pub fn attribute(&self, id: &str, attribute: &str) -> Option<String> {
        let start = self.body.find(&format!("id=\"{id}\""))?;
        let tag_start = self.body[..start].rfind('<')?;
        let tag_end = start + self.body[start..].find('>')?;
        let tag = &self.body[tag_start..tag_end];
        let marker = format!(" {attribute}=\"");
        let from = tag.find(&marker)? + marker.len();
        let to = tag[from..].find('"')?;
        Some(tag[from..from + to].replace("&amp;", "&"))
    }

    /// The text inside the element with id `id`, tags dropped (up to the first closing tag of
    /// its name: enough for the paragraphs and lists the tests read).
    pub fn text_of(&self, id: &str) -> Option<String> {
        let start = self.body.find(&format!("id=\"{id}\""))?;
        let tag_start = self.body[..start].rfind('<')?;
        let name: String = self.body[tag_start + 1..]
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        let open_end = start + self.body[start..].find('>')? + 1;
        let close = open_end + self.body[open_end..].find(&format!("</{name}>"))?;
        let mut text = String::new();
        let mut in_tag = false;
        for ch in self.body[open_end..close].chars() {
            match ch {
                '<' => in_tag = true,
                '>' => in_tag = false,
                c if !in_tag => text.push(c),
                _ => {}
            }
        }
        Some(text)
    }
}

/// One browser: its cookies, sent back as a browser sends them.
pub struct Browser {
    base: String,
    client: Client,
    cookies: BTreeMap<String, String>,
}

impl Browser {
    pub fn new(app: &TestApp) -> Browser {
        let client = Client::builder()
            .redirect(Policy::none())
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        Browser {
            base: app.url.clone(),
            client,
            cookies: BTreeMap::new(),
        }
    }

    /// Signs in with an account token through the sign-in form; panics unless it worked.
    pub async fn signed_in(app: &TestApp, token: &str) -> Browser {
        let mut browser = Browser::new(app);
        let answer = browser.sign_in(token).await;
        assert_eq!(answer.status, 303, "{}", answer.body);
        browser
    }

    /// Fetches the sign-in form and posts `token` with the form's nonce.
    pub async fn sign_in(&mut self, token: &str) -> Page {
        let form = self.get("/console/sign-in").await;
        let nonce = form.field("nonce").unwrap_or_default();
        self.post(
            "/console/sign-in",
            &[("nonce", &nonce), ("token", token)],
            &[],
        )
        .await
    }

    pub async fn get(&mut self, path: &str) -> Page {
        self.send(Method::GET, path, None, &[]).await
    }

    /// A GET with extra request headers (the body is left as sent, e.g. compressed).
    pub async fn send_with(&mut self, path: &str, headers: &[(&str, &str)]) -> Page {
        self.send(Method::GET, path, None, headers).await
    }

    /// Posts a form, with extra request headers (`Origin`, `Sec-Fetch-Site`) when given.
    pub async fn post(
        &mut self,
        path: &str,
        fields: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> Page {
        self.send(Method::POST, path, Some(fields), headers).await
    }

    /// The CSRF token the session's pages carry.
    pub async fn csrf(&mut self) -> String {
        self.get("/console/clusters")
            .await
            .field("csrf")
            .unwrap_or_default()
    }

    pub fn cookie(&self, name: &str) -> Option<&String> {
        self.cookies.get(name)
    }

    pub fn set_cookie(&mut self, name: &str, value: &str) {
        self.cookies.insert(name.to_owned(), value.to_owned());
    }

    async fn send(
        &mut self,
        method: Method,
        path: &str,
        form: Option<&[(&str, &str)]>,
        headers: &[(&str, &str)],
    ) -> Page {
        let mut r = self.client.request(method, format!("{}{path}", self.base));
        if !self.cookies.is_empty() {
            let jar: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            r = r.header(COOKIE, jar.join("; "));
        }
        if let Some(form) = form {
            r = r.form(form);
        }
        for (name, value) in headers {
            r = r.header(*name, *value);
        }
        let res = r.send().await.unwrap_or_else(|e| panic!("{path}: {e}"));
        let page = Page {
            status: res.status().as_u16(),
            headers: res.headers().clone(),
            body: res.text().await.unwrap_or_default(),
        };
        for set in page.set_cookies() {
            let pair = set.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                let gone = value.is_empty() || set.contains("Max-Age=0");
                if gone {
                    self.cookies.remove(name);
                } else {
                    self.cookies.insert(name.to_owned(), value.to_owned());
                }
            }
        }
        page
    }
}
