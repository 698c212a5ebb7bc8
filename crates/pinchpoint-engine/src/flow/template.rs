//! Text with variables: `${name}` is replaced by the variable's value when the request
//! is sent; `$${` stands for a literal `${`. A list variable's values are named
//! `${name[0]}`, `${name[-1]}` (from the end) or `${name[i]}` (the turn of a `foreach`).

/// A piece of a template: text as it is, or the variable at this index.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Text(Vec<u8>),
    Var(usize),
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Template {
    parts: Vec<Part>,
}

/// Where a value goes, which decides what it may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Into {
    /// A request target: bytes that cannot go on the request line are percent-encoded.
    Path,
    /// A header value: a value holding CR, LF or NUL is refused.
    Header,
    /// A body or an expected value: any bytes.
    Raw,
    /// Inside a JSON string (a gRPC request message): escaped as JSON escapes it.
    Json,
}

impl Template {
    /// Parses `text`, resolving each name with `index_of` (None: unknown, an error).
    pub fn parse(text: &str, index_of: &dyn Fn(&str) -> Option<usize>) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut literal = Vec::new();
        let mut rest = text;
        while let Some(at) = rest.find("${") {
            if rest[..at].ends_with('$') {
                literal.extend_from_slice(&rest.as_bytes()[..at - 1]);
                literal.extend_from_slice(b"${");
                rest = &rest[at + 2..];
                continue;
            }
            literal.extend_from_slice(&rest.as_bytes()[..at]);
            let after = &rest[at + 2..];
            let end = after.find('}').ok_or_else(|| format!("`${{` without its `}}` in {text:?}"))?;
            let name = after[..end].trim();
            let index = index_of(name).ok_or_else(|| format!("unknown variable ${{{name}}}"))?;
            if !literal.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut literal)));
            }
            parts.push(Part::Var(index));
            rest = &after[end + 1..];
        }
        literal.extend_from_slice(rest.as_bytes());
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(Self { parts })
    }

    /// The names `text` uses, in order (an unreadable template gives those before the fault).
    pub fn names(text: &str) -> Vec<String> {
        let seen = std::cell::RefCell::new(Vec::new());
        let _ = Self::parse(text, &|name| {
            seen.borrow_mut().push(name.to_string());
            Some(0)
        });
        seen.into_inner()
    }

    pub fn has_vars(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Var(_)))
    }

    /// Appends the text with `vars` in place to `out`; Err names a variable whose value
    /// cannot go `into` this place.
    pub fn render(&self, vars: &[String], into: Into, out: &mut Vec<u8>) -> Result<(), usize> {
        for part in &self.parts {
            match part {
                Part::Text(t) => out.extend_from_slice(t),
                Part::Var(i) => {
                    let value = vars[*i].as_bytes();
                    match into {
                        Into::Raw => out.extend_from_slice(value),
                        Into::Header => {
                            if value.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0)) {
                                return Err(*i);
                            }
                            out.extend_from_slice(value);
                        }
                        Into::Path => percent_encode(value, out),
                        Into::Json => {
                            let quoted = serde_json::to_string(&vars[*i]).expect("a string is JSON");
                            out.extend_from_slice(&quoted.as_bytes()[1..quoted.len() - 1]);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Which value of a list variable a name reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Element {
    /// From the start (0 the first), or from the end when negative (-1 the last).
    At(i64),
    /// The value of the `foreach` turn.
    Turn,
}

/// `name[0]`, `name[-1]` or `name[i]` as (name, which value); None for any other name.
pub fn element(name: &str) -> Option<(&str, Element)> {
    let (list, rest) = name.split_once('[')?;
    let index = rest.strip_suffix(']')?;
    let which = match index {
        "i" => Element::Turn,
        _ if index.trim_start_matches('-').bytes().all(|b| b.is_ascii_digit()) && !index.is_empty() => {
            Element::At(index.parse().ok()?)
        }
        _ => return None,
    };
    Some((list, which))
}

/// Bytes that may not stand on a request line (controls, space, non-ASCII, and `#`,
/// which would end the target) as `%XX`.
fn percent_encode(value: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in value {
        if b <= b' ' || b >= 0x7f || b == b'#' {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        } else {
            out.push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &str) -> Option<usize> {
        ["token", "id"].iter().position(|&k| k == n)
    }

    fn render(t: &str, into: Into) -> Result<String, usize> {
        let vars = vec!["a b\r\n".to_string(), "42".to_string()];
        let mut out = Vec::new();
        Template::parse(t, &names).unwrap().render(&vars, into, &mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn variables_are_replaced_and_literals_kept() {
        assert_eq!(render("/orders/${id}?x=${ id }", Into::Raw).unwrap(), "/orders/42?x=42");
        assert_eq!(render("cost $5, $${id} stays", Into::Raw).unwrap(), "cost $5, ${id} stays");
        assert_eq!(render("plain", Into::Raw).unwrap(), "plain");
        assert!(!Template::parse("plain", &names).unwrap().has_vars());
    }

    #[test]
    fn a_value_is_made_safe_for_where_it_goes() {
        assert_eq!(render("/q/${token}", Into::Path).unwrap(), "/q/a%20b%0D%0A");
        assert_eq!(render("Bearer ${token}", Into::Header), Err(0));
        assert_eq!(render("${token}", Into::Raw).unwrap(), "a b\r\n");
        assert_eq!(render(r#"{"t": "${token}"}"#, Into::Json).unwrap(), r#"{"t": "a b\r\n"}"#);
    }

    #[test]
    fn a_list_value_is_named_by_its_index_or_the_turn() {
        assert_eq!(element("ids[0]"), Some(("ids", Element::At(0))));
        assert_eq!(element("ids[-1]"), Some(("ids", Element::At(-1))));
        assert_eq!(element("ids[i]"), Some(("ids", Element::Turn)));
        for not in ["ids", "ids[]", "ids[-]", "ids[j]", "ids[1", "ids[1]x", "ids[--1]", "ids[99999999999999999999]"] {
            assert_eq!(element(not), None, "{not}");
        }
        assert_eq!(Template::names("/a/${ids[0]}/${ x }?${"), ["ids[0]", "x"]);
    }

    #[test]
    fn unknown_or_unclosed_variables_are_errors() {
        assert_eq!(Template::parse("/x/${nope}", &names).unwrap_err(), "unknown variable ${nope}");
        assert!(Template::parse("/x/${id", &names).unwrap_err().contains("without its"));
    }
}
