//! Small network helpers for the processes the tool starts.

/// A free loopback TCP port (bound, read, released).
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
