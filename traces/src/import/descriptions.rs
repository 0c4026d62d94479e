//! Open file descriptions as the traced kernel kept them, so the importer can say where a
//! read or write through a shared one starts.
//!
//! An fd names an open file description (the kernel's `struct file`): its position and its
//! `O_APPEND`. `dup`, `dup2` and `fcntl(F_DUPFD)` give one description a second fd, and a
//! `fork` gives the child a copy of its parent's fd table whose fds name the parent's
//! descriptions. A shell's redirection does both: `{ a; b; } > log` opens `log` once,
//! `dup2`s it onto fd 1, and every command it forks writes through that fd, each write
//! starting where the last one, in whichever process, ended.
//!
//! A replay keeps a position per fd, in the fd table that opened it, and opens an fd it
//! never saw opened (an inherited one) afresh, at offset 0, without `O_APPEND`: every child
//! of that shell would write over the others at the start of `log`, and `cmd >> log` would
//! not append. So the importer follows each description's position from the calls'
//! results. A read or write carries the offset (`off`) when the replay's position for its
//! fd is not the description's: the call that last moved it went through another fd, or an
//! `lseek` did. A write through an `O_APPEND` description by an fd other than the one that
//! opened it says so (`append`). Calls through the fd that opened a description, while no
//! other fd moves it, carry neither, as before.
//!
//! Memory: one entry per open fd of each live fd table. A `fork` copies its parent's table
//! (what the kernel does), and a process's exit drops its table.

use std::collections::HashMap;

/// One open file description.
#[derive(Clone, Debug)]
struct Description {
    /// Where its next read or write starts, where known: 0 at its open, set by an `lseek`,
    /// moved on by what each call moved. Unknown for a description opened before the trace
    /// began, and after a write to an `O_APPEND` one (the end of a file the importer does not
    /// size).
    pos: Option<u64>,
    append: bool,
    /// The (fd table, fd) the trace opened it through, while that fd still names it: the
    /// one fd a replay opens with its flags.
    opener: Option<(u32, i64)>,
    /// The (fd table, fd) whose call last moved it, while that fd still names it: the replay
    /// follows the position there.
    mover: Option<(u32, i64)>,
    /// An `lseek` moved it since a call last carried its position.
    seeked: bool,
    /// The fds that name it now.
    users: u32,
}

/// Where one read or write starts, as the trace event records it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Start {
    /// The offset, when the replay could not know it (`Op::Read`'s and `Op::Write`'s `off`).
    pub off: Option<u64>,
    /// A write to the end of the file through an `O_APPEND` description, by an fd that did
    /// not open it.
    pub append: bool,
}

/// Every fd table's fds and the descriptions they name.
#[derive(Debug, Default)]
pub struct Descriptions {
    /// Fd table → fd → description.
    tables: HashMap<u32, HashMap<i64, u64>>,
    descriptions: HashMap<u64, Description>,
    next: u64,
}

impl Descriptions {
    /// `fd` of `table` names a new description, at offset 0 (an `open`).
    pub fn open(&mut self, table: u32, fd: i64, append: bool) {
        let id = self.new_description(Some(0), append, Some((table, fd)));
        self.set(table, fd, id);
    }

    /// `fd` of `table` is closed.
    pub fn close(&mut self, table: u32, fd: i64) {
        if let Some(id) = self.tables.get_mut(&table).and_then(|t| t.remove(&fd)) {
            self.release(id, (table, fd));
        }
    }

    /// `new` of `table` names what `old` does (`dup2(old, new)`; a `new` open before is
    /// closed first).
    pub fn dup(&mut self, table: u32, old: i64, new: i64) {
        if old == new {
            return;
        }
        let id = self.id_of(table, old);
        self.set(table, new, id);
    }

    /// A new process's fd table, `child`, is a copy of `parent`'s: each of its fds names
    /// the parent's description (a `fork`, or a `clone` without `CLONE_FILES`).
    pub fn fork(&mut self, parent: u32, child: u32) {
        self.drop_table(child);
        let Some(fds) = self.tables.get(&parent).cloned() else {
            return;
        };
        for id in fds.values() {
            if let Some(d) = self.descriptions.get_mut(id) {
                d.users += 1;
            }
        }
        self.tables.insert(child, fds);
    }

    /// The fd table is gone (its process exited): its fds are closed.
    pub fn drop_table(&mut self, table: u32) {
        for (fd, id) in self.tables.remove(&table).into_iter().flatten() {
            self.release(id, (table, fd));
        }
    }

    /// `lseek` left `fd` of `table` at `at`.
    pub fn seek(&mut self, table: u32, fd: i64, at: u64) {
        let id = self.id_of(table, fd);
        if let Some(d) = self.descriptions.get_mut(&id) {
            d.pos = Some(at);
            d.seeked = true;
        }
    }

    /// Where a read or write through `fd` of `table` without an offset of its own starts;
    /// `moved`: the bytes it moved, when it succeeded (a failed call leaves the position).
    pub fn start(&mut self, table: u32, fd: i64, write: bool, moved: Option<u64>) -> Start {
        let Some(d) = self
            .tables
            .get(&table)
            .and_then(|t| t.get(&fd))
            .and_then(|id| self.descriptions.get_mut(id))
        else {
            return Start::default();
        };
        let appends = write && d.append;
        let here = Some((table, fd));
        let start = Start {
            off: d.pos.filter(|_| (d.mover != here || d.seeked) && !appends),
            append: appends && d.opener != here,
        };
        if let Some(n) = moved {
            d.seeked = false;
            d.mover = here;
            d.pos = match appends {
                true => None,
                false => d.pos.and_then(|p| p.checked_add(n)),
            };
        }
        start
    }

