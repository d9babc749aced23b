//! (area under construction)

use crate::kit::Probe;

pub fn probes() -> Vec<Probe> {
    Vec::new()
}
