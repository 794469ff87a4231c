//! Shard balance of the `stage` step: dsinfra's size-balanced assignment (longest processing
//! time first) against the seed's name-modulo scheme, on the skewed 64-file test dataset
//! (tests/step_library/dataset.rs, gzip-compressed as the test stores it) and on a larger
//! heavy-tailed set. Balance is the largest shard's bytes over the mean: the stage takes that
//! many times as long as a perfect split. Goal: <= 1.02 for size-balanced. Writes
//! target/bench/shard.md. Run: `cargo bench --bench shard_balance`.

#[path = "../tests/step_library/dataset.rs"]
mod dataset;

use std::fmt::Write as _;
use std::time::Instant;

use dsinfra::steps::library::shard::{self, Item};

fn row(out: &mut String, set: &str, items: &[Item], ranks: usize) -> f64 {
    let started = Instant::now();
    let lpt = shard::by_size(items, ranks);
    let lpt_time = started.elapsed();
    let modulo = shard::by_name_modulo(items, ranks);
    let lpt_balance = shard::balance(items, &lpt);
    let modulo_balance = shard::balance(items, &modulo);
    // No assignment beats the largest single file or a perfect split.
    let total: u64 = items.iter().map(|i| i.size).sum();
    let largest = items.iter().map(|i| i.size).max().unwrap_or(0);
    let mean = total as f64 / ranks as f64;
    let bound = (largest as f64).max(mean) / mean;
    let max = |shards: &[Vec<usize>]| shard::loads(items, shards).into_iter().max().unwrap_or(0);
    let _ = writeln!(
        out,
        "| {set} | {} | {ranks} | {lpt_balance:.4} | {modulo_balance:.4} | {bound:.4} | {} | {} | {:.1} |",
        items.len(),
        max(&lpt),
        max(&modulo),
        lpt_time.as_secs_f64() * 1e6,
    );
    lpt_balance
}

fn main() {
    let skewed: Vec<Item> = dataset::files()
        .iter()
        .map(|(name, content)| Item {
            name: format!("cosmoUniverse/train/{name}.gz"),
            size: dataset::gzip(content).len() as u64,
        })
        .collect();
    // A larger set: 4096 files whose sizes follow a Pareto-like tail, named in order.
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    let large: Vec<Item> = (0..4096)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = (state % 10_000) as f64 / 10_000.0;
            // Positive and far below u64::MAX: u < 1 bounds it by 1e6 * 10_000^0.7.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let size = (1_000_000.0 / (1.0 - u).powf(0.7)) as u64;
            Item {
                name: format!("shard_{i:05}.tfrecord.gz"),
                size,
            }
        })
        .collect();

    let mut out = String::from(
        "# Shard balance: size-balanced (LPT) vs the seed's name modulo\n\n\
         Balance = largest shard's bytes / mean bytes per shard (1.0 is perfect; goal <= 1.02). The lower\n\
         bound is max(largest file, mean) / mean: no assignment can do better.\n\n\
         | set | files | ranks | size-balanced | name modulo | lower bound | max bytes (size) | max bytes (modulo) | LPT time (us) |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let mut worst_skewed_4 = 0.0;
    for ranks in [2, 4, 8, 16] {
        let b = row(&mut out, "skewed-64 (test set)", &skewed, ranks);
        if ranks == 4 {
            worst_skewed_4 = b;
        }
    }
    for ranks in [4, 16, 64] {
        row(&mut out, "pareto-4096", &large, ranks);
    }
    let _ = writeln!(
        out,
        "\nOn the test set with 4 ranks (the staging test's cluster) size-balanced reaches {worst_skewed_4:.4} \
         ({}).",
        if worst_skewed_4 <= 1.02 {
            "goal met"
        } else {
            "goal NOT met"
        }
    );
    print!("{out}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    std::fs::create_dir_all(&dir).expect("target/bench can be created");
    std::fs::write(dir.join("shard.md"), &out).expect("target/bench/shard.md can be written");
}
