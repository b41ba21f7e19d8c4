//! A small JSON Schema checker for the subset of draft 2020-12 that viewerfleet's committed
//! schemas (`schemas/*.json`) use, so the tests can check real `--json` outputs against them.
//!
//! Why not the `jsonschema` crate: it brings regular-expression engines, URI resolution
//! and an HTTP client for remote references — dozens of crates and minutes of building on
//! two cores — for a handful of keywords. This checker knows exactly those and refuses any
//! other keyword, so a schema can never rely on one that is silently not checked:
//!
//! `type` (a name or a list of names), `properties`, `required`, `additionalProperties`
//! (`false` or a schema), `items`, `minItems`, `enum`, `const`, `minimum`, `maximum`,
//! `oneOf`, `anyOf`, and `$ref` to `#/$defs/<name>`; annotations (`$schema`, `$id`,
//! `$defs`, `title`, `description`, `$comment`, `examples`) are skipped. [`validate_closed`]
//! also refuses fields an object schema does not name (the committed schemas are open).

use serde_json::Value;

const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$defs",
    "title",
    "description",
    "$comment",
    "examples",
];
const KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "enum",
    "const",
    "minimum",
    "maximum",
    "oneOf",
    "anyOf",
    "$ref",
];

/// Checks `instance` against `schema` (whose `$defs` resolve `$ref`s); every violation, as
/// `<JSON pointer>: <what is wrong>`. Empty: valid.
pub fn validate(schema: &Value, instance: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(schema, schema, instance, "", &mut errors);
    errors
}

/// [`validate`], with every object schema that lists its `properties` (and says nothing of
/// `additionalProperties`) closed: a field of `instance` the schema does not name is an
/// error. The committed schemas are open — readers ignore fields they do not know, so a
/// release may add fields within a version — and the tests check with this that every field
/// the tool prints is documented in its schema.
pub fn validate_closed(schema: &Value, instance: &Value) -> Vec<String> {
    let mut closed = schema.clone();
    close(&mut closed);
    validate(&closed, instance)
}

fn close(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("type") == Some(&Value::String("object".into()))
                && map.contains_key("properties")
                && !map.contains_key("additionalProperties")
            {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            map.values_mut().for_each(close);
        }
        Value::Array(items) => items.iter_mut().for_each(close),
        _ => {}
    }
}

fn type_matches(name: &str, v: &Value) -> bool {
    match name {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => v.as_f64().is_some_and(|n| n.fract() == 0.0),
        _ => false,
    }
}

