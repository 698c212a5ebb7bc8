//! A request's own text for HTTP/2 (its URI and its tag's fields), kept from one request
//! to the next, on either client.

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Uri};

use super::request::connection_specific;
use crate::client::h2conn::Outbound;
use crate::client::http1::{push_baggage, push_tag_values, push_traceparent, Prepared, Tag};
use crate::outcome::ErrorClass;

/// A request's own text: its URI and its tag's fields, written once a request into
/// buffers kept from one request to the next, and the request made from them (again,
/// should its connection never send it).
#[derive(Default)]
pub struct Text {
    uri: Vec<u8>,
    /// Where the authority and the path start in `uri`.
    authority_at: usize,
    path_at: usize,
    /// `X-Pinchpoint`, `traceparent` and `baggage`; empty when the request has none.
    pinchpoint: Vec<u8>,
    traceparent: Vec<u8>,
    baggage: Vec<u8>,
}

impl Text {
    /// Writes the URI and the tag's fields of `prepared` with `tag`, replacing what the
    /// text held; the tag in the query too if `in_query`.
    pub fn write(&mut self, prepared: &Prepared, scheme: &str, authority: &str, (tag, in_query): (Option<&Tag>, bool)) {
        let authority = prepared
            .fields
            .iter()
            .rfind(|(k, _)| k.eq_ignore_ascii_case("host"))
            .map_or(authority, |(_, v)| v.as_str());
        let uri = &mut self.uri;
        uri.clear();
        uri.extend_from_slice(scheme.as_bytes());
        uri.extend_from_slice(b"://");
        self.authority_at = uri.len();
        uri.extend_from_slice(authority.as_bytes());
        self.path_at = uri.len();
        uri.extend_from_slice(prepared.path.as_bytes());
        self.pinchpoint.clear();
        self.traceparent.clear();
        self.baggage.clear();
        let Some(tag) = tag else { return };
        if in_query {
            uri.push(prepared.query_sep as u8);
            push_tag_values(uri, b"pp_run=", b"&pp_", tag);
        }
        push_tag_values(&mut self.pinchpoint, b"run=", b"; ", tag);
        if !prepared.has_traceparent {
            push_traceparent(&mut self.traceparent, tag);
        }
        if !prepared.has_baggage {
            push_baggage(&mut self.baggage, tag);
        }
    }

    pub fn scheme(&self) -> &[u8] {
        &self.uri[..self.authority_at.saturating_sub(3)]
    }

    pub fn authority(&self) -> &[u8] {
        &self.uri[self.authority_at..self.path_at]
    }

    /// The path with its query (and the tag in it).
    pub fn path(&self) -> &[u8] {
        &self.uri[self.path_at..]
    }

    /// `X-Pinchpoint`, `traceparent` and `baggage`, each empty when the request has none.
    pub fn tag_fields(&self) -> (&[u8], &[u8], &[u8]) {
        (&self.pinchpoint, &self.traceparent, &self.baggage)
    }

    /// The request `prepared` names, with the text written last and `body`.
    pub fn request(&self, prepared: &Prepared, body: Bytes) -> Result<Outbound, ErrorClass> {
        let uri = Uri::from_maybe_shared(Bytes::copy_from_slice(&self.uri)).map_err(|_| ErrorClass::Io)?;
        let method = Method::from_bytes(prepared.method.as_bytes()).map_err(|_| ErrorClass::Io)?;
        let mut headers = HeaderMap::with_capacity(prepared.fields.len() + 3);
        for (k, v) in &prepared.fields {
            if connection_specific(k) {
                continue;
            }
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| ErrorClass::Io)?;
            let value = HeaderValue::from_str(v).map_err(|_| ErrorClass::Io)?;
            headers.insert(name, value);
        }
        // Each request's own values are never indexed by HPACK: in its table they would
        // push out the fields every request repeats, sent as one byte each while there.
        let own = |value: &[u8]| {
            let mut value = HeaderValue::from_bytes(value).map_err(|_| ErrorClass::Io)?;
            value.set_sensitive(true);
            Ok::<_, ErrorClass>(value)
        };
        if !self.pinchpoint.is_empty() {
            headers.insert(HeaderName::from_static("x-pinchpoint"), own(&self.pinchpoint)?);
        }
        if !self.traceparent.is_empty() {
            headers.insert(HeaderName::from_static("traceparent"), own(&self.traceparent)?);
        }
        if !self.baggage.is_empty() {
            let value = HeaderValue::from_bytes(&self.baggage).map_err(|_| ErrorClass::Io)?;
            headers.insert(HeaderName::from_static("baggage"), value);
        }
        let mut head = Request::new(());
        *head.method_mut() = method;
        *head.uri_mut() = uri;
        *head.headers_mut() = headers;
        Ok(Outbound { head, body })
    }
}
