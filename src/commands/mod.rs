pub mod bench;
pub mod device;
pub mod ndp;
pub mod profiles;
pub mod replay;
pub mod runs;
pub mod task;
pub mod trace;
