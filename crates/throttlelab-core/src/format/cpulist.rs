//! CPU lists in the kernel's `cpulist` format (`"0-3,8"`: `cpuset.cpus`,
//! `/sys/devices/system/cpu/online`), kept as ranges: parsing and comparing a
//! list never costs in proportion to how many CPUs a range spans.

use std::fmt;
use std::ops::RangeInclusive;

/// No kernel has a CPU numbered this high (`CONFIG_NR_CPUS` is at most 8192).
pub const NR_CPUS_MAX: usize = 8192;

/// A non-empty set of CPU ids: sorted, disjoint, non-adjacent ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList {
    ranges: Vec<RangeInclusive<usize>>,
}

impl CpuList {
    /// Parse `"0-3,5"`; every id is checked against [`NR_CPUS_MAX`] before
    /// anything is expanded.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut ranges = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (lo, hi) = part.split_once('-').map_or((part, part), |(a, b)| (a.trim(), b.trim()));
            let id = |t: &str| match t.parse::<usize>() {
                Ok(c) if c < NR_CPUS_MAX => Ok(c),
                Ok(_) => Err(format!("CPU {t} in {s:?} is beyond any kernel's CPUs (ids are below {NR_CPUS_MAX})")),
                Err(_) => Err(format!("bad CPU list {s:?}")),
            };
            let (lo, hi) = (id(lo)?, id(hi)?);
            if lo > hi {
                return Err(format!("bad CPU range {part:?}"));
            }
            ranges.push(lo..=hi);
        }
        if ranges.is_empty() {
            return Err(format!("empty CPU list {s:?}"));
        }
        ranges.sort_unstable_by_key(|r| *r.start());
        let mut merged: Vec<RangeInclusive<usize>> = Vec::with_capacity(ranges.len());
        for r in ranges {
            match merged.last_mut() {
                Some(last) if *r.start() <= last.end() + 1 => *last = *last.start()..=*r.end().max(last.end()),
                _ => merged.push(r),
            }
        }
        Ok(CpuList { ranges: merged })
    }

    /// The highest CPU listed.
    pub fn last(&self) -> usize {
        *self.ranges.last().expect("non-empty").end()
    }

    /// Exactly CPUs 0..nr_cpus-1.
    pub fn is_all(&self, nr_cpus: usize) -> bool {
        self.ranges == [0..=nr_cpus.saturating_sub(1)]
    }

    /// Every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuList) -> bool {
        self.ranges.iter().all(|r| other.first_ending_at_or_after(*r.start()).is_some_and(|o| o.start() <= r.start() && r.end() <= o.end()))
    }

    /// Some CPU is in both.
    pub fn intersects(&self, other: &CpuList) -> bool {
        self.ranges.iter().any(|r| other.first_ending_at_or_after(*r.start()).is_some_and(|o| o.start() <= r.end()))
    }

    /// The first range that ends at or after `cpu` (binary search: the ranges are sorted).
    fn first_ending_at_or_after(&self, cpu: usize) -> Option<&RangeInclusive<usize>> {
        self.ranges.get(self.ranges.partition_point(|r| *r.end() < cpu))
    }

    /// The CPU ids, ascending.
    pub fn cpus(&self) -> impl Iterator<Item = usize> + '_ {
        self.ranges.iter().flat_map(|r| r.clone())
    }
}

/// The list in the kernel's format, as `cpuset.cpus.effective` shows it.
impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.ranges.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            match (r.start(), r.end()) {
                (lo, hi) if lo == hi => write!(f, "{sep}{lo}")?,
                (lo, hi) => write!(f, "{sep}{lo}-{hi}")?,
            }
        }
        Ok(())
    }
}

/// Parse `"0-3,5"` into a sorted list of CPU ids (at most [`NR_CPUS_MAX`]).
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    CpuList::parse(s).map(|l| l.cpus().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_merges() {
        assert_eq!(parse_cpu_list("0-3,5").unwrap(), vec![0, 1, 2, 3, 5]);
        assert_eq!(parse_cpu_list("2").unwrap(), vec![2]);
        assert_eq!(parse_cpu_list(" 5, 0-2 ,,3-4,1").unwrap(), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(CpuList::parse("4-5,0-1,2").unwrap().ranges, vec![0..=2, 4..=5]);
        assert_eq!(CpuList::parse("4-5, 7,0-1,2").unwrap().to_string(), "0-2,4-5,7");
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert!(parse_cpu_list("").is_err());
        assert!(parse_cpu_list(" , ").is_err());
    }

    #[test]
    fn huge_ids_are_refused_before_expansion() {
        for list in ["0-4294967295", "0-18446744073709551615", "0-300000000", "8192"] {
            let e = parse_cpu_list(list).unwrap_err();
            assert!(e.contains("ids are below 8192"), "{list}: {e}");
        }
        assert!(parse_cpu_list("0-99999999999999999999999").unwrap_err().starts_with("bad CPU list"));
        assert_eq!(CpuList::parse("8191").unwrap().last(), 8191);
    }

    #[test]
    fn subsets_and_overlaps() {
        let l = |s| CpuList::parse(s).unwrap();
        assert!(l("1-2").is_subset(&l("0-3")));
        assert!(l("1,3").is_subset(&l("0-1,3")));
        assert!(!l("1-4").is_subset(&l("0-3")));
        assert!(!l("2").is_subset(&l("0-1,3")));
        assert!(l("3-8").intersects(&l("0-3")));
        assert!(!l("4-8").intersects(&l("0-3,9")));
        assert!(l("0-1,2-3").is_all(4));
        assert!(!l("0-2").is_all(4) && !l("1-3").is_all(4));
    }
}
