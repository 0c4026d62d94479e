//! Owners and permission bits, and the POSIX access check.

use std::fmt;

/// Owner, group and permission bits of a file or directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Perms {
    pub uid: u32,
    pub gid: u32,
    pub mode: u16,
}

/// Who is asking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cred {
    pub uid: u32,
    pub gid: u32,
}

impl Cred {
    pub const ROOT: Cred = Cred { uid: 0, gid: 0 };
}

/// What the caller wants to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    /// Execute a file, or search (traverse) a directory.
    Execute,
}

impl Access {
    fn bit(self) -> u16 {
        match self {
            Access::Read => 4,
            Access::Write => 2,
            Access::Execute => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Execute => "search",
        }
    }
}

impl Perms {
    /// The classic check: owner bits for the owner, group bits for the group, other bits for
    /// everyone else; root may do anything but execute a file with no execute bit at all.
    pub fn allows(&self, who: Cred, want: Access) -> bool {
        if who.uid == 0 {
            return want != Access::Execute || self.mode & 0o111 != 0;
        }
        let shift = if who.uid == self.uid {
            6
        } else if who.gid == self.gid {
            3
        } else {
            0
        };
        (self.mode >> shift) & want.bit() != 0
    }
}

impl fmt::Display for Perms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{} {:o}", self.uid, self.gid, self.mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_group_other_and_root() {
        let p = Perms {
            uid: 10,
            gid: 20,
            mode: 0o750,
        };
        assert!(p.allows(Cred { uid: 10, gid: 99 }, Access::Write));
        assert!(p.allows(Cred { uid: 11, gid: 20 }, Access::Read));
        assert!(!p.allows(Cred { uid: 11, gid: 20 }, Access::Write));
        assert!(!p.allows(Cred { uid: 12, gid: 21 }, Access::Read));
        assert!(p.allows(Cred::ROOT, Access::Write));
        let no_x = Perms { mode: 0o644, ..p };
        assert!(!no_x.allows(Cred::ROOT, Access::Execute));
    }
}
