//! An nginx `log_format` string compiled into literal text and typed variables.
//!
//! Each variable gets the same pattern as in `pinchpoint.collect.formats.nginx`
//! (`_variable_pattern`): typed numbers and times, per-upstream lists, quoted fields,
//! text with spaces, or a word. Only the first occurrence of a variable is captured.

use std::fmt;

/// What a variable's value may look like; each is one pattern of the Python parser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `\d+(?:\.\d+)?|-`
    NumberOrDash,
    /// `\d{3}|-`
    Status,
    /// `\d+|-`
    IntOrDash,
    /// `\d{2}/[A-Za-z]{3}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}`
    ClfTime,
    /// `\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[+-]\d{2}:\d{2}|Z)?`
    IsoTime,
    /// `\S+?(?:(?:, | : )\S+?)*`
    AddressList,
    /// `N(?:\s*[,:]\s*N)*` with N = `\d+(?:\.\d+)?|-`
    List,
    /// `(?:[^"\\]|\\.)*?` inside double quotes
    Quoted,
    /// `.*?`: unquoted text that can hold spaces
    Any,
    /// `\S*?`
    Word,
}

/// The variables whose values make a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    RequestTime,
    UpstreamResponseTime,
    Status,
    Msec,
    TimeLocal,
    TimeIso8601,
    RequestUri,
    Request,
    Args,
    QueryString,
    TagHeader,
}

/// How many fields there are.
pub const FIELDS: usize = 11;

/// The variables that hold the tag, in the order their values are joined.
pub const TAG_FIELDS: [Field; 4] = [
    Field::RequestUri,
    Field::Request,
    Field::Args,
    Field::QueryString,
];

impl Field {
    fn of(name: &str) -> Option<Field> {
        Some(match name {
            "request_time" => Field::RequestTime,
            "upstream_response_time" => Field::UpstreamResponseTime,
            "status" => Field::Status,
            "msec" => Field::Msec,
            "time_local" => Field::TimeLocal,
            "time_iso8601" => Field::TimeIso8601,
            "request_uri" => Field::RequestUri,
            "request" => Field::Request,
            "args" => Field::Args,
            "query_string" => Field::QueryString,
            "http_x_pinchpoint" => Field::TagHeader,
            _ => return None,
        })
    }
}

/// One variable and the literal text that follows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variable {
    pub name: String,
    pub kind: Kind,
    /// The field this variable's value is captured as (first occurrence only).
    pub capture: Option<Field>,
    pub literal_after: Vec<u8>,
}

/// A compiled `log_format`: the literal text before the first variable, then variables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    pub head: Vec<u8>,
    pub vars: Vec<Variable>,
    captured: [bool; FIELDS],
}

/// A `log_format` that cannot be compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatError(pub String);

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FormatError {}

impl Format {
    /// Compiles `log_format`; it must hold at least one `$variable`.
    pub fn compile(log_format: &str) -> Result<Format, FormatError> {
        let text = log_format.as_bytes();
        let mut head = Vec::new();
        let mut vars: Vec<Variable> = Vec::new();
        let mut captured = [false; FIELDS];
        let mut quotes = 0usize;
        let mut i = 0;
        while i < text.len() {
            let Some((name, next)) = variable_at(text, i) else {
                quotes += usize::from(text[i] == b'"');
                match vars.last_mut() {
                    Some(var) => var.literal_after.push(text[i]),
                    None => head.push(text[i]),
                }
                i += 1;
                continue;
            };
            let kind = kind_of(name, quotes % 2 == 1);
            let capture = Field::of(name).filter(|f| !captured[*f as usize]);
            if let Some(f) = capture {
                captured[f as usize] = true;
            }
            vars.push(Variable {
                name: name.to_string(),
                kind,
                capture,
                literal_after: Vec::new(),
            });
            i = next;
        }
        if vars.is_empty() {
            return Err(FormatError(format!(
                "nginx log_format has no $variable: {log_format:?}"
            )));
        }
        Ok(Format {
            head,
            vars,
            captured,
        })
    }

