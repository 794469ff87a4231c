//! Sharding a dataset across the nodes of a cluster: which node (rank) copies which blob.
//!
//! The seed workflow split files by name (`..._NNN.tfrecord.gz`, rank `r` of `N` takes the
//! indices with `i % N == r`). That balances bytes only when every file has the same size; on a
//! skewed dataset one node copies far more than the others and the whole stage waits for it.
//! dsinfra lists the blobs once and assigns them by size with the longest-processing-time-first
//! greedy rule (largest blob first, each to the currently lightest rank), which is within 4/3 of
//! the optimum in the worst case and close to perfect when there are many more blobs than
//! ranks. Everything here is pure so both schemes are unit-tested and benchmarked side by side.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A blob to place: its name (relative to the listing) and its size in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Blob name.
    pub name: String,
    /// Size in bytes (as stored, i.e. compressed for gzip content-encoded blobs).
    pub size: u64,
}

/// Assigns items to `ranks` shards by size, largest first, each to the lightest shard so far
/// (ties go to the lowest rank, so the result is deterministic). Returns item indices per rank,
/// each shard sorted by name.
///
/// # Panics
///
/// Never: the heap holds one entry per rank (at least one) at every pop.
pub fn by_size(items: &[Item], ranks: usize) -> Vec<Vec<usize>> {
    let ranks = ranks.max(1);
    let mut order: Vec<usize> = (0..items.len()).collect();
    // Largest first; equal sizes in name order so the assignment never depends on list order.
    // The index breaks the last ties, so the unstable (faster) sort is deterministic too.
    order.sort_unstable_by(|&a, &b| {
        items[b]
            .size
            .cmp(&items[a].size)
            .then_with(|| items[a].name.cmp(&items[b].name))
            .then(a.cmp(&b))
    });
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = (0..ranks).map(|r| Reverse((0, r))).collect();
    let mut shards = vec![Vec::new(); ranks];
    for index in order {
        let Reverse((load, rank)) = heap
            .pop()
            .expect("the heap always holds one entry per rank");
        shards[rank].push(index);
        heap.push(Reverse((load + items[index].size, rank)));
    }
    sort_by_name(items, &mut shards);
    shards
}

/// The seed's scheme: the number after the last `_` of the file name (`cosmo_017.tfrecord.gz`
/// is 17) modulo `ranks`; names without such a number use their position in name order.
///
/// # Panics
///
/// Never: a remainder below `ranks` always fits in `usize`.
pub fn by_name_modulo(items: &[Item], ranks: usize) -> Vec<Vec<usize>> {
    let ranks = ranks.max(1);
    let mut by_name: Vec<usize> = (0..items.len()).collect();
    by_name.sort_by(|&a, &b| items[a].name.cmp(&items[b].name));
    let mut shards = vec![Vec::new(); ranks];
    for (position, &index) in by_name.iter().enumerate() {
        let number = name_index(&items[index].name).unwrap_or(position as u64);
        let rank = usize::try_from(number % ranks as u64).expect("a remainder below ranks fits");
        shards[rank].push(index);
    }
    sort_by_name(items, &mut shards);
    shards
}

fn sort_by_name(items: &[Item], shards: &mut [Vec<usize>]) {
    // Blob listings arrive in name order (Azure lists blobs lexicographically). Then index order
    // is name order, and sorting integers avoids millions of string comparisons through
    // pointers at CosmoFlow's 300,000 blobs; both orders break ties by index.
    let listed_in_order = items.windows(2).all(|w| w[0].name <= w[1].name);
    for shard in shards {
        if listed_in_order {
            shard.sort_unstable();
        } else {
            shard.sort_unstable_by(|&a, &b| items[a].name.cmp(&items[b].name).then(a.cmp(&b)));
        }
    }
}

/// The number after the last `_` in the file name part of `name`, up to the first `.`.
fn name_index(name: &str) -> Option<u64> {
    let file = name.rsplit('/').next().unwrap_or(name);
    let stem = file.split('.').next().unwrap_or(file);
    let digits = stem.rsplit('_').next()?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits == stem {
        return None;
    }
    digits.parse().ok()
}

/// Bytes per shard.
pub fn loads(items: &[Item], shards: &[Vec<usize>]) -> Vec<u64> {
    shards
        .iter()
        .map(|shard| shard.iter().map(|&i| items[i].size).sum())
        .collect()
}

/// Balance of an assignment: the largest shard's bytes over the mean bytes per shard. 1.0 is
/// perfect; the stage takes `balance` times as long as a perfect split would. An empty dataset
/// is perfectly balanced.
pub fn balance(items: &[Item], shards: &[Vec<usize>]) -> f64 {
    let loads = loads(items, shards);
    let total: u64 = loads.iter().sum();
    if total == 0 || loads.is_empty() {
        return 1.0;
    }
    let max = loads.iter().copied().max().unwrap_or_default();
    max as f64 * loads.len() as f64 / total as f64
}

