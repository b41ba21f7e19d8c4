//! STUN (RFC 5389) for the emulated internet: the Binding server viewers' browsers gather
//! server-reflexive candidates from (refsite runs it beside the site, on the public side of
//! every emulated NAT), and the probe that classifies a NAT the way RFC 4787 and RFC 5780 do
//! (mapping from two destinations, filtering from a changed address and port).
//!
//! - this file: the message format (Binding requests and responses, the attributes the
//!   server and the probe use);
//! - `server`: the Binding server, with RFC 5780's second address and port when it has them;
//! - `probe`: the classification, run from inside a viewer slot.
//!
//! Only what those two need is here: no authentication (Binding requests to a STUN server
//! carry none), no TURN.

pub mod probe;
pub mod server;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// RFC 5389's magic cookie.
pub(crate) const MAGIC_COOKIE: u32 = 0x2112_A442;
/// The port STUN servers listen on.
pub const DEFAULT_PORT: u16 = 3478;

pub(crate) const BINDING_REQUEST: u16 = 0x0001;
pub(crate) const BINDING_SUCCESS: u16 = 0x0101;
pub(crate) const BINDING_ERROR: u16 = 0x0111;

pub(crate) const ATTR_MAPPED_ADDRESS: u16 = 0x0001;
/// RFC 5780: ask for the response from the other address and/or port.
pub(crate) const ATTR_CHANGE_REQUEST: u16 = 0x0003;
pub(crate) const ATTR_ERROR_CODE: u16 = 0x0009;
pub(crate) const ATTR_UNKNOWN_ATTRIBUTES: u16 = 0x000A;
pub(crate) const ATTR_XOR_MAPPED_ADDRESS: u16 = 0x0020;
pub(crate) const ATTR_SOFTWARE: u16 = 0x8022;
pub(crate) const ATTR_FINGERPRINT: u16 = 0x8028;
/// RFC 5780: where the response was sent from.
pub(crate) const ATTR_RESPONSE_ORIGIN: u16 = 0x802B;
/// RFC 5780: the server's other address and port.
pub(crate) const ATTR_OTHER_ADDRESS: u16 = 0x802C;

/// CHANGE-REQUEST flags.
pub(crate) const CHANGE_IP: u32 = 0x4;
pub(crate) const CHANGE_PORT: u32 = 0x2;

const FINGERPRINT_XOR: u32 = 0x5354_554E;
const HEADER_LEN: usize = 20;

/// A message's transaction id.
pub(crate) type TransactionId = [u8; 12];

/// Why a datagram is not a STUN message this module reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StunError {
    #[error("shorter than a STUN header")]
    Short,
    #[error("not a STUN message (first bits or magic cookie)")]
    NotStun,
    #[error("length field does not match the datagram")]
    BadLength,
    #[error("malformed attribute {0:#06x}")]
    BadAttribute(u16),
}

/// One parsed message: its type, transaction and attributes (type, value) in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub kind: u16,
    pub transaction: TransactionId,
    pub attributes: Vec<(u16, Vec<u8>)>,
}

impl Message {
    pub fn new(kind: u16, transaction: TransactionId) -> Self {
        Self {
            kind,
            transaction,
            attributes: Vec::new(),
        }
    }

    /// A Binding request with a fresh random transaction id.
    pub fn binding_request() -> Self {
        Self::new(BINDING_REQUEST, rand::random())
    }

