//! Holds ABI 2.0 to its promise (policy-wit/README.md): every decision call
//! lowers as at most 16 flat core-wasm parameters (the canonical ABI's limit
//! before arguments go through a guest-allocated parameter area), and none
//! but VerifyOnly's `verify-partitions` passes a string or a list either way,
//! so wasmtime never calls back into the guest's `cabi_realloc` for them and
//! lifts no host allocations. Read from the shipped apache37 component's own
//! type, so a WIT change that breaks the promise fails here.
//!
//! The component is built by
//! `cargo build --release --target wasm32-wasip2 --workspace --exclude kaas`.

// Test code: a failed unwrap is a failed test. clippy.toml's allow-*-in-tests
// covers #[test] fns only, not this crate's helpers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use kaas::policy::{PolicyRuntime, SandboxLimits, WIT_EXPORT};
use wasmtime::component::Component;
use wasmtime::component::types::{ComponentItem, Type};

/// The canonical ABI's MAX_FLAT_PARAMS.
const MAX_FLAT_PARAMS: usize = 16;

/// Flat core values of `ty`, and whether lowering or lifting it allocates
/// (a string or a list anywhere inside).
fn flat(ty: &Type) -> (usize, bool) {
    let sum = |items: Vec<(usize, bool)>| {
        items
            .into_iter()
            .fold((0, false), |(n, a), (m, b)| (n + m, a || b))
    };
    let case = |payloads: Vec<Option<Type>>| {
        let (mut widest, mut allocates) = (0, false);
        for payload in payloads.iter().flatten() {
            let (n, a) = flat(payload);
            widest = widest.max(n);
            allocates |= a;
        }
        (1 + widest, allocates)
    };
    match ty {
        Type::Bool
        | Type::S8
        | Type::U8
        | Type::S16
        | Type::U16
        | Type::S32
        | Type::U32
        | Type::S64
        | Type::U64
        | Type::Float32
        | Type::Float64
        | Type::Char
        | Type::Enum(_) => (1, false),
        Type::String | Type::List(_) => (2, true),
        Type::Record(r) => sum(r.fields().map(|f| flat(&f.ty)).collect()),
        Type::Tuple(t) => sum(t.types().map(|t| flat(&t)).collect()),
        Type::Option(o) => case(vec![Some(o.ty())]),
        Type::Result(r) => case(vec![r.ok(), r.err()]),
        Type::Variant(v) => case(v.cases().map(|c| c.ty).collect()),
        Type::Flags(f) => (f.names().len().div_ceil(32).max(1), false),
        other => panic!("the policy ABI should not use {other:?}"),
    }
}

#[test]
fn every_decision_call_lowers_flat_without_strings_or_lists() {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/wasm32-wasip2/release/kaas_policy_apache37.wasm"
    ));
    let wasm = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {} ({e}); build the policies first",
            path.display()
        )
    });
    let rt = PolicyRuntime::new(SandboxLimits::default(), None).expect("runtime");
    let engine = rt.engine();
    let component = Component::new(engine, &wasm).expect("compiles");
    let ty = component.component_type();
    let (_, policy) = ty
        .exports(engine)
        .find(|(name, _)| *name == WIT_EXPORT)
        .unwrap_or_else(|| panic!("apache37 exports {WIT_EXPORT}"));
    let ComponentItem::ComponentInstance(policy) = policy.ty else {
        panic!("{WIT_EXPORT} is not an instance");
    };

    let mut seen = Vec::new();
    for (name, item) in policy.exports(engine) {
        let ComponentItem::ComponentFunc(func) = item.ty else {
            continue;
        };
        let (params, params_allocate) = func
            .params()
            .map(|(_, t)| flat(&t))
            .fold((0, false), |(n, a), (m, b)| (n + m, a || b));
        let results_allocate = func.results().any(|t| flat(&t).1);
        println!(
            "{name}: {params} flat params; strings/lists in params {params_allocate}, in results {results_allocate}"
        );
        assert!(
            params <= MAX_FLAT_PARAMS,
            "{name} lowers {params} flat params (> {MAX_FLAT_PARAMS}: a guest-allocated parameter area)"
        );
        match name {
            // Once per load, not a decision.
            "describe" => {}
            // VerifyOnly: one flag per partition in, one code per partition out.
            "verify-partitions" => {}
            _ => assert!(
                !params_allocate && !results_allocate,
                "{name} passes a string or a list"
            ),
        }
        seen.push(name.to_owned());
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            "add-partitions",
            "complete-transaction",
            "configure",
            "describe",
            "end-txn",
            "init-producer-id",
            "reap",
            "verify-partitions",
        ]
    );
}
