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
//! The table also keeps what belongs to an fd rather than its description: `FD_CLOEXEC`,
//! and whether a replay holds the fd open. A replay opens an fd when the first event names
//! it; the kernel closes every fd of a table when its last process exits, and those with
//! `FD_CLOEXEC` at an `execve`, the one a `dup2` lands on and a `close_range`'s, with no
//! `close` a trace could show. So the importer writes those closes itself (what
//! [`Descriptions::drop_table`], [`Descriptions::exec`], [`Descriptions::dup`] and
//! [`Descriptions::close_range`] return), or a replay keeps the files open to its end: a file unlinked while open would never be freed,
//! and LightFS would never see a close of a file written through a shell's `> log`.
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

/// One fd of a table: the description it names, and what belongs to the fd itself.
#[derive(Clone, Debug)]
struct Slot {
    id: u64,
    /// `FD_CLOEXEC`: an `execve` closes it.
    cloexec: bool,
    /// The path a replay holds the fd open by (the one its last event named): an event of
    /// this table used it, and nothing closed it since.
    replayed: Option<String>,
}

/// An fd the kernel closed with no `close` call: its number, and the path a replay holds it
/// open by, if it does.
pub type Closed = (i64, Option<String>);

/// Every fd table's fds and the descriptions they name.
#[derive(Debug, Default)]
pub struct Descriptions {
    /// Fd table → fd → description.
    tables: HashMap<u32, HashMap<i64, Slot>>,
    descriptions: HashMap<u64, Description>,
    next: u64,
}

impl Descriptions {
    /// `fd` of `table` names a new description, at offset 0 (an `open`; `cloexec`: with
    /// `O_CLOEXEC`).
    pub fn open(&mut self, table: u32, fd: i64, append: bool, cloexec: bool) {
        let id = self.new_description(Some(0), append, Some((table, fd)));
        // An open returns a free number: nothing a replay holds is there (a replay's `open`
        // event replaces whatever its own table still has at that number).
        self.set(table, fd, id, cloexec);
    }

    /// `fd` of `table` is closed.
    pub fn close(&mut self, table: u32, fd: i64) {
        if let Some(slot) = self.tables.get_mut(&table).and_then(|t| t.remove(&fd)) {
            self.release(slot.id, (table, fd));
        }
    }

    /// `new` of `table` names what `old` does (`dup2(old, new)`; a `new` open before is
    /// closed first, and the path a replay held it open by is returned). `cloexec`: the new
    /// fd's `FD_CLOEXEC` (`dup3`'s `O_CLOEXEC`, `F_DUPFD_CLOEXEC`; a plain `dup` clears it).
    pub fn dup(&mut self, table: u32, old: i64, new: i64, cloexec: bool) -> Option<String> {
        if old == new {
            return None;
        }
        let id = self.id_of(table, old);
        self.set(table, new, id, cloexec)
    }

    /// `fcntl(fd, F_SETFD, …)` set or cleared `FD_CLOEXEC`.
    pub fn set_cloexec(&mut self, table: u32, fd: i64, cloexec: bool) {
        self.id_of(table, fd);
        if let Some(slot) = self.tables.get_mut(&table).and_then(|t| t.get_mut(&fd)) {
            slot.cloexec = cloexec;
        }
    }

    /// `close_range(first, last, flags)`: the fds of `table` in `first..=last` are closed
    /// (these, in fd order), or with `CLOSE_RANGE_CLOEXEC` (`cloexec`) marked to close at
    /// the next `execve`. Walks the fds open, not the range, which the caller chose.
    pub fn close_range(&mut self, table: u32, first: i64, last: i64, cloexec: bool) -> Vec<Closed> {
        let Some(fds) = self.tables.get_mut(&table) else {
            return Vec::new();
        };
        let inside = |fd: i64| (first..=last).contains(&fd);
        if cloexec {
            fds.iter_mut()
                .filter(|(&fd, _)| inside(fd))
                .for_each(|(_, slot)| slot.cloexec = true);
            return Vec::new();
        }
        let gone = take_where(fds, |fd, _| inside(fd));
        self.released(table, gone)
    }

    /// An event of `table` named `fd` by `path`: a replay holds it open from here.
    pub fn replays(&mut self, table: u32, fd: i64, path: &str) {
        self.id_of(table, fd);
        if let Some(slot) = self.tables.get_mut(&table).and_then(|t| t.get_mut(&fd)) {
            if slot.replayed.as_deref() != Some(path) {
                slot.replayed = Some(path.to_string());
            }
        }
    }

    /// `execve` closed the fds of `table` that have `FD_CLOEXEC`: which, in fd order.
    pub fn exec(&mut self, table: u32) -> Vec<Closed> {
        let Some(fds) = self.tables.get_mut(&table) else {
            return Vec::new();
        };
        let gone = take_where(fds, |_, slot| slot.cloexec);
        self.released(table, gone)
    }

    /// A new process's fd table, `child`, is a copy of `parent`'s: each of its fds names
    /// the parent's description (a `fork`, or a `clone` without `CLONE_FILES`) and keeps
    /// its `FD_CLOEXEC`. A replay holds none of them open yet: it opens an inherited fd
    /// when the child first uses it.
    pub fn fork(&mut self, parent: u32, child: u32) {
        self.drop_table(child);
        let Some(fds) = self.tables.get(&parent) else {
            return;
        };
        let fds: HashMap<i64, Slot> = fds
            .iter()
            .map(|(&fd, slot)| {
                let copy = Slot {
                    replayed: None,
                    ..*slot
                };
                (fd, copy)
            })
            .collect();
        for slot in fds.values() {
            if let Some(d) = self.descriptions.get_mut(&slot.id) {
                d.users += 1;
            }
        }
        self.tables.insert(child, fds);
    }