    pub fn attribute(&self, kind: u16) -> Option<&[u8]> {
        self.attributes
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, v)| v.as_slice())
    }

    /// Adds CHANGE-REQUEST with `flags` (`CHANGE_IP | CHANGE_PORT`).
    pub(crate) fn with_change_request(mut self, flags: u32) -> Self {
        self.attributes
            .push((ATTR_CHANGE_REQUEST, flags.to_be_bytes().to_vec()));
        self
    }

    /// Adds an address attribute (MAPPED-ADDRESS, RESPONSE-ORIGIN, OTHER-ADDRESS), or its
    /// XOR form for XOR-MAPPED-ADDRESS.
    pub(crate) fn with_address(mut self, kind: u16, addr: SocketAddr) -> Self {
        let value = if kind == ATTR_XOR_MAPPED_ADDRESS {
            encode_xor_address(addr, &self.transaction)
        } else {
            encode_address(addr)
        };
        self.attributes.push((kind, value));
        self
    }

    /// The address in attribute `kind` (decoding the XOR form where it is one).
    pub fn address(&self, kind: u16) -> Option<SocketAddr> {
        let value = self.attribute(kind)?;
        if kind == ATTR_XOR_MAPPED_ADDRESS {
            decode_xor_address(value, &self.transaction)
        } else {
            decode_address(value)
        }
    }

    /// The reflexive address a response carries: XOR-MAPPED-ADDRESS, else MAPPED-ADDRESS.
    pub fn mapped_address(&self) -> Option<SocketAddr> {
        self.address(ATTR_XOR_MAPPED_ADDRESS)
            .or_else(|| self.address(ATTR_MAPPED_ADDRESS))
    }

    /// The CHANGE-REQUEST flags, 0 without the attribute.
    pub(crate) fn change_request(&self) -> u32 {
        self.attribute(ATTR_CHANGE_REQUEST)
            .and_then(|v| v.get(..4))
            .map(|v| u32::from_be_bytes([v[0], v[1], v[2], v[3]]))
            .unwrap_or(0)
    }

    /// The wire form, with a FINGERPRINT when `fingerprint` is set.
    pub fn encode(&self, fingerprint: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&self.kind.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&MAGIC_COOKIE.to_be_bytes());
        out.extend_from_slice(&self.transaction);
        for (kind, value) in &self.attributes {
            push_attribute(&mut out, *kind, value);
        }
        if fingerprint {
            // The length covers the FINGERPRINT attribute when the CRC is computed.
            let with_fingerprint = out.len() - HEADER_LEN + 8;
            set_length(&mut out, with_fingerprint);
            let mut crc = flate2::Crc::new();
            crc.update(&out);
            let value = (crc.sum() ^ FINGERPRINT_XOR).to_be_bytes();
            push_attribute(&mut out, ATTR_FINGERPRINT, &value);
        }
        let body = out.len() - HEADER_LEN;
        set_length(&mut out, body);
        out
    }

    /// Parses one datagram.
    pub fn decode(data: &[u8]) -> Result<Self, StunError> {
        if data.len() < HEADER_LEN {
            return Err(StunError::Short);
        }
        let kind = u16::from_be_bytes([data[0], data[1]]);
        let length = u16::from_be_bytes([data[2], data[3]]) as usize;
        let cookie = u32::from_be_bytes([data[4], data[5], data[6], data[7]]);
        if kind & 0xC000 != 0 || cookie != MAGIC_COOKIE {
            return Err(StunError::NotStun);
        }
        if length % 4 != 0 || HEADER_LEN + length != data.len() {
            return Err(StunError::BadLength);
        }
        let mut transaction = [0u8; 12];
        transaction.copy_from_slice(&data[8..20]);
        let mut attributes = Vec::new();
        let mut rest = &data[HEADER_LEN..];
        while !rest.is_empty() {
            if rest.len() < 4 {
                return Err(StunError::BadLength);
            }
            let attr = u16::from_be_bytes([rest[0], rest[1]]);
            let len = u16::from_be_bytes([rest[2], rest[3]]) as usize;
            let padded = len.div_ceil(4) * 4;
            let value = rest.get(4..4 + len).ok_or(StunError::BadAttribute(attr))?;
            attributes.push((attr, value.to_vec()));
            rest = rest
                .get(4 + padded..)
                .ok_or(StunError::BadAttribute(attr))?;
        }
        Ok(Self {
            kind,
            transaction,
            attributes,
        })
    }
}

fn push_attribute(out: &mut Vec<u8>, kind: u16, value: &[u8]) {
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&(value.len() as u16).to_be_bytes());
    out.extend_from_slice(value);
    out.resize(out.len() + (4 - value.len() % 4) % 4, 0);
}

fn set_length(out: &mut [u8], length: usize) {
    out[2..4].copy_from_slice(&(length as u16).to_be_bytes());
}

fn encode_address(addr: SocketAddr) -> Vec<u8> {
    let mut v = vec![0];
    match addr.ip() {
        IpAddr::V4(ip) => {
            v.push(1);
            v.extend_from_slice(&addr.port().to_be_bytes());
            v.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            v.push(2);
            v.extend_from_slice(&addr.port().to_be_bytes());
            v.extend_from_slice(&ip.octets());
        }
    }
    v
}

fn decode_address(v: &[u8]) -> Option<SocketAddr> {
    let port = u16::from_be_bytes([*v.get(2)?, *v.get(3)?]);
    let ip = match v.get(1)? {
        1 => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(v.get(4..8)?).ok()?)),
        2 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(v.get(4..20)?).ok()?)),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The XOR mask of an address: the cookie, then (IPv6) the transaction id.
