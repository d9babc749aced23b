//! Test-only fault points. With the `fault-injection` feature, a point named
//! by the `KAAS_FAULT` environment variable aborts the process ([`point`],
//! a broker killed at exactly that moment) or fires once ([`once`], a
//! one-shot failure the caller injects). Without the feature both compile to
//! nothing, so no release build can be made to fail through them.

/// Aborts the process when `KAAS_FAULT` names this point.
#[allow(unused_variables)]
pub fn point(name: &str) {
    #[cfg(feature = "fault-injection")]
    if std::env::var("KAAS_FAULT").is_ok_and(|v| v == name) {
        eprintln!("kaas: fault injection: aborting at {name}");
        std::process::abort();
    }
}

/// True exactly once per process when `KAAS_FAULT` names `name`.
#[allow(unused_variables)]
pub fn once(name: &str) -> bool {
    #[cfg(feature = "fault-injection")]
    {
        static FIRED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if std::env::var("KAAS_FAULT").is_ok_and(|v| v == name)
            && !FIRED.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            eprintln!("kaas: fault injection: {name}");
            return true;
        }
    }
    false
}
