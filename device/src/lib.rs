//! symmem device API.
//!
//! `#![no_std]` so the same source compiles to PTX for GPU kernels and, with the `host`
//! feature, for the CPU executor. This crate currently holds only the version of the
//! host/device contract; the device operations arrive with the device-API issue.
#![no_std]

/// Version of the host/device `DeviceState` contract. Host and device must agree on it.
pub const DEVICE_STATE_VERSION: u32 = 1;