fn xor_mask(transaction: &TransactionId) -> [u8; 16] {
    let mut mask = [0u8; 16];
    mask[..4].copy_from_slice(&MAGIC_COOKIE.to_be_bytes());
    mask[4..].copy_from_slice(transaction);
    mask
}

fn encode_xor_address(addr: SocketAddr, transaction: &TransactionId) -> Vec<u8> {
    let mask = xor_mask(transaction);
    let mut v = encode_address(addr);
    v[2] ^= mask[0];
    v[3] ^= mask[1];
    for (byte, m) in v[4..].iter_mut().zip(mask.iter()) {
        *byte ^= m;
    }
    v
}

fn decode_xor_address(v: &[u8], transaction: &TransactionId) -> Option<SocketAddr> {
    let mask = xor_mask(transaction);
    let mut plain = v.to_vec();
    *plain.get_mut(2)? ^= mask[0];
    *plain.get_mut(3)? ^= mask[1];
    for (byte, m) in plain.iter_mut().skip(4).zip(mask.iter()) {
        *byte ^= m;
    }
    decode_address(&plain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip_plain_and_xored() {
        for addr in ["198.18.0.3:40000", "[fd00:5f::3]:3478"] {
            let addr: SocketAddr = addr.parse().unwrap();
            let msg = Message::new(BINDING_SUCCESS, [7; 12])
                .with_address(ATTR_XOR_MAPPED_ADDRESS, addr)
                .with_address(ATTR_OTHER_ADDRESS, addr);
            let back = Message::decode(&msg.encode(true)).unwrap();
            assert_eq!(back.mapped_address(), Some(addr));
            assert_eq!(back.address(ATTR_OTHER_ADDRESS), Some(addr));
            assert_eq!(back.transaction, [7; 12]);
        }
    }

    /// RFC 5769 2.2: a sample IPv4 response (XOR-MAPPED-ADDRESS 192.0.2.1:32853).
    #[test]
    fn the_rfc_5769_sample_response_decodes() {
        let sample: [u8; 80] = [
            0x01, 0x01, 0x00, 0x3c, 0x21, 0x12, 0xa4, 0x42, 0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34,
            0xd6, 0x86, 0xfa, 0x87, 0xdf, 0xae, 0x80, 0x22, 0x00, 0x0b, 0x74, 0x65, 0x73, 0x74,
            0x20, 0x76, 0x65, 0x63, 0x74, 0x6f, 0x72, 0x20, 0x00, 0x20, 0x00, 0x08, 0x00, 0x01,
            0xa1, 0x47, 0xe1, 0x12, 0xa6, 0x43, 0x00, 0x08, 0x00, 0x14, 0x2b, 0x91, 0xf5, 0x99,
            0xfd, 0x9e, 0x90, 0xc3, 0x8c, 0x74, 0x89, 0xf9, 0x2a, 0xf9, 0xba, 0x53, 0xf0, 0x6b,
            0xe7, 0xd7, 0x80, 0x28, 0x00, 0x04, 0xc0, 0x7d, 0x4c, 0x96,
        ];
        let msg = Message::decode(&sample).unwrap();
        assert_eq!(msg.kind, BINDING_SUCCESS);
        assert_eq!(
            msg.mapped_address(),
            Some("192.0.2.1:32853".parse().unwrap())
        );
        // Our FINGERPRINT over the same bytes is the sample's.
        let fp = msg.attribute(ATTR_FINGERPRINT).unwrap();
        let mut crc = flate2::Crc::new();
        crc.update(&sample[..sample.len() - 8]);
        assert_eq!(fp, (crc.sum() ^ FINGERPRINT_XOR).to_be_bytes());
    }

    #[test]
    fn change_requests_and_garbage() {
        let msg = Message::binding_request().with_change_request(CHANGE_IP | CHANGE_PORT);
        let back = Message::decode(&msg.encode(false)).unwrap();
        assert_eq!(back.change_request(), CHANGE_IP | CHANGE_PORT);
        assert_eq!(Message::decode(b"hello"), Err(StunError::Short));
        assert_eq!(Message::decode(&[0xff; 20]), Err(StunError::NotStun));
        let mut bytes = msg.encode(false);
        bytes.push(0);
        assert_eq!(Message::decode(&bytes), Err(StunError::BadLength));
    }
}
