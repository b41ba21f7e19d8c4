//! The WebTorrent tracker at `/tracker/socket`: the part of the protocol p2p-media-loader v2
//! (through the `bittorrent-tracker` browser client) needs. Peers announce a swarm
//! (`info_hash`) with WebRTC offers; the tracker hands each offer to another peer of the
//! swarm and relays that peer's answer back by `peer_id`. `stopped` leaves the swarm,
//! `completed` marks a seeder, peers that stop announcing expire, a closed socket removes all
//! the peers it carried (one socket may carry several swarms).
//!
//! Bad input never takes the tracker down: invalid JSON or fields get a `failure reason`
//! reply, unknown actions too, oversized frames close only that socket, and an answer for a
//! peer that vanished mid-handshake is dropped. The connection loop is generic over
//! `Sink`/`Stream` so it is tested without a socket.

use super::stats::SiteStats;
use axum::extract::ws::Message;
use futures::{Sink, SinkExt, Stream, StreamExt};
use rand::seq::SliceRandom;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Largest text message accepted (offers with ICE candidates are a few KB each).
pub(crate) const MAX_MESSAGE_BYTES: usize = 64 * 1024;
/// At most this many offers are forwarded per announce (bittorrent-tracker's cap).
const MAX_OFFERS: usize = 50;
/// Messages queued for one connection; beyond that a slow client loses messages (its
/// peers retry on their next announce) instead of growing the tracker's memory.
const QUEUE: usize = 512;
/// Bounds on what the tracker keeps, so clients that invent info hashes or peer ids cannot
/// grow its memory without end: far above a run's one swarm per video and its peers.
const MAX_SWARMS: usize = 1024;
const MAX_PEERS_PER_SWARM: usize = 20_000;
const MAX_PEERS_PER_CONNECTION: usize = 64;
const MAX_CONNECTIONS: usize = 20_000;

/// Tracker tuning.
#[derive(Debug, Clone)]
pub struct TrackerConfig {
    /// Announce interval told to clients.
    pub interval: Duration,
    /// A peer that has not announced for this long is dropped.
    pub peer_ttl: Duration,
}

impl Default for TrackerConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(120),
            peer_ttl: Duration::from_secs(300),
        }
    }
}

type ConnId = u64;
/// A connection's outgoing queue and the (info_hash, peer_id) pairs it announced.
type ConnEntry = (mpsc::Sender<String>, HashSet<(String, String)>);

#[derive(Debug)]
struct PeerEntry {
    conn: ConnId,
    last_seen: Instant,
    complete: bool,
}

#[derive(Debug, Default)]
struct State {
    /// info_hash → peer_id → peer.
    swarms: HashMap<String, HashMap<String, PeerEntry>>,
    conns: HashMap<ConnId, ConnEntry>,
}

/// The tracker shared by all connections.
#[derive(Debug)]
pub struct Tracker {
    config: TrackerConfig,
    state: Mutex<State>,
    next_conn: AtomicU64,
    stats: Arc<SiteStats>,
}