    /// Fd tables held, and descriptions open: what this costs in memory.
    #[cfg(test)]
    fn sizes(&self) -> (usize, usize) {
        (self.tables.len(), self.descriptions.len())
    }

    /// The description `fd` of `table` names, made (its position unknown) for an fd the trace
    /// did not see opened: one inherited from before it began.
    fn id_of(&mut self, table: u32, fd: i64) -> u64 {
        if let Some(&id) = self.tables.get(&table).and_then(|t| t.get(&fd)) {
            return id;
        }
        // Opened before the trace began: no replay fd has its flags, and the position is
        // unknown until an `lseek` says it.
        let id = self.new_description(None, false, None);
        self.set(table, fd, id);
        id
    }

    fn new_description(&mut self, pos: Option<u64>, append: bool, by: Option<(u32, i64)>) -> u64 {
        let id = self.next;
        self.next += 1;
        self.descriptions.insert(
            id,
            Description {
                pos,
                append,
                opener: by,
                mover: by,
                seeked: false,
                users: 0,
            },
        );
        id
    }

    /// `fd` of `table` names description `id` (which gains a user), closing what it named.
    fn set(&mut self, table: u32, fd: i64, id: u64) {
        if let Some(d) = self.descriptions.get_mut(&id) {
            d.users += 1;
        }
        if let Some(old) = self.tables.entry(table).or_default().insert(fd, id) {
            self.release(old, (table, fd));
        }
    }

    /// Fd `key` no longer names description `id`: a replay's fd of that number, opened
    /// again, is a new one.
    fn release(&mut self, id: u64, key: (u32, i64)) {
        if let Some(d) = self.descriptions.get_mut(&id) {
            d.users = d.users.saturating_sub(1);
            if d.opener == Some(key) {
                d.opener = None;
            }
            if d.mover == Some(key) {
                d.mover = None;
            }
            if d.users == 0 {
                self.descriptions.remove(&id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_fd_of_its_own_carries_no_offset_but_after_an_lseek() {
        let mut d = Descriptions::default();
        d.open(1, 3, false);
        assert_eq!(d.start(1, 3, true, Some(10)), Start::default());
        d.seek(1, 3, 100);
        assert_eq!(d.start(1, 3, false, None).off, Some(100), "a failed call");
        assert_eq!(d.start(1, 3, false, Some(5)).off, Some(100));
        assert_eq!(d.start(1, 3, false, Some(5)), Start::default());
    }

    #[test]
    fn a_dup_and_a_fork_share_one_position() {
        let mut d = Descriptions::default();
        d.open(1, 3, false);
        d.start(1, 3, true, Some(6));
        d.dup(1, 3, 1);
        d.close(1, 3);
        d.fork(1, 2);
        // The child writes 100 bytes after the parent's 6, then the parent after those.
        assert_eq!(d.start(2, 1, true, Some(100)).off, Some(6));
        assert_eq!(d.start(1, 1, true, Some(4)).off, Some(106));
        // The parent's next call follows its own: the replay's position for it is right.
        assert_eq!(d.start(1, 1, true, Some(1)), Start::default());
        d.drop_table(2);
        d.close(1, 1);
        assert_eq!(d.sizes(), (1, 0), "the last fd took the description");
    }

    #[test]
    fn children_that_exit_leave_nothing_behind() {
        let mut d = Descriptions::default();
        for fd in 0..3 {
            d.open(1, fd, false);
        }
        for child in 2..10_002 {
            d.fork(1, child);
            d.start(child, 1, true, Some(1));
            d.drop_table(child);
        }
        assert_eq!(d.sizes(), (1, 3));
        assert_eq!(d.start(1, 1, true, Some(1)).off, Some(10_000));
    }

    #[test]
    fn a_shared_append_description_writes_at_the_end() {
        let mut d = Descriptions::default();
        d.open(5, 3, true);
        d.dup(5, 3, 1);
        let s = d.start(5, 1, true, Some(10));
        assert_eq!(
            s,
            Start {
                off: None,
                append: true
            }
        );
        // Its end is not known after a write, so a read carries nothing.
        assert_eq!(d.start(5, 1, false, Some(1)), Start::default());
    }

    #[test]
    fn an_inherited_fd_dup_ed_is_shared_without_a_position() {
        let mut d = Descriptions::default();
        d.dup(7, 1, 2);
        assert_eq!(d.start(7, 2, true, Some(3)), Start::default());
        d.seek(7, 1, 40);
        assert_eq!(d.start(7, 2, false, Some(2)).off, Some(40));
        assert_eq!(d.start(7, 1, false, Some(2)).off, Some(42));
        // The copy closed, the inherited fd still names the description, and the copy's
        // number, given it again, is a new fd to the replay.
        d.close(7, 2);
        d.dup(7, 1, 2);
        assert_eq!(d.start(7, 1, false, Some(2)), Start::default());
        assert_eq!(d.start(7, 2, false, Some(2)).off, Some(46));
        d.drop_table(7);
        assert_eq!(d.sizes(), (0, 0));
    }
}
