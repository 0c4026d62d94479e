//! The extent allocator against a block bitmap, under random allocate/free sequences.

use csd_hostfs::alloc::{AllocError, Extent, ExtentAllocator};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Alloc(u64, Option<u64>),
    Free(usize),
}

proptest! {
    #[test]
    fn allocator_matches_a_bitmap(ops in prop::collection::vec(prop_oneof![
        3 => (1u64..60, prop::option::of(0u64..600)).prop_map(|(n, g)| Op::Alloc(n, g)),
        2 => any::<usize>().prop_map(Op::Free),
    ], 1..300)) {
        const FIRST: u64 = 10;
        const BLOCKS: u64 = 500;
        let mut a = ExtentAllocator::new(FIRST, BLOCKS);
        let mut used = vec![false; BLOCKS as usize];
        let mut files: Vec<Vec<Extent>> = Vec::new();
        for op in ops {
            match op {
                Op::Alloc(n, goal) => {
                    let free_before = a.free_blocks();
                    match a.allocate(n, goal.map(|g| g + FIRST)) {
                        Ok(runs) => {
                            prop_assert_eq!(runs.iter().map(|r| r.pages).sum::<u64>(), n);
                            for r in &runs {
                                for b in r.first.0..r.end() {
                                    let i = (b - FIRST) as usize;
                                    prop_assert!(!used[i], "block {} handed out twice", b);
                                    used[i] = true;
                                }
                            }
                            files.push(runs);
                        }
                        Err(AllocError::NoSpace { wanted, free }) => {
                            prop_assert_eq!(wanted, n);
                            prop_assert_eq!(free, free_before);
                            prop_assert!(n > free_before);
                        }
                        Err(e) => prop_assert!(false, "{}", e),
                    }
                }
                Op::Free(i) if !files.is_empty() => {
                    let runs = files.swap_remove(i % files.len());
                    for r in runs {
                        a.free(r).unwrap();
                        for b in r.first.0..r.end() {
                            used[(b - FIRST) as usize] = false;
                        }
                        prop_assert!(a.free(r).is_err(), "double free accepted");
                    }
                }
                Op::Free(_) => {}
            }
            // Free runs are exactly the unused blocks, merged (never adjacent).
            let free: Vec<Extent> = a.free_runs().collect();
            prop_assert_eq!(a.free_blocks(), used.iter().filter(|u| !**u).count() as u64);
            for w in free.windows(2) {
                prop_assert!(w[0].end() < w[1].first.0, "adjacent free runs not merged");
            }
            for r in &free {
                for b in r.first.0..r.end() {
                    prop_assert!(!used[(b - FIRST) as usize]);
                }
            }
        }
        // Freeing everything leaves one run covering the volume.
        for runs in files {
            for r in runs {
                a.free(r).unwrap();
            }
        }
        prop_assert_eq!(a.free_runs().collect::<Vec<_>>(), vec![Extent::new(FIRST, BLOCKS)]);
    }

    #[test]
    fn a_request_that_fits_one_free_run_gets_one_run(sizes in prop::collection::vec(1u64..40, 1..30), n in 1u64..40) {
        let mut a = ExtentAllocator::new(0, 1000);
        let mut held = Vec::new();
        for (i, s) in sizes.iter().enumerate() {
            let runs = a.allocate(*s, None).unwrap();
            if i % 2 == 0 { held.extend(runs); } else { for r in runs { a.free(r).unwrap(); } }
        }
        let fits_whole = a.free_runs().any(|r| r.pages >= n);
        let runs = a.allocate(n, None).unwrap();
        prop_assert_eq!(runs.len() == 1, fits_whole);
    }
}