    /// Whether the format logs `field`.
    pub fn has(&self, field: Field) -> bool {
        self.captured[field as usize]
    }
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The variable starting at `i` (`$name` or `${name}`) and where it ends.
fn variable_at(text: &[u8], i: usize) -> Option<(&str, usize)> {
    if text[i] != b'$' {
        return None;
    }
    let name_len = |from: usize| {
        text[from.min(text.len())..]
            .iter()
            .take_while(|b| is_name_byte(**b))
            .count()
    };
    if text.get(i + 1) == Some(&b'{') {
        let n = name_len(i + 2);
        if n > 0 && text.get(i + 2 + n) == Some(&b'}') {
            return Some((ascii(&text[i + 2..i + 2 + n]), i + 3 + n));
        }
    }
    let n = name_len(i + 1);
    (n > 0).then(|| (ascii(&text[i + 1..i + 1 + n]), i + 1 + n))
}

fn ascii(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or_default()
}

/// The pattern of variable `name`, as `_variable_pattern` of the Python parser.
fn kind_of(name: &str, quoted: bool) -> Kind {
    match name {
        "request_time" | "msec" | "connection_time" => return Kind::NumberOrDash,
        "status" => return Kind::Status,
        "body_bytes_sent"
        | "bytes_sent"
        | "request_length"
        | "connection"
        | "connection_requests"
        | "pid" => return Kind::IntOrDash,
        "time_local" => return Kind::ClfTime,
        "time_iso8601" => return Kind::IsoTime,
        "upstream_addr" => return Kind::AddressList,
        "upstream_status" | "upstream_response_length" => return Kind::List,
        _ => {}
    }
    if name.starts_with("upstream_bytes")
        || (name.starts_with("upstream_") && name.ends_with("_time"))
    {
        return Kind::List;
    }
    if quoted {
        return Kind::Quoted;
    }
    let spaced = ["http_", "sent_http_", "upstream_http_", "cookie_"];
    if name == "request" || spaced.iter().any(|p| name.starts_with(p)) {
        return Kind::Any;
    }
    Kind::Word
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_literals_and_kinds() {
        let f =
            Format::compile(r#"$remote_addr [$time_local] "$request" ${status}x rt=$request_time"#)
                .unwrap();
        assert_eq!(f.head, b"");
        let got: Vec<(&str, Kind, &[u8])> = f
            .vars
            .iter()
            .map(|v| (v.name.as_str(), v.kind, v.literal_after.as_slice()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("remote_addr", Kind::Word, &b" ["[..]),
                ("time_local", Kind::ClfTime, &b"] \""[..]),
                ("request", Kind::Quoted, &b"\" "[..]),
                ("status", Kind::Status, &b"x rt="[..]),
                ("request_time", Kind::NumberOrDash, &b""[..]),
            ]
        );
        assert!(f.has(Field::TimeLocal) && f.has(Field::Request) && !f.has(Field::Msec));
    }

    #[test]
    fn unquoted_request_and_headers_take_spaces_and_upstream_times_are_lists() {
        let f =
            Format::compile("$request|$http_user_agent|$upstream_connect_time|$upstream_addr|$uri")
                .unwrap();
        let kinds: Vec<Kind> = f.vars.iter().map(|v| v.kind).collect();
        assert_eq!(
            kinds,
            vec![
                Kind::Any,
                Kind::Any,
                Kind::List,
                Kind::AddressList,
                Kind::Word
            ]
        );
    }

    #[test]
    fn a_dollar_without_a_name_is_literal_and_only_the_first_occurrence_is_captured() {
        let f = Format::compile("a$ ${x $request_time $request_time").unwrap();
        assert_eq!(f.head, b"a$ ${x ");
        assert_eq!(f.vars[0].capture, Some(Field::RequestTime));
        assert_eq!(f.vars[1].capture, None);
    }

    #[test]
    fn a_format_without_variables_is_refused() {
        assert!(Format::compile("just text").is_err());
        assert!(Format::compile("").is_err());
    }
}