    /// The fd table is gone (its last process exited): its fds are closed, and these, in
    /// fd order, were.
    pub fn drop_table(&mut self, table: u32) -> Vec<Closed> {
        let gone = self.tables.remove(&table).into_iter().flatten().collect();
        self.released(table, gone)
    }

    /// The fds of `table` the kernel closed, their descriptions released.
    fn released(&mut self, table: u32, mut gone: Vec<(i64, Slot)>) -> Vec<Closed> {
        gone.sort_unstable_by_key(|&(fd, _)| fd);
        gone.into_iter()
            .map(|(fd, slot)| {
                self.release(slot.id, (table, fd));
                (fd, slot.replayed)
            })
            .collect()
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
            .and_then(|slot| self.descriptions.get_mut(&slot.id))
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
        if let Some(slot) = self.tables.get(&table).and_then(|t| t.get(&fd)) {
            return slot.id;
        }
        // Opened before the trace began: no replay fd has its flags, and the position is
        // unknown until an `lseek` says it.
        let id = self.new_description(None, false, None);
        self.set(table, fd, id, false);
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

    /// `fd` of `table` names description `id` (which gains a user), closing what it named:
    /// the path a replay held that open by, if it did.
    fn set(&mut self, table: u32, fd: i64, id: u64, cloexec: bool) -> Option<String> {
        if let Some(d) = self.descriptions.get_mut(&id) {
            d.users += 1;
        }
        let slot = Slot {
            id,
            cloexec,
            replayed: None,
        };
        let old = self.tables.entry(table).or_default().insert(fd, slot)?;
        self.release(old.id, (table, fd));
        old.replayed
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

/// Removes the fds `closes` picks from a table, returning them.
fn take_where(
    fds: &mut HashMap<i64, Slot>,
    closes: impl Fn(i64, &Slot) -> bool,
) -> Vec<(i64, Slot)> {
    let picked: Vec<i64> = fds
        .iter()
        .filter(|(&fd, s)| closes(fd, s))
        .map(|(&fd, _)| fd)
        .collect();
    picked
        .into_iter()
        .filter_map(|fd| fds.remove_entry(&fd))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_fd_of_its_own_carries_no_offset_but_after_an_lseek() {
        let mut d = Descriptions::default();
        d.open(1, 3, false, false);
        assert_eq!(d.start(1, 3, true, Some(10)), Start::default());
        d.seek(1, 3, 100);
        assert_eq!(d.start(1, 3, false, None).off, Some(100), "a failed call");
        assert_eq!(d.start(1, 3, false, Some(5)).off, Some(100));
        assert_eq!(d.start(1, 3, false, Some(5)), Start::default());
    }

    #[test]
    fn a_dup_and_a_fork_share_one_position() {
        let mut d = Descriptions::default();
        d.open(1, 3, false, false);
        d.start(1, 3, true, Some(6));
        d.dup(1, 3, 1, false);
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
            d.open(1, fd, false, false);
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
        d.open(5, 3, true, false);
        d.dup(5, 3, 1, false);
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
        d.dup(7, 1, 2, false);
        assert_eq!(d.start(7, 2, true, Some(3)), Start::default());
        d.seek(7, 1, 40);
        assert_eq!(d.start(7, 2, false, Some(2)).off, Some(40));
        assert_eq!(d.start(7, 1, false, Some(2)).off, Some(42));
        // The copy closed, the inherited fd still names the description, and the copy's
        // number, given it again, is a new fd to the replay.
        d.close(7, 2);
        d.dup(7, 1, 2, false);
        assert_eq!(d.start(7, 1, false, Some(2)), Start::default());
        assert_eq!(d.start(7, 2, false, Some(2)).off, Some(46));
        d.drop_table(7);
        assert_eq!(d.sizes(), (0, 0));
    }

    #[test]
    fn the_fds_a_replay_holds_are_closed_at_exit_and_cloexec_ones_at_execve() {
        let mut d = Descriptions::default();
        d.open(1, 3, false, true);
        d.open(1, 4, false, false);
        d.open(1, 5, false, false);
        d.replays(1, 4, "/a");
        d.replays(1, 3, "/b");
        d.replays(1, 0, "/inherited");
        d.set_cloexec(1, 5, true);
        // A child's copy holds nothing a replay opened, and keeps FD_CLOEXEC.
        d.fork(1, 2);
        assert_eq!(d.exec(2), vec![(3, None), (5, None)]);
        assert_eq!(d.drop_table(2), vec![(0, None), (4, None)]);
        assert_eq!(d.exec(1), vec![(3, Some("/b".into())), (5, None)]);
        // A dup over a replayed fd closes what it held.
        d.open(1, 6, false, false);
        assert_eq!(d.dup(1, 6, 4, false), Some("/a".into()));
        assert_eq!(
            d.drop_table(1),
            vec![(0, Some("/inherited".into())), (4, None), (6, None)]
        );
        assert_eq!(d.sizes(), (0, 0));
    }

    #[test]
    fn close_range_walks_the_fds_open_not_the_range() {
        let mut d = Descriptions::default();
        for fd in [0, 3, 9] {
            d.open(1, fd, false, false);
            d.replays(1, fd, "/f");
        }
        d.close_range(1, 9, i64::MAX, true);
        assert_eq!(
            d.close_range(1, 3, i64::from(u32::MAX), false),
            vec![(3, Some("/f".into())), (9, Some("/f".into()))]
        );
        assert_eq!(d.exec(1), vec![]);
        assert_eq!(d.sizes(), (1, 1));
    }
}
