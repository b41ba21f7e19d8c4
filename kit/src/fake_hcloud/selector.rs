//! Hetzner's label selectors, as the API evaluates them on list calls.

use serde_json::Value;

/// A parsed Hetzner label selector: comma-separated terms, all of which must hold.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LabelSelector(Vec<Term>);

#[derive(Debug, Clone, PartialEq)]
enum Term {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    Absent(String),
}

impl LabelSelector {
    /// Parses `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, comma-separated.
    pub fn parse(text: &str) -> Result<LabelSelector, String> {
        let mut terms = Vec::new();
        let mut depth = 0;
        let mut current = String::new();
        let mut parts = Vec::new();
        for c in text.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(std::mem::take(&mut current));
                    continue;
                }
                _ => {}
            }
            current.push(c);
        }
        parts.push(current);
        for part in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
            let list = |rest: &str| -> Result<Vec<String>, String> {
                let inner = rest
                    .trim()
                    .strip_prefix('(')
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or_else(|| format!("invalid label selector term `{part}`"))?;
                Ok(inner.split(',').map(|s| s.trim().to_string()).collect())
            };
            let term = if let Some((k, v)) = part.split_once("!=") {
                Term::Ne(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Term::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                Term::NotIn(k.trim().into(), list(rest)?)
            } else if let Some((k, rest)) = part.split_once(" in ") {
                Term::In(k.trim().into(), list(rest)?)
            } else if let Some(k) = part.strip_prefix('!') {
                Term::Absent(k.trim().into())
            } else if part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            {
                Term::Exists(part.into())
            } else {
                return Err(format!("invalid label selector term `{part}`"));
            };
            terms.push(term);
        }
        Ok(LabelSelector(terms))
    }

    pub fn matches(&self, labels: &Value) -> bool {
        let get = |k: &str| labels.get(k).and_then(|v| v.as_str());
        self.0.iter().all(|t| match t {
            Term::Eq(k, v) => get(k) == Some(v.as_str()),
            Term::Ne(k, v) => get(k) != Some(v.as_str()),
            Term::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Term::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            Term::Exists(k) => get(k).is_some(),
            Term::Absent(k) => get(k).is_none(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors() {
        let labels = json!({"viewerfleet-run": "r1", "viewerfleet-role": "node"});
        let ok = |s: &str| LabelSelector::parse(s).unwrap().matches(&labels);
        assert!(ok("viewerfleet-run=r1"));
        assert!(ok("viewerfleet-run==r1,viewerfleet-role"));
        assert!(!ok("viewerfleet-run!=r1"));
        assert!(ok("viewerfleet-role in (hub, node)"));
        assert!(!ok("viewerfleet-role notin (node)"));
        assert!(ok("!other"));
        assert!(!ok("other"));
        assert!(LabelSelector::parse("a in b").is_err());
    }
}
