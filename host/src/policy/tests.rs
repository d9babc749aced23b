use super::*;

#[test]
fn traps_are_classified_by_what_stopped_the_guest() {
    let cases = [
        (
            wasmtime::Error::new(wasmtime::Trap::OutOfFuel),
            TrapKind::Fuel,
        ),
        (
            wasmtime::Error::new(wasmtime::Trap::Interrupt),
            TrapKind::Deadline,
        ),
        (
            wasmtime::Error::new(wasmtime::Trap::StackOverflow),
            TrapKind::Stack,
        ),
        (
            wasmtime::Error::new(wasmtime::Trap::AllocationTooLarge),
            TrapKind::Memory,
        ),
        (
            wasmtime::Error::new(wasmtime::Trap::UnreachableCodeReached),
            TrapKind::Panic,
        ),
        (
            wasmtime::Error::new(wasmtime::Trap::MemoryOutOfBounds),
            TrapKind::Panic,
        ),
        (
            wasmtime::Error::msg(
                "unknown import: `wasi:clocks/wall-clock@0.2.6#now` has not been defined",
            ),
            TrapKind::Capability,
        ),
        (
            wasmtime::Error::msg("forcing trap when growing memory to 33554432 bytes"),
            TrapKind::Memory,
        ),
        (
            wasmtime::Error::msg("instantiating failed"),
            TrapKind::Other,
        ),
    ];
    for (e, kind) in cases {
        assert_eq!(classify_trap(&e), kind, "{e:#}");
    }
}

#[test]
fn a_capability_trap_names_the_import_and_what_is_granted() {
    let e = wasmtime::Error::msg(
        "unknown import: `wasi:random/random@0.2.6#get-random-bytes` has not been defined",
    );
    let text = describe_trap(&e);
    assert!(
        text.contains("`wasi:random/random@0.2.6#get-random-bytes`"),
        "{text}"
    );
    assert!(text.contains("bounded stderr"), "{text}");
}

#[test]
fn a_panic_cause_carries_the_guest_stderr() {
    let e = wasmtime::Error::new(wasmtime::Trap::UnreachableCodeReached);
    let text = with_stderr(describe_trap(&e), Some("panicked at x: boom"));
    assert_eq!(
        text,
        "panicked (wasm `unreachable`); its stderr: panicked at x: boom"
    );
}