/// Whether `name` matches a `;`-separated list of file-name patterns with `*` and `?` (the
/// syntax of azcopy's `--include-pattern`, which matches the file name only, not the path).
pub fn matches_any(patterns: &str, name: &str) -> bool {
    let file = name.rsplit('/').next().unwrap_or(name);
    patterns
        .split(';')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .any(|p| glob(p.as_bytes(), file.as_bytes()))
}

/// Wildcard match with backtracking over the last `*` (linear in practice).
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(sizes: &[u64]) -> Vec<Item> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| Item {
                name: format!("cosmo_{i:03}.tfrecord.gz"),
                size,
            })
            .collect()
    }

    #[test]
    fn lpt_places_largest_first_on_the_lightest_rank() {
        let set = items(&[7, 5, 4, 3, 3, 2]);
        let shards = by_size(&set, 2);
        // 7 -> r0 (7); 5 -> r1 (5); 4 -> r1 (9); 3 -> r0 (10); 3 -> r1 (12); 2 -> r0 (12).
        assert_eq!(loads(&set, &shards), [12, 12]);
        assert_eq!(shards, [vec![0, 3, 5], vec![1, 2, 4]]);
        assert!((balance(&set, &shards) - 1.0).abs() < f64::EPSILON);
    }

    #[test]
    fn shards_are_in_name_order_whether_or_not_the_items_are() {
        // 6 -> r0; 5 -> r1; 4 -> r1 (9); 3 -> r0 (9); 2 -> r0 (tie: lowest rank); 1 -> r1.
        let mut set = items(&[5, 4, 3, 2, 1, 6]);
        assert_eq!(by_size(&set, 2), [vec![2, 3, 5], vec![0, 1, 4]]);
        // Listed out of name order: the same shards, each still sorted by name.
        set.reverse();
        let shards = by_size(&set, 2);
        assert_eq!(shards, [vec![3, 2, 0], vec![5, 4, 1]]);
        for shard in &shards {
            assert!(shard.windows(2).all(|w| set[w[0]].name < set[w[1]].name));
        }
    }

    #[test]
    fn every_item_is_assigned_exactly_once() {
        let set = items(&(1..=97).map(|i| (i * 7919) % 1000 + 1).collect::<Vec<_>>());
        for scheme in [by_size, by_name_modulo] {
            let shards = scheme(&set, 4);
            let mut all: Vec<usize> = shards.concat();
            all.sort_unstable();
            assert_eq!(all, (0..set.len()).collect::<Vec<_>>());
        }
    }

    #[test]
    fn name_modulo_follows_the_seed_numbering() {
        let set = items(&[1; 8]);
        let shards = by_name_modulo(&set, 4);
        assert_eq!(shards[1], [1, 5]);
        assert_eq!(name_index("dir/cosmo_017.tfrecord.gz"), Some(17));
        assert_eq!(name_index("plain.txt"), None);
        assert_eq!(name_index("a_b.txt"), None);
    }

    #[test]
    fn size_balancing_beats_name_modulo_on_a_skewed_set() {
        // Every fourth file is large: the seed's modulo puts all of them on rank 0.
        let sizes: Vec<u64> = (0..64)
            .map(|i| if i % 4 == 0 { 900 } else { 100 + i })
            .collect();
        let set = items(&sizes);
        let modulo = balance(&set, &by_name_modulo(&set, 4));
        let lpt = balance(&set, &by_size(&set, 4));
        assert!(modulo > 2.0, "modulo balance {modulo}");
        assert!(lpt <= 1.02, "size-balanced balance {lpt}");
    }

    #[test]
    fn more_ranks_than_items_leaves_empty_shards_and_zero_ranks_means_one() {
        let set = items(&[5, 3]);
        let shards = by_size(&set, 4);
        assert_eq!(shards.iter().filter(|s| s.is_empty()).count(), 2);
        assert_eq!(by_size(&set, 0).len(), 1);
        assert!((balance(&[], &[vec![], vec![]]) - 1.0).abs() < f64::EPSILON);
    }

    #[test]
    fn include_patterns_match_file_names_like_azcopy() {
        assert!(matches_any("*.gz;*.tfrecord", "dir/a.tfrecord"));
        assert!(matches_any("*.gz", "dir/sub/x_001.tfrecord.gz"));
        assert!(!matches_any("*.gz", "dir.gz/readme"));
        assert!(matches_any("x_0??.*", "x_012.bin"));
        assert!(!matches_any("x_0??.*", "x_0123.bin"));
        assert!(matches_any("exact", "p/exact"));
        assert!(!matches_any("", "anything"));
        assert!(matches_any("a*b*c", "aXXbYYc") && !matches_any("a*b*c", "aXXbYY"));
    }
}
