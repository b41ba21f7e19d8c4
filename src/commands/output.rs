//! What the commands print, and what happens when nobody reads it any more.
//!
//! Output is piped into `head` and `grep`: `viewerfleet validate FILE | head -1` closes the
//! pipe after one line. A reader that went away is not an error. The rest of the output is
//! dropped, and the command finishes what it started (a teardown that is under way included)
//! and exits with the code it would have had anyway.
//!
//! That takes three parts:
//! - `println!`/`print!`/`eprintln!`/`eprint!` in every command file go through [`out`] and
//!   [`err`] (the macros in `commands/mod.rs` shadow std's). A broken pipe there is
//!   noted, never a panic;
//! - [`guard_standard_streams`] watches stdout and stderr. Once a pipe's reader is gone,
//!   the stream is pointed at `/dev/null`, so writes made elsewhere (a writer handed
//!   `std::io::stdout()`, the engine's progress lines) succeed and go nowhere;
//! - [`is_closed_pipe_error`] lets `main` treat an error that a closed stdout caused, and
//!   that reached the top anyway, as the quiet end it is.

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::fmt;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_GONE: AtomicBool = AtomicBool::new(false);
static STDERR_GONE: AtomicBool = AtomicBool::new(false);
/// `--json`: stdout carries the JSON document only; what `out` writes goes to stderr.
static TEXT_TO_STDERR: AtomicBool = AtomicBool::new(false);
/// A `--json` document went to stdout (a command prints one at most).
static JSON_WRITTEN: AtomicBool = AtomicBool::new(false);

/// Writes to stdout (to stderr under `--json`); a closed pipe drops this and every later
/// write.
pub fn out(args: fmt::Arguments<'_>) {
    if TEXT_TO_STDERR.load(Ordering::Relaxed) {
        return err(args);
    }
    write_to(
        &STDOUT_GONE,
        libc::STDOUT_FILENO,
        &mut std::io::stdout().lock(),
        args,
    );
}

/// From now on, the human-readable text goes to stderr and stdout holds only what
/// [`json`] writes (`--json`).
pub fn text_to_stderr() {
    TEXT_TO_STDERR.store(true, Ordering::Relaxed);
}

/// Writes the `--json` document to stdout; a closed pipe drops it like any output.
pub fn json(text: &str) {
    JSON_WRITTEN.store(true, Ordering::Relaxed);
    write_to(
        &STDOUT_GONE,
        libc::STDOUT_FILENO,
        &mut std::io::stdout().lock(),
        format_args!("{text}\n"),
    );
}

/// Whether [`json`] wrote the document already (`refsite` prints it once it listens).
pub fn json_written() -> bool {
    JSON_WRITTEN.load(Ordering::Relaxed)
}

/// Writes to stderr; a closed pipe drops this and every later write.
pub fn err(args: fmt::Arguments<'_>) {
    write_to(
        &STDERR_GONE,
        libc::STDERR_FILENO,
        &mut std::io::stderr().lock(),
        args,
    );
}

fn write_to(gone: &AtomicBool, fd: i32, stream: &mut dyn Write, args: fmt::Arguments<'_>) {
    if gone.load(Ordering::Relaxed) {
        return;
    }
    let result = stream.write_fmt(args).and_then(|()| stream.flush());
    if let Err(error) = result {
        gone.store(true, Ordering::Relaxed);
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            discard(fd);
        } else if fd == libc::STDOUT_FILENO {
            // Not a reader that left (a full disk, an I/O error): say so once, on stderr.
            err(format_args!(
                "warning: cannot write to stdout ({error}); the rest of the output is lost\n"
            ));
        }
    }
}

/// Points `fd` at `/dev/null`, so later writes to it succeed and go nowhere.
fn discard(fd: i32) {
    use std::os::fd::AsRawFd;
    // Opened close-on-exec, closed again when dropped.
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let _ = nix::unistd::dup2(null.as_raw_fd(), fd);
    }
}

/// The standard stream `fd` (stdout or stderr) as a borrowed descriptor, for as long as
/// `f` runs.
fn with_stream<T>(fd: i32, f: impl FnOnce(BorrowedFd<'_>) -> T) -> T {
    if fd == libc::STDERR_FILENO {
        f(std::io::stderr().as_fd())
    } else {
        f(std::io::stdout().as_fd())
    }
}

/// Whether a poll's answer says the reading end of the pipe is closed.
fn hung_up(poll: &PollFd<'_>) -> bool {
    poll.revents()
        .is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP))
}

/// Whether `fd` is a pipe (or socket) whose reading end is closed.
fn reader_gone(fd: BorrowedFd<'_>) -> bool {
    let mut polls = [PollFd::new(fd, PollFlags::empty())];
    matches!(poll(&mut polls, PollTimeout::ZERO), Ok(ready) if ready > 0) && hung_up(&polls[0])
}

/// Starts one thread per pipe on stdout/stderr that waits (in `poll`, woken by the
/// kernel) until the pipe's reader is gone, then points the stream at `/dev/null`. Streams
/// that are terminals or files are left alone. The threads end with the process.
pub fn guard_standard_streams() {
    for (fd, gone) in [
        (libc::STDOUT_FILENO, &STDOUT_GONE),
        (libc::STDERR_FILENO, &STDERR_GONE),
    ] {
        if !is_pipe_or_socket(fd) {
            continue;
        }
        if with_stream(fd, reader_gone) {
            gone.store(true, Ordering::Relaxed);
            discard(fd);
            continue;
        }
        let spawned = std::thread::Builder::new()
            .name(format!("watch-fd{fd}"))
            .spawn(move || {
                // Waits until the kernel reports an event.
                let closed = with_stream(fd, |stream| loop {
                    let mut polls = [PollFd::new(stream, PollFlags::empty())];
                    match poll(&mut polls, PollTimeout::NONE) {
                        Ok(ready) if ready > 0 && hung_up(&polls[0]) => break true,
                        Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                        Err(_) => break false,
                    }
                });
                if closed {
                    gone.store(true, Ordering::Relaxed);
                    discard(fd);
                }
            });
        // Without the thread, the macros still handle a closed pipe.
        drop(spawned);
    }
}

fn is_pipe_or_socket(fd: i32) -> bool {
    nix::sys::stat::fstat(fd).is_ok_and(|stat| {
        let kind = stat.st_mode & libc::S_IFMT;
        kind == libc::S_IFIFO || kind == libc::S_IFSOCK
    })
}

/// Whether `error` is a write to a stdout whose reader left (and nothing else): then the
/// command's output was simply not wanted any more.
pub fn is_closed_pipe_error(error: &anyhow::Error) -> bool {
    let broken_pipe = error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    });
    broken_pipe
        && (STDOUT_GONE.load(Ordering::Relaxed) || with_stream(libc::STDOUT_FILENO, reader_gone))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_without_reader_is_seen_as_gone() {
        use std::os::fd::AsRawFd;
        let (read, write) = nix::unistd::pipe().unwrap();
        assert!(!reader_gone(write.as_fd()), "a pipe with a reader is open");
        assert!(is_pipe_or_socket(write.as_raw_fd()));
        drop(read);
        assert!(reader_gone(write.as_fd()), "the reader closed its end");
    }
}
