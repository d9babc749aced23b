//! The only WASI a policy gets: a bounded stderr and an empty environment
//!, so a std guest's panic message reaches the broker's
//! log instead of the guest trapping at its first WASI call.
//!
//! Granted, for the `0.2.x` versions a component imports:
//! - `wasi:cli/stderr` `get-stderr`, and on its `output-stream` the write,
//!   flush, check-write and subscribe methods of `wasi:io/streams`: bytes go
//!   into a per-instance buffer of [`STDERR_CAPACITY`] bytes; the rest of a
//!   flood is counted and dropped, never stored;
//! - `wasi:io/error` (its `to-debug-string`) and `wasi:io/poll` (a stderr
//!   stream is always ready), which those methods' types name;
//! - `wasi:cli/environment`: no variables, no arguments, no working
//!   directory (std's panic path reads `RUST_BACKTRACE`).
//!
//! Everything else (stdin, stdout, clocks, random, the file system,
//! sockets, exit, input streams) stays undefined here, so
//! `define_unknown_imports_as_traps` makes it trap.
//!
//! Why not `wasmtime-wasi`: its synchronous bindings run each stream call
//! through `Handle::block_on` of the ambient tokio runtime, which panics on
//! a runtime thread (the coordinator calls policies from tokio tasks), and
//! they need wasmtime's `async` feature; the subset needed here is a few
//! dozen lines of plain host functions.
//!
//! It may touch only the store's [`GuestStderr`]; it knows no policy ABI.

use wasmtime::Engine;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{
    Component, ComponentType, Linker, LinkerInstance, Lower, Resource, ResourceType,
};

/// The most stderr bytes kept per call (the rest are counted).
pub const STDERR_CAPACITY: usize = 4096;

/// Most bytes one `check-write` allows (the interface's contract allows a
/// writer to write that much next).
const WRITE_BUDGET: u64 = 4096;

/// What a guest wrote to stderr during one call.
#[derive(Debug, Default)]
pub struct GuestStderr {
    /// The first [`STDERR_CAPACITY`] bytes.
    kept: Vec<u8>,
    /// Bytes written past the capacity.
    dropped: u64,
}

impl GuestStderr {
    /// Keeps what fits, counts the rest.
    fn write(&mut self, bytes: &[u8]) {
        let room = STDERR_CAPACITY - self.kept.len();
        let keep = room.min(bytes.len());
        self.kept.extend_from_slice(&bytes[..keep]);
        self.dropped += (bytes.len() - keep) as u64;
    }

    fn write_zeroes(&mut self, len: u64) {
        let room = (STDERR_CAPACITY - self.kept.len()) as u64;
        let keep = room.min(len);
        self.kept.resize(self.kept.len() + keep as usize, 0);
        self.dropped += len - keep;
    }

    /// Whether nothing was written since the last [`Self::take`].
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty() && self.dropped == 0
    }

    /// What was written, as one line for a log or an error (control
    /// characters and line breaks become spaces, runs of them one space),
    /// with a count of what was dropped; `None` if nothing was written.
    pub fn take(&mut self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let text = sanitise(&String::from_utf8_lossy(&self.kept));
        let dropped = std::mem::take(&mut self.dropped);
        self.kept.clear();
        Some(if dropped > 0 {
            format!("{text} [{dropped} more bytes dropped]")
        } else {
            text
        })
    }
}

/// One line: whitespace and control characters collapse to single spaces.
fn sanitise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split(|c: char| c.is_whitespace() || c.is_control()) {
        if word.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// What the linked functions need from the store's data.
pub trait HasStderr: 'static {
    fn stderr(&mut self) -> &mut GuestStderr;
}

/// `wasi:io/streams` `output-stream` (only stderr ever exists).
struct OutputStream;
/// `wasi:io/error` `error` (never created: stderr writes do not fail).
struct IoError;
/// `wasi:io/poll` `pollable` (only stderr's, always ready).
struct Pollable;

/// `wasi:io/streams` `stream-error` (never produced: stderr writes do not
/// fail, but the methods' result types name it).
#[allow(dead_code, reason = "the type only shapes the signatures")]
#[derive(ComponentType, Lower)]
#[component(variant)]
enum StreamError {
    #[component(name = "last-operation-failed")]
    LastOperationFailed(Resource<IoError>),
    #[component(name = "closed")]
    Closed,
}

type StreamResult<T> = Result<T, StreamError>;

/// Defines the granted interfaces under the exact names (`@0.2.x`) the
/// component imports them by, so the trap stubs defined afterwards fill in
/// only what is not granted. Other versions are not granted.
///
/// Other WASI interfaces name the same resources (`wasi:cli/stdout` returns
/// an `output-stream`, `wasi:filesystem/types` uses `error`): there the
/// resource types are defined too, as the same host types, or the stubs'
/// placeholder types would not match the granted ones; their functions
/// still trap.
pub fn link<T: HasStderr>(
    linker: &mut Linker<T>,
    engine: &Engine,
    component: &Component,
) -> wasmtime::Result<()> {
    for (name, item) in component.component_type().imports(engine) {
        let Some((interface, version)) = name.split_once('@') else {
            continue;
        };
        if !interface.starts_with("wasi:") || !version.starts_with("0.2.") {
            continue;
        }
        let mut instance = linker.instance(name)?;
        match interface {
            "wasi:cli/stderr" => stderr(&mut instance)?,
            "wasi:cli/environment" => environment(&mut instance)?,
            "wasi:io/streams" => streams(&mut instance)?,
            "wasi:io/error" => error(&mut instance)?,
            "wasi:io/poll" => poll(&mut instance)?,
            _ => {
                let ComponentItem::ComponentInstance(ty) = item.ty else {
                    continue;
                };
                for (export, item) in ty.exports(engine) {
                    if !matches!(item.ty, ComponentItem::Resource(_)) {
                        continue;
                    }
                    match export {
                        "output-stream" => output_stream_resource(&mut instance)?,
                        "error" => error_resource(&mut instance)?,
                        "pollable" => pollable_resource(&mut instance)?,
                        _ => {}
                    }
                }
            }
        }
    }
    Ok(())
}

