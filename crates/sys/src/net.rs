//! Small network helpers for the processes the tool starts.

use std::net::TcpListener;
use std::ops::RangeInclusive;

/// Where `free_port` looks first: below the kernel's ephemeral range (32768–60999 by
/// default), so no outgoing connection can take the port between the probe and the bind of
/// the program it is meant for (a Selenium hub's JVM binds its event bus seconds later).
const PROBED: RangeInclusive<u16> = 10_000..=19_999;
/// Ports tried in `PROBED` before leaving the choice to the kernel.
const PROBES: u32 = 64;

/// A free loopback TCP port (bound, read, released) for a program to listen on: one of
/// `PROBED` outside the kernel's ephemeral range, from a random start so concurrent runs
/// differ, else one the kernel picks.
pub fn free_port() -> std::io::Result<u16> {
    probe_from(rand::random::<u32>() % probed_span())
}

fn probed_span() -> u32 {
    u32::from(PROBED.end() - PROBED.start()) + 1
}

/// `free_port` with its probes starting at offset `start` of `PROBED`.
fn probe_from(start: u32) -> std::io::Result<u16> {
    let ephemeral = ephemeral_range();
    let span = probed_span();
    for i in 0..PROBES {
        // 7919 is prime and does not divide the span: the probes fall far apart.
        let port = PROBED.start() + ((start + i * 7919) % span) as u16;
        if ephemeral.as_ref().is_some_and(|r| r.contains(&port)) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The kernel's ephemeral port range (`None` where it cannot be read).
fn ephemeral_range() -> Option<RangeInclusive<u16>> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut bounds = text.split_whitespace().map(|v| v.parse::<u16>().ok());
    Some(bounds.next()??..=bounds.next()??)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_port_is_bindable_and_outside_the_ephemeral_range() {
        let ephemeral = ephemeral_range();
        for _ in 0..20 {
            let port = free_port().unwrap();
            assert!(TcpListener::bind(("127.0.0.1", port)).is_ok(), "{port}");
            if let Some(r) = &ephemeral {
                if !r.contains(PROBED.start()) && !r.contains(PROBED.end()) {
                    assert!(PROBED.contains(&port), "{port} outside {PROBED:?}");
                }
            }
        }
    }

    #[test]
    fn a_port_taken_is_skipped_for_the_next_probe() {
        // The same start twice: the first answer, held, cannot be the second.
        let first = probe_from(1234).unwrap();
        let held = TcpListener::bind(("127.0.0.1", first)).unwrap();
        let second = probe_from(1234).unwrap();
        assert_ne!(second, first);
        assert!(TcpListener::bind(("127.0.0.1", second)).is_ok(), "{second}");
        drop(held);
    }
}
