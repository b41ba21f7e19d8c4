//! Address arithmetic shared by the scenario checks and the fleets: IPv6 prefixes for
//! viewer slots and address ranges (CIDR) for firewalls, in code rather than `sed`.

use std::net::Ipv6Addr;

/// Parses `fd00:5f::/64` into its base address; the same rules as the script.
pub fn parse_prefix(prefix: &str) -> Result<Ipv6Addr, String> {
    let bad = |why: &str| {
        format!(
            "`{prefix}` {why}; write an IPv6 prefix ending in `::` with a length, e.g. fd00:5f::/64"
        )
    };
    let (base, len) = prefix
        .split_once('/')
        .ok_or_else(|| bad("has no /length"))?;
    if !base.ends_with("::") {
        return Err(bad("does not end in `::`"));
    }
    let addr: Ipv6Addr = base.parse().map_err(|_| bad("is not an IPv6 prefix"))?;
    let len: u32 = len
        .parse()
        .map_err(|_| bad("has a length that is not a number"))?;
    if !(48..=112).contains(&len) {
        return Err(bad("must be between /48 and /112 long"));
    }
    if u128::from(addr) & (u128::MAX >> len) != 0 {
        return Err(bad("has bits set beyond its length"));
    }
    Ok(addr)
}

/// Parses `ADDR/LEN` (IPv4 or IPv6).
pub fn parse_cidr(s: &str) -> Option<(std::net::IpAddr, u8)> {
    let (addr, len) = s.split_once('/')?;
    let addr: std::net::IpAddr = addr.parse().ok()?;
    let len: u8 = len.parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    (len <= max).then_some((addr, len))
}

/// Whether `ip` lies in `net/len` (an IPv4 client seen as `::ffff:a.b.c.d` counts as IPv4).
pub fn cidr_contains(net: std::net::IpAddr, len: u8, ip: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(len.min(32)))
                .unwrap_or(0);
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(len.min(128)))
                .unwrap_or(0);
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_membership() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert!(cidr_contains(
            ip("2a01:4f8:1:2::"),
            64,
            ip("2a01:4f8:1:2::99")
        ));
        assert!(!cidr_contains(
            ip("2a01:4f8:1:2::"),
            64,
            ip("2a01:4f8:1:3::1")
        ));
        assert!(cidr_contains(ip("10.0.0.0"), 8, ip("::ffff:10.1.2.3")));
        assert!(!cidr_contains(ip("10.0.0.0"), 8, ip("11.0.0.1")));
        assert!(cidr_contains(ip("0.0.0.0"), 0, ip("192.0.2.1")));
        assert!(cidr_contains(ip("fd00::1"), 128, ip("fd00::1")));
        assert!(!cidr_contains(ip("10.0.0.0"), 8, ip("fd00::1")));
    }

    #[test]
    fn prefixes_are_checked() {
        assert_eq!(
            parse_prefix("fd00:5f::/64").unwrap(),
            "fd00:5f::".parse::<Ipv6Addr>().unwrap()
        );
        assert!(parse_prefix("2a01:4f8:1:2::/64").is_ok());
        for bad in [
            "fd00:5f::",
            "fd00:5f::1/64",
            "fd00::/8",
            "nonsense::/64",
            "fd00::/64x",
        ] {
            let message = parse_prefix(bad).unwrap_err();
            assert!(message.contains("e.g. fd00:5f::/64"), "{bad}: {message}");
        }
    }
}
