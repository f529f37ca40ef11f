//! The ofi transport's driver: what runs its protocol ([`super::protocol`]) over the
//! shim, the provider and the job's bootstrap.

pub(super) mod auth;
