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

use std::fmt;
use std::io::Write;
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
    // SAFETY: plain system calls on descriptors this process owns; `path` is a valid C
    // string; the temporary descriptor is closed again.
    unsafe {
        let path = c"/dev/null";
        let null = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if null >= 0 {
            libc::dup2(null, fd);
            libc::close(null);
        }
    }
}

/// Whether `fd` is a pipe (or socket) whose reading end is closed.
fn reader_gone(fd: i32) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    };
    // SAFETY: one valid pollfd, a zero timeout.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0 && poll.revents & (libc::POLLERR | libc::POLLHUP) != 0
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
        if reader_gone(fd) {
            gone.store(true, Ordering::Relaxed);
            discard(fd);
            continue;
        }
        let spawned = std::thread::Builder::new()
            .name(format!("watch-fd{fd}"))
            .spawn(move || {
                let mut poll = libc::pollfd {
                    fd,
                    events: 0,
                    revents: 0,
                };
                loop {
                    // SAFETY: one valid pollfd; -1 waits until the kernel reports an event.
                    let ready = unsafe { libc::poll(&mut poll, 1, -1) };
                    if ready > 0 && poll.revents & (libc::POLLERR | libc::POLLHUP) != 0 {
                        gone.store(true, Ordering::Relaxed);
                        discard(fd);
                        return;
                    }
                    if ready < 0
                        && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
                    {
                        return;
                    }
                }
            });
        // Without the thread, the macros still handle a closed pipe.
        drop(spawned);
    }
}

fn is_pipe_or_socket(fd: i32) -> bool {
    // SAFETY: fstat fills the zeroed struct for a descriptor this process owns.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut stat) != 0 {
            return false;
        }
        let kind = stat.st_mode & libc::S_IFMT;
        kind == libc::S_IFIFO || kind == libc::S_IFSOCK
    }
}

/// Whether `error` is a write to a stdout whose reader left (and nothing else): then the
/// command's output was simply not wanted any more.
pub fn is_closed_pipe_error(error: &anyhow::Error) -> bool {
    let broken_pipe = error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    });
    broken_pipe && (STDOUT_GONE.load(Ordering::Relaxed) || reader_gone(libc::STDOUT_FILENO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_without_reader_is_seen_as_gone() {
        let mut fds = [0; 2];
        // SAFETY: a two-element array for pipe(2); both ends are closed below.
        unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        }
        let (read, write) = (fds[0], fds[1]);
        assert!(!reader_gone(write), "a pipe with a reader is open");
        assert!(is_pipe_or_socket(write));
        // SAFETY: closing the descriptors made above.
        unsafe {
            libc::close(read);
        }
        assert!(reader_gone(write), "the reader closed its end");
        unsafe {
            libc::close(write);
        }
    }
}
