//! The number a numeric check compares with: arithmetic over numbers and variables,
//! `+ - * /` and parentheses (`${budget} * 1.1`, `(${price} + 2) * ${qty}`). Parsed once
//! before the run; evaluated on each answer with the user's values, each of which must
//! then read as a number. No function calls, and bounded: an expression is at most
//! `MAX_CHARS` long and nests at most `MAX_DEPTH` deep.

use std::fmt;

pub const MAX_CHARS: usize = 200;
pub const MAX_DEPTH: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Clone, Debug, PartialEq)]
enum Node {
    Number(f64),
    /// The `k`th of the expression's variables.
    Var(usize),
    Neg(Box<Node>),
    Apply(Op, Box<Node>, Box<Node>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    root: Node,
    /// The variables it reads: (slot in the user's values, name), for the reasons.
    vars: Vec<(usize, String)>,
    /// As the plan wrote it.
    text: String,
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Number(f64),
    Var(String),
    Op(Op),
    Open,
    Close,
}

impl Expr {
    /// Parses `text`, resolving each name with `index_of` (None: unknown, an error).
    pub fn parse(text: &str, index_of: &dyn Fn(&str) -> Option<usize>) -> Result<Self, String> {
        if text.chars().count() > MAX_CHARS {
            return Err(format!("{} characters, above the {MAX_CHARS} an expression may have", text.chars().count()));
        }
        let tokens = tokenize(text)?;
        let mut parser = Parser { tokens: &tokens, at: 0, depth: 0, vars: Vec::new(), index_of };
        let root = parser.sum()?;
        if let Some(extra) = tokens.get(parser.at) {
            return Err(format!("{} where the expression should end", describe(extra)));
        }
        Ok(Self { root, vars: parser.vars, text: text.trim().to_string() })
    }

    /// Whether it is one number as written (`2`, `-0.5`): no variable, no operation.
    pub fn is_constant(&self) -> bool {
        match &self.root {
            Node::Number(_) => true,
            Node::Neg(inner) => matches!(**inner, Node::Number(_)),
            _ => false,
        }
    }

    /// Its value with `values` (the user's, by slot); Err: why it has none (a variable
    /// that is not a number, a division by zero).
    pub fn eval(&self, values: &[String]) -> Result<f64, String> {
        let x = self.eval_node(&self.root, values)?;
        if x.is_finite() {
            Ok(x)
        } else {
            Err(format!("{} is not a finite number", self.text))
        }
    }

