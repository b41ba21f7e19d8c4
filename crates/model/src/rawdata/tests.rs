use super::*;
use std::io::Write;

#[test]
fn truncated_last_line_is_skipped_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.jsonl");
    let mut w = JsonlWriter::append(&path).unwrap();
    w.write(&RunEvent {
        t: 1.0,
        event: RunEventKind::Started,
        detail: None,
        viewers: None,
        cpu_busy: None,
    })
    .unwrap();
    drop(w);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(b"{\"t\":2.0,\"ev").unwrap();
    let got: JsonlContents<RunEvent> = read_jsonl(&path).unwrap();
    assert_eq!(got.records.len(), 1);
    assert!(got.truncated_last_line);
}

#[test]
fn corrupt_middle_line_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.jsonl");
    std::fs::write(&path, "{\"t\":1}\nnot json\n{\"t\":2}\n").unwrap();
    let err = read_jsonl::<serde_json::Value>(&path)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("x.jsonl:2"), "{err}");
}