fn check(root: &Value, schema: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    let Some(map) = schema.as_object() else {
        if schema == &Value::Bool(false) {
            errors.push(format!("{at}: not allowed here"));
        }
        return;
    };
    for key in map.keys() {
        if !KEYWORDS.contains(&key.as_str()) && !ANNOTATIONS.contains(&key.as_str()) {
            errors.push(format!(
                "{at}: the schema uses `{key}`, which this checker does not know"
            ));
        }
    }
    if let Some(Value::String(r)) = map.get("$ref") {
        match r
            .strip_prefix("#/$defs/")
            .and_then(|name| root.get("$defs")?.get(name))
        {
            Some(target) => check(root, target, v, at, errors),
            None => errors.push(format!("{at}: unresolved $ref {r}")),
        }
    }
    if let Some(t) = map.get("type") {
        let names: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.iter().any(|n| type_matches(n, v)) {
            errors.push(format!("{at}: expected {}, got {v}", names.join(" or ")));
            return;
        }
    }
    if let Some(Value::Array(allowed)) = map.get("enum") {
        if !allowed.contains(v) {
            errors.push(format!("{at}: {v} is not one of {allowed:?}"));
        }
    }
    if let Some(c) = map.get("const") {
        if c != v {
            errors.push(format!("{at}: expected {c}, got {v}"));
        }
    }
    if let (Some(min), Some(n)) = (map.get("minimum").and_then(Value::as_f64), v.as_f64()) {
        if n < min {
            errors.push(format!("{at}: {n} is below {min}"));
        }
    }
    if let (Some(max), Some(n)) = (map.get("maximum").and_then(Value::as_f64), v.as_f64()) {
        if n > max {
            errors.push(format!("{at}: {n} is above {max}"));
        }
    }
    for (keyword, exactly_one) in [("oneOf", true), ("anyOf", false)] {
        if let Some(Value::Array(options)) = map.get(keyword) {
            let passing = options
                .iter()
                .filter(|o| {
                    let mut e = Vec::new();
                    check(root, o, v, at, &mut e);
                    e.is_empty()
                })
                .count();
            if (exactly_one && passing != 1) || passing == 0 {
                errors.push(format!(
                    "{at}: matches {passing} of the {} forms of `{keyword}`",
                    options.len()
                ));
            }
        }
    }
    if let Value::Object(obj) = v {
        let props = map.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(required)) = map.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if !obj.contains_key(name) {
                    errors.push(format!("{at}: `{name}` is missing"));
                }
            }
        }
        for (key, value) in obj {
            let here = format!("{at}/{key}");
            match props.and_then(|p| p.get(key)) {
                Some(s) => check(root, s, value, &here, errors),
                None => match map.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        errors.push(format!("{here}: not in the schema"));
                    }
                    Some(s @ Value::Object(_)) => check(root, s, value, &here, errors),
                    _ => {}
                },
            }
        }
    }
    if let Value::Array(items) = v {
        if let Some(min) = map.get("minItems").and_then(Value::as_u64) {
            if (items.len() as u64) < min {
                errors.push(format!("{at}: fewer than {min} items"));
            }
        }
        if let Some(item_schema) = map.get("items") {
            for (i, item) in items.iter().enumerate() {
                check(root, item_schema, item, &format!("{at}/{i}"), errors);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_supported_keywords_are_checked_and_others_refused() {
        let schema = json!({
            "$defs": {"share": {"type": ["number", "null"], "minimum": 0, "maximum": 1}},
            "type": "object",
            "required": ["a", "b"],
            "additionalProperties": false,
            "properties": {
                "a": {"const": 1},
                "b": {"type": "array", "items": {"$ref": "#/$defs/share"}, "minItems": 1},
                "c": {"enum": ["x", "y"]},
                "d": {"oneOf": [{"type": "string"}, {"type": "integer"}]}
            }
        });
        assert!(validate(&schema, &json!({"a": 1, "b": [0.5, null], "d": 3})).is_empty());
        let errors = validate(
            &schema,
            &json!({"a": 2, "b": [1.5], "c": "z", "d": 1.5, "e": 0}),
        );
        assert_eq!(errors.len(), 5, "{errors:#?}");
        assert!(validate(&schema, &json!({"a": 1})).contains(&": `b` is missing".to_string()));
        let unknown = validate(&json!({"pattern": "x"}), &json!("x"));
        assert!(unknown[0].contains("`pattern`"), "{unknown:?}");
    }

    #[test]
    fn an_open_schema_accepts_added_fields_and_its_closed_check_names_them() {
        let schema = json!({
            "$defs": {"row": {"type": "object", "properties": {"n": {"type": "integer"}}}},
            "type": "object",
            "properties": {
                "rows": {"type": "array", "items": {"$ref": "#/$defs/row"}},
                "sums": {"type": "object", "additionalProperties": {"type": "number"}}
            },
            "anyOf": [{"required": ["rows"]}, {"properties": {"rows": {"const": null}}}]
        });
        let doc = json!({"rows": [{"n": 1, "added": true}], "sums": {"x": 1.0}, "new": 0});
        assert!(validate(&schema, &doc).is_empty());
        assert_eq!(
            validate_closed(&schema, &doc),
            [
                "/new: not in the schema",
                "/rows/0/added: not in the schema"
            ]
        );
        let known = json!({"rows": [{"n": 1}], "sums": {"x": 1.0, "y": 2.0}});
        assert!(validate_closed(&schema, &known).is_empty());
    }
}