    fn eval_node(&self, node: &Node, values: &[String]) -> Result<f64, String> {
        Ok(match node {
            Node::Number(x) => *x,
            Node::Var(k) => {
                let (slot, name) = &self.vars[*k];
                let value = values[*slot].as_str();
                match value.trim().parse::<f64>() {
                    Ok(x) if x.is_finite() => x,
                    _ => return Err(format!("${{{name}}} is {:?}, not a number", shorten(value))),
                }
            }
            Node::Neg(inner) => -self.eval_node(inner, values)?,
            Node::Apply(op, a, b) => {
                let (a, b) = (self.eval_node(a, values)?, self.eval_node(b, values)?);
                match op {
                    Op::Add => a + b,
                    Op::Sub => a - b,
                    Op::Mul => a * b,
                    Op::Div if b == 0.0 => return Err(format!("{} divides by zero", self.text)),
                    Op::Div => a / b,
                }
            }
        })
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A value as a reason quotes it: at most 40 characters.
fn shorten(value: &str) -> String {
    match value.char_indices().nth(40) {
        Some((at, _)) => format!("{}…", &value[..at]),
        None => value.to_string(),
    }
}

fn describe(t: &Token) -> String {
    match t {
        Token::Number(x) => format!("the number {x}"),
        Token::Var(name) => format!("${{{name}}}"),
        Token::Op(op) => format!("`{}`", op_char(*op)),
        Token::Open => "`(`".into(),
        Token::Close => "`)`".into(),
    }
}

fn op_char(op: Op) -> char {
    match op {
        Op::Add => '+',
        Op::Sub => '-',
        Op::Mul => '*',
        Op::Div => '/',
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let at = text.len() - rest.len() + 1;
        let (token, len) = match c {
            _ if c.is_whitespace() => {
                rest = &rest[c.len_utf8()..];
                continue;
            }
            '+' => (Token::Op(Op::Add), 1),
            '-' => (Token::Op(Op::Sub), 1),
            '*' => (Token::Op(Op::Mul), 1),
            '/' => (Token::Op(Op::Div), 1),
            '(' => (Token::Open, 1),
            ')' => (Token::Close, 1),
            '$' => {
                let inner = rest.strip_prefix("${").ok_or_else(|| format!("`$` at character {at} does not start a ${{variable}}"))?;
                let end = inner.find('}').ok_or_else(|| format!("`${{` at character {at} has no closing `}}`"))?;
                let name = inner[..end].trim();
                if name.is_empty() {
                    return Err(format!("`${{}}` at character {at} names no variable"));
                }
                (Token::Var(name.to_string()), end + 3)
            }
            _ if c.is_ascii_digit() || c == '.' => number(rest, at)?,
            _ => {
                let word: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.').collect();
                let word = if word.is_empty() { c.to_string() } else { word };
                return Err(format!("{word:?} at character {at} is not a number, a ${{variable}}, + - * / or a parenthesis"));
            }
        };
        tokens.push(token);
        rest = &rest[len..];
    }
    Ok(tokens)
}

/// A decimal number at the start of `rest` (`12`, `1.5`, `.5`, `2e3`) and its length.
fn number(rest: &str, at: usize) -> Result<(Token, usize), String> {
    let bytes = rest.as_bytes();
    let mut len = bytes.iter().take_while(|b| b.is_ascii_digit() || **b == b'.').count();
    if matches!(bytes.get(len), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(len + 1), Some(b'+' | b'-')));
        let digits = bytes[len + 1 + sign..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits > 0 {
            len += 1 + sign + digits;
        }
    }
    let text = &rest[..len];
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok((Token::Number(x), len)),
        _ => Err(format!("{text:?} at character {at} is not a number")),
    }
}

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    depth: usize,
    vars: Vec<(usize, String)>,
    index_of: &'a dyn Fn(&str) -> Option<usize>,
}

