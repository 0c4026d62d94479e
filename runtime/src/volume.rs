//! A minimal file namespace over the device's logical space, so tasks have files to work on.
//!
//! A flat map from path to a list of page-aligned extents, with a free list to grow files
//! from. It does what the task runtime needs and nothing more: place imported files, grow
//! files tasks write, and translate a file's byte range into device byte ranges.
//!
//! A `Volume` either owns the device's whole logical space (`new`: `csd run`, `csd ndp`) or
//! is *lent* some files of another file system together with a pool of pages reserved for
//! growth (`lent`: a trace's `isc` op runs a task over `csd-hostfs` files).

use csd_device::Lpn;
use std::collections::BTreeMap;

pub use csd_device::Extent;

/// Where a file lives on the device.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FileLayout {
    /// Stable identity (an inode number): TxISC names files to the device by it.
    pub id: u64,
    pub extents: Vec<Extent>,
    pub size_bytes: u64,
}

impl FileLayout {
    pub fn allocated_pages(&self) -> u64 {
        self.extents.iter().map(|e| e.pages).sum()
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VolumeError {
    #[error("no such file '{0}' on the device")]
    NoSuchFile(String),
    #[error("'{0}' is not a valid device path (absolute, '/'-separated, no '.' or '..' parts)")]
    BadPath(String),
    #[error("the device is out of space: {needed_pages} more pages needed, {free_pages} free")]
    NoSpace { needed_pages: u64, free_pages: u64 },
}

/// The flat file namespace. Paths are absolute, like `/logs/a.txt`.
#[derive(Clone, Debug)]
pub struct Volume {
    files: BTreeMap<String, FileLayout>,
    page_size: u64,
    /// Pages files can grow into, lowest first.
    free: std::collections::VecDeque<Extent>,
    capacity_pages: u64,
    next_id: u64,
}

impl Volume {
    pub fn new(page_size: u64, capacity_pages: u64) -> Self {
        Volume {
            files: BTreeMap::new(),
            page_size,
            free: [Extent {
                first: Lpn(0),
                pages: capacity_pages,
            }]
            .into_iter()
            .filter(|e| e.pages > 0)
            .collect(),
            capacity_pages,
            next_id: 0,
        }
    }

    /// A volume of files another file system lent, with `pool` to grow them (or create
    /// files) from. File ids are the lender's (inode numbers); new files get ids above them.
    pub fn lent(
        page_size: u64,
        files: impl IntoIterator<Item = (String, FileLayout)>,
        pool: Vec<Extent>,
    ) -> Self {
        let files: BTreeMap<String, FileLayout> = files.into_iter().collect();
        let next_id = files.values().map(|f| f.id).max().unwrap_or(0);
        let capacity_pages = pool.iter().map(|e| e.pages).sum();
        Volume {
            files,
            page_size,
            free: pool.into_iter().filter(|e| e.pages > 0).collect(),
            capacity_pages,
            next_id,
        }
    }

    /// Every file, in path order (to hand lent files back).
    pub fn files(&self) -> impl Iterator<Item = (&str, &FileLayout)> {
        self.files.iter().map(|(p, l)| (p.as_str(), l))
    }

    /// The pages no file took.
    pub fn free_extents(&self) -> Vec<Extent> {
        self.free.iter().copied().collect()
    }

    /// Checks a device path: absolute, no empty, `.` or `..` components.
    pub fn check_path(path: &str) -> Result<(), VolumeError> {
        let ok = path.starts_with('/')
            && path.len() > 1
            && path[1..]
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\0'));
        if ok {
            Ok(())
        } else {
            Err(VolumeError::BadPath(path.to_string()))
        }
    }

    pub fn layout(&self, path: &str) -> Result<&FileLayout, VolumeError> {
        self.files
            .get(path)
            .ok_or_else(|| VolumeError::NoSuchFile(path.to_string()))
    }

    /// Creates an empty file if `path` does not exist.
    pub fn create(&mut self, path: &str) -> Result<(), VolumeError> {
        Self::check_path(path)?;
        if !self.files.contains_key(path) {
            self.next_id += 1;
            let layout = FileLayout {
                id: self.next_id,
                ..FileLayout::default()
            };
            self.files.insert(path.to_string(), layout);
        }
        Ok(())
    }

    /// Puts a file's size back (a rolled-back task's growth); its pages stay allocated.
    pub fn set_size(&mut self, path: &str, size_bytes: u64) -> Result<(), VolumeError> {
        let file = self
            .files
            .get_mut(path)
            .ok_or_else(|| VolumeError::NoSuchFile(path.to_string()))?;
        file.size_bytes = size_bytes.min(file.allocated_pages() * self.page_size);
        Ok(())
    }

    /// Forgets a file (one a rolled-back task created).
    pub fn remove(&mut self, path: &str) -> Result<FileLayout, VolumeError> {
        self.files
            .remove(path)
            .ok_or_else(|| VolumeError::NoSuchFile(path.to_string()))
    }

    /// Files whose path starts with `prefix`, in path order.
    pub fn list<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a FileLayout)> + 'a {
        self.files
            .range(prefix.to_string()..)
            .take_while(move |(p, _)| p.starts_with(prefix))
            .map(|(p, l)| (p.as_str(), l))
    }

