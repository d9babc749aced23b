//! Every probe of the kit, one file per area. Ids: the spec's scenario id
//! where one exists (IT-04, PS-03, …), else the area's prefix:
//! AV api versions, PF produce/fetch, ID idempotence, TX transactions,
//! CG classic groups, KG KIP-848 groups, AD admin, MF malformed requests.

pub mod admin;
pub mod classic_groups;
pub mod consumer_groups;
pub mod idempotence;
pub mod malformed;
pub mod produce_fetch;
pub mod rejoin;
pub mod transactions;
pub mod versions;

use crate::kit::Probe;

/// All probes, in the order they run.
pub fn all() -> Vec<Probe> {
    let mut all = Vec::new();
    all.extend(versions::probes());
    all.extend(produce_fetch::probes());
    all.extend(idempotence::probes());
    all.extend(rejoin::probes());
    all.extend(transactions::probes());
    all.extend(classic_groups::probes());
    all.extend(consumer_groups::probes());
    all.extend(admin::probes());
    all.extend(malformed::probes());
    all
}

#[cfg(test)]
mod tests {
    #[test]
    fn probe_ids_are_unique() {
        let all = super::all();
        let mut ids: Vec<_> = all.iter().map(|p| p.id).collect();
        ids.sort_unstable();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n, "duplicate probe ids");
    }
}
