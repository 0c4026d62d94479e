//! ISPFS's in-storage processing engine (ISPFS §3.2–3.4): the instructions a host writes to
//! a directory's command file, and the word-query engine that runs them beside the PCM data
//! path.
//!
//! [`instruction`] is the paper's `Search` structure, byte for byte, with the checks the
//! engine makes before it starts; [`wordquery`] is what the engine's comparators compute,
//! streamed over the file's bytes in the chunks the controller delivers; [`engine`] is how
//! long that takes on the board, derived from its controllers' clock, width and timing. The
//! file system that owns the command file and resolves a filename to the file's physical
//! extents is ISPFS, in `csd-hostfs`.

pub mod engine;
pub mod instruction;
pub mod wordquery;

pub use engine::{Engine, HostRequest, IspCosts, Shared};

pub use instruction::{
    IspError, Scmd, Search, FLAG_DONE, KEYWORDS, SEARCH_BYTES, STAGE_NAME_BYTES, STAGE_OUTPUT_BYTES,
};
pub use wordquery::{WordQuery, MAX_ADDRS};