    /// Grows `path` so it holds at least `size_bytes`, allocating pages as needed.
    pub fn ensure_size(&mut self, path: &str, size_bytes: u64) -> Result<(), VolumeError> {
        let page_size = self.page_size;
        let free_pages: u64 = self.free.iter().map(|e| e.pages).sum();
        let file = self
            .files
            .get_mut(path)
            .ok_or_else(|| VolumeError::NoSuchFile(path.to_string()))?;
        let mut needed = size_bytes
            .div_ceil(page_size)
            .saturating_sub(file.allocated_pages());
        if needed > free_pages {
            return Err(VolumeError::NoSpace {
                needed_pages: needed,
                free_pages,
            });
        }
        while needed > 0 {
            let head = self.free.front_mut().expect("enough free pages");
            let take = needed.min(head.pages);
            let first = head.first;
            head.first = Lpn(head.first.0 + take);
            head.pages -= take;
            if head.pages == 0 {
                self.free.pop_front();
            }
            needed -= take;
            match file.extents.last_mut() {
                Some(last) if last.first.0 + last.pages == first.0 => last.pages += take,
                _ => file.extents.push(Extent { first, pages: take }),
            }
        }
        file.size_bytes = file.size_bytes.max(size_bytes);
        Ok(())
    }

    /// Translates `len` bytes at file offset `offset` into device byte ranges
    /// `(device_offset, len)`. The range must lie within the allocated pages.
    pub fn map(&self, layout: &FileLayout, offset: u64, len: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut file_pos = 0u64;
        let (mut want, end) = (offset, offset + len);
        for e in &layout.extents {
            let ext_bytes = e.pages * self.page_size;
            let (ext_start, ext_end) = (file_pos, file_pos + ext_bytes);
            if want < end && want < ext_end && end > ext_start {
                let from = want.max(ext_start);
                let to = end.min(ext_end);
                out.push((e.first.0 * self.page_size + (from - ext_start), to - from));
                want = to;
            }
            file_pos = ext_end;
        }
        debug_assert_eq!(
            out.iter().map(|r| r.1).sum::<u64>(),
            len,
            "range within allocation"
        );
        out
    }

    pub fn used_pages(&self) -> u64 {
        self.capacity_pages - self.free.iter().map(|e| e.pages).sum::<u64>()
    }
}

/// The device together with its files, as the runtime owns them between invocations.
pub struct Storage {
    pub device: csd_device::Device,
    pub volume: Volume,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growing_files_and_mapping_ranges() {
        let mut v = Volume::new(4096, 100);
        v.create("/a").unwrap();
        v.create("/b").unwrap();
        v.ensure_size("/a", 5000).unwrap(); // pages 0-1
        v.ensure_size("/b", 1).unwrap(); // page 2
        v.ensure_size("/a", 9000).unwrap(); // page 3: a new extent
        let a = v.layout("/a").unwrap().clone();
        assert_eq!(a.extents.len(), 2);
        assert_eq!(a.size_bytes, 9000);
        assert_eq!(v.map(&a, 8000, 500), vec![(8000, 192), (3 * 4096, 308)]);
        assert_eq!(v.map(&a, 0, 10), vec![(0, 10)]);
        assert!(matches!(
            v.ensure_size("/b", 1 << 30),
            Err(VolumeError::NoSpace { .. })
        ));
        for bad in ["a", "/", "/x/../y", "/x//y", "/./x"] {
            assert!(v.create(bad).is_err(), "{bad}");
        }
        assert_eq!(v.list("/").count(), 2);
    }

    #[test]
    fn a_lent_volume_grows_files_from_its_pool_only() {
        let file = FileLayout {
            id: 7,
            extents: vec![Extent {
                first: Lpn(100),
                pages: 1,
            }],
            size_bytes: 4096,
        };
        let pool = vec![
            Extent {
                first: Lpn(101),
                pages: 1,
            },
            Extent {
                first: Lpn(300),
                pages: 2,
            },
        ];
        let mut v = Volume::lent(4096, [("/f".to_string(), file)], pool);
        v.ensure_size("/f", 3 * 4096).unwrap();
        let f = v.layout("/f").unwrap();
        // The first pool page continues the file's extent; the next comes from the second.
        assert_eq!(
            f.extents,
            vec![
                Extent {
                    first: Lpn(100),
                    pages: 2
                },
                Extent {
                    first: Lpn(300),
                    pages: 1
                }
            ]
        );
        assert_eq!(
            v.free_extents(),
            vec![Extent {
                first: Lpn(301),
                pages: 1
            }]
        );
        v.create("/new").unwrap();
        assert_eq!(
            v.layout("/new").unwrap().id,
            8,
            "ids continue past the lender's"
        );
        assert!(matches!(
            v.ensure_size("/new", 2 * 4096),
            Err(VolumeError::NoSpace {
                needed_pages: 2,
                free_pages: 1
            })
        ));
    }
}
