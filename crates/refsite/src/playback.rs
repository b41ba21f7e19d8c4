//! `/api/v1/metrics/playback`: validation of the players' periodic report (PeerTube's body,
//! deltas since the previous report). A malformed body is refused with a reason naming the
//! field, and never reaches a counter.

use super::stats::{PlaybackLabels, PlaybackReport};
use serde_json::{Map, Value};

/// Largest delta accepted for one counter in one report (2^53, JavaScript's safe integers).
const MAX_DELTA: u64 = 1 << 53;

/// Player modes PeerTube accepts.
const PLAYER_MODES: [&str; 3] = ["p2p-media-loader", "web-video", "webtorrent"];

/// Why a report was refused (sent back as the 400 body).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum PlaybackError {
    #[error("body is not JSON: {0}")]
    NotJson(String),
    #[error("body must be a JSON object")]
    NotObject,
    #[error("field `{0}` is required")]
    Missing(&'static str),
    #[error("field `{field}` must be {expected}")]
    Invalid {
        field: &'static str,
        expected: &'static str,
    },
    #[error("field `videoId`: no video `{0}` on this site")]
    UnknownVideo(String),
}

/// Parses and validates one report body. `known_video` says whether an id exists.
pub(crate) fn parse_report(
    body: &[u8],
    known_video: impl Fn(&str) -> bool,
) -> Result<PlaybackReport, PlaybackError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| PlaybackError::NotJson(e.to_string()))?;
    let obj = value.as_object().ok_or(PlaybackError::NotObject)?;

    let player_mode = match obj.get("playerMode") {
        None | Some(Value::Null) => return Err(PlaybackError::Missing("playerMode")),
        Some(Value::String(s)) if PLAYER_MODES.contains(&s.as_str()) => s.clone(),
        Some(_) => {
            return Err(PlaybackError::Invalid {
                field: "playerMode",
                expected: "one of \"p2p-media-loader\", \"web-video\", \"webtorrent\"",
            })
        }
    };
    let p2p_enabled = match obj.get("p2pEnabled") {
        None | Some(Value::Null) => return Err(PlaybackError::Missing("p2pEnabled")),
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(PlaybackError::Invalid {
                field: "p2pEnabled",
                expected: "a boolean",
            })
        }
    };
    let video_id = match obj.get("videoId") {
        None | Some(Value::Null) => return Err(PlaybackError::Missing("videoId")),
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return Err(PlaybackError::Invalid {
                field: "videoId",
                expected: "a video UUID string",
            })
        }
    };
    if !known_video(&video_id) {
        return Err(PlaybackError::UnknownVideo(video_id));
    }

    let resolution = optional_count(obj, "resolution")?;
    let fps = optional_count(obj, "fps")?;
    Ok(PlaybackReport {
        labels: PlaybackLabels {
            video_origin: "local".into(),
            player_mode,
            resolution: resolution.map_or_else(|| "undefined".into(), |r| r.to_string()),
            fps: fps.map_or_else(|| "undefined".into(), |f| f.to_string()),
            p2p_enabled: p2p_enabled.to_string(),
            video_uuid: video_id,
        },
        http_downloaded: required_count(obj, "downloadedBytesHTTP")?,
        p2p_downloaded: required_count(obj, "downloadedBytesP2P")?,
        p2p_uploaded: required_count(obj, "uploadedBytesP2P")?,
        errors: required_count(obj, "errors")?,
        resolution_changes: required_count(obj, "resolutionChanges")?,
        buffer_stalled: optional_count(obj, "bufferStalled")?,
        peers: optional_count(obj, "p2pPeers")?,
    })
}

fn required_count(obj: &Map<String, Value>, field: &'static str) -> Result<u64, PlaybackError> {
    optional_count(obj, field)?.ok_or(PlaybackError::Missing(field))
}

fn optional_count(
    obj: &Map<String, Value>,
    field: &'static str,
) -> Result<Option<u64>, PlaybackError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(v) if v <= MAX_DELTA => Ok(Some(v)),
            _ => Err(PlaybackError::Invalid {
                field,
                expected: "an integer between 0 and 2^53",
            }),
        },
        Some(_) => Err(PlaybackError::Invalid {
            field,
            expected: "an integer between 0 and 2^53",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> serde_json::Value {
        serde_json::json!({
            "playerMode": "p2p-media-loader", "resolution": 720, "fps": 25,
            "p2pEnabled": true, "p2pPeers": 2, "resolutionChanges": 0, "errors": 0,
            "downloadedBytesP2P": 10, "downloadedBytesHTTP": 20, "uploadedBytesP2P": 5,
            "videoId": "abc", "bufferStalled": 0
        })
    }

    fn parse(v: &serde_json::Value) -> Result<PlaybackReport, PlaybackError> {
        parse_report(v.to_string().as_bytes(), |id| id == "abc")
    }

    #[test]
    fn accepts_peertube_body() {
        let r = parse(&good()).unwrap();
        assert_eq!(r.http_downloaded, 20);
        assert_eq!(r.labels.resolution, "720");
        assert_eq!(r.labels.p2p_enabled, "true");
    }

    #[test]
    fn live_without_fps_gets_undefined_label() {
        let mut v = good();
        v.as_object_mut().unwrap().remove("fps");
        assert_eq!(parse(&v).unwrap().labels.fps, "undefined");
    }

    #[test]
    fn rejects_malformed_fields_with_their_name() {
        let cases: Vec<(&str, serde_json::Value, &str)> = vec![
            (
                "downloadedBytesHTTP",
                serde_json::json!(-1),
                "downloadedBytesHTTP",
            ),
            (
                "downloadedBytesP2P",
                serde_json::json!(1.5),
                "downloadedBytesP2P",
            ),
            (
                "uploadedBytesP2P",
                serde_json::json!("12"),
                "uploadedBytesP2P",
            ),
            ("p2pEnabled", serde_json::json!("yes"), "p2pEnabled"),
            ("playerMode", serde_json::json!("flash"), "playerMode"),
            ("errors", serde_json::json!(1e300), "errors"),
            ("videoId", serde_json::json!("nope"), "videoId"),
        ];
        for (field, value, named) in cases {
            let mut v = good();
            v[field] = value;
            let err = parse(&v).unwrap_err().to_string();
            assert!(err.contains(named), "{field}: {err}");
        }
        let mut v = good();
        v.as_object_mut().unwrap().remove("errors");
        assert_eq!(parse(&v).unwrap_err(), PlaybackError::Missing("errors"));
        assert!(matches!(
            parse_report(b"{not json", |_| true),
            Err(PlaybackError::NotJson(_))
        ));
        assert_eq!(
            parse_report(b"[1,2]", |_| true).unwrap_err(),
            PlaybackError::NotObject
        );
    }
}
