pub mod bench;
pub mod device;
pub mod profiles;
pub mod task;