/// A message the tracker refused, with the reason sent back as `failure reason`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum TrackerError {
    #[error("invalid JSON: {0}")]
    Json(String),
    #[error("message must be a JSON object")]
    NotObject,
    #[error("invalid action in WS request: {0}")]
    UnknownAction(String),
    #[error("invalid {0} (a 20-character string is required)")]
    BadId(&'static str),
    #[error("message too large: {0} bytes (limit {MAX_MESSAGE_BYTES})")]
    TooLarge(usize),
    #[error("binary frames are not part of the protocol")]
    Binary,
    #[error("tracker full: {0}")]
    Full(&'static str),
}

impl Tracker {
    /// A tracker whose gauges land in `stats`.
    pub fn new(config: TrackerConfig, stats: Arc<SiteStats>) -> Self {
        Self {
            config,
            state: Mutex::new(State::default()),
            next_conn: AtomicU64::new(1),
            stats,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a connection; messages for it arrive on the returned receiver. `None` when
    /// the tracker already holds [`MAX_CONNECTIONS`].
    fn connect(&self) -> Option<(ConnId, mpsc::Receiver<String>)> {
        let mut state = self.lock();
        if state.conns.len() >= MAX_CONNECTIONS {
            return None;
        }
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(QUEUE);
        state.conns.insert(id, (tx, HashSet::new()));
        Some((id, rx))
    }

    /// Removes a connection and every peer it carried.
    fn disconnect(&self, conn: ConnId) {
        let mut state = self.lock();
        if let Some((_, peers)) = state.conns.remove(&conn) {
            for (info_hash, peer_id) in peers {
                remove_peer(&mut state, &info_hash, &peer_id, conn);
            }
        }
        self.update_gauges(&state);
    }

    /// Drops peers that have not announced within the TTL.
    pub fn expire(&self, now: Instant) {
        let mut state = self.lock();
        let ttl = self.config.peer_ttl;
        let mut gone = Vec::new();
        for (info_hash, peers) in &state.swarms {
            for (peer_id, peer) in peers {
                if now.saturating_duration_since(peer.last_seen) > ttl {
                    gone.push((info_hash.clone(), peer_id.clone(), peer.conn));
                }
            }
        }
        for (info_hash, peer_id, conn) in gone {
            tracing::debug!(peer = %hexish(&peer_id), "tracker: peer expired");
            state.forget_peer(&info_hash, &peer_id, conn);
        }
        self.update_gauges(&state);
    }

    fn update_gauges(&self, state: &State) {
        let peers: usize = state.swarms.values().map(HashMap::len).sum();
        self.stats
            .tracker_peers
            .store(peers as u64, Ordering::Relaxed);
        self.stats
            .tracker_swarms
            .store(state.swarms.len() as u64, Ordering::Relaxed);
    }

    /// Number of peers in one swarm (tests and diagnostics).
    pub fn swarm_size(&self, info_hash: &str) -> usize {
        self.lock().swarms.get(info_hash).map_or(0, HashMap::len)
    }

    /// Handles one text message from connection `conn`. Replies and relayed messages are
    /// queued on the connections' channels. An error is answered with `failure reason`.
    fn handle(&self, conn: ConnId, text: &str) -> Result<(), TrackerError> {
        if text.len() > MAX_MESSAGE_BYTES {
            return Err(TrackerError::TooLarge(text.len()));
        }
        let value: Value =
            serde_json::from_str(text).map_err(|e| TrackerError::Json(e.to_string()))?;
        let msg = value.as_object().ok_or(TrackerError::NotObject)?;
        match msg.get("action").and_then(Value::as_str) {
            Some("announce") => self.announce(conn, msg),
            Some("scrape") => self.scrape(conn, msg),
            other => Err(TrackerError::UnknownAction(
                other.map_or_else(|| "(none)".to_string(), str::to_string),
            )),
        }
    }

    /// An announce: the peer joins (or, `stopped`, leaves) the swarm; then either its answer
    /// is relayed to the peer that made the offer, or it gets the swarm's counts and its
    /// offers are handed to other peers.
    fn announce(&self, conn: ConnId, msg: &Map<String, Value>) -> Result<(), TrackerError> {
        let info_hash = id_field(msg, "info_hash")?;
        let peer_id = id_field(msg, "peer_id")?;
        let answer = msg.get("answer").filter(|a| !a.is_null());
        let to_peer_id = if answer.is_some() {
            Some(id_field(msg, "to_peer_id")?)
        } else {
            None
        };
        self.stats.tracker_announces.fetch_add(1, Ordering::Relaxed);
        let event = msg.get("event").and_then(Value::as_str).unwrap_or("");
        let left_zero = msg.get("left").and_then(Value::as_f64) == Some(0.0);
        let now = Instant::now();

        let mut state = self.lock();
        if event == "stopped" {
            state.forget_peer(&info_hash, &peer_id, conn);
        } else {
            state.room_for(&info_hash, &peer_id, conn)?;
            let complete = event == "completed" || left_zero;
            state.join(&info_hash, &peer_id, conn, now, complete);
        }
        if let (Some(answer), Some(to)) = (answer, to_peer_id) {
            state.relay_answer(&info_hash, &peer_id, &to, answer, msg.get("offer_id"));
        } else {
            let (complete, incomplete) = state.counts(&info_hash);
            if let Some((tx, _)) = state.conns.get(&conn) {
                let reply = json!({
                    "action": "announce",
                    "interval": self.config.interval.as_secs().max(1),
                    "info_hash": info_hash,
                    "complete": complete,
                    "incomplete": incomplete,
                });
                queue(tx, reply.to_string());
            }
            if event != "stopped" && event != "completed" {
                if let Some(offers) = msg.get("offers").and_then(Value::as_array) {
                    state.hand_out_offers(&info_hash, &peer_id, offers);
                }
            }
        }
        self.update_gauges(&state);
        Ok(())
    }

    fn scrape(&self, conn: ConnId, msg: &Map<String, Value>) -> Result<(), TrackerError> {
        let state = self.lock();
        let hashes: Vec<String> = match msg.get("info_hash") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<_>>()
                .ok_or(TrackerError::BadId("info_hash"))?,
            _ => state.swarms.keys().cloned().collect(),
        };
        let mut files = Map::new();
        for h in hashes {
            let (complete, incomplete) = state.counts(&h);
            files.insert(
                h,
                json!({"complete": complete, "incomplete": incomplete, "downloaded": complete}),
            );
        }
        if let Some((tx, _)) = state.conns.get(&conn) {
            queue(tx, json!({"action": "scrape", "files": files}).to_string());
        }
        Ok(())
    }
}

impl State {
    /// Whether the peer may join: a new swarm, a new peer of a swarm and a new peer of a
    /// connection each count against their bound.
    fn room_for(&self, info_hash: &str, peer_id: &str, conn: ConnId) -> Result<(), TrackerError> {
        match self.swarms.get(info_hash) {
            None if self.swarms.len() >= MAX_SWARMS => return Err(TrackerError::Full("swarms")),
            Some(swarm) if !swarm.contains_key(peer_id) && swarm.len() >= MAX_PEERS_PER_SWARM => {
                return Err(TrackerError::Full("peers in this swarm"))
            }
            _ => {}
        }
        if let Some((_, announced)) = self.conns.get(&conn) {
            let known = announced.contains(&(info_hash.to_string(), peer_id.to_string()));
            if !known && announced.len() >= MAX_PEERS_PER_CONNECTION {
                return Err(TrackerError::Full("peers on this connection"));
            }
        }
        Ok(())
    }

    /// Adds the peer to the swarm, or refreshes it: seen now, on this connection, a seeder
    /// once it says it is `complete`.
    fn join(&mut self, info_hash: &str, peer_id: &str, conn: ConnId, now: Instant, complete: bool) {
        let swarm = self.swarms.entry(info_hash.to_string()).or_default();
        let peer = swarm.entry(peer_id.to_string()).or_insert(PeerEntry {
            conn,
            last_seen: now,
            complete: false,
        });
        peer.conn = conn;
        peer.last_seen = now;
        peer.complete |= complete;
        if let Some((_, set)) = self.conns.get_mut(&conn) {
            set.insert((info_hash.to_string(), peer_id.to_string()));
        }
    }

    /// Takes the peer out of its swarm and out of its connection's list.
    fn forget_peer(&mut self, info_hash: &str, peer_id: &str, conn: ConnId) {
        remove_peer(self, info_hash, peer_id, conn);
        if let Some((_, set)) = self.conns.get_mut(&conn) {
            set.remove(&(info_hash.to_string(), peer_id.to_string()));
        }
    }

    /// Seeders and leechers of a swarm.
    fn counts(&self, info_hash: &str) -> (usize, usize) {
        self.swarms.get(info_hash).map_or((0, 0), |s| {
            let done = s.values().filter(|p| p.complete).count();
            (done, s.len() - done)
        })
    }

    /// Relays `answer` from `peer_id` to the peer `to` that made the offer, if it is still
    /// in the swarm.
    fn relay_answer(
        &self,
        info_hash: &str,
        peer_id: &str,
        to: &str,
        answer: &Value,
        offer_id: Option<&Value>,
    ) {
        let target = self
            .swarms
            .get(info_hash)
            .and_then(|s| s.get(to))
            .map(|p| p.conn);
        match target.and_then(|c| self.conns.get(&c)) {
            Some((tx, _)) => {
                let relay = json!({
                    "action": "announce",
                    "answer": answer,
                    "offer_id": offer_id.cloned().unwrap_or(Value::Null),
                    "peer_id": peer_id,
                    "info_hash": info_hash,
                });
                queue(tx, relay.to_string());
            }
            None => {
                tracing::debug!(to = %hexish(to), "tracker: answer for a peer that is gone")
            }
        }
    }

    /// Hands each offer (at most [`MAX_OFFERS`]) to a different random peer of the swarm.
    fn hand_out_offers(&self, info_hash: &str, peer_id: &str, offers: &[Value]) {
        let mut others: Vec<ConnId> = self
            .swarms
            .get(info_hash)
            .map(|s| {
                s.iter()
                    .filter(|(id, _)| *id != peer_id)
                    .map(|(_, p)| p.conn)
                    .collect()
            })
            .unwrap_or_default();
        others.shuffle(&mut rand::thread_rng());
        for (offer, target) in offers.iter().take(MAX_OFFERS).zip(others) {
            let (Some(sdp), Some(offer_id)) = (offer.get("offer"), offer.get("offer_id")) else {
                continue;
            };
            if let Some((tx, _)) = self.conns.get(&target) {
                let relay = json!({
                    "action": "announce",
                    "offer": sdp,
                    "offer_id": offer_id,
                    "peer_id": peer_id,
                    "info_hash": info_hash,
                });
                queue(tx, relay.to_string());
            }
        }
    }
}

/// Queues a message for a connection; drops it if the client is not keeping up.
fn queue(tx: &mpsc::Sender<String>, message: String) {
    if tx.try_send(message).is_err() {
        tracing::debug!("tracker: a client's queue is full or closed; message dropped");
    }
}

fn remove_peer(state: &mut State, info_hash: &str, peer_id: &str, conn: ConnId) {
    if let Some(swarm) = state.swarms.get_mut(info_hash) {
        if swarm.get(peer_id).is_some_and(|p| p.conn == conn) {
            swarm.remove(peer_id);
        }
        if swarm.is_empty() {
            state.swarms.remove(info_hash);
        }
    }
}

fn id_field(msg: &Map<String, Value>, field: &'static str) -> Result<String, TrackerError> {
    match msg.get(field).and_then(Value::as_str) {
        Some(s) if s.chars().count() == 20 => Ok(s.to_string()),
        _ => Err(TrackerError::BadId(field)),
    }
}

/// Printable form of a binary-string id for logs.
fn hexish(id: &str) -> String {
    id.chars()
        .map(|c| format!("{:02x}", c as u32 & 0xff))
        .collect()
}

/// Runs one tracker connection until the client leaves, the stream fails or `cancel` fires.
/// Generic over the socket halves so tests drive it with channels.
pub async fn serve_connection<S, R, E>(
    tracker: Arc<Tracker>,
    mut sink: S,
    mut stream: R,
    cancel: CancellationToken,
) where
    S: Sink<Message> + Unpin,
    R: Stream<Item = Result<Message, E>> + Unpin,
    E: std::fmt::Display,
{
    let Some((conn, mut outgoing)) = tracker.connect() else {
        tracing::warn!("tracker: {MAX_CONNECTIONS} connections open, its limit; one refused");
        let _ = sink.send(Message::Close(None)).await;
        return;
    };
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            out = outgoing.recv() => {
                let Some(text) = out else { break };
                if sink.send(Message::Text(text.into())).await.is_err() {
                    break;
                }
            }
            incoming = stream.next() => {
                let result = match incoming {
                    None => break,
                    Some(Err(e)) => {
                        tracing::debug!("tracker: socket error, dropping connection: {e}");
                        break;
                    }
                    Some(Ok(Message::Text(text))) => tracker.handle(conn, text.as_str()),
                    Some(Ok(Message::Binary(b))) => {
                        // bittorrent-tracker clients send text; accept UTF-8 binary as text.
                        match std::str::from_utf8(&b) {
                            Ok(text) => tracker.handle(conn, text),
                            Err(_) => Err(TrackerError::Binary),
                        }
                    }
                    Some(Ok(Message::Close(_))) => break,
                    Some(Ok(_)) => Ok(()),
                };
                if let Err(err) = result {
                    tracing::debug!("tracker: refused message: {err}");
                    let too_large = matches!(err, TrackerError::TooLarge(_));
                    let reply = json!({"failure reason": err.to_string()}).to_string();
                    if sink.send(Message::Text(reply.into())).await.is_err() || too_large {
                        break;
                    }
                }
            }
        }
    }
    tracker.disconnect(conn);
    let _ = sink.close().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::mpsc as fmpsc;
    use std::convert::Infallible;

    struct Client {
        to_server: fmpsc::UnboundedSender<Result<Message, Infallible>>,
        from_server: fmpsc::UnboundedReceiver<Message>,
        task: tokio::task::JoinHandle<()>,
    }

    impl Client {
        fn send(&self, v: Value) {
            self.to_server
                .unbounded_send(Ok(Message::Text(v.to_string().into())))
                .unwrap();
        }
        fn send_raw(&self, s: &str) {
            self.to_server
                .unbounded_send(Ok(Message::Text(s.to_string().into())))
                .unwrap();
        }
        async fn recv(&mut self) -> Value {
            let msg = tokio::time::timeout(Duration::from_secs(5), self.from_server.next())
                .await
                .expect("tracker answered within 5 s")
                .expect("connection open");
            match msg {
                Message::Text(t) => serde_json::from_str(t.as_str()).unwrap(),
                other => panic!("unexpected frame {other:?}"),
            }
        }
    }

    fn client(tracker: &Arc<Tracker>, cancel: &CancellationToken) -> Client {
        let (to_server, server_in) = fmpsc::unbounded();
        let (server_out, from_server) = fmpsc::unbounded::<Message>();
        let task = tokio::spawn(serve_connection(
            tracker.clone(),
            server_out.sink_map_err(|_| ()),
            server_in,
            cancel.clone(),
        ));
        Client {
            to_server,
            from_server,
            task,
        }
    }

    const HASH: &str = "aaaaaaaaaaaaaaaaaaaa";
    const P1: &str = "11111111111111111111";
    const P2: &str = "22222222222222222222";

    fn announce(peer: &str, offers: usize) -> Value {
        let offers: Vec<Value> = (0..offers)
            .map(|i| json!({"offer": {"type": "offer", "sdp": format!("sdp{i}")}, "offer_id": format!("offer{i:015}")}))
            .collect();
        json!({"action": "announce", "info_hash": HASH, "peer_id": peer, "numwant": offers.len(), "offers": offers, "event": "started", "uploaded": 0, "downloaded": 0})
    }

    fn setup() -> (Arc<Tracker>, Arc<SiteStats>, CancellationToken) {
        let stats = Arc::new(SiteStats::default());
        let tracker = Arc::new(Tracker::new(TrackerConfig::default(), stats.clone()));
        (tracker, stats, CancellationToken::new())
    }

    #[tokio::test]
    async fn offers_reach_other_peers_and_answers_come_back() {
        let (tracker, stats, cancel) = setup();
        let mut a = client(&tracker, &cancel);
        let mut b = client(&tracker, &cancel);
        a.send(announce(P1, 2));
        let reply = a.recv().await;
        assert_eq!(reply["incomplete"], 1);
        assert_eq!(reply["info_hash"], HASH);
        b.send(announce(P2, 3));
        assert_eq!(b.recv().await["incomplete"], 2);
        // Only one other peer: exactly one of b's offers goes to a.
        let offer = a.recv().await;
        assert_eq!(offer["peer_id"], P2);
        assert_eq!(offer["offer"]["type"], "offer");
        a.send(
            json!({"action": "announce", "info_hash": HASH, "peer_id": P1, "to_peer_id": P2,
            "answer": {"type": "answer", "sdp": "x"}, "offer_id": offer["offer_id"]}),
        );
        let answer = b.recv().await;
        assert_eq!(answer["peer_id"], P1);
        assert_eq!(answer["answer"]["type"], "answer");
        assert_eq!(answer["offer_id"], offer["offer_id"]);
        assert_eq!(stats.tracker_peers.load(Ordering::Relaxed), 2);
        assert_eq!(stats.tracker_swarms.load(Ordering::Relaxed), 1);
        assert_eq!(stats.tracker_announces.load(Ordering::Relaxed), 3);

        // stopped leaves the swarm, completed marks a seeder.
        b.send(json!({"action": "announce", "info_hash": HASH, "peer_id": P2, "event": "stopped"}));
        assert_eq!(b.recv().await["incomplete"], 1);
        a.send(json!({"action": "announce", "info_hash": HASH, "peer_id": P1, "event": "completed", "left": 0}));
        let r = a.recv().await;
        assert_eq!(
            (r["complete"].as_u64(), r["incomplete"].as_u64()),
            (Some(1), Some(0))
        );
        cancel.cancel();
        a.task.await.unwrap();
        b.task.await.unwrap();
        assert_eq!(stats.tracker_peers.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn made_up_peers_and_swarms_hit_their_bounds() {
        let (tracker, stats, cancel) = setup();
        let mut a = client(&tracker, &cancel);
        let peer = |i: usize| format!("{i:020}");
        for i in 0..MAX_PEERS_PER_CONNECTION {
            a.send(announce(&peer(i), 0));
            assert!(a.recv().await.get("failure reason").is_none());
        }
        a.send(announce(&peer(MAX_PEERS_PER_CONNECTION), 0));
        let refused = a.recv().await;
        assert!(refused["failure reason"]
            .as_str()
            .unwrap()
            .contains("peers on this connection"));
        // A peer it already announced still refreshes.
        a.send(announce(&peer(0), 0));
        assert!(a.recv().await.get("failure reason").is_none());
        assert_eq!(
            stats.tracker_peers.load(Ordering::Relaxed),
            MAX_PEERS_PER_CONNECTION as u64
        );
        // Swarms: one connection per 64 made-up info hashes, up to the bound.
        let mut clients = Vec::new();
        let mut made = 1;
        while made < MAX_SWARMS {
            let mut c = client(&tracker, &cancel);
            for _ in 0..MAX_PEERS_PER_CONNECTION.min(MAX_SWARMS - made) {
                let mut msg = announce(P1, 0);
                msg["info_hash"] = json!(format!("{made:020}"));
                c.send(msg);
                assert!(c.recv().await.get("failure reason").is_none());
                made += 1;
            }
            clients.push(c);
        }
        let mut msg = announce(P2, 0);
        msg["info_hash"] = json!("zzzzzzzzzzzzzzzzzzzz");
        let mut b = client(&tracker, &cancel);
        b.send(msg);
        assert!(b.recv().await["failure reason"]
            .as_str()
            .unwrap()
            .contains("swarms"));
        assert_eq!(
            stats.tracker_swarms.load(Ordering::Relaxed),
            MAX_SWARMS as u64
        );
        cancel.cancel();
    }

    #[tokio::test]
    async fn bad_input_gets_failure_reason_and_connection_survives() {
        let (tracker, _stats, cancel) = setup();
        let mut a = client(&tracker, &cancel);
        a.send_raw("{not json");
        assert!(a.recv().await["failure reason"]
            .as_str()
            .unwrap()
            .contains("invalid JSON"));
        a.send(json!({"action": "dance"}));
        assert!(a.recv().await["failure reason"]
            .as_str()
            .unwrap()
            .contains("dance"));
        a.send(json!([1, 2]));
        assert!(a.recv().await["failure reason"].is_string());
        a.send(json!({"action": "announce", "info_hash": "short", "peer_id": P1}));
        assert!(a.recv().await["failure reason"]
            .as_str()
            .unwrap()
            .contains("info_hash"));
        a.send(
            json!({"action": "announce", "info_hash": HASH, "peer_id": P1, "answer": {"sdp": "x"}}),
        );
        assert!(a.recv().await["failure reason"]
            .as_str()
            .unwrap()
            .contains("to_peer_id"));
        // Still serving.
        a.send(announce(P1, 1));
        assert_eq!(a.recv().await["incomplete"], 1);
        // A huge frame closes only this connection.
        a.send_raw(&"x".repeat(MAX_MESSAGE_BYTES + 1));
        assert!(a.recv().await["failure reason"]
            .as_str()
            .unwrap()
            .contains("too large"));
        tokio::time::timeout(Duration::from_secs(5), a.task)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(tracker.swarm_size(HASH), 0);
        let mut b = client(&tracker, &cancel);
        b.send(announce(P2, 0));
        assert_eq!(b.recv().await["incomplete"], 1);
        cancel.cancel();
    }

    #[tokio::test]
    async fn peer_vanishing_mid_handshake_is_harmless() {
        let (tracker, _stats, cancel) = setup();
        let mut a = client(&tracker, &cancel);
        let mut b = client(&tracker, &cancel);
        a.send(announce(P1, 0));
        a.recv().await;
        b.send(announce(P2, 1));
        b.recv().await;
        let offer = a.recv().await;
        // b disappears before a answers.
        drop(b.to_server);
        tokio::time::timeout(Duration::from_secs(5), b.task)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(tracker.swarm_size(HASH), 1);
        a.send(
            json!({"action": "announce", "info_hash": HASH, "peer_id": P1, "to_peer_id": P2,
            "answer": {"type": "answer", "sdp": "x"}, "offer_id": offer["offer_id"]}),
        );
        a.send(json!({"action": "scrape", "info_hash": HASH}));
        let scrape = a.recv().await;
        assert_eq!(scrape["files"][HASH]["incomplete"], 1);
        cancel.cancel();
    }

    #[tokio::test]
    async fn silent_peers_expire() {
        let stats = Arc::new(SiteStats::default());
        let tracker = Arc::new(Tracker::new(
            TrackerConfig {
                interval: Duration::from_secs(1),
                peer_ttl: Duration::from_millis(10),
            },
            stats.clone(),
        ));
        let cancel = CancellationToken::new();
        let mut a = client(&tracker, &cancel);
        a.send(announce(P1, 0));
        assert_eq!(a.recv().await["interval"], 1);
        tracker.expire(Instant::now() + Duration::from_secs(1));
        assert_eq!(tracker.swarm_size(HASH), 0);
        assert_eq!(stats.tracker_peers.load(Ordering::Relaxed), 0);
        cancel.cancel();
    }
}
