//! Content stamps: what a device's readable bytes are at a moment, in a few words.
//!
//! Reading the same addresses of a device twice gives the same bytes unless something
//! changed a mapping or a page in between. A [`ContentStamp`] names that state without
//! reading it: the device instance, its FTL's program sequence (every program, trim and
//! applied delta takes the next number) and its restores after power loss. A caller that
//! keeps results computed over some bytes can then find them again by stamp and addresses,
//! without reading and hashing the bytes a second time (an NDP request measured warm runs
//! the same reads twice).

use std::sync::atomic::{AtomicU64, Ordering};

/// The state of a device's readable content. Equal stamps of one device mean no mapping and
/// no page changed between them; stamps of different devices, clones included, never match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ContentStamp {
    pub(crate) instance: u64,
    pub(crate) seq: u64,
    pub(crate) restores: u64,
}

/// A device's identity for stamps. A clone is another device from the moment it is made,
/// so it draws a fresh identity: two clones changed alike would otherwise stamp alike.
#[derive(Debug)]
pub(crate) struct Instance(pub(crate) u64);

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

impl Instance {
    pub(crate) fn fresh() -> Instance {
        Instance(NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed))
    }
}

impl Clone for Instance {
    fn clone(&self) -> Instance {
        Instance::fresh()
    }
}

#[cfg(test)]
mod tests {
    use crate::{DataMode, Device, Extent, FileId, IoPath, Lpn, Profile, VirtualTime};

    /// Reads leave the stamp as it was; a write, a trim and a restore each change it; a
    /// clone never shares it; a registered snapshot withholds it.
    #[test]
    fn a_stamp_changes_with_the_content_and_only_then() {
        let p = Profile::load("pcm-zynq").unwrap();
        let mut d = Device::new(&p, DataMode::Payloads).unwrap();
        let t = VirtualTime::ZERO;
        let page = vec![7u8; d.page_size() as usize];
        d.write_at(IoPath::Internal, t, 0, page.len() as u64, Some(&page))
            .unwrap();
        let s = d.content_stamp().unwrap();
        let mut out = vec![0u8; page.len()];
        d.read_at(IoPath::Internal, t, 0, page.len() as u64, Some(&mut out))
            .unwrap();
        assert_eq!(d.content_stamp(), Some(s), "a read changes nothing");
        assert_ne!(
            d.clone().content_stamp(),
            Some(s),
            "a clone is another device"
        );

        d.write_at(IoPath::Internal, t, 0, page.len() as u64, Some(&page))
            .unwrap();
        let written = d.content_stamp().unwrap();
        assert_ne!(written, s, "even the same bytes again are a new program");
        d.trim(IoPath::Internal, t, Lpn(0), 1).unwrap();
        let trimmed = d.content_stamp().unwrap();
        assert_ne!(trimmed, written);
        d.power_cycle().unwrap();
        assert_ne!(d.content_stamp(), Some(trimmed), "a restore remaps");

        let task = d.tx_begin();
        d.tx_register(task, FileId(1), &[Extent::new(0, 1)])
            .unwrap();
        assert_eq!(
            d.content_stamp(),
            None,
            "a snapshot's deltas are not followed"
        );
    }
}
