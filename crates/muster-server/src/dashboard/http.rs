//! The dashboard's HTTP details: its answers and their security headers, and the decoding of
//! what a URL carries (percent-encoded path segments and query strings).

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Response, StatusCode};
use serde::Serialize;

/// Only this origin's script, style and JSON; no inline script or style, no frames, no forms
/// elsewhere. What a client-chosen string could smuggle into the page would not run.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

fn respond(status: StatusCode, body: Bytes, content_type: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    let fixed: [(HeaderName, &'static str); 6] = [
        (hyper::header::CONTENT_TYPE, content_type),
        (
            hyper::header::CONTENT_SECURITY_POLICY,
            CONTENT_SECURITY_POLICY,
        ),
        (hyper::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (hyper::header::X_FRAME_OPTIONS, "DENY"),
        (hyper::header::REFERRER_POLICY, "no-referrer"),
        // Live data, and with an auth file a principal's view: never from a cache.
        (hyper::header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// One of the embedded pages or assets.
pub(super) fn page(body: &'static str, content_type: &'static str) -> Response<Full<Bytes>> {
    respond(
        StatusCode::OK,
        Bytes::from_static(body.as_bytes()),
        content_type,
    )
}

pub(super) fn json(status: StatusCode, value: &impl Serialize) -> Response<Full<Bytes>> {
    match serde_json::to_vec(value) {
        Ok(body) => respond(status, Bytes::from(body), "application/json"),
        Err(e) => json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("answer not encodable: {e}"),
        ),
    }
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
}

/// `{"error": message}` with `status`.
pub(super) fn json_error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let body = serde_json::to_vec(&ErrorBody { error: message })
        .unwrap_or_else(|_| br#"{"error":"unencodable error"}"#.to_vec());
    respond(status, Bytes::from(body), "application/json")
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// `%XX` sequences decoded; `None` for a broken escape or bytes that are not UTF-8.
pub(super) fn percent_decode(s: &str) -> Option<String> {
    decode(s, false)
}

fn decode(s: &str, plus_is_space: bool) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hi = hex(*bytes.get(i + 1)?)?;
                let lo = hex(*bytes.get(i + 2)?)?;
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The value of `key` in a query string (`a=1&b=x%20y`), form-decoded; the first one wins.
/// A value that does not decode counts as absent.
pub(super) fn query_value(query: &str, key: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find(|(k, _)| decode(k, true).as_deref() == Some(key))
        .and_then(|(_, v)| decode(v, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding_takes_utf8_and_refuses_broken_escapes() {
        assert_eq!(percent_decode("a%2Fb%20c").as_deref(), Some("a/b c"));
        assert_eq!(percent_decode("caf%C3%A9").as_deref(), Some("café"));
        assert_eq!(percent_decode("a+b").as_deref(), Some("a+b"));
        assert_eq!(percent_decode("%"), None);
        assert_eq!(percent_decode("%4"), None);
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%FF"), None, "not UTF-8");
    }

    #[test]
    fn query_values_are_form_decoded_and_the_first_wins() {
        let q = "filter=orders+eu&state=Stable&filter=x&empty=&flag";
        assert_eq!(query_value(q, "filter").as_deref(), Some("orders eu"));
        assert_eq!(query_value(q, "state").as_deref(), Some("Stable"));
        assert_eq!(query_value(q, "empty").as_deref(), Some(""));
        assert_eq!(query_value(q, "flag").as_deref(), Some(""));
        assert_eq!(query_value(q, "after"), None);
        assert_eq!(query_value("after=%FF", "after"), None);
    }

    #[test]
    fn every_answer_carries_the_security_headers() {
        for response in [
            page("<p>", "text/html; charset=utf-8"),
            json_error(StatusCode::NOT_FOUND, "not found"),
        ] {
            let headers = response.headers();
            let csp = headers
                .get(hyper::header::CONTENT_SECURITY_POLICY)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            assert!(csp.contains("script-src 'self'"), "{csp}");
            assert!(!csp.contains("unsafe"), "{csp}");
            assert_eq!(
                headers.get(hyper::header::X_CONTENT_TYPE_OPTIONS),
                Some(&HeaderValue::from_static("nosniff"))
            );
        }
    }
}