fn stderr<T: HasStderr>(i: &mut LinkerInstance<'_, T>) -> wasmtime::Result<()> {
    output_stream_resource(i)?;
    i.func_wrap("get-stderr", |_, ()| {
        Ok((Resource::<OutputStream>::new_own(0),))
    })
}

fn environment<T: HasStderr>(i: &mut LinkerInstance<'_, T>) -> wasmtime::Result<()> {
    i.func_wrap("get-environment", |_, ()| {
        Ok((Vec::<(String, String)>::new(),))
    })?;
    i.func_wrap("get-arguments", |_, ()| Ok((Vec::<String>::new(),)))?;
    i.func_wrap("initial-cwd", |_, ()| Ok((None::<String>,)))
}

fn output_stream_resource<T: HasStderr>(i: &mut LinkerInstance<'_, T>) -> wasmtime::Result<()> {
    i.resource(
        "output-stream",
        ResourceType::host::<OutputStream>(),
        |_, _| Ok(()),
    )
}

fn error_resource<T: HasStderr>(i: &mut LinkerInstance<'_, T>) -> wasmtime::Result<()> {
    i.resource("error", ResourceType::host::<IoError>(), |_, _| Ok(()))
}

fn pollable_resource<T: HasStderr>(i: &mut LinkerInstance<'_, T>) -> wasmtime::Result<()> {
    i.resource("pollable", ResourceType::host::<Pollable>(), |_, _| Ok(()))
}

fn streams<T: HasStderr>(i: &mut LinkerInstance<'_, T>) -> wasmtime::Result<()> {
    output_stream_resource(i)?;
    // The types the interface `use`s from wasi:io/error and wasi:io/poll,
    // so that both paths name the same host resource.
    error_resource(i)?;
    pollable_resource(i)?;
    type Stream = Resource<OutputStream>;
    i.func_wrap(
        "[method]output-stream.check-write",
        |_, (_,): (Stream,)| -> wasmtime::Result<(StreamResult<u64>,)> { Ok((Ok(WRITE_BUDGET),)) },
    )?;
    for name in [
        "[method]output-stream.write",
        "[method]output-stream.blocking-write-and-flush",
    ] {
        i.func_wrap(
            name,
            |mut store, (_, bytes): (Stream, Vec<u8>)| -> wasmtime::Result<(StreamResult<()>,)> {
                store.data_mut().stderr().write(&bytes);
                Ok((Ok(()),))
            },
        )?;
    }
    for name in [
        "[method]output-stream.write-zeroes",
        "[method]output-stream.blocking-write-zeroes-and-flush",
    ] {
        i.func_wrap(
            name,
            |mut store, (_, len): (Stream, u64)| -> wasmtime::Result<(StreamResult<()>,)> {
                store.data_mut().stderr().write_zeroes(len);
                Ok((Ok(()),))
            },
        )?;
    }
    for name in [
        "[method]output-stream.flush",
        "[method]output-stream.blocking-flush",
    ] {
        i.func_wrap(
            name,
            |_, (_,): (Stream,)| -> wasmtime::Result<(StreamResult<()>,)> { Ok((Ok(()),)) },
        )?;
    }
    i.func_wrap("[method]output-stream.subscribe", |_, (_,): (Stream,)| {
        Ok((Resource::<Pollable>::new_own(0),))
    })?;
    Ok(())
}

fn error<T: HasStderr>(i: &mut LinkerInstance<'_, T>) -> wasmtime::Result<()> {
    error_resource(i)?;
    i.func_wrap(
        "[method]error.to-debug-string",
        |_, (_,): (Resource<IoError>,)| Ok((String::from("stderr error"),)),
    )
}

fn poll<T: HasStderr>(i: &mut LinkerInstance<'_, T>) -> wasmtime::Result<()> {
    pollable_resource(i)?;
    i.func_wrap(
        "[method]pollable.ready",
        |_, (_,): (Resource<Pollable>,)| Ok((true,)),
    )?;
    i.func_wrap(
        "[method]pollable.block",
        |_, (_,): (Resource<Pollable>,)| Ok(()),
    )?;
    // Every pollable is stderr's, which is always ready.
    i.func_wrap("poll", |_, (all,): (Vec<Resource<Pollable>>,)| {
        Ok(((0..all.len() as u32).collect::<Vec<u32>>(),))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_keeps_its_capacity_and_counts_the_rest() {
        let mut e = GuestStderr::default();
        assert!(e.take().is_none(), "nothing written, nothing to report");
        e.write(&vec![b'a'; STDERR_CAPACITY - 1]);
        e.write(b"bc");
        e.write_zeroes(10);
        let text = e.take().expect("written");
        assert_eq!(
            text,
            format!(
                "{}b [{} more bytes dropped]",
                "a".repeat(STDERR_CAPACITY - 1),
                1 + 10
            )
        );
        assert!(e.is_empty(), "take() empties the buffer");
    }

    #[test]
    fn a_panic_message_becomes_one_line() {
        let mut e = GuestStderr::default();
        e.write(b"\nthread '<unnamed>' panicked at src/lib.rs:14:9:\ndescribe exploded\r\n\x1b[0mnote: x\n");
        assert_eq!(
            e.take().as_deref(),
            Some("thread '<unnamed>' panicked at src/lib.rs:14:9: describe exploded [0mnote: x")
        );
    }
}
