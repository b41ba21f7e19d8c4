//! The committed JSON Schemas (`schemas/`), checked against real outputs with the kit's
//! checker (`viewerfleet_kit::json_schema`: the subset of JSON Schema those files use).
//!
//! The schemas are open (a release may add fields within a version); the tests check them
//! closed, so every field the tool prints must be named in its schema.

use std::path::Path;

fn schema(file: &str) -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(file);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Parses `text` (the whole of a command's stdout) as one JSON document and checks it
/// against `schemas/<file>`, every field named, and against the envelope every document
/// starts with (`schemas/envelope.v1.json`, this build's version in it); panics with every
/// violation.
pub fn assert_valid(file: &str, text: &str) -> serde_json::Value {
    let doc = assert_envelope(text);
    let errors = viewerfleet_kit::json_schema::validate_closed(&schema(file), &doc);
    assert!(
        errors.is_empty(),
        "{file}: the output does not match its schema:\n{}\n{text}",
        errors.join("\n")
    );
    doc
}

/// Parses `text` as one JSON document and checks its envelope (`schemas/envelope.v1.json`,
/// open: the figures may follow) with this build's version as `tool_version`.
pub fn assert_envelope(text: &str) -> serde_json::Value {
    let doc: serde_json::Value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{text}"));
    let errors = viewerfleet_kit::json_schema::validate(&schema("envelope.v1.json"), &doc);
    assert!(
        errors.is_empty(),
        "envelope.v1.json: the output does not match:\n{}\n{text}",
        errors.join("\n")
    );
    assert_eq!(doc["tool_version"], env!("CARGO_PKG_VERSION"), "{text}");
    doc
}