impl Parser<'_> {
    fn next_op(&mut self, ops: [Op; 2]) -> Option<Op> {
        match self.tokens.get(self.at) {
            Some(Token::Op(op)) if ops.contains(op) => {
                self.at += 1;
                Some(*op)
            }
            _ => None,
        }
    }

    fn sum(&mut self) -> Result<Node, String> {
        let mut left = self.product()?;
        while let Some(op) = self.next_op([Op::Add, Op::Sub]) {
            left = Node::Apply(op, Box::new(left), Box::new(self.product()?));
        }
        Ok(left)
    }

    fn product(&mut self) -> Result<Node, String> {
        let mut left = self.operand()?;
        while let Some(op) = self.next_op([Op::Mul, Op::Div]) {
            left = Node::Apply(op, Box::new(left), Box::new(self.operand()?));
        }
        Ok(left)
    }

    fn operand(&mut self) -> Result<Node, String> {
        let Some(token) = self.tokens.get(self.at) else {
            return Err(match self.at {
                0 => "no number or ${variable}".to_string(),
                _ => format!("a number or ${{variable}} is missing after {}", describe(&self.tokens[self.at - 1])),
            });
        };
        self.at += 1;
        match token {
            Token::Number(x) => Ok(Node::Number(*x)),
            Token::Var(name) => {
                let slot = (self.index_of)(name).ok_or_else(|| format!("unknown variable ${{{name}}}"))?;
                self.vars.push((slot, name.clone()));
                Ok(Node::Var(self.vars.len() - 1))
            }
            Token::Op(Op::Sub | Op::Add) => {
                let negate = matches!(token, Token::Op(Op::Sub));
                let inner = self.nested(Self::operand)?;
                Ok(if negate { Node::Neg(Box::new(inner)) } else { inner })
            }
            Token::Open => {
                let inner = self.nested(Self::sum)?;
                match self.tokens.get(self.at) {
                    Some(Token::Close) => {
                        self.at += 1;
                        Ok(inner)
                    }
                    _ => Err("a `(` has no closing `)`".to_string()),
                }
            }
            other => Err(format!("{} where a number or ${{variable}} should be", describe(other))),
        }
    }

    fn nested(&mut self, part: fn(&mut Self) -> Result<Node, String>) -> Result<Node, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("nested more than {MAX_DEPTH} deep"));
        }
        let node = part(self);
        self.depth -= 1;
        node
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &str) -> Option<usize> {
        ["budget", "price", "name"].iter().position(|&k| k == n)
    }

    fn value(text: &str) -> Result<f64, String> {
        let values = ["100".to_string(), " 19.99 ".to_string(), "lamp".to_string()];
        Expr::parse(text, &names)?.eval(&values)
    }

    #[test]
    fn arithmetic_follows_precedence_parentheses_and_signs() {
        assert_eq!(value("${budget} * 1.1").unwrap(), 100.0 * 1.1);
        assert_eq!(value("1 + 2 * 3").unwrap(), 7.0);
        assert_eq!(value("(1 + 2) * 3").unwrap(), 9.0);
        assert_eq!(value("10 - 4 - 3").unwrap(), 3.0);
        assert_eq!(value("12 / 4 / 3").unwrap(), 1.0);
        assert_eq!(value("-${price} + -(-2)").unwrap(), -19.99 + 2.0);
        assert_eq!(value("${ price }").unwrap(), 19.99);
        assert_eq!(value(".5 + 2e3 + 25E-2").unwrap(), 2000.75);
        assert!(Expr::parse("42", &names).unwrap().is_constant());
        assert!(Expr::parse("-42", &names).unwrap().is_constant());
        assert!(!Expr::parse("-(1 + 2)", &names).unwrap().is_constant());
    }

    #[test]
    fn a_value_that_is_not_a_number_or_a_division_by_zero_is_a_reason() {
        assert_eq!(value("${name} * 2").unwrap_err(), "${name} is \"lamp\", not a number");
        assert_eq!(value("${budget} / (${price} - ${price})").unwrap_err(), "${budget} / (${price} - ${price}) divides by zero");
        let long = vec!["x".repeat(100)];
        let e = Expr::parse("${budget}", &names).unwrap().eval(&long).unwrap_err();
        assert_eq!(e, format!("${{budget}} is \"{}…\", not a number", "x".repeat(40)));
        let huge = Expr::parse("1e308 * 10", &names).unwrap().eval(&[]).unwrap_err();
        assert_eq!(huge, "1e308 * 10 is not a finite number");
    }

    #[test]
    fn bad_arithmetic_is_refused_saying_where() {
        let refused = |text: &str| Expr::parse(text, &names).unwrap_err();
        for (text, reason) in [
            ("cheap", "\"cheap\" at character 1 is not a number, a ${variable}, + - * / or a parenthesis"),
            ("max(${price}, 2)", "\"max\" at character 1 is not a number, a ${variable}, + - * / or a parenthesis"),
            ("${budget} *", "a number or ${variable} is missing after `*`"),
            ("${budget} 2", "the number 2 where the expression should end"),
            ("(${budget} + 1", "a `(` has no closing `)`"),
            ("${budget} )", "`)` where the expression should end"),
            ("* 2", "`*` where a number or ${variable} should be"),
            ("", "no number or ${variable}"),
            ("1.2.3", "\"1.2.3\" at character 1 is not a number"),
            ("${nope} + 1", "unknown variable ${nope}"),
            ("${budget", "`${` at character 1 has no closing `}`"),
            ("2 $ 3", "`$` at character 3 does not start a ${variable}"),
        ] {
            assert_eq!(refused(text), reason, "{text}");
        }
        assert!(refused(&"(".repeat(17)).contains("nested more than 16 deep"));
        assert!(refused(&"1+".repeat(101)).contains("above the 200"));
    }
}
