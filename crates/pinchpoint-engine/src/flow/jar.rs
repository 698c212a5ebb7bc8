//! A user's cookies: set by the target's `Set-Cookie` headers, sent back on the
//! requests whose path they cover. One target, so domains are not compared.

use cookie::Cookie;

#[derive(Debug, Default)]
pub struct Jar {
    /// Name, value, path (None: every path).
    cookies: Vec<(String, String, Option<String>)>,
}

/// The most cookies a user keeps; past it, the oldest goes.
const MAX_COOKIES: usize = 64;

impl Jar {
    pub fn clear(&mut self) {
        self.cookies.clear();
    }

    /// Takes in one `Set-Cookie` value: set, replaced, or removed when it has expired
    /// (`Max-Age` zero or less, or an `Expires` in the past). One that does not parse is
    /// ignored, as browsers do.
    pub fn set_from_header(&mut self, value: &str) {
        let Ok(c) = Cookie::parse(value) else {
            return;
        };
        let path = c.path().filter(|p| p.starts_with('/') && *p != "/").map(str::to_string);
        self.cookies.retain(|(n, _, p)| !(n == c.name() && *p == path));
        let expired = c.max_age().is_some_and(|age| age.is_zero() || age.is_negative())
            || c.expires_datetime().is_some_and(|at| at < cookie::time::OffsetDateTime::now_utc());
        if expired {
            return;
        }
        if self.cookies.len() >= MAX_COOKIES {
            self.cookies.remove(0);
        }
        self.cookies.push((c.name().to_string(), c.value().to_string(), path));
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.cookies.iter().rev().find(|(n, _, _)| n == name).map(|(_, v, _)| v.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.cookies.is_empty()
    }

    /// `a=1; b=2`: the cookies whose path covers `request_path`; false if there are none.
    pub fn header_value(&self, request_path: &str, out: &mut Vec<u8>) -> bool {
        let path = request_path.split(['?', '#']).next().unwrap_or("");
        let mut any = false;
        for (name, value, p) in &self.cookies {
            if p.as_deref().is_some_and(|p| !covers(p, path)) {
                continue;
            }
            if any {
                out.extend_from_slice(b"; ");
            }
            out.extend_from_slice(name.as_bytes());
            out.push(b'=');
            out.extend_from_slice(value.as_bytes());
            any = true;
        }
        any
    }
}

/// RFC 6265 §5.1.4 path-match.
fn covers(cookie_path: &str, path: &str) -> bool {
    path == cookie_path
        || path.starts_with(cookie_path)
            && (cookie_path.ends_with('/') || path.as_bytes().get(cookie_path.len()) == Some(&b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(jar: &Jar, path: &str) -> String {
        let mut out = Vec::new();
        jar.header_value(path, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn cookies_are_set_replaced_and_sent_back() {
        let mut jar = Jar::default();
        jar.set_from_header("session=a1; Path=/; HttpOnly");
        jar.set_from_header("theme=dark");
        assert_eq!(sent(&jar, "/api/orders?x=1"), "session=a1; theme=dark");
        jar.set_from_header("session=b2; Path=/");
        assert_eq!(jar.get("session"), Some("b2"));
        assert_eq!(sent(&jar, "/"), "theme=dark; session=b2");
    }

    #[test]
    fn expired_cookies_are_removed_and_paths_respected() {
        let mut jar = Jar::default();
        jar.set_from_header("session=a1");
        jar.set_from_header("session=; Max-Age=0");
        assert_eq!(jar.get("session"), None);
        jar.set_from_header("cart=c; Path=/shop");
        jar.set_from_header("old=x; Expires=Wed, 21 Oct 2015 07:28:00 GMT");
        assert_eq!(sent(&jar, "/shop/1"), "cart=c");
        assert_eq!(sent(&jar, "/shopping"), "");
        assert!(!jar.header_value("/", &mut Vec::new()));
        jar.set_from_header("garbage without equals");
        assert!(jar.get("garbage without equals").is_none());
    }
}
